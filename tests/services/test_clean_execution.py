"""Running a clean: plans and metadata are Hudi's Avro records and a dry run writes nothing; on Spark it
equals a local run; an interrupted clean runs its plan again; the registered service finishes
pending cleans first.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.models.clean import CleanerPlan
from hoodie.models.codec import load_schema
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.services.clean import CleanPolicy, CleanService, clean_plan, execute_clean, schedule_clean
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from tests.conftest import hudi_rs_rows
from tests.services.clean_support import (
    VERSIONS,
    clean_metadata,
    cleanable_table,
    data_files,
    planned_paths,
    run_clean,
    write_times,
)
from tests.tables import age_heartbeats

# -- format, dry run, refusal, runners, recovery ----------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_plan_and_metadata_are_hudis_avro_and_dry_run_writes_nothing(
    tmp_path: Path, version: TableVersion
) -> None:
    path = tmp_path / "t"
    table = cleanable_table(path, TableType.MERGE_ON_READ, version)
    timeline_dir = table.paths.timeline
    before = (sorted(os.listdir(timeline_dir)), data_files(path))
    dry = schedule_clean(ServiceContext(table), CleanPolicy(commits_retained=2), dry_run=True)
    assert dry is not None and dry.instant_time is None
    assert (sorted(os.listdir(timeline_dir)), data_files(path)) == before

    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_clean(ctx, CleanPolicy(commits_retained=2))
    assert scheduled is not None and scheduled.instant_time is not None
    assert scheduled.plan == dry.plan
    ts = scheduled.instant_time
    requested = Path(timeline_dir, f"{ts}.clean.requested").read_bytes()
    (plan,) = list(
        fastavro.reader(io.BytesIO(requested), reader_schema=load_schema("HoodieCleanerPlan", version))
    )
    assert plan["version"] == 2 and plan["policy"] == "KEEP_LATEST_COMMITS"
    assert plan["filesToBeDeletedPerPartition"] == {} and plan["partitionsToBeDeleted"] == []
    assert plan["earliestInstantToRetain"]["state"] == "COMPLETED"
    assert plan["lastCompletedCommitTimestamp"] == write_times(path)[-1]
    infos = [i for infos in plan["filePathsToBeDeletedPerPartition"].values() for i in infos]
    assert infos and all(
        i["filePath"].startswith(f"file:{path}/") and i["isBootstrapBaseFile"] is False for i in infos
    )
    assert scheduled.plan_json() == plan
    assert clean_plan(HoodieTable.open(str(path)), ts) == scheduled.plan

    execute_clean(ctx, ts, LocalRunner())
    inflight = Path(timeline_dir, f"{ts}.clean.inflight").read_bytes()
    # Hudi 0.14/0.15 copy the plan into the inflight file; 1.x leaves it empty.
    if version is TableVersion.SIX:
        assert CleanerPlan.from_bytes(inflight, 6) == scheduled.plan
    else:
        assert inflight == b""
    completed = next(Path(timeline_dir).glob(f"{ts}*.clean"))
    (meta,) = list(
        fastavro.reader(
            io.BytesIO(completed.read_bytes()), reader_schema=load_schema("HoodieCleanMetadata", version)
        )
    )
    assert meta["version"] == 2 and meta["startCleanTime"] == ts
    assert meta["bootstrapPartitionMetadata"] == {} and meta["timeTakenInMillis"] >= 0
    assert meta["totalFilesDeleted"] == len(infos)
    names = {i["filePath"].rsplit("/", 1)[1] for i in infos}
    for partition, pm in meta["partitionMetadata"].items():
        assert pm["partitionPath"] == partition and pm["policy"] == "KEEP_LATEST_COMMITS"
        assert pm["deletePathPatterns"] == pm["successDeleteFiles"] and pm["failedDeleteFiles"] == []
        assert all("/" not in n and n in names for n in pm["successDeleteFiles"])
        assert pm["isPartitionDeleted"] is False


def test_clean_on_spark_equals_local(tmp_path: Path, spark_runner: Any) -> None:
    local = tmp_path / "local"
    cleanable_table(local, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    on_spark = tmp_path / "spark"
    cleanable_table(on_spark, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    snapshot = hudi_rs_rows(on_spark)
    _, local_meta, _ = run_clean(local, CleanPolicy(commits_retained=2))
    plan, spark_meta, _ = run_clean(on_spark, CleanPolicy(commits_retained=2), spark_runner)
    assert (
        spark_meta.total_files_deleted
        == len(planned_paths(plan, on_spark))
        == local_meta.total_files_deleted
        > 0
    )
    assert not planned_paths(plan, on_spark) & data_files(on_spark)
    assert {p: len(m.success_delete_files) for p, m in spark_meta.partition_metadata.items()} == {
        p: len(m.success_delete_files) for p, m in local_meta.partition_metadata.items()
    }
    assert hudi_rs_rows(on_spark) == snapshot


_CRASH_SCRIPT = """
import sys
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import execute_clean
from hoodie.table import HoodieTable
execute_clean(ServiceContext(HoodieTable.open(sys.argv[1])), sys.argv[2], LocalRunner())
"""


def test_an_interrupted_clean_runs_its_plan_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    snapshot = hudi_rs_rows(path)
    files = data_files(path)
    scheduled = schedule_clean(ServiceContext(HoodieTable.open(str(path))), CleanPolicy(commits_retained=2))
    assert scheduled is not None and scheduled.instant_time is not None
    assert isinstance(scheduled.plan, CleanerPlan)
    planned = planned_paths(scheduled.plan, path)
    env = {**os.environ, "HTS_CRASH_AT": "clean.task_mid_write"}
    crashed = subprocess.run(
        [sys.executable, "-c", _CRASH_SCRIPT, str(path), scheduled.instant_time],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert crashed.returncode == 97, crashed.stderr
    gone = files - data_files(path)
    assert len(gone) == 1 and gone <= planned  # killed after its first delete
    table = HoodieTable.open(str(path))
    assert table.reload().get(scheduled.instant_time, Action.CLEAN).state is State.INFLIGHT  # type: ignore[union-attr]
    assert hudi_rs_rows(path) == snapshot

    # The dead attempt's heartbeat is still fresh: a second executor refuses until it expires.
    with pytest.raises(TableServiceError, match="heartbeat is alive"):
        execute_clean(ServiceContext(table), scheduled.instant_time, LocalRunner())
    age_heartbeats(path)  # it expires (the next executor beats at the default interval)
    execute_clean(ServiceContext(table), scheduled.instant_time, LocalRunner())

    meta = clean_metadata(path, scheduled.instant_time)
    failed = {f"{p}/{n}" for p, m in meta.partition_metadata.items() for n in m.failed_delete_files}
    assert failed == gone  # already gone: recorded as a failed delete, as Hudi records it
    assert meta.total_files_deleted == len(planned) - 1
    assert data_files(path) == files - planned
    assert hudi_rs_rows(path) == snapshot


def test_clean_is_a_registered_service_that_finishes_pending_cleans_first(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.NINE)
    service = service_named("clean")
    assert isinstance(service, CleanService) and service.name == "clean"
    ctx = ServiceContext(HoodieTable.open(str(path)), options={"hoodie.clean.commits.retained": "2"})
    scheduled = service.schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    table = HoodieTable.open(str(path))
    assert [i.requested_time for i in service.pending(table, table.reload())] == [scheduled.instant_time]
    # While one clean is pending no other is planned (hoodie.clean.allow.multiple is false).
    assert service.schedule(ServiceContext(table, options={"hoodie.clean.commits.retained": "1"})) is None
    result = service.execute(ctx, scheduled.instant_time, LocalRunner())
    assert result.instant.is_completed and result.details["files_deleted"] > 0
    assert service.pending(table, table.reload()) == []
