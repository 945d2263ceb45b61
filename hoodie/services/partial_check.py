"""Partial-update log blocks in the slices a plan merges, found at schedule time (before the plan is
written) from the headers of their log files (:mod:`hoodie.shape.partial_blocks`: Hudi records them
nowhere else).

Only tables whose merger has no partial merge read anything here: elsewhere compaction and
clustering merge the blocks as Hudi does, and log compaction reads the blocks of every slice it
plans anyway. Each block is read up to its header (a ranged read of at most 1 MiB), not its records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import LogBlock
from hoodie.merge.resolve import resolve_merge_config
from hoodie.read.log_scanner import scan_log_blocks
from hoodie.read.spill_blocks import LazyLogs, NotStreamable
from hoodie.shape.partial_blocks import check_partial_blocks, missing_partial_merge
from hoodie.table import HoodieTable
from hoodie.timeline.timeline import ActiveTimeline


def log_block_headers(
    table: HoodieTable, file_slice: FileSlice, is_committed: Callable[[str], bool], latest: str | None
) -> list[LogBlock]:
    """The blocks a scan of ``file_slice`` applies, read without their content where the log files
    allow it (else whole, where the corrupt-block rules live)."""
    try:
        lazy = LazyLogs(table.fileio, small_block=0)
        return scan_log_blocks(
            table.fileio,
            table.base_path,
            file_slice,
            is_committed=is_committed,
            latest_instant=latest,
            read_log=lazy.read,
        )
    except NotStreamable:
        return scan_log_blocks(
            table.fileio, table.base_path, file_slice, is_committed=is_committed, latest_instant=latest
        )


def check_planned_slices(
    table: HoodieTable, timeline: ActiveTimeline, operation: str, slices: Iterable[FileSlice]
) -> None:
    """Refuse ``operation`` (an :class:`~hoodie.errors.UnsupportedShapeError` naming the block) when a
    slice it would merge has an ``IS_PARTIAL`` block the table's merger cannot merge."""
    merge = resolve_merge_config(table.config)
    if missing_partial_merge(merge) is None:
        return
    view = table.file_system_view(timeline=timeline)
    last = timeline.completed().writes().last()
    latest = last.requested_time if last is not None else None
    for file_slice in slices:
        if file_slice.log_files:
            blocks = log_block_headers(table, file_slice, view.is_committed, latest)
            check_partial_blocks(table.base_path, operation, blocks, merge)
