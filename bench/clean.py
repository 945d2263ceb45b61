"""Clean-planning benchmark: planning a clean of a table with ~100,000 files against listing them.

The table is synthetic but real to the planner: 100 partitions x 50 file groups x 20 commits of
empty base files with Hudi's names, and matching completed commits on the timeline. Listing is
one pass over the partitions (what any cleaner must do); planning works from that listing.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pyarrow as pa

TARGET_VS_LISTING = 2.0
T = TypeVar("T")


@dataclass(frozen=True)
class CleanTimes:
    files: int
    to_delete: int
    listing: float
    planning: float


def _instant(commit: int, millis: int = 0) -> str:
    seconds = commit * 7
    return f"20250101{seconds // 3600:02d}{(seconds // 60) % 60:02d}{seconds % 60:02d}{millis:03d}"


def build(path: Path, partitions: int = 100, groups: int = 50, commits: int = 20) -> None:
    from hoodie.config.table_config import TableType, TableVersion
    from hoodie.models.commit import CommitMetadata, WriteStat
    from hoodie.table import HoodieTable
    from hoodie.timeline.instant import Action, Instant, State
    from hoodie.write.create import create_table

    shutil.rmtree(path, ignore_errors=True)
    schema = pa.schema([("id", pa.string()), ("p", pa.string())])
    create_table(
        str(path),
        table_name="clean_bench",
        table_type=TableType.COPY_ON_WRITE,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        table_version=TableVersion.EIGHT,
        metadata_table=False,  # the commits below are written without metadata-table updates
    )
    times = [_instant(c) for c in range(commits)]
    for p in range(partitions):
        folder = path / f"p={p:03d}"
        folder.mkdir(parents=True)
        (folder / ".hoodie_partition_metadata").write_bytes(
            b"#partition metadata\ncommitTime=0\npartitionDepth=1\n"
        )
        for g in range(groups):
            file_id = f"{p:08d}-{g:04d}-0000-0000-000000000000-0"
            for c, ts in enumerate(times):
                (folder / f"{file_id}_0-1-{c}_{ts}.parquet").write_bytes(b"")
    table = HoodieTable.open(str(path))
    stats = {f"p={p:03d}": [WriteStat(partition_path=f"p={p:03d}")] for p in range(partitions)}
    for c, ts in enumerate(times):
        timeline = table.reload()
        requested = timeline.create_requested(Instant(ts, Action.COMMIT, State.REQUESTED))
        inflight = timeline.transition_to_inflight(requested)
        meta = CommitMetadata(partition_to_write_stats=stats, operation_type="UPSERT")
        timeline.complete(inflight, meta.to_bytes(8), _instant(c, 500))


def _best(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    best = float("inf")
    result: T | None = None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


def time_clean_planning(root: Path, repeat: int) -> CleanTimes:
    from hoodie.services.clean_planner import list_partitions, plan_clean
    from hoodie.services.clean_policy import CleanPolicy
    from hoodie.table import HoodieTable

    path = root / "clean-table"
    if not (path / ".hoodie" / "hoodie.properties").exists():
        build(path)
    table = HoodieTable.open(str(path))
    listing_time, listing = _best(lambda: list_partitions(table.fileio, table.base_path), repeat)
    timeline = table.reload()
    policy = CleanPolicy(commits_retained=3)
    planning_time, planning = _best(
        lambda: plan_clean(table, policy, timeline=timeline, listing=listing), repeat
    )
    plan = planning.plan
    to_delete = (
        sum(len(v) for v in (plan.file_paths_to_be_deleted_per_partition or {}).values()) if plan else 0
    )
    return CleanTimes(sum(len(v) for v in listing.values()), to_delete, listing_time, planning_time)
