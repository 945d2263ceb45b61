"""Clean: every policy keeps exactly what Apache Hudi's cleaner keeps; after a clean hudi-rs reads
the same snapshot and time travel to every retained instant reads what it read before; savepoints,
pending compactions and clusterings keep their files; plans and metadata are Hudi's Avro records."""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.models.clean import CleanerPlan, CleaningPolicy, CleanMetadata
from hoodie.models.clustering import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hoodie.models.codec import load_schema
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.models.savepoint import SavepointMetadata, SavepointPartitionMetadata
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.services.clean import (
    CleanPolicy,
    CleanService,
    CleanTrigger,
    clean_plan,
    execute_clean,
    list_partitions,
    plan_clean,
    schedule_clean,
)
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize, parse_instant_time
from hoodie.write.writer import HoodieWriter
from tests.conftest import NO_METADATA_TABLE, hudi_rs_rows
from tests.tables import age_heartbeats, new_table, rows

VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]
FILE_VERSIONS = CleaningPolicy.KEEP_LATEST_FILE_VERSIONS


def _compact(path: Path) -> str:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return scheduled.instant_time


def _table(path: Path, table_type: TableType, version: TableVersion, rounds: int = 6) -> HoodieTable:
    """Many versions per file group: upserts (and, for MERGE_ON_READ, a compaction every two)."""
    table = new_table(path, table_type=table_type, version=version)
    writer = HoodieWriter(table)
    writer.insert(rows(range(30), 1))
    for k in range(rounds):
        writer.upsert(rows(range(k % 3, 30, 2 + k % 2), k + 2))
        if table_type is TableType.MERGE_ON_READ and k % 2 == 1:
            _compact(path)
    writer.delete(rows([4, 5], 99).select(["id", "p"]))
    return HoodieTable.open(str(path))


def _data_files(path: Path) -> set[str]:
    return {
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and ".hoodie" not in p.parts and not p.name.startswith(".hoodie_partition_metadata")
    }


def _read(path: Path, as_of: str | None = None) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot(as_of=as_of)
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _writes(path: Path) -> list[str]:
    return [i.requested_time for i in HoodieTable.open(str(path)).reload().writes().completed()]


def _clean(path: Path, policy: CleanPolicy, runner: Any = None) -> tuple[CleanerPlan, CleanMetadata, str]:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_clean(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    assert isinstance(scheduled.plan, CleanerPlan)
    result = execute_clean(ctx, scheduled.instant_time, runner or LocalRunner())
    return scheduled.plan, _metadata(path, scheduled.instant_time), result.instant.requested_time


def _metadata(path: Path, instant_time: str) -> CleanMetadata:
    table = HoodieTable.open(str(path))
    data = table.reload().read_state(instant_time, State.COMPLETED, Action.CLEAN)
    return CleanMetadata.from_bytes(data, table.table_version)


def _planned(plan: CleanerPlan, path: Path) -> set[str]:
    """Plan entries as paths relative to the table."""
    return {
        p.removeprefix("file:").removeprefix(str(path) + "/")
        for paths in plan.files_to_delete().values()
        for p in paths
    }


def _slices(path: Path) -> dict[tuple[str, str], list[tuple[str, list[str]]]]:
    """Per live file group: (base instant, relative file paths) of every slice, newest first.

    Built with the file-system view (not the planner) as an independent oracle.
    """
    table = HoodieTable.open(str(path))
    view = table.file_system_view(timeline=table.reload())
    out: dict[tuple[str, str], list[tuple[str, list[str]]]] = {}
    for partition in view.partitions():
        for fg in view.file_groups(partition):
            if view.is_replaced(fg.group_id):
                continue
            out[(partition, fg.file_id)] = [
                (
                    s.base_instant_time,
                    [f"{partition}/{n}" for n in ([s.base_file.name] if s.base_file else [])]
                    + [f"{partition}/{lf.name}" for lf in s.log_files],
                )
                for s in fg.slices()
            ]
    return out


def _expected_by_commits(path: Path, earliest: str) -> set[str]:
    """Hudi's rule: keep the latest slice, slices at or after ``earliest``, and the newest one before it."""
    out: set[str] = set()
    cut = normalize(earliest)
    for slices in _slices(path).values():
        older = [i for i, (base, _) in enumerate(slices) if normalize(base) < cut]
        keep = {0} | set(older[:1])
        out.update(
            f
            for i, (base, files) in enumerate(slices)
            if i not in keep and normalize(base) < cut
            for f in files
        )
    return out


# -- the main guarantee -----------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_clean_keeps_snapshot_and_time_travel_and_removes_what_is_outside_retention(
    tmp_path: Path, table_type: TableType, version: TableVersion
) -> None:
    path = tmp_path / "t"
    _table(path, table_type, version)
    writes = _writes(path)
    earliest = writes[-3]
    snapshot = hudi_rs_rows(path)
    travel = {w: _read(path, w) for w in writes}
    files = _data_files(path)
    expected = _expected_by_commits(path, earliest)
    assert expected, "the table should have slices outside retention"

    plan, meta, _ = _clean(path, CleanPolicy(commits_retained=3))

    assert plan.earliest_instant_to_retain is not None
    assert plan.earliest_instant_to_retain.timestamp == earliest
    assert _planned(plan, path) == expected
    assert _data_files(path) == files - expected
    assert hudi_rs_rows(path) == snapshot
    for w in writes:
        if normalize(w) >= normalize(earliest):
            assert _read(path, w) == travel[w], f"time travel to {w} changed"
    assert meta.total_files_deleted == len(expected)
    assert meta.earliest_commit_to_retain == earliest
    assert meta.last_completed_commit_timestamp == writes[-1]
    assert all(not m.failed_delete_files for m in meta.partition_metadata.values())
    # Nothing else is due right after a clean.
    assert plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=3)).plan is None


@pytest.mark.parametrize("name", NO_METADATA_TABLE)
def test_clean_of_tables_apache_hudi_wrote(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    for policy in (
        CleanPolicy(commits_retained=1),
        CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1),
    ):
        writes = _writes(path)
        snapshot = hudi_rs_rows(path)
        latest = _read(path, writes[-1])
        files = _data_files(path)
        scheduled = schedule_clean(ServiceContext(HoodieTable.open(str(path))), policy)
        if scheduled is None:
            # Every slice is one Hudi keeps: the latest, or the one the earliest retained commit reads.
            assert policy.policy is not FILE_VERSIONS or all(len(s) == 1 for s in _slices(path).values())
            continue
        assert scheduled.instant_time is not None and isinstance(scheduled.plan, CleanerPlan)
        execute_clean(ServiceContext(HoodieTable.open(str(path))), scheduled.instant_time, LocalRunner())
        assert _data_files(path) == files - _planned(scheduled.plan, path)
        assert hudi_rs_rows(path) == snapshot
        assert _read(path, writes[-1]) == latest
        assert all(slices for slices in _slices(path).values())
    # After the by-versions clean, every live file group is down to its latest slice.
    assert all(len(s) == 1 for s in _slices(path).values())


# -- policies ---------------------------------------------------------------------------------


def test_file_versions_policy_keeps_the_newest_slices_of_every_group(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, rounds=8)
    snapshot = hudi_rs_rows(path)
    before = _slices(path)
    assert max(len(s) for s in before.values()) >= 3
    expected = {f for slices in before.values() for _, files in slices[2:] for f in files}

    plan, meta, _ = _clean(path, CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=2))

    assert plan.earliest_instant_to_retain is None and meta.earliest_commit_to_retain == ""
    assert plan.policy == "KEEP_LATEST_FILE_VERSIONS"
    assert _planned(plan, path) == expected
    after = _slices(path)
    assert {k: [b for b, _ in v] for k, v in after.items()} == {
        k: [b for b, _ in v[:2]] for k, v in before.items()
    }
    assert hudi_rs_rows(path) == snapshot


def test_by_hours_retains_from_the_first_commit_inside_the_window(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    writes = _writes(path)
    cutoff = writes[-4]
    now = parse_instant_time(cutoff, table.tz) + dt.timedelta(hours=2)
    by_hours = plan_clean(
        table, CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_BY_HOURS, hours_retained=2), now=now
    )
    by_commits = plan_clean(table, CleanPolicy(commits_retained=4))
    assert by_hours.earliest is not None and by_hours.earliest.requested_time == cutoff
    assert by_hours.plan is not None and by_commits.plan is not None
    assert by_hours.plan.policy == "KEEP_LATEST_BY_HOURS"
    assert by_hours.plan.files_to_delete() == by_commits.plan.files_to_delete()
    # Every commit older than the window: Hudi finds no commit to retain and cleans nothing.
    later = now + dt.timedelta(days=3)
    stale = plan_clean(
        table, CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_BY_HOURS, hours_retained=2), now=later
    )
    assert stale.earliest is None and stale.plan is None


def test_too_few_commits_means_nothing_to_clean(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    writes = _writes(path)
    count = len(writes)
    assert plan_clean(table, CleanPolicy(commits_retained=count)).plan is None  # not more than N commits
    # Retaining from the second commit: the first commit's slices are what that commit reads.
    assert plan_clean(table, CleanPolicy(commits_retained=count - 1)).plan is None
    third = plan_clean(table, CleanPolicy(commits_retained=count - 2))
    assert third.plan is not None
    planned = _planned(third.plan, path)
    assert planned and all(f.endswith(f"_{writes[0]}.parquet") for f in planned)


def test_policy_from_hudi_keys() -> None:
    assert CleanPolicy.from_options({}) == CleanPolicy()
    old = CleanPolicy.from_options(
        {"hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS", "hoodie.cleaner.hours.retained": "5"}
    )
    assert old.policy is CleaningPolicy.KEEP_LATEST_BY_HOURS and old.hours_retained == 5
    new = CleanPolicy.from_options(
        {"hoodie.clean.policy": "keep_latest_commits", "hoodie.clean.commits.retained": "4"}
    )
    assert new.policy is CleaningPolicy.KEEP_LATEST_COMMITS and new.commits_retained == 4
    # A single retention key chooses the policy (Hudi's inference); several keep the default.
    assert CleanPolicy.from_options({"hoodie.cleaner.fileversions.retained": "2"}).policy is FILE_VERSIONS
    both = {"hoodie.cleaner.fileversions.retained": "2", "hoodie.cleaner.hours.retained": "3"}
    assert CleanPolicy.from_options(both).policy is CleaningPolicy.KEEP_LATEST_COMMITS
    assert CleanPolicy.from_options({"hoodie.cleaner.incremental.mode": "false"}).incremental is False
    assert CleanPolicy.from_options({}).trigger is None
    triggered = CleanPolicy.from_options({"hoodie.clean.max.commits": "3"})
    assert triggered.trigger is CleanTrigger.NUM_COMMITS and triggered.max_commits == 3
    with pytest.raises(TableServiceError, match=r"hoodie.cleaner.policy='KEEP_ALL'"):
        CleanPolicy.from_options({"hoodie.cleaner.policy": "KEEP_ALL"})
    with pytest.raises(TableServiceError, match=r"hoodie.clean.commits.retained='ten'"):
        CleanPolicy.from_options({"hoodie.clean.commits.retained": "ten"})
    with pytest.raises(TableServiceError, match=r"hoodie.cleaner.fileversions.retained=0"):
        CleanPolicy.from_options({"hoodie.cleaner.fileversions.retained": "0"})
    with pytest.raises(TableServiceError, match=r"hoodie.clean.trigger.strategy='TIME'"):
        CleanPolicy.from_options({"hoodie.clean.trigger.strategy": "TIME"})


def test_num_commits_trigger_counts_commits_since_the_last_clean(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    _clean(path, CleanPolicy(commits_retained=2))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows(range(0, 30, 2), 50))
    gated = CleanPolicy(commits_retained=2, trigger=CleanTrigger.NUM_COMMITS, max_commits=2)
    assert schedule_clean(ServiceContext(HoodieTable.open(str(path))), gated) is None
    writer.upsert(rows(range(0, 30, 2), 51))
    scheduled = schedule_clean(ServiceContext(HoodieTable.open(str(path))), gated)
    assert scheduled is not None and scheduled.reason.startswith("NUM_COMMITS: 2 commit(s)")


# -- what must survive ------------------------------------------------------------------------


def _savepoint(path: Path, instant_time: str) -> set[str]:
    """Savepoint ``instant_time`` the way Hudi does: the latest files as of it, per partition."""
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    view = table.file_system_view(as_of=instant_time, timeline=timeline)
    per_partition: dict[str, list[str]] = {}
    for s in view.latest_file_slices():
        names = ([s.base_file.name] if s.base_file else []) + [lf.name for lf in s.log_files]
        per_partition.setdefault(s.partition_path, []).extend(names)
    meta = SavepointMetadata(
        savepointed_by="hts-test",
        savepointed_at=int(time.time()),
        comments="clean test",
        partition_metadata={
            p: SavepointPartitionMetadata(partition_path=p, savepoint_data_file=names)
            for p, names in per_partition.items()
        },
    )
    inflight = timeline.create_inflight(Instant(instant_time, Action.SAVEPOINT, State.INFLIGHT))
    completion = ServiceContext(table).new_instant_time() if table.table_version >= 8 else None
    timeline.reload().complete(inflight, meta.to_bytes(table.table_version), completion)
    return {f"{p}/{n}" for p, names in per_partition.items() for n in names}


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_savepointed_files_survive(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    _table(path, TableType.MERGE_ON_READ, version)
    saved_at = _writes(path)[1]
    saved_view = _read(path, saved_at)
    saved = _savepoint(path, saved_at)
    snapshot = hudi_rs_rows(path)

    plan, meta, _ = _clean(path, CleanPolicy(commits_retained=1))

    assert saved <= _data_files(path)
    assert not saved & _planned(plan, path)
    assert _read(path, saved_at) == saved_view
    assert hudi_rs_rows(path) == snapshot
    assert (plan.extra_metadata or {}) == {"savepointed_timestamps": saved_at}
    assert meta.extra_metadata == plan.extra_metadata
    assert meta.total_files_deleted > 0


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_pending_compaction_inputs_survive(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    _table(path, TableType.MERGE_ON_READ, version)
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
    before = _read(path)

    plan, _, _ = _clean(path, CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1))

    assert inputs and inputs <= _data_files(path)
    assert _planned(plan, path), "older slices of the same groups are still cleaned"
    assert hudi_rs_rows(path) == snapshot
    execute_compaction(ServiceContext(HoodieTable.open(str(path))), scheduled.instant_time, LocalRunner())
    assert _read(path) == before


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
    _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    writes = _writes(path)
    # Cluster an older slice of a p0 group (not its latest), which a by-versions clean would drop.
    (_, _), slices = next((k, v) for k, v in _slices(path).items() if k[0] == "p0" and len(v) >= 3)
    older = slices[2][1][0]
    clustering = _request_clustering(path, [("p0", older.split("/", 1)[1])])
    for k in range(3):  # writes after it, away from the clustered partition
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1, 2, 4], 70 + k))

    # The earliest commit to retain never passes the oldest pending instant.
    by_commits = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=1))
    assert by_commits.earliest is not None and by_commits.earliest.requested_time == writes[-1]
    assert normalize(by_commits.earliest.requested_time) < normalize(clustering)

    plan, _, _ = _clean(path, CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1))
    assert older in _data_files(path)
    assert older not in _planned(plan, path)
    assert slices[1][1][0] in _data_files(path)  # newer than the clustering input: kept too
    assert _planned(plan, path), "other groups are still cleaned"


def _files_of_groups(path: Path, partition: str, file_ids: set[str]) -> set[str]:
    return {f for f in _data_files(path) if f.startswith(partition + "/") and any(i in f for i in file_ids)}


def test_replaced_groups_go_once_outside_retention(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT, rounds=3)
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
    inside, _, _ = _clean(path, CleanPolicy(commits_retained=3))
    assert replaced <= _data_files(path) and not replaced & _planned(inside, path)
    assert hudi_rs_rows(path) == snapshot
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1, 2], 83))
    snapshot = hudi_rs_rows(path)
    outside, meta, _ = _clean(path, CleanPolicy(commits_retained=2))
    assert replaced <= _planned(outside, path)
    assert not replaced & _data_files(path)
    assert not meta.partition_metadata["p0"].is_partition_deleted
    assert hudi_rs_rows(path) == snapshot


def test_a_deleted_partition_loses_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT, rounds=2)
    # A clean first, so that the clean below is incremental and takes the replace commit's partitions
    # (CleanPlanner.getPartitionsForInstants): a first, full clean lists the partitions from the
    # metadata table, whose partition list no longer has p2 after the DELETE_PARTITION.
    _clean(path, CleanPolicy(commits_retained=1))
    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table)
    # DELETE_PARTITION as Hudi writes it: a replace commit replacing every group of the partition.
    file_ids = sorted({fid for (p, fid) in _slices(path) if p == "p2"})
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

    plan, cleaned, _ = _clean(path, CleanPolicy(commits_retained=1))

    assert plan.partitions_to_be_deleted == ["p2"]
    assert not (path / "p2").exists()
    assert cleaned.partition_metadata["p2"].is_partition_deleted is True
    assert cleaned.partition_metadata["p0"].is_partition_deleted is False
    assert hudi_rs_rows(path) == snapshot


# -- incremental planning ---------------------------------------------------------------------


def test_incremental_mode_scans_only_partitions_written_since_the_last_clean(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    p0_keys = range(0, 30, 3)
    for k in range(2):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p0_keys, 100 + k))
    first = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=2))
    assert first.partitions_scanned == ["p0", "p1", "p2"]  # no clean yet: a full scan
    _clean(path, CleanPolicy(commits_retained=2))
    for k in range(3):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p0_keys, 110 + k))

    incremental = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=2))
    full = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=2, incremental=False))
    assert incremental.partitions_scanned == ["p0"]
    assert sorted(full.partitions_scanned) == ["p0", "p1", "p2"]
    assert incremental.plan is not None and full.plan is not None
    assert incremental.plan.files_to_delete() == full.plan.files_to_delete()


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_a_deleted_savepoint_brings_its_partitions_back_into_incremental_cleaning(
    tmp_path: Path, version: TableVersion
) -> None:
    path = tmp_path / "t"
    _table(path, TableType.COPY_ON_WRITE, version)
    p0_keys, p1_keys = range(0, 30, 3), range(1, 30, 3)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p1_keys, 100))  # a commit writing only p1
    saved_at = _writes(path)[-1]
    saved = _savepoint(path, saved_at)
    for k in range(2):  # the savepointed p1 slice becomes an old one
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p1_keys, 101 + k))
    for k in range(3):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p0_keys, 103 + k))
    _, meta, _ = _clean(path, CleanPolicy(commits_retained=2))
    assert (meta.extra_metadata or {}).get("savepointed_timestamps") == saved_at
    kept = {f for f in saved if f.startswith("p1/")}
    assert kept and kept <= _data_files(path)
    # Hudi deletes a savepoint by removing its instant files.
    timeline_dir = Path(HoodieTable.open(str(path)).paths.timeline)
    for f in timeline_dir.glob(f"{saved_at}*.savepoint*"):
        f.unlink()
    for k in range(3):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p0_keys, 110 + k))

    planning = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=2))
    # 0.14/0.15 add the partitions the deleted savepoint's commit wrote; 1.x rescans every partition.
    expected = ["p0", "p1"] if version is TableVersion.SIX else ["p0", "p1", "p2"]
    assert sorted(planning.partitions_scanned) == expected
    assert planning.plan is not None
    assert kept <= _planned(planning.plan, path)  # no longer savepointed: cleaned now


def test_planning_from_a_given_listing_equals_planning_that_lists(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableType.MERGE_ON_READ, TableVersion.NINE)
    listing = list_partitions(table.fileio, table.base_path)
    assert sorted(listing) == ["p0", "p1", "p2"]
    assert sum(len(v) for v in listing.values()) == len(_data_files(path)) + 3  # + partition metadata
    policy = CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1)
    given = plan_clean(table, policy, listing=listing).plan
    listed = plan_clean(table, policy).plan
    assert given is not None and given == listed


# -- format, dry run, refusal, runners, recovery ----------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_plan_and_metadata_are_hudis_avro_and_dry_run_writes_nothing(
    tmp_path: Path, version: TableVersion
) -> None:
    path = tmp_path / "t"
    table = _table(path, TableType.MERGE_ON_READ, version)
    timeline_dir = table.paths.timeline
    before = (sorted(os.listdir(timeline_dir)), _data_files(path))
    dry = schedule_clean(ServiceContext(table), CleanPolicy(commits_retained=2), dry_run=True)
    assert dry is not None and dry.instant_time is None
    assert (sorted(os.listdir(timeline_dir)), _data_files(path)) == before

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
    assert plan["lastCompletedCommitTimestamp"] == _writes(path)[-1]
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
    _table(local, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    on_spark = tmp_path / "spark"
    _table(on_spark, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    snapshot = hudi_rs_rows(on_spark)
    _, local_meta, _ = _clean(local, CleanPolicy(commits_retained=2))
    plan, spark_meta, _ = _clean(on_spark, CleanPolicy(commits_retained=2), spark_runner)
    assert (
        spark_meta.total_files_deleted == len(_planned(plan, on_spark)) == local_meta.total_files_deleted > 0
    )
    assert not _planned(plan, on_spark) & _data_files(on_spark)
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
    _table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    snapshot = hudi_rs_rows(path)
    files = _data_files(path)
    scheduled = schedule_clean(ServiceContext(HoodieTable.open(str(path))), CleanPolicy(commits_retained=2))
    assert scheduled is not None and scheduled.instant_time is not None
    assert isinstance(scheduled.plan, CleanerPlan)
    planned = _planned(scheduled.plan, path)
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
    gone = files - _data_files(path)
    assert len(gone) == 1 and gone <= planned  # killed after its first delete
    table = HoodieTable.open(str(path))
    assert table.reload().get(scheduled.instant_time, Action.CLEAN).state is State.INFLIGHT  # type: ignore[union-attr]
    assert hudi_rs_rows(path) == snapshot

    # The dead attempt's heartbeat is still fresh: a second executor refuses until it expires.
    with pytest.raises(TableServiceError, match="heartbeat is alive"):
        execute_clean(ServiceContext(table), scheduled.instant_time, LocalRunner())
    age_heartbeats(path)  # it expires (the next executor beats at the default interval)
    execute_clean(ServiceContext(table), scheduled.instant_time, LocalRunner())

    meta = _metadata(path, scheduled.instant_time)
    failed = {f"{p}/{n}" for p, m in meta.partition_metadata.items() for n in m.failed_delete_files}
    assert failed == gone  # already gone: recorded as a failed delete, as Hudi records it
    assert meta.total_files_deleted == len(planned) - 1
    assert _data_files(path) == files - planned
    assert hudi_rs_rows(path) == snapshot


def test_clean_is_a_registered_service_that_finishes_pending_cleans_first(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, TableType.COPY_ON_WRITE, TableVersion.NINE)
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
