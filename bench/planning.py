"""Planning benchmark: compaction, log-compaction, clustering and clean planning of a wide table
against a bare listing of it.

The table is synthetic but real to the planners: a MERGE_ON_READ table (version 8) of
``partitions`` x ``groups`` file groups, each an empty base file written by a first delta commit,
one in four with a log file of a second delta commit, one in eight with a second log file of a
third, and the completed delta commits on the timeline; then a completed compaction (an empty
plan) and a delta commit touching ``TOUCHED`` partitions, so that the incremental compaction plan
looks at those only. With the metadata table on, its ``files`` partition is built from that storage
and the bare listing is a read of that partition.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

TARGET_VS_LISTING = 2.0
PARTITIONS = int(os.environ.get("HTS_BENCH_PLANNING_PARTITIONS", "10000"))
GROUPS = int(os.environ.get("HTS_BENCH_PLANNING_GROUPS", "20"))
TOUCHED = 100
COLUMNAR = "columnar read of the files partition"
"""With the metadata table on, the planners read its ``files`` partition into columns
(``MetadataTable.file_columns``), about 3x cheaper than the bare listing (``list_files``, a dict per
partition and per file): their ratios to that read are printed too, without a target."""


@dataclass(frozen=True)
class PlanningTimes:
    metadata_table: bool
    partitions: int
    file_groups: int
    files: int
    build: float
    listing: float
    planning: dict[str, float]
    cpu: dict[str, float]
    """The best process CPU time (user + system) of the listing and of each planner, by name."""


def _instant(commit: int, millis: int = 0) -> str:
    return f"2025010100{commit:02d}00{millis:03d}"


def build(path: Path, partitions: int, groups: int, *, metadata_table: bool) -> int:
    """Write the table; returns the number of data files."""
    from hoodie.config.table_config import TableType, TableVersion
    from hoodie.metadata.init import initialize_metadata_table
    from hoodie.models.commit import CommitMetadata, WriteStat
    from hoodie.models.compaction import CompactionPlan
    from hoodie.table import HoodieTable
    from hoodie.timeline.instant import Action, Instant, State
    from hoodie.write.create import create_table

    shutil.rmtree(path, ignore_errors=True)
    schema = pa.schema([("id", pa.string()), ("p", pa.string())])
    create_table(
        str(path),
        table_name="planning_bench",
        table_type=TableType.MERGE_ON_READ,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        table_version=TableVersion.EIGHT,
        metadata_table=False,
    )
    times = [_instant(c) for c in range(3)]
    files = 0
    for p in range(partitions):
        folder = path / f"p={p:05d}"
        folder.mkdir(parents=True)
        (folder / ".hoodie_partition_metadata").write_bytes(
            b"#partition metadata\ncommitTime=0\npartitionDepth=1\n"
        )
        for g in range(groups):
            file_id = f"{p:08d}-{g:04d}-0000-0000-000000000000-0"
            (folder / f"{file_id}_0-1-0_{times[0]}.parquet").write_bytes(b"")
            files += 1
            if g % 4 == 0:
                (folder / f".{file_id}_{times[1]}.log.1_0-1-0").write_bytes(b"")
                files += 1
            if g % 8 == 0:
                (folder / f".{file_id}_{times[2]}.log.1_0-1-0").write_bytes(b"")
                files += 1
    table = HoodieTable.open(str(path))
    stats = {f"p={p:05d}": [WriteStat(partition_path=f"p={p:05d}")] for p in range(partitions)}
    for c, ts in enumerate(times):
        timeline = table.reload()
        requested = timeline.create_requested(Instant(ts, Action.DELTA_COMMIT, State.REQUESTED))
        inflight = timeline.transition_to_inflight(requested)
        meta = CommitMetadata(partition_to_write_stats=stats, operation_type="UPSERT")
        timeline.complete(inflight, meta.to_bytes(8), _instant(c, 500))
    # A completed compaction that compacted nothing, then a delta commit touching TOUCHED partitions.
    timeline = table.reload()
    plan = CompactionPlan(operations=[], extra_metadata={}, missing_schedule_partitions=[])
    requested = timeline.create_requested(
        Instant(_instant(3), Action.COMPACTION, State.REQUESTED), plan.to_bytes(8)
    )
    inflight = timeline.transition_to_inflight(requested)
    done = CommitMetadata(partition_to_write_stats={}, operation_type="COMPACT", compacted=True)
    timeline.complete(inflight, done.to_bytes(8), _instant(3, 500))
    step = max(1, partitions // TOUCHED)
    touched = {f"p={p:05d}": [WriteStat(partition_path=f"p={p:05d}")] for p in range(0, partitions, step)}
    timeline = table.reload()
    requested = timeline.create_requested(Instant(_instant(4), Action.DELTA_COMMIT, State.REQUESTED))
    inflight = timeline.transition_to_inflight(requested)
    meta = CommitMetadata(partition_to_write_stats=touched, operation_type="UPSERT")
    timeline.complete(inflight, meta.to_bytes(8), _instant(4, 500))
    if metadata_table:
        initialize_metadata_table(HoodieTable.open(str(path)), lambda: _instant(9))
    return files


def _best_interleaved(
    fns: dict[str, Callable[[], object]], repeat: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The best of ``repeat`` runs of each of ``fns`` (wall clock, and process CPU time), run in
    turn (the listing, then every planner, ``repeat`` times over): a shared machine's load then
    weighs on the listing and the planners alike, rather than on whichever ran in a busy stretch."""
    wall = dict.fromkeys(fns, float("inf"))
    cpu = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            wall[name] = min(wall[name], time.perf_counter() - start)
            cpu[name] = min(cpu[name], time.process_time() - start_cpu)
    return wall, cpu


def time_planning(
    root: Path, repeat: int, *, metadata_table: bool, partitions: int = PARTITIONS, groups: int = GROUPS
) -> PlanningTimes:
    from hoodie.metadata.table import MetadataTable
    from hoodie.services.clean_planner import list_partitions, plan_clean
    from hoodie.services.clean_policy import CleanPolicy
    from hoodie.services.clustering import ClusteringPolicy, plan_clustering
    from hoodie.services.compaction import CompactionPolicy, plan_compaction
    from hoodie.services.logcompaction import LogCompactionPolicy, plan_log_compaction
    from hoodie.table import HoodieTable

    path = root / f"planning2-{partitions}x{groups}-{'mdt' if metadata_table else 'nomdt'}"
    start = time.perf_counter()
    marker = path / ".bench-files"
    if not marker.exists():
        files = build(path, partitions, groups, metadata_table=metadata_table)
        marker.write_text(str(files))
    files = int(marker.read_text())
    built = time.perf_counter() - start
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    bare: Callable[[], object] = (
        (lambda: MetadataTable.open(table, timeline).list_files())
        if metadata_table
        else (lambda: list_partitions(table.fileio, table.base_path))
    )
    planners: dict[str, Callable[[], object]] = {
        "compaction": lambda: plan_compaction(table, CompactionPolicy(incremental=False), timeline),
        f"incremental compaction ({TOUCHED} partitions written since)": lambda: plan_compaction(
            table, CompactionPolicy(), timeline
        ),
        "log compaction": lambda: plan_log_compaction(table, LogCompactionPolicy(), timeline),
        "clustering": lambda: plan_clustering(table, ClusteringPolicy(), timeline),
        "clean": lambda: plan_clean(table, CleanPolicy(commits_retained=1), timeline=timeline),
    }
    fns: dict[str, Callable[[], object]] = {"listing": bare}
    if metadata_table:  # the planners' own columnar read of the files partition, shown beside the target
        fns[COLUMNAR] = lambda: MetadataTable.open(table, timeline).file_columns()
    planning, cpu = _best_interleaved({**fns, **planners}, repeat)
    listing = planning.pop("listing")
    return PlanningTimes(
        metadata_table, partitions, partitions * groups, files, built, listing, planning, cpu
    )
