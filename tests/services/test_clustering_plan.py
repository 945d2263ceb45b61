"""Clustering plans: the size, group and partition rules of Hudi's size-based plan strategy,
incremental planning from table version 8, the commit trigger and dry runs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError, UnsupportedTableError
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.services.base import ServiceContext, service_named
from hoodie.services.clustering import (
    ClusteringPolicy,
    PartitionFilterMode,
    plan_clustering,
    schedule_clustering,
)
from hoodie.table import HoodieTable
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.services.test_clustering import PLANS, SORT, TARGET, _cluster, _live_sizes, _our_table, _rows


def _plan(table: HoodieTable, options: dict[str, str], **kw: Any) -> RequestedReplaceMetadata | None:
    return plan_clustering(table, ClusteringPolicy.from_options(options), **kw)


def _group_partitions(meta: RequestedReplaceMetadata | None) -> list[str]:
    assert meta is not None and meta.clustering_plan is not None
    return [g.slices[0].partition_path for g in meta.clustering_plan.input_groups or ()]


def test_planner_sizes_and_limits(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE)
    sizes = sorted(size for per_partition in _live_sizes(path).values() for size in per_partition)
    # No file is below the small file limit: nothing to do.
    assert _plan(table, {"hoodie.clustering.plan.strategy.small.file.limit": str(sizes[0])}) is None
    # Groups hold at most max.bytes.per.group: two files each.
    two = str(sizes[-1] * 2 + sizes[-1] // 2)
    plan = _plan(table, {"hoodie.clustering.plan.strategy.max.bytes.per.group": two})
    assert plan is not None and plan.clustering_plan is not None
    assert [len(g.slices or ()) for g in plan.clustering_plan.input_groups or ()] == [2] * 6
    for group in plan.clustering_plan.input_groups or ():
        slice_sizes = [
            (path / s.partition_path / s.data_file_path.rsplit("/", 1)[-1]).stat().st_size
            for s in group.slices
        ]
        assert slice_sizes == sorted(slice_sizes, reverse=True)
    # numOutputFileGroups = ceil(group bytes / target.file.max.bytes).
    plan = _plan(table, {TARGET: str(sizes[-1])})
    assert plan is not None and all(g.num_output_file_groups == 4 for g in plan.clustering_plan.input_groups)
    # max.num.groups caps the plan; partitions left out are recorded for the next (incremental) run.
    plan = _plan(table, {"hoodie.clustering.plan.strategy.max.num.groups": "2"})
    assert _group_partitions(plan) == ["p0", "p1"]
    assert plan.clustering_plan.missing_schedule_partitions == ["p2"]
    plan = _plan(
        table,
        {
            "hoodie.clustering.plan.strategy.max.num.groups": "2",
            "hoodie.table.services.incremental.enabled": "false",
        },
    )
    assert plan is not None and plan.clustering_plan.missing_schedule_partitions is None


def test_a_lone_small_file_is_clustered_only_when_allowed_or_sorted(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE, batches=1)
    assert _group_partitions(_plan(table, {})) == ["p0", "p1", "p2"]  # single.group.clustering.enabled=true
    off = {"hoodie.clustering.plan.strategy.single.group.clustering.enabled": "false"}
    assert _plan(table, off) is None
    assert _group_partitions(_plan(table, {**off, SORT: "x"})) == ["p0", "p1", "p2"]
    with pytest.raises(TableServiceError, match="nope"):
        _plan(table, {SORT: "x,nope"})


def test_partition_selection(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE, batches=2)
    assert _group_partitions(
        _plan(table, {"hoodie.clustering.plan.strategy.partition.regex.pattern": "p[01]"})
    ) == ["p0", "p1"]
    selected = {
        "hoodie.clustering.plan.partition.filter.mode": "SELECTED_PARTITIONS",
        "hoodie.clustering.plan.strategy.cluster.begin.partition": "p1",
        "hoodie.clustering.plan.strategy.cluster.end.partition": "p2",
    }
    assert _group_partitions(_plan(table, selected)) == ["p1", "p2"]
    recent = {
        "hoodie.clustering.plan.partition.filter.mode": "RECENT_DAYS",
        "hoodie.clustering.plan.strategy.daybased.lookback.partitions": "1",
        "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions": "1",
    }
    plan = _plan(table, recent)
    assert _group_partitions(plan) == ["p1"] and plan.clustering_plan.missing_schedule_partitions == ["p2"]
    deprecated = {
        "hoodie.clustering.plan.strategy.class": PLANS + "SparkRecentDaysClusteringPlanStrategy",
        "hoodie.clustering.plan.strategy.daybased.lookback.partitions": "2",
    }
    assert _group_partitions(_plan(table, deprecated)) == ["p2", "p1"]
    rolling = {"hoodie.clustering.plan.partition.filter.mode": "DAY_ROLLING"}
    assert _group_partitions(_plan(table, rolling, now=dt.datetime(2024, 1, 1, 1))) == ["p1"]
    assert _plan(table, rolling, now=dt.datetime(2024, 1, 1, 5)) is None
    assert _group_partitions(
        _plan(table, {"hoodie.clustering.plan.strategy.partition.selected": "p2,p0"})
    ) == ["p2", "p0"]
    with pytest.raises(UnsupportedTableError, match="SparkConsistentBucketClusteringPlanStrategy"):
        ClusteringPolicy.from_options(
            {"hoodie.clustering.plan.strategy.class": PLANS + "SparkConsistentBucketClusteringPlanStrategy"}
        )
    assert (
        ClusteringPolicy.from_options({"hoodie.clustering.plan.partition.filter.mode": "none"}).filter_mode
        is PartitionFilterMode.NONE
    )


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_incremental_planning_looks_at_partitions_written_since_the_last_clustering(
    tmp_path: Path, version: TableVersion
) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version, TableType.COPY_ON_WRITE, batches=2)
    _cluster(table)
    writer = HoodieWriter(HoodieTable.open(str(path)), options=WriteOptions(small_file_limit=0))
    writer.insert(_rows([3000, 3003], 70))  # p0 only
    table = HoodieTable.open(str(path))
    everything = {"hoodie.table.services.incremental.enabled": "false"}
    assert _group_partitions(_plan(table, everything)) == ["p0", "p1", "p2"]
    # Table version 6 (Hudi 0.x) has no incremental table services: every partition, always.
    expected = ["p0"] if version >= TableVersion.EIGHT else ["p0", "p1", "p2"]
    assert _group_partitions(_plan(table, {})) == expected


def test_dry_run_and_the_commit_trigger(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.EIGHT, TableType.MERGE_ON_READ)  # 6 delta commits
    timeline_dir = path / ".hoodie" / "timeline"
    before = sorted(p.name for p in timeline_dir.iterdir())
    dry = schedule_clustering(ServiceContext(table), ClusteringPolicy(), dry_run=True)
    assert dry is not None and dry.instant_time is None and dry.plan_json()["operationType"] == "CLUSTER"
    assert sorted(p.name for p in timeline_dir.iterdir()) == before
    not_yet = ClusteringPolicy.from_options({"hoodie.clustering.async.max.commits": "7"})
    assert schedule_clustering(ServiceContext(table), not_yet) is None
    now = ClusteringPolicy.from_options({"hoodie.clustering.inline.max.commits": "6"})
    scheduled = schedule_clustering(ServiceContext(table), now)
    assert scheduled is not None
    # A pending clustering restarts the count.
    assert (
        schedule_clustering(
            ServiceContext(table),
            ClusteringPolicy.from_options({"hoodie.clustering.inline.max.commits": "1"}),
        )
        is None
    )
    service = service_named("clustering")
    assert [i.requested_time for i in service.pending(table, table.reload())] == [scheduled.instant_time]
