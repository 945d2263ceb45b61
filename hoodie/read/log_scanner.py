"""Which log blocks of a file slice a read applies, in which order (Hudi's log-record scan).

Blocks are visited in log-file order, then file order. Data and delete blocks newer than the
read's instant are skipped, as are those of instants that did not complete (failed or
rolled-back writes) and blocks outside an incremental range. A ROLLBACK command
block cancels every earlier queued block of its target instant, and every queued corrupt block.
Corrupt blocks that survive are reported and ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hoodie.errors import CorruptLogBlockError, UnsupportedTableError
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType, LogBlock
from hoodie.file_group.log_reader import CorruptBlockReport, iter_blocks
from hoodie.io.fileio import FileIO
from hoodie.schema.meta_fields import OPERATION_METADATA_FIELD
from hoodie.timeline.instant_time import normalize


@dataclass(frozen=True, slots=True)
class InstantRange:
    """``(start, end]`` on requested instant times; either bound may be open."""

    start_exclusive: str | None = None
    end_inclusive: str | None = None

    def __contains__(self, ts: object) -> bool:
        if not isinstance(ts, str):
            return False
        key = normalize(ts)
        if self.start_exclusive is not None and key <= normalize(self.start_exclusive):
            return False
        return self.end_inclusive is None or key <= normalize(self.end_inclusive)


@dataclass(slots=True)
class ScanStats:
    """Counters Hudi reports in its write stats for a compaction's log scan."""

    total_log_files: int = 0
    total_log_blocks: int = 0
    total_rollback_blocks: int = 0
    total_corrupt_blocks: int = 0
    total_log_size: int = 0


def scan_log_blocks(
    fileio: FileIO,
    base_path: str,
    file_slice: FileSlice,
    *,
    is_committed: Callable[[str], bool],
    latest_instant: str | None,
    instant_range: InstantRange | None = None,
    report: CorruptBlockReport | None = None,
    stats: ScanStats | None = None,
    hfile_blocks: bool = False,
    read_log: Callable[[str], tuple[int, Iterable[LogBlock]]] | None = None,
) -> list[LogBlock]:
    """The data and delete blocks to apply to the slice, in application order.

    HFile data blocks belong to metadata tables: ``hfile_blocks`` accepts them (and a data
    table's scan refuses them). ``read_log`` (a path -> its size and its blocks) replaces reading
    each log file whole, e.g. with blocks whose content is read later.
    """
    queue: list[LogBlock] = []
    latest = normalize(latest_instant) if latest_instant is not None else None
    stats = stats if stats is not None else ScanStats()
    for path in file_slice.log_file_paths(base_path):
        if read_log is not None:
            size, file_blocks = read_log(path)
        else:
            data = fileio.read_bytes(path)
            size, file_blocks = len(data), iter_blocks(data, path)
        stats.total_log_files += 1
        stats.total_log_size += size
        for block in file_blocks:
            stats.total_log_blocks += 1
            if block.is_corrupt:
                stats.total_corrupt_blocks += 1
                if report is not None:
                    report.add(path, block.offset, block.size)
                queue.append(block)
                continue
            ts = block.instant_time
            if ts is None:
                raise CorruptLogBlockError(f"{path}@{block.offset}: log block has no INSTANT_TIME header")
            if block.block_type is not BlockType.COMMAND and latest is not None and normalize(ts) > latest:
                # Hudi 1.x skips a data or delete block newer than the read's instant and reads on
                # (BaseHoodieLogRecordReader.scanInternalV1; 0.x stopped the scan there). Blocks of
                # two writers of a v6 table can be out of instant order, so a committed block may
                # follow an inflight newer one. Command blocks apply whatever their instant.
                continue
            if block.block_type is BlockType.COMMAND:
                if block.is_rollback:
                    stats.total_rollback_blocks += 1
                    target = block.target_instant_time
                    queue = [b for b in queue if not b.is_corrupt and b.instant_time != target]
                continue
            if block.block_type is BlockType.HFILE_DATA and not hfile_blocks:
                raise UnsupportedTableError(f"{path}: HFile data blocks belong to the metadata table")
            if block.block_type is BlockType.CDC_DATA:
                continue
            if not is_committed(ts):
                continue
            if instant_range is not None and ts not in instant_range:
                continue
            if block.block_type.is_data and _OPERATION_FIELD in (block.schema or ""):
                raise UnsupportedTableError(_operation_field_refusal(path, block))
            queue.append(block)
    return apply_log_compaction([b for b in queue if not b.is_corrupt])


_OPERATION_FIELD = f'"{OPERATION_METADATA_FIELD}"'  # as a field name appears in a schema's JSON


def _operation_field_refusal(path: str, block: LogBlock) -> str:
    """Why a data block with the ``_hoodie_operation`` meta field is refused: its rows marked ``D``
    or ``-U`` are deletes (``RecordContext.isDeleteHoodieOperation``) in a column hts's reader
    schema does not carry (Hudi adds it when a data file has it, ``TableSchemaResolver``), so
    merging without it would bring deleted records back."""
    return (
        f"{path}@{block.offset}: refused: log data block of instant {block.instant_time} carries the "
        "_hoodie_operation meta field (hoodie.allow.operation.metadata.field=true, e.g. Flink's "
        "changelog mode): hts does not read that column, so its deletes (D, -U) would be missed"
    )


def apply_log_compaction(blocks: list[LogBlock]) -> list[LogBlock]:
    """Replace blocks covered by log-compacted blocks (``COMPACTED_BLOCK_TIMES``).

    A log-compacted block holds the merged records of the instants it lists (transitively: it
    may list another compacted block's instant). Their original blocks are dropped and the
    compacted block takes the place of the newest instant it covers, keeping its order relative
    to every instant it does not cover.
    """
    covered_by: dict[str, str] = {}
    for block in blocks:
        ts = block.instant_time
        if ts is not None:
            for covered in block.compacted_block_times:
                covered_by[covered] = ts
    if not covered_by:
        return blocks

    def final(ts: str) -> str:
        seen = set()
        while ts in covered_by and ts not in seen:
            seen.add(ts)
            ts = covered_by[ts]
        return ts

    compacted: dict[str, list[LogBlock]] = {}
    for block in blocks:
        if block.compacted_block_times and block.instant_time is not None:
            compacted.setdefault(block.instant_time, []).append(block)
    # Where each surviving compacted instant goes: the last position of any instant it covers.
    slot: dict[str, int] = {}
    for i, block in enumerate(blocks):
        ts = block.instant_time
        if ts is not None and ts in covered_by:
            slot[final(ts)] = i
    out: list[LogBlock] = []
    for i, block in enumerate(blocks):
        ts = block.instant_time
        if ts is None:
            out.append(block)
        elif block.compacted_block_times and ts not in covered_by:
            # Emitted at its slot; kept where it is if none of what it covers is present.
            if ts not in slot:
                out.append(block)
        elif ts in covered_by:
            target = final(ts)
            if slot.get(target) == i:
                out.extend(compacted.get(target, []))
        else:
            out.append(block)
    return out
