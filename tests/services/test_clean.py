"""Clean: every policy keeps exactly what Apache Hudi's cleaner keeps; after a clean hudi-rs reads
the same snapshot and time travel to every retained instant reads what it read before; incremental
planning looks only at the partitions written since the last clean.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.models.clean import CleanerPlan, CleaningPolicy
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import (
    CleanPolicy,
    CleanTrigger,
    execute_clean,
    list_partitions,
    plan_clean,
    schedule_clean,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant_time import normalize, parse_instant_time
from hoodie.write.writer import HoodieWriter
from tests.conftest import NO_METADATA_TABLE, hudi_rs_rows
from tests.services.clean_support import (
    FILE_VERSIONS,
    VERSIONS,
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


def _expected_by_commits(path: Path, earliest: str) -> set[str]:
    """Hudi's rule: keep the latest slice, slices at or after ``earliest``, and the newest one before it."""
    out: set[str] = set()
    cut = normalize(earliest)
    for slices in live_slices(path).values():
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
    cleanable_table(path, table_type, version)
    writes = write_times(path)
    earliest = writes[-3]
    snapshot = hudi_rs_rows(path)
    travel = {w: read_rows(path, w) for w in writes}
    files = data_files(path)
    expected = _expected_by_commits(path, earliest)
    assert expected, "the table should have slices outside retention"

    plan, meta, _ = run_clean(path, CleanPolicy(commits_retained=3))

    assert plan.earliest_instant_to_retain is not None
    assert plan.earliest_instant_to_retain.timestamp == earliest
    assert planned_paths(plan, path) == expected
    assert data_files(path) == files - expected
    assert hudi_rs_rows(path) == snapshot
    for w in writes:
        if normalize(w) >= normalize(earliest):
            assert read_rows(path, w) == travel[w], f"time travel to {w} changed"
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
        writes = write_times(path)
        snapshot = hudi_rs_rows(path)
        latest = read_rows(path, writes[-1])
        files = data_files(path)
        scheduled = schedule_clean(ServiceContext(HoodieTable.open(str(path))), policy)
        if scheduled is None:
            # Every slice is one Hudi keeps: the latest, or the one the earliest retained commit reads.
            assert policy.policy is not FILE_VERSIONS or all(len(s) == 1 for s in live_slices(path).values())
            continue
        assert scheduled.instant_time is not None and isinstance(scheduled.plan, CleanerPlan)
        execute_clean(ServiceContext(HoodieTable.open(str(path))), scheduled.instant_time, LocalRunner())
        assert data_files(path) == files - planned_paths(scheduled.plan, path)
        assert hudi_rs_rows(path) == snapshot
        assert read_rows(path, writes[-1]) == latest
        assert all(slices for slices in live_slices(path).values())
    # After the by-versions clean, every live file group is down to its latest slice.
    assert all(len(s) == 1 for s in live_slices(path).values())


# -- policies ---------------------------------------------------------------------------------


def test_file_versions_policy_keeps_the_newest_slices_of_every_group(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, rounds=8)
    snapshot = hudi_rs_rows(path)
    before = live_slices(path)
    assert max(len(s) for s in before.values()) >= 3
    expected = {f for slices in before.values() for _, files in slices[2:] for f in files}

    plan, meta, _ = run_clean(path, CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=2))

    assert plan.earliest_instant_to_retain is None and meta.earliest_commit_to_retain == ""
    assert plan.policy == "KEEP_LATEST_FILE_VERSIONS"
    assert planned_paths(plan, path) == expected
    after = live_slices(path)
    assert {k: [b for b, _ in v] for k, v in after.items()} == {
        k: [b for b, _ in v[:2]] for k, v in before.items()
    }
    assert hudi_rs_rows(path) == snapshot


def test_by_hours_retains_from_the_first_commit_inside_the_window(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    writes = write_times(path)
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
    table = cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    writes = write_times(path)
    count = len(writes)
    assert plan_clean(table, CleanPolicy(commits_retained=count)).plan is None  # not more than N commits
    # Retaining from the second commit: the first commit's slices are what that commit reads.
    assert plan_clean(table, CleanPolicy(commits_retained=count - 1)).plan is None
    third = plan_clean(table, CleanPolicy(commits_retained=count - 2))
    assert third.plan is not None
    planned = planned_paths(third.plan, path)
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
    cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    run_clean(path, CleanPolicy(commits_retained=2))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows(range(0, 30, 2), 50))
    gated = CleanPolicy(commits_retained=2, trigger=CleanTrigger.NUM_COMMITS, max_commits=2)
    assert schedule_clean(ServiceContext(HoodieTable.open(str(path))), gated) is None
    writer.upsert(rows(range(0, 30, 2), 51))
    scheduled = schedule_clean(ServiceContext(HoodieTable.open(str(path))), gated)
    assert scheduled is not None and scheduled.reason.startswith("NUM_COMMITS: 2 commit(s)")


# -- incremental planning ---------------------------------------------------------------------


def test_incremental_mode_scans_only_partitions_written_since_the_last_clean(tmp_path: Path) -> None:
    path = tmp_path / "t"
    cleanable_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    p0_keys = range(0, 30, 3)
    for k in range(2):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p0_keys, 100 + k))
    first = plan_clean(HoodieTable.open(str(path)), CleanPolicy(commits_retained=2))
    assert first.partitions_scanned == ["p0", "p1", "p2"]  # no clean yet: a full scan
    run_clean(path, CleanPolicy(commits_retained=2))
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
    cleanable_table(path, TableType.COPY_ON_WRITE, version)
    p0_keys, p1_keys = range(0, 30, 3), range(1, 30, 3)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p1_keys, 100))  # a commit writing only p1
    saved_at = write_times(path)[-1]
    saved = savepoint_at(path, saved_at)
    for k in range(2):  # the savepointed p1 slice becomes an old one
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p1_keys, 101 + k))
    for k in range(3):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(p0_keys, 103 + k))
    _, meta, _ = run_clean(path, CleanPolicy(commits_retained=2))
    assert (meta.extra_metadata or {}).get("savepointed_timestamps") == saved_at
    kept = {f for f in saved if f.startswith("p1/")}
    assert kept and kept <= data_files(path)
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
    assert kept <= planned_paths(planning.plan, path)  # no longer savepointed: cleaned now


def test_planning_from_a_given_listing_equals_planning_that_lists(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = cleanable_table(path, TableType.MERGE_ON_READ, TableVersion.NINE)
    listing = list_partitions(table.fileio, table.base_path)
    assert sorted(listing) == ["p0", "p1", "p2"]
    assert sum(len(v) for v in listing.values()) == len(data_files(path)) + 3  # + partition metadata
    policy = CleanPolicy(policy=FILE_VERSIONS, file_versions_retained=1)
    given = plan_clean(table, policy, listing=listing).plan
    listed = plan_clean(table, policy).plan
    assert given is not None and given == listed
