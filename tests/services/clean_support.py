"""What the clean tests share (``test_clean*.py``): a table with many versions per file group, its data
files, reads and writes, a clean run with its plan and metadata, the live slices, a savepoint.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hoodie.config.table_config import TableType, TableVersion
from hoodie.models.clean import CleanerPlan, CleaningPolicy, CleanMetadata
from hoodie.models.savepoint import SavepointMetadata, SavepointPartitionMetadata
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import CleanPolicy, execute_clean, schedule_clean
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.write.writer import HoodieWriter
from tests.tables import new_table, rows

VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]
FILE_VERSIONS = CleaningPolicy.KEEP_LATEST_FILE_VERSIONS


def _compact(path: Path) -> str:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return scheduled.instant_time


def cleanable_table(path: Path, table_type: TableType, version: TableVersion, rounds: int = 6) -> HoodieTable:
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


def data_files(path: Path) -> set[str]:
    return {
        str(p.relative_to(path))
        for p in path.rglob("*")
        if p.is_file() and ".hoodie" not in p.parts and not p.name.startswith(".hoodie_partition_metadata")
    }


def read_rows(path: Path, as_of: str | None = None) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot(as_of=as_of)
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def write_times(path: Path) -> list[str]:
    return [i.requested_time for i in HoodieTable.open(str(path)).reload().writes().completed()]


def run_clean(path: Path, policy: CleanPolicy, runner: Any = None) -> tuple[CleanerPlan, CleanMetadata, str]:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_clean(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    assert isinstance(scheduled.plan, CleanerPlan)
    result = execute_clean(ctx, scheduled.instant_time, runner or LocalRunner())
    return scheduled.plan, clean_metadata(path, scheduled.instant_time), result.instant.requested_time


def clean_metadata(path: Path, instant_time: str) -> CleanMetadata:
    table = HoodieTable.open(str(path))
    data = table.reload().read_state(instant_time, State.COMPLETED, Action.CLEAN)
    return CleanMetadata.from_bytes(data, table.table_version)


def planned_paths(plan: CleanerPlan, path: Path) -> set[str]:
    """Plan entries as paths relative to the table."""
    return {
        p.removeprefix("file:").removeprefix(str(path) + "/")
        for paths in plan.files_to_delete().values()
        for p in paths
    }


def live_slices(path: Path) -> dict[tuple[str, str], list[tuple[str, list[str]]]]:
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


def savepoint_at(path: Path, instant_time: str) -> set[str]:
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
