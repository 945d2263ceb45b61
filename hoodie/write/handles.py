"""File-group writes: create a base file, merge into a base file, append to a log.

Each returns Hudi's write stat for the file it wrote. Records get their meta fields here:
``_hoodie_commit_time`` is the writing instant, ``_hoodie_commit_seqno`` is
``<instant>_<bucket>_<row>``; a base file's ``_hoodie_file_name`` is its own name, a log
record's is the file id. A merge keeps untouched records' commit time and sequence number.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.cdc.logger import diff_by_key
from hoodie.cdc.write import CDCWrite, handle_writes_log, log_changes
from hoodie.errors import InstantExistsError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.base_file_writer import BaseFileResult, BloomOptions, write_base_file
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_writer import OrderingWrapper, avro_data_block, delete_block, parquet_data_block
from hoodie.io.fileio import FileIO, join
from hoodie.merge.buffer import merge_file_group
from hoodie.merge.config import MergeConfig
from hoodie.merge.log_entries import DeleteEntries, MergeSpec, supports
from hoodie.merge.records import DataEntry, DeleteEntry, LogEntry
from hoodie.merge.vectorized import merge_slice
from hoodie.models.commit import RuntimeStats, WriteStat
from hoodie.read.slice_reader import read_parquet
from hoodie.schema.internal_schema import SchemaOnRead
from hoodie.schema.meta_fields import (
    COMMIT_SEQNO_METADATA_FIELD,
    COMMIT_TIME_METADATA_FIELD,
    FILENAME_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
)
from hoodie.write.input import PreparedInput
from hoodie.write.markers import IOType, WriteMarkers
from hoodie.write.options import LogBlockFormat, WriteOptions

_POS = "__hoodie_pos"


@dataclass(frozen=True)
class WriteContext:
    """What every handle of one write needs."""

    fileio: FileIO
    base_path: str
    instant_time: str
    table_version: int
    schema: pa.Schema  # Arrow schema with meta fields
    avro_schema: Mapping[str, Any]  # Avro schema with meta fields (log SCHEMA header, footer)
    spec: MergeSpec
    options: WriteOptions
    markers: WriteMarkers
    merge: MergeConfig
    on_read: SchemaOnRead | None = None  # schema-on-read tables: old base files read by column id
    log_records: dict[str, pa.Table] = field(default_factory=dict)
    """Log file path (``partition/name``) -> the records of its data block, for the metadata
    table's column stats (which would otherwise decode the file again)."""
    base_footers: dict[str, pq.FileMetaData] = field(default_factory=dict)
    """Base file path (``partition/name``) -> its Parquet footer as written, for the same
    (which would otherwise read the footer back)."""
    cdc: CDCWrite | None = None
    """The table's CDC settings when ``hoodie.table.cdc.enabled``: merges then write CDC logs."""

    @property
    def bloom(self) -> BloomOptions:
        return self.options.bloom


def _write_stat(**fields: Any) -> WriteStat:
    """A write stat with the counters a plain write leaves at zero (as Hudi writes them)."""
    zero = dict.fromkeys(
        (
            "total_write_errors",
            "total_log_records",
            "total_log_files_compacted",
            "total_log_size_compacted",
            "total_updated_records_compacted",
            "total_log_blocks",
            "total_corrupt_log_block",
            "total_rollback_blocks",
        ),
        0,
    )
    return WriteStat(**{**zero, **fields})


def _ms_since(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def with_meta_fields(ctx: WriteContext, rows: PreparedInput, bucket: int, file_name: str) -> pa.Table:
    """``rows`` (table schema) with the five meta fields of this write prepended."""
    n = rows.num_rows
    commit = pa.array([ctx.instant_time] * n, pa.string()) if n else pa.array([], pa.string())
    seq = pc.binary_join_element_wise(
        pa.array([f"{ctx.instant_time}_{bucket}"] * n, pa.string()),
        pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string()),
        "_",
    )
    names = pa.array([file_name] * n, pa.string())
    arrays = [commit, seq, rows.keys, rows.partitions, names] + [rows.data[f.name] for f in rows.data.schema]
    return pa.Table.from_arrays(arrays, schema=ctx.schema)


def _renumber(ctx: WriteContext, table: pa.Table, bucket: int, file_name: str) -> pa.Table:
    """Give rows written by this instant their final sequence numbers and every row the file name."""
    n = table.num_rows
    ours = pc.equal(table[COMMIT_TIME_METADATA_FIELD], ctx.instant_time)
    fresh = pc.binary_join_element_wise(
        pa.array([f"{ctx.instant_time}_{bucket}"] * n, pa.string()),
        pc.cast(pa.array(np.arange(n, dtype=np.int64)), pa.string()),
        "_",
    )
    seq = pc.if_else(pc.fill_null(ours, False), fresh, table[COMMIT_SEQNO_METADATA_FIELD])
    table = table.set_column(
        table.schema.get_field_index(COMMIT_SEQNO_METADATA_FIELD),
        ctx.schema.field(COMMIT_SEQNO_METADATA_FIELD),
        seq,
    )
    names = pa.array([file_name] * n, pa.string())
    return table.set_column(
        table.schema.get_field_index(FILENAME_METADATA_FIELD),
        ctx.schema.field(FILENAME_METADATA_FIELD),
        names,
    )


def _keep_footer(ctx: WriteContext, partition: str, name: str, result: BaseFileResult) -> None:
    if result.footer is not None:
        ctx.base_footers[join(partition, name)] = result.footer


def _write_token(bucket: int) -> str:
    return f"{bucket}-0-{bucket}"


def create_base_file(
    ctx: WriteContext, partition: str, file_id: str, rows: PreparedInput, bucket: int
) -> WriteStat:
    """A new file group (or a new slice of one): a base file holding ``rows``."""
    start = time.monotonic()
    base = BaseFile(file_id, _write_token(bucket), ctx.instant_time)
    ctx.markers.create(partition, base.name, IOType.CREATE)
    table = with_meta_fields(ctx, rows, bucket, base.name)
    path = join(ctx.base_path, partition, base.name)
    result = write_base_file(
        ctx.fileio, path, table, ctx.avro_schema, compression=ctx.options.parquet_compression, bloom=ctx.bloom
    )
    _keep_footer(ctx, partition, base.name, result)
    return _write_stat(
        file_id=file_id,
        path=join(partition, base.name),
        prev_commit="null",
        num_writes=table.num_rows,
        num_deletes=0,
        num_update_writes=0,
        num_inserts=table.num_rows,
        total_write_bytes=result.size,
        partition_path=partition,
        file_size_in_bytes=result.size,
        runtime_stats=RuntimeStats(
            total_scan_time=0, total_upsert_time=0, total_create_time=_ms_since(start)
        ),
    )


def merge_into_base(
    ctx: WriteContext,
    file_slice: FileSlice,
    rows: PreparedInput,
    bucket: int,
    *,
    concat: bool = False,
    delete_entries: DeleteEntries | None = None,
) -> WriteStat:
    """A new base file version of ``file_slice``'s group: its base rows merged with ``rows``.

    Rows keep the base file's order with updates in place and inserts at the end, as Hudi's
    merge handle writes them. ``concat`` (the insert operation) keeps every base row and appends
    ``rows`` without merging; ``delete_entries`` removes keys (the delete operation).
    """
    start = time.monotonic()
    if not concat:
        rows = _last_per_key(rows)
    partition = file_slice.partition_path
    assert file_slice.base_file is not None
    old_path = join(ctx.base_path, partition, file_slice.base_file.name)
    base = read_parquet(ctx.fileio, old_path, ctx.schema, on_read=ctx.on_read)
    new = BaseFile(file_slice.file_id, _write_token(bucket), ctx.instant_time)
    ctx.markers.create(partition, new.name, IOType.MERGE)
    incoming = with_meta_fields(ctx, rows, bucket, new.name)
    n_base = base.num_rows
    if concat:
        merged = pa.concat_tables([base, incoming])
        updated = 0
    elif not supports(ctx.merge):
        merged = _merge_per_record(ctx, base, incoming, delete_entries)
        updated = _count_updates(ctx, base, incoming, merged)
    else:
        base_pos = pc.index_in(incoming[RECORD_KEY_METADATA_FIELD], value_set=base[RECORD_KEY_METADATA_FIELD])
        fallback = pa.array(np.arange(n_base, n_base + incoming.num_rows, dtype=np.int64))
        in_pos = pc.if_else(pc.is_null(base_pos), fallback, pc.cast(base_pos, pa.int64()))
        base_t = base.append_column(_POS, pa.array(np.arange(n_base, dtype=np.int64)))
        incoming_t = incoming.append_column(_POS, in_pos)
        batches: list[pa.Table | DeleteEntries] = [incoming_t]
        if delete_entries is not None:
            batches = [delete_entries] if rows.num_rows == 0 else [incoming_t, delete_entries]
        merged = merge_slice(base_t, batches, ctx.spec)
        merged = merged.take(pc.sort_indices(merged[_POS])).drop_columns([_POS])
        updated = _count_updates(ctx, base, incoming, merged)
    merged = _renumber(ctx, merged, bucket, new.name)
    path = join(ctx.base_path, partition, new.name)
    result = write_base_file(
        ctx.fileio,
        path,
        merged,
        ctx.avro_schema,
        compression=ctx.options.parquet_compression,
        bloom=ctx.bloom,
    )
    _keep_footer(ctx, partition, new.name, result)
    written_by_us = int(pc.sum(pc.equal(merged[COMMIT_TIME_METADATA_FIELD], ctx.instant_time)).as_py() or 0)
    deleted = n_base + written_by_us - updated - merged.num_rows if not concat else 0
    cdc_stats = None
    # HoodieConcatHandle logs nothing (a CDC table refuses it before the write starts).
    if ctx.cdc is not None and not concat and handle_writes_log(merged.num_rows, written_by_us - updated):
        changes = diff_by_key(base, merged)
        cdc_stats = log_changes(
            ctx.cdc,
            ctx.fileio,
            ctx.base_path,
            ctx.markers,
            partition,
            file_slice.file_id,
            ctx.instant_time,
            _write_token(bucket),
            changes,
            base,
            merged,
        )
    return _write_stat(
        file_id=file_slice.file_id,
        path=join(partition, new.name),
        prev_commit=file_slice.base_instant_time,
        num_writes=merged.num_rows,
        num_deletes=max(deleted, 0),
        num_update_writes=updated,
        num_inserts=written_by_us - updated,
        total_write_bytes=result.size,
        partition_path=partition,
        file_size_in_bytes=result.size,
        prev_base_file=file_slice.base_file.name,
        cdc_stats=cdc_stats,
        runtime_stats=RuntimeStats(
            total_scan_time=0, total_upsert_time=_ms_since(start), total_create_time=0
        ),
    )


def _last_per_key(rows: PreparedInput) -> PreparedInput:
    """The last incoming record of each key: ``HoodieMergeHandle`` keeps its incoming records in a
    map by key, a later record replacing an earlier one (before any merging with the file's)."""
    if rows.num_rows < 2 or pc.count_distinct(rows.keys).as_py() == rows.num_rows:
        return rows
    positions = pa.table({"k": rows.keys, "i": pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    last = positions.group_by("k").aggregate([("i", "max")])["i_max"].to_numpy()
    return rows.take(np.sort(last).astype(np.int64))


def _count_updates(ctx: WriteContext, base: pa.Table, incoming: pa.Table, merged: pa.Table) -> int:
    """Incoming records that replaced a base record (and won the merge)."""
    if not incoming.num_rows:
        return 0
    ours = pc.filter(
        merged[RECORD_KEY_METADATA_FIELD], pc.equal(merged[COMMIT_TIME_METADATA_FIELD], ctx.instant_time)
    )
    was_in_base = pc.is_in(incoming[RECORD_KEY_METADATA_FIELD], value_set=base[RECORD_KEY_METADATA_FIELD])
    won = pc.is_in(incoming[RECORD_KEY_METADATA_FIELD], value_set=ours)
    return int(pc.sum(pc.and_(was_in_base, won)).as_py() or 0)


def _merge_per_record(
    ctx: WriteContext, base: pa.Table, incoming: pa.Table, deletes: DeleteEntries | None
) -> pa.Table:
    """The merge for CUSTOM mergers, payloads and partial updates, record by record."""
    entries: list[LogEntry] = [DataEntry(row) for row in incoming.to_pylist()]
    if deletes is not None:
        entries.extend(
            DeleteEntry(str(k), None, v, c)
            for k, v, c in zip(
                deletes.keys.to_pylist(), deletes.ordering_values, deletes.ordering_classes, strict=True
            )
        )
    rows = merge_file_group(
        base.to_pylist(),
        entries,
        ctx.merge.with_schema(ctx.schema),
        lambda r: str(r[RECORD_KEY_METADATA_FIELD]),
    )
    return pa.Table.from_pylist(rows, schema=ctx.schema)


def append_to_log(
    ctx: WriteContext,
    file_slice: FileSlice,
    log_base_instant: str,
    existing_logs: list[LogFile],
    rows: PreparedInput,
    bucket: int,
    deletes: tuple[list[str], list[str], list[OrderingWrapper | None] | None] | None,
) -> WriteStat:
    """A new log file in ``file_slice``'s group holding ``rows`` and the ``deletes``.

    Table version 8+ names the log with this instant; version 6 with the slice's base instant
    (``log_base_instant``: the pending compaction's instant if one is scheduled), one version
    after the slice's latest log.
    """
    start = time.monotonic()
    partition = file_slice.partition_path
    token = _write_token(bucket)
    if ctx.table_version >= 8:
        same = [lf for lf in existing_logs if lf.instant_time == ctx.instant_time]
        version = max((lf.version for lf in same), default=0) + 1
        log = LogFile(file_slice.file_id, ctx.instant_time, version, token)
    else:
        same = [lf for lf in existing_logs if lf.instant_time == log_base_instant]
        version = max((lf.version for lf in same), default=0) + 1
        log = LogFile(file_slice.file_id, log_base_instant, version, token)
    ctx.markers.create(partition, log.name, IOType.APPEND)
    blocks: list[bytes] = []
    data_rows = 0
    if rows.num_rows:
        table = with_meta_fields(ctx, rows, bucket, file_slice.file_id)
        data_rows = table.num_rows
        if ctx.options.log_block_format is LogBlockFormat.PARQUET:
            blocks.append(
                parquet_data_block(table, ctx.avro_schema, ctx.instant_time, ctx.options.parquet_compression)
            )
        else:
            blocks.append(avro_data_block(table, ctx.avro_schema, ctx.instant_time))
        ctx.log_records[join(partition, log.name)] = table
    n_deletes = 0
    if deletes is not None and deletes[0]:
        keys, partitions, ordering = deletes
        n_deletes = len(keys)
        blocks.append(
            delete_block(keys, partitions, ordering, ctx.instant_time, ctx.avro_schema, ctx.table_version)
        )
    data = b"".join(blocks)
    path = join(ctx.base_path, partition, log.name)
    try:
        ctx.fileio.create_new(path, data)
    except FileExistsError as e:
        raise InstantExistsError(f"log file {path} already exists") from e
    all_logs = sorted([*existing_logs, log], key=lambda lf: lf.sort_key)
    return _write_stat(
        file_id=file_slice.file_id,
        path=join(partition, log.name),
        prev_commit=file_slice.base_instant_time or ctx.instant_time,  # a log-only group starts here
        num_writes=data_rows + n_deletes,
        num_deletes=n_deletes,
        num_update_writes=data_rows,
        num_inserts=0,
        total_write_bytes=len(data),
        partition_path=partition,
        file_size_in_bytes=len(data),
        log_version=log.version,
        log_offset=0,
        base_file=file_slice.base_file.name if file_slice.base_file else "",
        log_files=[lf.name for lf in all_logs],
        runtime_stats=RuntimeStats(
            total_scan_time=0, total_upsert_time=_ms_since(start), total_create_time=0
        ),
    )
