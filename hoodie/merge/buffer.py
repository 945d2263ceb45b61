"""Merging a file group record by record: the merger a configuration calls for
(``BufferedRecordMergerFactory``), the file-group merge of a slice (``HoodieFileGroupReader``'s
record buffer) and the writer's pre-combine of an incoming batch.

The records and the built-in mergers are in :mod:`hoodie.merge.records`; custom mergers and
payloads in :mod:`hoodie.merge.mergers` and :mod:`hoodie.merge.payloads`, which build on the
records module; this one brings them together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from hoodie.config.table_config import RecordMergeMode
from hoodie.errors import InvalidTableConfigError
from hoodie.merge.config import COMMIT_TIME_STRATEGY_ID, EVENT_TIME_STRATEGY_ID, MergeConfig
from hoodie.merge.mergers import CustomMerger, PartialBlockMerger, record_merger_for
from hoodie.merge.records import (
    BufferedRecord,
    BufferedRecordMerger,
    CommitTimeMerger,
    CommitTimePartialMerger,
    DeleteEntry,
    EventTimeMerger,
    EventTimePartialMerger,
    LogEntry,
    Row,
)
from hoodie.schema.meta_fields import HOODIE_IS_DELETED_FIELD


def _strategy_id(ctx: MergeConfig) -> str:
    if ctx.mode is RecordMergeMode.EVENT_TIME_ORDERING:
        return EVENT_TIME_STRATEGY_ID
    if ctx.mode is RecordMergeMode.COMMIT_TIME_ORDERING:
        return COMMIT_TIME_STRATEGY_ID
    if ctx.strategy_id is None:
        raise InvalidTableConfigError("CUSTOM merge mode without a merge strategy id")
    return ctx.strategy_id


def create_merger(
    ctx: MergeConfig, *, partial_blocks: bool = False, pre_combine: bool = False
) -> BufferedRecordMerger:
    """The :class:`BufferedRecordMerger` for ``ctx`` (``BufferedRecordMergerFactory.create``).

    ``partial_blocks`` gives the merger used after an ``IS_PARTIAL`` block; ``pre_combine`` the one
    the writer deduplicates an incoming batch with (payloads use ``preCombine`` there).
    """

    if partial_blocks:
        merger = record_merger_for(_strategy_id(ctx))
        if pre_combine:
            merger = merger.as_pre_combining_mode()
        return PartialBlockMerger(merger, create_merger(ctx, pre_combine=pre_combine), ctx)
    if ctx.mode is RecordMergeMode.COMMIT_TIME_ORDERING:
        return CommitTimeMerger() if ctx.partial_update_mode is None else CommitTimePartialMerger(ctx)
    if ctx.mode is RecordMergeMode.EVENT_TIME_ORDERING:
        return EventTimeMerger() if ctx.partial_update_mode is None else EventTimePartialMerger(ctx)
    merger = record_merger_for(_strategy_id(ctx))
    return CustomMerger(merger.as_pre_combining_mode() if pre_combine else merger, ctx)


# -- the file-group merge ----------------------------------------------------------------------------


def merge_file_group(
    base_rows: Iterable[Row],
    log_entries: Iterable[LogEntry],
    ctx: MergeConfig,
    key_of: Callable[[Row], str],
) -> list[Row]:
    """Merge a file slice the way Hudi 1.1's file-group reader does (snapshot read, no deletes).

    ``log_entries`` must be in processing order: log files in log-file order, blocks in file order,
    rows in block order (every delete entry of a commit's delete block after that commit's data
    rows). The output is the merged rows in base-file order, then the log-only rows in the order
    their keys first appeared in the logs (Hudi leaves that order unspecified). A row that was
    merged column-wise is a new dict; otherwise the input row itself is returned. Rows of partial
    blocks keep only their columns; project them onto the table schema (absent = null).
    """
    merger = create_merger(ctx)
    partial_seen = False
    buffer: dict[str, BufferedRecord] = {}
    for entry in log_entries:
        if isinstance(entry, DeleteEntry):
            delete = entry.to_record()
            if merger.delta_merge_delete(delete, buffer.get(delete.key)) is not None:
                buffer[delete.key] = delete
            continue
        if entry.is_partial and not partial_seen:
            partial_seen = True
            merger = create_merger(ctx, partial_blocks=True)
        key = key_of(entry.row)
        columns = (entry.columns or frozenset(entry.row)) if entry.is_partial else None
        record = BufferedRecord.from_row(key, entry.row, ctx, columns=columns)
        merged = merger.delta_merge(record, buffer.get(key))
        if merged is not None:
            buffer[key] = merged

    out: list[Row] = []
    for row in base_rows:
        key = key_of(row)
        log = buffer.pop(key, None)
        if log is None:
            out.append(row)
            continue
        result = merger.final_merge(BufferedRecord.from_row(key, row, ctx, is_delete=False), log)
        if not result.is_delete and result.values is not None:
            out.append(result.values)
    out.extend(rec.values for rec in buffer.values() if not rec.is_delete and rec.values is not None)
    return out


def dedupe_incoming(rows: Iterable[Row], ctx: MergeConfig, key_of: Callable[[Row], str]) -> list[Row]:
    """Precombine an incoming batch: one row per key (``BaseWriteHelper.deduplicateRecords``, 1.1).

    Duplicates are reduced in input order with the reader's delta merge, the earlier row as the
    existing one: EVENT_TIME keeps the later row on ``>=`` ordering (or a commit-time delete),
    COMMIT_TIME keeps the later row, CUSTOM asks the merger in pre-combine mode (payloads:
    ``preCombine``). Partial-update modes fill columns as on read. Spark's ``reduceByKey`` does not
    preserve input order, so Hudi's choice between equal duplicates is not deterministic; this one
    is. Output is in first-appearance order of the keys; a surviving delete keeps its row, and a
    delete the merger made up without a row is returned as the latest input row with
    ``_hoodie_is_deleted=True``.
    """
    merger = create_merger(ctx, pre_combine=True)
    kept: dict[str, BufferedRecord] = {}
    latest: dict[str, Row] = {}
    for row in rows:
        key = key_of(row)
        record = BufferedRecord.from_row(key, row, ctx)
        latest[key] = row
        previous = kept.get(key)
        if previous is None:
            kept[key] = record
            continue
        merged = merger.delta_merge(record, previous)
        if merged is not None:
            kept[key] = merged
    return [
        rec.values if rec.values is not None else {**latest[key], HOODIE_IS_DELETED_FIELD: True}
        for key, rec in kept.items()
    ]
