"""Clean planning cuts the listing, with array operations, to the file groups a clean may touch
(``_with_more_than_one_slice``): what it plans from the cut equals what it plans from every file,
on every table Apache Hudi wrote and on generated tables, under each cleaning policy."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from hoodie.config.table_config import TableVersion
from hoodie.models.clean import CleaningPolicy
from hoodie.services.clean_planner import (
    TimelineFacts,
    _Planner,
    _with_more_than_one_slice,
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
    cut = _with_more_than_one_slice(facts, list(listed), listed)
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
