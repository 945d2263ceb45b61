"""Clean planning cuts the listing, with array operations, to the file groups a clean may touch
(``hoodie.services.clean_candidates``): what it plans from the cut equals what it plans from every file,
on every table Apache Hudi wrote and on generated tables, under each cleaning policy."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from hoodie.config.table_config import TableVersion
from hoodie.models.clean import CleaningPolicy
from hoodie.services.clean_candidates import files_worth_planning, more_than_one_slice
from hoodie.services.clean_planner import (
    TimelineFacts,
    _Planner,
    earliest_commit_to_retain,
    list_partitions,
)
from hoodie.services.clean_policy import CleanPolicy
from hoodie.table import HoodieTable
from hoodie.timeline.instant_time import normalize
from tests.conftest import fixture_names, fixture_path
from tests.fixtures.test_file_index import generated_table

POLICIES = [
    CleanPolicy(commits_retained=1),
    CleanPolicy(commits_retained=2),
    CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1),
    CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=2),
    CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_BY_HOURS, hours_retained=0),
]


def _assert_cut_plans_alike(table: HoodieTable) -> int:
    """Per policy and partition, the files to delete from the cut and from the full listing."""
    timeline = table.reload()
    facts = TimelineFacts.gather(table, timeline)
    listed = list_partitions(table.fileio, table.base_path)
    pinned = {**facts.pending_compaction_slices, **facts.needed_from, **facts.clustering_from}
    cut = more_than_one_slice(facts.table_version, list(listed), listed, facts.replaced, pinned)
    assert set(cut) == set(listed)
    deleted = 0
    for policy in POLICIES:
        earliest = earliest_commit_to_retain(timeline, policy, table.tz, dt.datetime.now(dt.UTC))
        planner = _Planner(table, policy, facts, normalize(earliest.requested_time) if earliest else None)
        for partition, names in listed.items():
            full = planner.files_to_delete(partition, names)
            assert planner.files_to_delete(partition, cut[partition]) == full, (policy, partition)
            deleted += len(full[0])
    return deleted


@pytest.mark.parametrize("name", fixture_names())
def test_cut_listing_plans_as_the_full_one_on_hudi_tables(fixture_root: Path, name: str) -> None:
    _assert_cut_plans_alike(HoodieTable.open(str(fixture_path(fixture_root, name))))


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_cut_listing_plans_as_the_full_one_on_generated_tables(tmp_path: Path, version: TableVersion) -> None:
    assert _assert_cut_plans_alike(generated_table(tmp_path / "t", version)) > 0


def _names(partitions: int, groups: int, slices: int) -> dict[str, list[str]]:
    """Base file names as Hudi lays them out: ``groups`` file groups of ``slices`` slices per partition."""
    times = [f"2025010100{c // 60:02d}{c % 60:02d}000" for c in range(slices)]
    return {
        f"p={p:03d}": [
            f"{p:08d}-{g:04d}-0000-0000-000000000000-0_0-1-{c}_{ts}.parquet"
            for g in range(groups)
            for c, ts in enumerate(times)
        ]
        for p in range(partitions)
    }


def test_the_listing_is_cut_only_when_a_sample_says_it_pays() -> None:
    # Every group has 20 slices: the cut would drop nothing, so the listing is planned as it is.
    many = _names(100, 50, 20)
    assert files_worth_planning(8, list(many), many, (), ()) is many
    # One slice per group but in 10 groups a partition: the cut keeps just those 10 groups' files.
    single = _names(100, 50, 1)
    for names in single.values():
        # A second base file, of a later commit, in the first 10 groups.
        names.extend(n.replace("0000000.parquet", "0001000.parquet") for n in names[:10])
    cut = files_worth_planning(8, list(single), single, (), ())
    assert cut is not single
    assert sum(len(v) for v in cut.values()) == 100 * 10 * 2
    # A pinned group (pending compaction) and a whole partition (a replaced group) stay in it.
    pinned = [("p=000", "00000000-0040-0000-0000-000000000000-0")]
    cut = files_worth_planning(8, list(single), single, ["p=001"], pinned)
    assert len(cut["p=000"]) == 21 and len(cut["p=001"]) == 60
