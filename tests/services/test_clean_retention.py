"""What a clean must leave: savepointed files, the inputs of pending compactions and clusterings (which
hold retention back); replaced file groups go once outside retention; a deleted partition loses its folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.models.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import CleanPolicy, plan_clean
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.services.clean_support import (
    FILE_VERSIONS,
    cleanable_table,
    data_files,
    live_slices,
    planned_paths,
    read_rows,
    run_clean,
    savepoint_at,
    write_times,
)
from tests.tables import rows


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_savepointed_files_survive(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.MERGE_ON_READ, version)
    saved_at = write_times(path)[1]
    saved_view = read_rows(path, saved_at)
    saved = savepoint_at(path, saved_at)
    snapshot = hudi_rs_rows(path)

    plan, meta, _ = run_clean(path, CleanPolicy(commits_retained=1))

    assert saved <= data_files(path)
    assert not saved & planned_paths(plan, path)
    assert read_rows(path, saved_at) == saved_view
    assert hudi_rs_rows(path) == snapshot
    assert (plan.extra_metadata or {}) == {"savepointed_timestamps": saved_at}
    assert meta.extra_metadata == plan.extra_metadata
    assert meta.total_files_deleted > 0


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_pending_compaction_inputs_survive(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.MERGE_ON_READ, version)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(0, 30, 3), 60))
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    table = HoodieTable.open(str(path))
    inputs = {
        f"{op.partition_path}/{n}"
        for op in table.compaction_plan(scheduled.instant_time).operations or ()
        for n in ([op.data_file_path] if op.data_file_path else []) + list(op.delta_file_paths or ())
    }
    snapshot = hudi_rs_rows(path)
    before = read_rows(path)

    plan, _, _ = run_clean(path, CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1))

    assert inputs and inputs <= data_files(path)
    assert planned_paths(plan, path), "older slices of the same groups are still cleaned"
    assert hudi_rs_rows(path) == snapshot
    execute_compaction(ServiceContext(HoodieTable.open(str(path))), scheduled.instant_time, LocalRunner())
    assert read_rows(path) == before


def _request_clustering(path: Path, slices: list[tuple[str, str]]) -> str:
    """A pending clustering over the given (partition, base file name) slices (layout 2)."""
    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table)
    pieces = [
        SliceInfo(
            data_file_path=table.fileio.to_uri(f"{table.base_path}/{p}/{name}"),
            delta_file_paths=[],
            file_id=name.split("_")[0],
            partition_path=p,
        )
        for p, name in slices
    ]
    meta = RequestedReplaceMetadata(
        operation_type="CLUSTER",
        clustering_plan=ClusteringPlan(
            input_groups=[ClusteringGroup(slices=pieces, metrics={}, num_output_file_groups=1)],
            strategy=ClusteringStrategy(
                strategy_class_name="org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
            ),
            extra_metadata={},
            preserve_hoodie_metadata=True,
        ),
        extra_metadata={},
    )
    instant_time = ctx.new_instant_time()
    table.reload().create_requested(
        Instant(instant_time, Action.CLUSTERING, State.REQUESTED), meta.to_bytes(table.table_version)
    )
    return instant_time


def test_pending_clustering_holds_retention_back_and_keeps_its_inputs(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    writes = write_times(path)
    # Cluster an older slice of a p0 group (not its latest), which a by-versions clean would drop.
    (_, _), slices = next((k, v) for k, v in live_slices(path).items() if k[0] == "p0" and len(v) >= 3)
    older = slices[2][1][0]
    clustering = _request_clustering(path, [("p0", older.split("/", 1)[1])])
    for k in range(3):  # writes after it, away from the clustered partition
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1, 2, 4], 70 + k))

    # The earliest commit to retain never passes the oldest pending instant.
    by_commits = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=1))
    assert by_commits.earliest is not None and by_commits.earliest.requested_time == writes[-1]
    assert normalize(by_commits.earliest.requested_time) < normalize(clustering)

    plan, _, _ = run_clean(path, CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1))
    assert older in data_files(path)
    assert older not in planned_paths(plan, path)
    assert slices[1][1][0] in data_files(path)  # newer than the clustering input: kept too
    assert planned_paths(plan, path), "other groups are still cleaned"


def _files_of_groups(path: Path, partition: str, file_ids: set[str]) -> set[str]:
    return {f for f in data_files(path) if f.startswith(partition + "/") and any(i in f for i in file_ids)}


def test_replaced_groups_go_once_outside_retention(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT, rounds=3)
    table = HoodieTable.open(str(path))
    result = HoodieWriter(table).insert_overwrite(rows([0, 3, 6], 80))
    replaced_ids = set(result.replaced_file_groups["p0"])
    replaced = _files_of_groups(path, "p0", replaced_ids)
    assert replaced
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([1, 2], 81))
    writer.upsert(rows([1, 2], 82))
    snapshot = hudi_rs_rows(path)

    # The replace commit is still inside retention: its replaced groups stay (time travel needs them).
    inside, _, _ = run_clean(path, CleanPolicy(commits_retained=3))
    assert replaced <= data_files(path) and not replaced & planned_paths(inside, path)
    assert hudi_rs_rows(path) == snapshot
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1, 2], 83))
    snapshot = hudi_rs_rows(path)
    outside, meta, _ = run_clean(path, CleanPolicy(commits_retained=2))
    assert replaced <= planned_paths(outside, path)
    assert not replaced & data_files(path)
    assert not meta.partition_metadata["p0"].is_partition_deleted
    assert hudi_rs_rows(path) == snapshot


def test_a_deleted_partition_loses_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT, rounds=2)
    # A clean first, so that the clean below is incremental and takes the replace commit's partitions
    # (CleanPlanner.getPartitionsForInstants): a first, full clean lists the partitions from the
    # metadata table, whose partition list no longer has p2 after the DELETE_PARTITION.
    run_clean(path, CleanPolicy(commits_retained=1))
    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table)
    # DELETE_PARTITION as Hudi writes it: a replace commit replacing every group of the partition.
    file_ids = sorted({fid for (p, fid) in live_slices(path) if p == "p2"})
    instant_time = ctx.new_instant_time()
    timeline = table.reload()
    requested = timeline.create_requested(
        Instant(instant_time, Action.REPLACE_COMMIT, State.REQUESTED),
        RequestedReplaceMetadata.empty().to_bytes(8),
    )
    inflight = timeline.transition_to_inflight(requested, b"")
    meta = ReplaceCommitMetadata(
        partition_to_write_stats={},
        compacted=False,
        extra_metadata={},
        operation_type="DELETE_PARTITION",
        partition_to_replace_file_ids={"p2": file_ids},
    )
    ctx.complete(inflight, meta.to_bytes(8))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([0, 1], 90))
    writer.upsert(rows([0, 1], 91))
    snapshot = hudi_rs_rows(path)
    assert snapshot and all("'p': 'p2'" not in r for r in snapshot)

    plan, cleaned, _ = run_clean(path, CleanPolicy(commits_retained=1))

    assert plan.partitions_to_be_deleted == ["p2"]
    assert not (path / "p2").exists()
    assert cleaned.partition_metadata["p2"].is_partition_deleted is True
    assert cleaned.partition_metadata["p0"].is_partition_deleted is False
    assert hudi_rs_rows(path) == snapshot
