"""Planning at scale: incremental compaction planning (``hoodie.table.services.incremental.enabled``)
equals full planning when no cap applies, capped plans carry the partitions they left out to the
next plan, and the bounded clean (``hoodie.clean.max.commits.to.clean``) follows Hudi's rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.clean import build as build_clean_table
from hoodie.models.compaction import CompactionPlan
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import execute_clean, schedule_clean
from hoodie.services.clean_planner import plan_clean
from hoodie.services.clean_policy import CleanPolicy
from hoodie.services.compaction import (
    CompactionPolicy,
    CompactionStrategy,
    execute_compaction,
    plan_compaction,
    schedule_compaction,
)
from hoodie.services.planning import metadata_listing_source, planning_view
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from tests.tables import new_table, rows

PARTS = 12
FULL = CompactionPolicy(incremental=False)


def _mor(path: Path) -> HoodieTable:
    """A MERGE_ON_READ table of 12 partitions, every one with log files."""
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(PARTS * 3), 1, partitions=PARTS))
    writer.upsert(rows(range(PARTS * 3), 2, partitions=PARTS))
    return HoodieTable.open(str(path))


def _upsert(path: Path, partitions: list[int], ts: int) -> HoodieTable:
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(partitions, ts, partitions=PARTS))
    return HoodieTable.open(str(path))


def _ops(plan: CompactionPlan | None) -> list[tuple[str, str, tuple[str, ...]]]:
    assert plan is not None
    return [
        (op.partition_path or "", op.file_id or "", tuple(op.delta_file_paths or ()))
        for op in plan.operations
    ]


def _partitions(plan: CompactionPlan | None) -> list[str]:
    return sorted({p for p, _, _ in _ops(plan)})


def _compact(table: HoodieTable, policy: CompactionPolicy) -> str:
    ctx = ServiceContext(table)
    scheduled = schedule_compaction(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return scheduled.instant_time


def test_incremental_compaction_plans_equal_full_plans(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _mor(path)
    # No compaction yet: the incremental plan lists every partition, as the full one does.
    first = plan_compaction(table, CompactionPolicy())
    assert _ops(first) == _ops(plan_compaction(table, FULL))
    assert len(_partitions(first)) == PARTS
    assert first is not None and first.missing_schedule_partitions == []
    _compact(table, CompactionPolicy())
    table = HoodieTable.open(str(path))
    # Nothing written since the last compaction: nothing to plan.
    assert plan_compaction(table, CompactionPolicy()) is None
    assert plan_compaction(table, FULL) is None
    # Writes to three of the twelve partitions: only those are looked at, and the plan is the full one.
    table = _upsert(path, [1, 5, 17], 3)
    table = _upsert(path, [10], 4)
    incremental = plan_compaction(table, CompactionPolicy())
    full = plan_compaction(table, FULL)
    assert _ops(incremental) == _ops(full)
    assert _partitions(incremental) == ["p1", "p10", "p5"]
    assert full is not None and full.missing_schedule_partitions is None


def test_capped_plans_carry_left_out_partitions_to_the_next_plan(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _compact(_mor(path), CompactionPolicy())
    _upsert(path, [1, 2, 3], 3)
    table = _upsert(path, [1], 4)  # p1 has two log files, p2 and p3 one each
    capped = CompactionPolicy(strategy=CompactionStrategy.LOG_FILE_NUM, log_file_num_threshold=2)
    plan = plan_compaction(table, capped)
    assert _partitions(plan) == ["p1"]
    assert plan is not None and plan.missing_schedule_partitions == ["p2", "p3"]
    _compact(table, capped)
    table = HoodieTable.open(str(path))
    # Nothing was written since, yet p2 and p3 still need compaction: the next plan goes there.
    carried = plan_compaction(table, CompactionPolicy())
    assert _partitions(carried) == ["p2", "p3"]
    assert _ops(carried) == _ops(plan_compaction(table, FULL))
    _compact(table, CompactionPolicy())
    assert plan_compaction(HoodieTable.open(str(path)), CompactionPolicy()) is None


def test_without_the_last_compaction_plan_every_partition_is_listed(tmp_path: Path) -> None:
    """An archived (or unreadable) last compaction: Hudi falls back to a full listing."""
    path = tmp_path / "t"
    instant = _compact(_mor(path), CompactionPolicy())
    table = _upsert(path, [4], 3)
    requested = path / ".hoodie" / "timeline" / f"{instant}.compaction.requested"
    assert requested.exists()
    requested.unlink()
    table = HoodieTable.open(str(path))
    assert table.reload().completed().actions(Action.COMMIT).last() is not None
    assert _ops(plan_compaction(table, CompactionPolicy())) == _ops(plan_compaction(table, FULL))


def _model_earliest(commits: list[str], previous: str | None, uncapped: str, cap: int | None) -> str:
    """Hudi's bound: at most ``cap`` commits from the previous clean's earliest retained commit."""
    if cap is None or previous is None:
        return uncapped
    start = next(i for i, ts in enumerate(commits) if ts >= previous)
    end = commits.index(uncapped)
    return commits[start + cap] if end - start > cap else uncapped


def test_bounded_clean_equals_hudis_rule(tmp_path: Path) -> None:
    path = tmp_path / "t"
    build_clean_table(path, partitions=3, groups=2, commits=30)
    table = HoodieTable.open(str(path))
    commits = [i.requested_time for i in table.reload().completed().writes()]
    # A first clean retaining 25 commits: without a previous clean nothing bounds it.
    first = CleanPolicy(commits_retained=25, max_commits_to_clean=3)
    planning = plan_clean(table, first)
    assert planning.earliest is not None
    assert planning.earliest.requested_time == _model_earliest(commits, None, commits[5], 3) == commits[5]
    ctx = ServiceContext(table)
    scheduled = schedule_clean(ctx, first)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_clean(ctx, scheduled.instant_time, LocalRunner())
    table = HoodieTable.open(str(path))
    for cap in (1, 7, 22, 23, 40):
        bounded = plan_clean(table, CleanPolicy(commits_retained=2, max_commits_to_clean=cap))
        expected = _model_earliest(commits, commits[5], commits[28], cap)
        assert bounded.earliest is not None and bounded.earliest.requested_time == expected
        # The bounded clean is the unbounded clean that retains from the bounded commit.
        retained = len(commits) - commits.index(expected)
        same = plan_clean(table, dataclasses.replace(CleanPolicy(), commits_retained=retained))
        assert same.earliest is not None and same.earliest.requested_time == expected
        assert bounded.plan == same.plan
        assert bounded.partitions_scanned == same.partitions_scanned


def test_planners_list_from_the_metadata_table_as_from_storage(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _compact(_mor(path), CompactionPolicy())
    _upsert(path, [1, 2, 3], 3)
    table = _upsert(path, [1, 14], 4)
    timeline = table.reload()
    assert metadata_listing_source(table, timeline) is not None
    from_metadata = planning_view(table, timeline)
    from_storage = table.file_system_view(timeline=timeline)
    assert from_metadata.partitions() == from_storage.partitions()
    assert from_metadata.all_file_slices() == from_storage.all_file_slices()
    assert from_metadata.latest_file_slices() == from_storage.latest_file_slices()
