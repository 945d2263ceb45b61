"""Partial-update log blocks (``IS_PARTIAL``): the one shape seen only in log-block headers.

Hudi persists nothing else about them (settled from Hudi's source): Spark SQL's MERGE INTO on a
MERGE_ON_READ table of version 8 or later writes them when an update sets a strict subset of the
columns (``MergeIntoHoodieTableCommand`` puts the projected schema in the write config
``hoodie.write.partial.update.schema``, ``HoodieWriteConfig.WRITE_PARTIAL_UPDATE_SCHEMA``). That key
is a write option only: it is not in ``hoodie.properties`` (``HoodieTableConfig``), the commit's
extra metadata keeps the full table schema (``WRITE_SCHEMA_OVERRIDE``), and the delta write stats
have no field for it (``HoodieAppendHandle.populateWriteStatAndFetchFileSlice``). Only the block
says so: ``HoodieAppendHandle`` writes the partial ``SCHEMA`` header and ``IS_PARTIAL=true``
(``getUpdatedHeader``; ``HoodieDataBlock.containsPartialUpdates`` reads it back).

So the shape is not known when a table is opened (that would read every log header of the
table); the services that merge log files read the headers of the log files their plan merges,
at schedule time, before anything is written (``hoodie.services.partial_check``), and a read
meets them in the slices it reads. Reads, compaction and clustering merge them as Hudi's
file-group reader does (``PartialUpdateBufferedRecordMerger``: the merger's ``partialMerge``,
KEEP_VALUES); a table whose merger has no partial merge is refused there, as Hudi's reader fails
on it (``HoodieRecordMerger.partialMerge`` throws unless implemented).
"""

from __future__ import annotations

from collections.abc import Iterable

from hoodie.config.table_config import RecordMergeMode
from hoodie.errors import UnsupportedShapeError, UnsupportedTableError
from hoodie.file_group.log_block import LogBlock
from hoodie.merge.config import MergeConfig
from hoodie.merge.mergers import RecordMerger, record_merger_for
from hoodie.shape.matrix import Shape, cell


def first_partial_block(blocks: Iterable[LogBlock]) -> LogBlock | None:
    return next((b for b in blocks if b.is_partial), None)


def missing_partial_merge(merge: MergeConfig) -> str | None:
    """Why the table's merger cannot merge ``IS_PARTIAL`` blocks; None when it can. The event-time
    and commit-time mergers can; a CUSTOM merger only if it overrides ``partial_merge`` (an
    unregistered one is the unsupported-merge shape, named on open)."""
    if merge.mode is not RecordMergeMode.CUSTOM or merge.strategy_id is None:
        return None
    try:
        merger = record_merger_for(merge.strategy_id)
    except UnsupportedTableError:
        return None
    if type(merger).partial_merge is not RecordMerger.partial_merge:
        return None
    named = f", payload {merge.payload_class}" if merge.payload_class else ""
    return (
        f"record merger {type(merger).__name__} (strategy id {merge.strategy_id}{named}) has no partial merge"
    )


def partial_block_refusal(
    where: str, operation: str, blocks: Iterable[LogBlock], merge: MergeConfig
) -> UnsupportedShapeError | None:
    """The error refusing ``operation`` on the slices whose log ``blocks`` are given, if one is an
    ``IS_PARTIAL`` block the matrix refuses ``operation`` on; None otherwise."""
    block = first_partial_block(blocks)
    if block is None:
        return None
    evidence = f"IS_PARTIAL=true in {block.log_file}@{block.offset}"
    missing = missing_partial_merge(merge)
    shapes = [(Shape.PARTIAL_BLOCKS, evidence)]
    if missing is not None:
        shapes.insert(0, (Shape.UNMERGED_PARTIAL_BLOCKS, f"{evidence}; {missing}"))
    for shape, found in shapes:
        reason = cell(shape, operation)
        if reason is not None:
            return UnsupportedShapeError(where, shape.value, found, operation, reason)
    return None


def check_partial_blocks(where: str, operation: str, blocks: Iterable[LogBlock], merge: MergeConfig) -> None:
    error = partial_block_refusal(where, operation, list(blocks), merge)
    if error is not None:
        raise error
