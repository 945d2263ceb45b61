"""Rollback: failed writes and abandoned table services are undone as Apache Hudi does it, per table
version; the rollback instant decodes with Hudi's schema; readers (ours and hudi-rs) see the table
as it was; live writers are never touched; the v6 fixture's rollback is reproduced exactly."""

from __future__ import annotations

import io
import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.file_group.log_reader import read_blocks
from hoodie.models.codec import load_schema
from hoodie.models.rollback import RollbackPlan
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, Task, TaskFunction, TaskResult, service_named
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.recovery import rollback_candidates
from hoodie.services.rollback import (
    RollbackService,
    execute_rollback,
    recover_inflight,
    rollback,
    schedule_rollback,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig
from hoodie.write.writer import HoodieWriter
from tests.conftest import fixture_path, hudi_rs_rows
from tests.tables import Killed, KilledWriter, new_table, rows

VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]
FAST = HeartbeatConfig(interval_ms=1, tolerable_misses=1)


class DyingRunner:
    """Runs the first task, then dies (an executor killed in the middle of a table service)."""

    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
        if tasks:
            fn(tasks[0])
        raise Killed


def _table(path: Path, version: TableVersion, table_type: TableType) -> HoodieTable:
    table = new_table(path, table_type=table_type, version=version)
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    writer.upsert(rows(range(0, 12, 2), 2))
    return HoodieTable.open(str(path))


def _snapshot(path: Path, as_of: str | None = None) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot(as_of)
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _data_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".hoodie" not in p.parts}


def _fail_a_write(path: Path) -> str:
    """An upsert (updates and an insert) that dies after writing its files; returns its instant."""
    with pytest.raises(Killed):
        KilledWriter(HoodieTable.open(str(path))).upsert(rows([1, 2, 3, 4, 40], 3))
    pending = HoodieTable.open(str(path)).reload().pending().writes()
    assert len(pending) == 1 and pending.instants[0].is_inflight
    return pending.instants[0].requested_time


def _decode(data: bytes, record: str, version: int) -> dict[str, Any]:
    (out,) = list(fastavro.reader(io.BytesIO(data), reader_schema=load_schema(record, version)))
    assert isinstance(out, dict)
    return out


def _timeline_file(path: Path, table: HoodieTable, ts: str, state: State, action: Action) -> bytes:
    name = table.reload().state_file(ts, state, action)
    assert name is not None
    return Path(table.paths.timeline, name).read_bytes()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_a_failed_write_is_rolled_back(tmp_path: Path, version: TableVersion, table_type: TableType) -> None:
    path = tmp_path / "t"
    table = _table(path, version, table_type)
    before, before_rs, files_before = _snapshot(path), hudi_rs_rows(path), _data_files(path)
    failed = _fail_a_write(path)
    written = _data_files(path) - files_before
    assert written and (path / ".hoodie" / ".temp" / failed).is_dir()

    service = service_named("rollback")
    assert [i.requested_time for i in service.pending(table, table.reload())] == [failed]
    result = service.execute(ServiceContext(table), failed, LocalRunner())
    rollback_time = result.instant.requested_time

    tl = table.reload()
    assert tl.get(failed) is None  # requested and inflight files are gone
    assert not (path / ".hoodie" / ".temp" / failed).exists()
    assert not (path / ".hoodie" / ".heartbeat" / failed).exists()
    assert _snapshot(path) == before
    assert hudi_rs_rows(path) == before_rs

    plan = _decode(
        _timeline_file(path, table, rollback_time, State.REQUESTED, Action.ROLLBACK),
        "HoodieRollbackPlan",
        version,
    )
    meta = _decode(
        _timeline_file(path, table, rollback_time, State.COMPLETED, Action.ROLLBACK),
        "HoodieRollbackMetadata",
        version,
    )
    assert plan["instantToRollback"]["commitTime"] == failed
    assert meta["commitsRollback"] == [failed] and meta["startRollbackTime"] == rollback_time
    assert meta["instantsRollback"] == [plan["instantToRollback"]]
    deleted = {f for p in meta["partitionMetadata"].values() for f in p["successDeleteFiles"]}
    assert meta["totalFilesDeleted"] == len(deleted)
    assert all(not Path(f).exists() and f.startswith(str(path)) for f in deleted)
    remaining = _data_files(path) - files_before
    if version >= TableVersion.EIGHT or table_type is TableType.COPY_ON_WRITE:
        # Every file the failed write created is gone; no log blocks are rolled back in place.
        assert remaining == set() and deleted == {str(path / f) for f in written}
        assert all(not r["logBlocksToBeDeleted"] for r in plan["RollbackRequests"])
        assert all(not p["rollbackLogFiles"] for p in meta["partitionMetadata"].values())
        return
    # Table version 6 MERGE_ON_READ: the new base file goes; each log the write appended to its
    # file group stays, cancelled by a ROLLBACK block in the next log version of the slice.
    assert {f for f in written if not f.rsplit("/", 1)[-1].startswith(".")} == {
        str(Path(f).relative_to(path)) for f in deleted
    }
    appended = {f"file:{path / f}" for f in written if f.rsplit("/", 1)[-1].startswith(".")}
    failed_logs = {k for p in meta["partitionMetadata"].values() for k in p["logFilesFromFailedCommit"]}
    assert failed_logs == appended
    rollback_logs = {
        k: v for p in meta["partitionMetadata"].values() for k, v in p["rollbackLogFiles"].items()
    }
    assert len(rollback_logs) == len(appended)
    for uri, size in rollback_logs.items():
        data = Path(uri[len("file:") :]).read_bytes()
        assert len(data) == size
        (block,) = read_blocks(data, uri)
        assert (
            block.is_rollback and block.target_instant_time == failed and block.instant_time == rollback_time
        )
    # Later writes keep working on top of the rollback blocks (new log versions), for both readers.
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows([0, 1, 5], 9))
    assert _snapshot(path) != before and hudi_rs_rows(path) == _snapshot(path)


def test_a_live_heartbeat_is_never_rolled_back(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.EIGHT, TableType.MERGE_ON_READ)
    failed = _fail_a_write(path)
    beat = Heartbeat(table.fileio, table.paths, failed, HeartbeatConfig())
    beat.beat()  # another process still writes it
    ctx = ServiceContext(table)
    service = RollbackService()
    assert service.pending(table, table.reload()) == []
    assert service.schedule(ctx) is None
    with pytest.raises(TableServiceError, match="heartbeat is alive"):
        rollback(ctx, failed, LocalRunner())
    assert table.reload().get(failed) is not None and not table.reload().actions(Action.ROLLBACK)
    # Once it stops beating for longer than the configured expiry, it is a candidate.
    time.sleep(0.01)
    assert [i.requested_time for i in service.pending(table, table.reload(), FAST)] == [failed]


def test_dry_run_plans_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.NINE, TableType.MERGE_ON_READ)
    failed = _fail_a_write(path)
    before = sorted(p.name for p in Path(table.paths.timeline).iterdir())
    files = _data_files(path)
    dry = RollbackService().schedule(ServiceContext(table), dry_run=True)
    assert dry is not None and dry.instant_time is None
    plan = dry.plan_json()
    assert plan["instantToRollback"] == {"commitTime": failed, "action": "deltacommit"}
    assert {f for r in plan["RollbackRequests"] for f in r["filesToBeDeleted"]} == {
        str(path / f) for f in files if failed in f
    }
    assert (
        sorted(p.name for p in Path(table.paths.timeline).iterdir()) == before and _data_files(path) == files
    )


def test_the_v6_fixture_rollback_is_reproduced(fixture_root: Path, table_copy: Any) -> None:
    """Rebuild the table as it was before Hudi's ``rollback_to_instant`` and roll back the same commit."""
    name = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
    original = fixture_path(fixture_root, name)
    path = table_copy(name)
    meta_dir = path / ".hoodie"
    failed, rollback_time, later = "20250126040826878", "20250126040936578", "20250126060846931"
    group, base = "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0", "20250126040823628"
    expected_plan = _decode(
        (meta_dir / f"{rollback_time}.rollback.requested").read_bytes(), "HoodieRollbackPlan", 6
    )
    expected_meta = _decode(
        (meta_dir / f"{rollback_time}.rollback").read_bytes(), "HoodieRollbackMetadata", 6
    )
    block_log = f".{group}_{base}.log.2_1-0-1"
    expected_block = (path / block_log).read_bytes()
    # Undo the rollback and the write after it; bring back the rolled-back delta commit: its log
    # (still there, named by the slice's base instant) and the base file of its insert.
    for f in [*meta_dir.glob(f"{rollback_time}.rollback*"), *meta_dir.glob(f"{later}.deltacommit*")]:
        f.unlink()
    (path / block_log).unlink()
    (path / f".{group}_{base}.log.3_0-13-9").unlink()
    commit = json.loads((original / ".hoodie" / f"{later}.deltacommit").read_text())
    update = commit["partitionToWriteStats"][""][0]
    log1 = f".{group}_{base}.log.1_0-33-43"
    update.update(path=log1, totalWriteBytes=11828, fileSizeInBytes=11828, logVersion=1, logFiles=[log1])
    insert_file = f"cd329d8f-0ce4-4654-84ab-2f769aae5034-0_1-33-44_{failed}.parquet"
    insert = {**update, "fileId": insert_file[:38], "path": insert_file, "prevCommit": "null", "logFiles": []}
    commit["partitionToWriteStats"][""] = [update, insert]
    (meta_dir / f"{failed}.deltacommit.requested").write_bytes(b"")
    (meta_dir / f"{failed}.deltacommit.inflight").write_bytes(b"")
    (meta_dir / f"{failed}.deltacommit").write_text(json.dumps(commit, indent=2))
    shutil.copy(path / f"{group}_0-13-23_{base}.parquet", path / insert_file)

    class SameTime:
        def new_instant_time(self, *, lock_held: bool = False) -> str:
            return rollback_time

    table = HoodieTable.open(str(path))
    rollback(ServiceContext(table, time_source=SameTime()), failed, LocalRunner())

    def as_hudi(record: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(
            json.dumps(record).replace(str(path), "/opt/data/external_tables/v6_nonpartitioned_rollback")
        )
        return out

    plan = _decode((meta_dir / f"{rollback_time}.rollback.requested").read_bytes(), "HoodieRollbackPlan", 6)
    meta = _decode((meta_dir / f"{rollback_time}.rollback").read_bytes(), "HoodieRollbackMetadata", 6)
    assert as_hudi(plan) == expected_plan
    assert as_hudi({**meta, "timeTakenInMillis": expected_meta["timeTakenInMillis"]}) == expected_meta
    assert (path / block_log).read_bytes() == expected_block
    assert not (meta_dir / f"{failed}.deltacommit").exists() and not (path / insert_file).exists()
    # Both readers see the table as before the rolled-back commit: Alice's update is gone.
    ours = TableReader(HoodieTable.open(str(path))).snapshot().select(["id", "name", "isActive"]).to_pylist()
    assert sorted(ours, key=lambda r: r["id"]) == [
        {"id": 1, "name": "Alice", "isActive": True},
        {"id": 2, "name": "Bob", "isActive": False},
        {"id": 3, "name": "Carol", "isActive": True},
    ]
    assert hudi_rs_rows(path) == _snapshot(path)


def test_the_v6_fixture_plan_decodes_into_our_model(fixture_root: Path) -> None:
    path = fixture_path(fixture_root, "sample_table/mor/parquet/v6_nonpartitioned_rollback")
    data = (path / ".hoodie" / "20250126040936578.rollback.requested").read_bytes()
    plan = RollbackPlan.from_bytes(data, 6)
    assert plan.instant_to_rollback is not None and plan.instant_to_rollback.action == "deltacommit"
    assert RollbackPlan.from_bytes(plan.to_bytes(6), 6) == plan


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_an_abandoned_compaction_returns_to_requested_and_runs_again(
    tmp_path: Path, version: TableVersion
) -> None:
    path = tmp_path / "t"
    table = _table(path, version, TableType.MERGE_ON_READ)
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    ctx = ServiceContext(table, heartbeat=FAST)
    # The executors beat at the default interval: with a 1 ms expiry an attempt would be late at once.
    executor = ServiceContext(table)
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time
    plan_bytes = _timeline_file(path, table, ts, State.REQUESTED, Action.COMPACTION)
    with pytest.raises(Killed):
        execute_compaction(executor, ts, DyingRunner())
    half_done = [f for f in _data_files(path) if f.endswith(f"_{ts}.parquet")]
    assert len(half_done) == 1 and table.reload().get(ts, Action.COMPACTION).is_inflight  # type: ignore[union-attr]
    time.sleep(0.01)
    # The rollback service sees the abandoned attempt and puts it back to REQUESTED, plan intact.
    assert [i.requested_time for i in rollback_candidates(table, table.reload(), FAST)] == [ts]
    result = RollbackService().execute(ctx, ts, LocalRunner())
    instant = table.reload().get(ts, Action.COMPACTION)
    assert instant is not None and instant.state is State.REQUESTED
    assert _timeline_file(path, table, ts, State.REQUESTED, Action.COMPACTION) == plan_bytes
    assert not (path / half_done[0]).exists()
    meta = _decode(
        _timeline_file(path, table, result.instant.requested_time, State.COMPLETED, Action.ROLLBACK),
        "HoodieRollbackMetadata",
        version,
    )
    assert meta["instantsRollback"] == [{"commitTime": ts, "action": "compaction"}]
    assert meta["partitionMetadata"][half_done[0].split("/")[0]]["successDeleteFiles"] == [
        str(path / half_done[0])
    ]
    # The same plan now runs to completion; the table reads the same to both readers.
    done = execute_compaction(executor, ts, LocalRunner())
    assert done.instant.is_completed and _snapshot(path) == before and hudi_rs_rows(path) == before_rs


def test_recover_inflight_records_a_rollback_for_the_executor(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.NINE, TableType.MERGE_ON_READ)
    ctx = ServiceContext(table, heartbeat=FAST)
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time
    with pytest.raises(Killed):  # the executor beats at the default interval (1 ms: late at once)
        execute_compaction(ServiceContext(table), ts, DyingRunner())
    inflight = table.reload().get(ts, Action.COMPACTION)
    assert inflight is not None
    live = ServiceContext(table)  # default expiry: a fresh attempt still counts as alive
    Heartbeat(table.fileio, table.paths, ts, HeartbeatConfig()).beat()
    with pytest.raises(TableServiceError, match="heartbeat is alive"):
        recover_inflight(live, inflight)
    time.sleep(0.01)
    removed = recover_inflight(ctx, inflight)
    assert len(removed) == 1 and not Path(removed[0]).exists()
    tl = table.reload()
    assert tl.get(ts, Action.COMPACTION).state is State.REQUESTED  # type: ignore[union-attr]
    assert [i.is_completed for i in tl.actions(Action.ROLLBACK)] == [True]


def test_completed_instants_roll_back_only_newest_first(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE)
    first, second = [i.requested_time for i in table.reload().completed().writes()]
    ctx = ServiceContext(table)
    with pytest.raises(TableServiceError, match="must be rolled back first"):
        schedule_rollback(ctx, first)
    as_of_first = _snapshot(path, first)
    rollback(ctx, second, LocalRunner())
    assert _snapshot(path) == as_of_first and hudi_rs_rows(path) == as_of_first
    assert [i.requested_time for i in table.reload().writes()] == [first]
    assert not [f for f in _data_files(path) if second in f]


def test_an_interrupted_rollback_resumes(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.SIX, TableType.MERGE_ON_READ)
    before = _snapshot(path)
    failed = _fail_a_write(path)
    ctx = ServiceContext(table, heartbeat=FAST)
    scheduled = schedule_rollback(ctx, failed)
    assert scheduled.instant_time is not None
    rb = scheduled.instant_time
    with pytest.raises(Killed):
        execute_rollback(ctx, rb, DyingRunner())
    time.sleep(0.01)
    # Only the pending rollback is listed: its target is spoken for.
    assert [i.requested_time for i in rollback_candidates(table, table.reload(), FAST)] == [rb]
    RollbackService().execute(ctx, rb, LocalRunner())
    tl = table.reload()
    assert tl.get(failed) is None and tl.get(rb, Action.ROLLBACK).is_completed  # type: ignore[union-attr]
    assert _snapshot(path) == before and hudi_rs_rows(path) == before
    assert not (path / ".hoodie" / ".temp" / rb).exists()


def test_timeline_server_markers_are_read(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE)
    files = _data_files(path)
    failed = _fail_a_write(path)
    marker_dir = path / ".hoodie" / ".temp" / failed
    names = sorted(str(p.relative_to(marker_dir)) for p in marker_dir.rglob("*.marker.*"))
    shutil.rmtree(marker_dir)
    marker_dir.mkdir()
    (marker_dir / "MARKERS.type").write_text("TIMELINE_SERVER_BASED")
    (marker_dir / "MARKERS0").write_text("\n".join(names) + "\n")
    dry = schedule_rollback(ServiceContext(table), failed, dry_run=True)
    assert sorted(f for r in dry.plan_json()["RollbackRequests"] for f in r["filesToBeDeleted"]) == sorted(
        str(path / n.rsplit(".marker.", 1)[0]) for n in names
    )
    rollback(ServiceContext(table), failed, LocalRunner())
    assert _data_files(path) == files


def test_rollback_on_spark_equals_local(tmp_path: Path, spark_runner: Any) -> None:
    local = tmp_path / "local"
    _table(local, TableVersion.SIX, TableType.MERGE_ON_READ)
    failed = _fail_a_write(local)
    shutil.copytree(local, tmp_path / "spark")
    for where, runner in ((local, LocalRunner()), (tmp_path / "spark", spark_runner)):
        rollback(ServiceContext(HoodieTable.open(str(where))), failed, runner)
    assert _snapshot(local) == _snapshot(tmp_path / "spark")
    assert hudi_rs_rows(tmp_path / "spark") == hudi_rs_rows(local)
    assert _data_files(local) == _data_files(tmp_path / "spark")


def test_a_write_that_died_while_requested_leaves_only_its_requested_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.EIGHT, TableType.MERGE_ON_READ)
    ctx = ServiceContext(table)
    ts = ctx.new_instant_time()
    table.reload().create_requested(Instant(ts, Action.DELTA_COMMIT, State.REQUESTED))
    assert [i.requested_time for i in RollbackService().pending(table, table.reload())] == [ts]
    result = RollbackService().execute(ctx, ts, LocalRunner())
    assert table.reload().get(ts) is None
    plan = _decode(
        _timeline_file(path, table, result.instant.requested_time, State.REQUESTED, Action.ROLLBACK),
        "HoodieRollbackPlan",
        8,
    )
    assert plan["RollbackRequests"] == [] and plan["instantToRollback"]["action"] == "deltacommit"
    meta = _decode(
        _timeline_file(path, table, result.instant.requested_time, State.COMPLETED, Action.ROLLBACK),
        "HoodieRollbackMetadata",
        8,
    )
    assert meta["partitionMetadata"] == {} and meta["totalFilesDeleted"] == 0
