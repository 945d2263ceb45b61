"""The planning benchmark's table is real to the planners: full and incremental compaction plans,
from storage and from the metadata table, agree with what the table holds."""

from __future__ import annotations

from pathlib import Path

from bench.planning import TOUCHED, build
from hoodie.services.compaction import CompactionPolicy, plan_compaction
from hoodie.table import HoodieTable


def _ops(table: HoodieTable, policy: CompactionPolicy) -> list[tuple[str, str]]:
    plan = plan_compaction(table, policy)
    assert plan is not None
    return [(op.partition_path or "", op.file_id or "") for op in plan.operations]


def test_planning_bench_table(tmp_path: Path) -> None:
    partitions, groups = 2 * TOUCHED, 8
    plans = {}
    for metadata_table in (False, True):
        path = tmp_path / str(metadata_table)
        files = build(path, partitions, groups, metadata_table=metadata_table)
        assert files == partitions * (groups + groups // 4 + groups // 8)
        table = HoodieTable.open(str(path))
        full = _ops(table, CompactionPolicy(incremental=False))
        assert len(full) == partitions * groups // 4  # every file group with log files
        incremental = _ops(table, CompactionPolicy())
        assert sorted({p for p, _ in incremental}) == [f"p={p:05d}" for p in range(0, partitions, 2)]
        assert incremental == [op for op in full if op[0] in {p for p, _ in incremental}]
        plans[metadata_table] = (full, incremental)
    assert plans[True] == plans[False]
