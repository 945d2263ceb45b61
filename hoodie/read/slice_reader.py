"""Reading one file slice: its base file, its log blocks, merged as the table's merge mode says."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import CorruptLogBlockError, SchemaError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType, LogBlock
from hoodie.file_group.log_reader import CorruptBlockReport
from hoodie.io.fileio import FileIO
from hoodie.merge.buffer import merge_file_group
from hoodie.merge.config import MergeConfig
from hoodie.merge.log_entries import DeleteEntries, MergeSpec, spec_for, supports
from hoodie.merge.records import DataEntry, DeleteEntry, LogEntry
from hoodie.merge.trace import MergeTrace
from hoodie.merge.vectorized import MergeCounts, iter_merge_slice
from hoodie.models.codec import load_schema
from hoodie.read.base_keys import RowGroupKeys
from hoodie.read.log_scanner import InstantRange, ScanStats, scan_log_blocks
from hoodie.read.read_ahead import ReadAhead
from hoodie.schema.avro_arrow import avro_to_arrow_schema, conform, decode_avro_block_content
from hoodie.schema.internal_schema import SchemaOnRead
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD
from hoodie.shape.partial_blocks import check_partial_blocks

_I32 = struct.Struct(">i")
_WRAPPER_PREFIX = "org.apache.hudi.avro.model."


def project_table(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: missing ones null, types promoted as Avro allows."""
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for f in schema:
        if f.name in table.column_names:
            col = table[f.name]
            if col.type == f.type:
                arrays.append(col)
            else:
                chunks = [conform(c, f.type, f"{where}: {f.name}") for c in col.chunks]
                arrays.append(pa.chunked_array(chunks, f.type))
        else:
            arrays.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


BASE_BATCH_ROWS = 262_144  # memory holds one batch of the base file at a time
#: Base batches decoded ahead of the merge while a slice with logs is read (:class:`ReadAhead`):
#: one for a stream (compaction holds one batch more than it merges); queries, which hold the
#: whole result anyway, take two (the logs' decode then overlaps two batches' Parquet decode).
BASE_READ_AHEAD = 1
QUERY_READ_AHEAD = 2
_STREAM_BUFFER = 8 * 1024 * 1024


def iter_parquet(
    fileio: FileIO,
    path: str,
    schema: pa.Schema,
    batch_rows: int = BASE_BATCH_ROWS,
    *,
    on_read: SchemaOnRead | None = None,
    low_memory: bool = False,
    keys: RowGroupKeys | None = None,
) -> Iterator[pa.Table]:
    """A Parquet base file, projected onto ``schema``, in batches of about ``batch_rows`` rows.

    With ``on_read`` (a schema-on-read table) its columns are matched by id with the schema
    version of the file's commit. ``low_memory`` reads column chunks through a buffer, without
    pre-buffering a whole row group (about half the peak memory on 1M-row row groups). With
    ``keys``, a string key column is read a row group at a time ahead of the row group's other
    columns and handed to ``keys`` (batches then stay within a row group and hold slices of it)."""
    commit = _commit_time(path) if on_read else ""
    with fileio.open_input(path) as f:
        pf = pq.ParquetFile(f, pre_buffer=not low_memory, buffer_size=_STREAM_BUFFER if low_memory else 0)
        available = set(pf.schema_arrow.names)
        wanted = on_read.columns(commit, schema.names) if on_read else schema.names
        present = [n for n in wanted if n in available]
        if keys is not None and on_read is None and _splits_keys(pf, schema, keys.key_field, present):
            yield from _iter_row_groups(pf, path, schema, batch_rows, present, keys)
            return
        batches = pf.iter_batches(batch_size=batch_rows, columns=present, use_threads=not low_memory)
        for batch in batches:
            data = pa.Table.from_batches([batch])
            yield on_read.read(data, commit, schema, path) if on_read else project_table(data, schema, path)


def _splits_keys(pf: pq.ParquetFile, schema: pa.Schema, key: str, present: list[str]) -> bool:
    """Whether the key column can be read apart: a plain string column of the file and the
    schema, read with at least one other column."""
    if key not in present or len(present) < 2 or schema.get_field_index(key) < 0:
        return False
    return bool(pf.schema_arrow.field(key).type == pa.string() == schema.field(key).type)


def _iter_row_groups(
    pf: pq.ParquetFile, path: str, schema: pa.Schema, batch_rows: int, present: list[str], keys: RowGroupKeys
) -> Iterator[pa.Table]:
    key = keys.key_field
    others = [n for n in present if n != key]
    key_field = pf.schema_arrow.field(key)
    for rg in range(pf.num_row_groups):
        if not pf.metadata.row_group(rg).num_rows:
            continue
        column = pf.read_row_group(rg, columns=[key]).column(0).combine_chunks()
        keys.add(column)
        pos = 0
        for batch in pf.iter_batches(
            batch_size=batch_rows, row_groups=[rg], columns=others, use_threads=True
        ):
            data = pa.Table.from_batches([batch]).append_column(key_field, column.slice(pos, batch.num_rows))
            pos += batch.num_rows
            yield project_table(data, schema, path)


def read_parquet(
    fileio: FileIO, path: str, schema: pa.Schema, *, on_read: SchemaOnRead | None = None
) -> pa.Table:
    """A Parquet base file projected onto ``schema`` (see :func:`iter_parquet`)."""
    commit = _commit_time(path) if on_read else ""
    with fileio.open_input(path) as f:
        pf = pq.ParquetFile(f)
        available = set(pf.schema_arrow.names)
        wanted = on_read.columns(commit, schema.names) if on_read else schema.names
        present = [n for n in wanted if n in available]
        table = pf.read(columns=present, use_threads=True)
    return on_read.read(table, commit, schema, path) if on_read else project_table(table, schema, path)


def _commit_time(path: str) -> str:
    base = BaseFile.parse(path.rsplit("/", 1)[-1])
    if base is None:
        raise SchemaError(f"{path}: not a base file name; its commit time (schema version) is unknown")
    return base.commit_time


@dataclass(frozen=True, slots=True)
class DeleteBatch:
    """A decoded delete block: keys, partitions and ordering values with their wrapper class."""

    keys: list[str]
    partitions: list[str | None]
    ordering_values: list[Any]
    ordering_classes: list[Any]  # a wrapper name, None, or a tuple of them (ArrayWrapper)


def decode_delete_block(block: LogBlock, table_version: int) -> DeleteBatch:
    """The ``HoodieDeleteRecordList`` of a delete block (content version 3)."""
    content = block.content
    source = f"{block.log_file}@{block.offset}"
    try:
        version, length = struct.unpack_from(">ii", content, 0)
    except struct.error as e:
        raise CorruptLogBlockError(f"{source}: truncated delete block") from e
    if version != 3:
        raise CorruptLogBlockError(
            f"{source}: delete block content version {version} is not supported (only 3, Hudi 0.10+)"
        )
    if length < 0 or 8 + length > len(content):
        raise CorruptLogBlockError(f"{source}: delete block length {length} exceeds its {len(content)} bytes")
    schema = fastavro.parse_schema(load_schema("HoodieDeleteRecordList", table_version))
    try:
        record = fastavro.schemaless_reader(
            io.BytesIO(content[8 : 8 + length]), schema, None, return_record_name=True
        )
    except (EOFError, ValueError, IndexError, struct.error) as e:
        raise CorruptLogBlockError(f"{source}: undecodable delete records: {e}") from e
    assert isinstance(record, dict)
    keys: list[str] = []
    partitions: list[str | None] = []
    values: list[Any] = []
    classes: list[str | None] = []
    for entry in record["deleteRecordList"]:
        keys.append(entry["recordKey"])
        partitions.append(entry.get("partitionPath"))
        value, klass = _unwrap_ordering(entry.get("orderingVal"))
        values.append(value)
        classes.append(klass)
    return DeleteBatch(keys, partitions, values, classes)


def _unwrap_ordering(ordering: Any) -> tuple[Any, Any]:
    """An ``orderingVal`` union member as (value, wrapper name). Several ordering fields (1.1) are an
    ``ArrayWrapper`` of wrapped values (``HoodieAvroUtils.wrapValueIntoAvro`` of an
    ``ArrayComparable``): a tuple of values with a tuple of wrapper names (``None`` for a null)."""
    if not isinstance(ordering, tuple):
        return ordering, None
    name, wrapped = ordering
    klass = name.removeprefix(_WRAPPER_PREFIX)
    if klass == "ArrayWrapper":
        parts = [_unwrap_ordering(v) for v in (wrapped.get("wrappedValues") or [])]
        return tuple(v for v, _ in parts), tuple(c for _, c in parts)
    return (wrapped.get("value") if isinstance(wrapped, dict) else wrapped), klass


@dataclass
class SliceMergeInfo:
    """What a slice read merged, for the write stats of compaction and clustering."""

    base_keys: pa.Array | None = None
    log_keys: list[pa.Array] = field(default_factory=list)
    log_records: int = 0
    counts: MergeCounts | None = None  # filled by the vectorized merge
    trace: MergeTrace | None = None  # set to have the vectorized merge record it (CDC compaction)

    def all_log_keys(self) -> pa.Array:
        return pa.concat_arrays(self.log_keys) if self.log_keys else pa.array([], pa.string())


@dataclass
class SliceReadOptions:
    """How to read slices of one table at one point of its timeline."""

    schema: pa.Schema
    merge: MergeConfig
    table_version: int
    is_committed: Callable[[str], bool]
    latest_instant: str | None
    key_field: str = RECORD_KEY_METADATA_FIELD
    instant_range: InstantRange | None = None
    report: CorruptBlockReport = field(default_factory=CorruptBlockReport)
    stats: ScanStats = field(default_factory=ScanStats)
    info: SliceMergeInfo | None = None
    on_read: SchemaOnRead | None = None  # schema-on-read tables: files matched by column id
    # Tables without meta fields: rebuilds the record keys of rows read (hoodie.keygen.virtual_record_keys)
    virtual_keys: Callable[[pa.Table], pa.Array] | None = None
    base_read_ahead: int = BASE_READ_AHEAD  # base batches decoded ahead of the merge

    @property
    def merge_spec(self) -> MergeSpec:
        return spec_for(self.merge, self.key_field)

    @property
    def vectorized(self) -> bool:
        return supports(self.merge)


def read_slice(fileio: FileIO, base_path: str, file_slice: FileSlice, opts: SliceReadOptions) -> pa.Table:
    """Merge one slice's base file and log blocks into rows of ``opts.schema``."""
    parts = list(iter_read_slice(fileio, base_path, file_slice, opts))
    if not parts:
        return opts.schema.empty_table()
    return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def iter_read_slice(
    fileio: FileIO, base_path: str, file_slice: FileSlice, opts: SliceReadOptions
) -> Iterator[pa.Table]:
    """The merged rows of one slice in parts: the base file streams through the merge in batches,
    so memory holds one batch of it plus the decoded log blocks."""
    base_file = file_slice.base_file_path(base_path)
    if not file_slice.log_files:
        if base_file:
            yield from iter_parquet(fileio, base_file, opts.schema, on_read=opts.on_read)
        return
    if not base_file:
        yield from _iter_merge_logs(fileio, base_path, file_slice, opts, (), None)
        return
    # The base file is decoded on a thread from now on, while the logs are scanned and decoded here;
    # the vectorized merge looks its keys up a row group at a time.
    keys = RowGroupKeys(opts.key_field) if opts.vectorized else None
    base = iter_parquet(fileio, base_file, opts.schema, on_read=opts.on_read, keys=keys)
    with ReadAhead(base, opts.base_read_ahead, "hts-base-read") as base_batches:
        yield from _iter_merge_logs(fileio, base_path, file_slice, opts, base_batches, keys)


def _iter_merge_logs(
    fileio: FileIO,
    base_path: str,
    file_slice: FileSlice,
    opts: SliceReadOptions,
    base_batches: Iterable[pa.Table],
    keys: RowGroupKeys | None,
) -> Iterator[pa.Table]:
    blocks = scan_log_blocks(
        fileio,
        base_path,
        file_slice,
        is_committed=opts.is_committed,
        latest_instant=opts.latest_instant,
        instant_range=opts.instant_range,
        report=opts.report,
        stats=opts.stats,
    )
    partial = any(b.is_partial for b in blocks)
    if keys is not None and (not blocks or partial):
        keys.discard()  # no vectorized merge: nothing looks the keys up
    if not blocks:
        yield from base_batches
        return
    if partial:  # services check the slices they plan to merge when they schedule and execute
        check_partial_blocks(base_path, "read", blocks, opts.merge)
    keyed, opts = _virtual_keying(opts)
    names = opts.schema.names
    if keyed is not None:
        base_batches = (keyed(b) for b in base_batches)
    if opts.vectorized and not partial:
        batches: list[pa.Table | DeleteEntries] = []
        for block in blocks:
            if block.block_type is BlockType.DELETE:
                d = decode_delete_block(block, opts.table_version)
                batches.append(
                    DeleteEntries(pa.array(d.keys, pa.string()), d.ordering_values, d.ordering_classes)
                )
            else:
                data = decode_data_block(block, opts.schema, on_read=opts.on_read)
                batches.append(data if keyed is None else keyed(data))
        counts = None
        if opts.info is not None:
            counts = opts.info.counts = MergeCounts()
        trace = opts.info.trace if opts.info is not None else None
        base_codes = None
        if keys is not None and keys.key_field == opts.merge_spec.key_field:
            base_codes = keys.codes_of  # the merge keys rows by the column ``keys`` holds
        elif keys is not None:
            keys.discard()  # e.g. rebuilt virtual keys: each batch is looked up
        spec = opts.merge_spec
        merged = iter_merge_slice(base_batches, batches, spec, counts, opts.schema, trace, base_codes)
        yield from (merged if keyed is None else (part.select(names) for part in merged))
        return
    base_parts = list(base_batches)
    base = pa.concat_tables(base_parts) if base_parts else None
    yield _merge_per_record(base, blocks, opts, keyed)


VIRTUAL_KEY_COLUMN = "\x00virtual_record_key"
"""The column that carries the rebuilt record keys of a table without meta fields while a slice merges."""


def _virtual_keying(opts: SliceReadOptions) -> tuple[Callable[[pa.Table], pa.Table] | None, SliceReadOptions]:
    """For a table without meta fields: a function that appends the rows' rebuilt record keys (Hudi's
    file-group reader keys them by ``RecordContext.getRecordKey``; delete blocks carry their keys),
    and the options that merge by them. Otherwise no function and ``opts``."""
    keys_of = opts.virtual_keys
    if keys_of is None:
        return None, opts

    def keyed(table: pa.Table) -> pa.Table:
        return table.append_column(VIRTUAL_KEY_COLUMN, keys_of(table).cast(pa.string()))

    return keyed, replace(opts, key_field=VIRTUAL_KEY_COLUMN, virtual_keys=None)


def decode_data_block(block: LogBlock, schema: pa.Schema, *, on_read: SchemaOnRead | None = None) -> pa.Table:
    """An Avro or Parquet data block as rows of ``schema``; with ``on_read``, its columns are
    matched by id with the schema version of the block's ``INSTANT_TIME``."""
    where = f"{block.log_file}@{block.offset}"
    if block.block_type is BlockType.AVRO_DATA:
        if not block.schema:
            raise CorruptLogBlockError(f"{where}: Avro data block has no SCHEMA header")
        if on_read is None:
            return decode_avro_block_content(block.content, block.schema, schema, source=where)
        written = avro_to_arrow_schema(block.schema)
        table = decode_avro_block_content(block.content, block.schema, written, source=where)
    elif block.block_type is BlockType.PARQUET_DATA:
        try:
            table = pq.read_table(pa.BufferReader(block.content))
        except pa.ArrowInvalid as e:
            raise CorruptLogBlockError(f"{where}: Parquet data block is unreadable: {e}") from e
        if on_read is None:
            return project_table(table, schema, where)
    else:
        raise CorruptLogBlockError(f"{where}: {block.block_type.name} is not a data block")
    if not block.instant_time:
        raise CorruptLogBlockError(f"{where}: data block has no INSTANT_TIME header")
    return on_read.read(table, block.instant_time, schema, where)


def _merge_per_record(
    base: pa.Table | None,
    blocks: list[LogBlock],
    opts: SliceReadOptions,
    keyed: Callable[[pa.Table], pa.Table] | None = None,
) -> pa.Table:
    ctx = opts.merge.with_schema(opts.schema)
    entries: list[LogEntry] = []
    for block in blocks:
        if block.block_type is BlockType.DELETE:
            d = decode_delete_block(block, opts.table_version)
            entries.extend(
                DeleteEntry(k, p, v, c)
                for k, p, v, c in zip(
                    d.keys, d.partitions, d.ordering_values, d.ordering_classes, strict=True
                )
            )
            continue
        columns: frozenset[str] | None = None
        if block.is_partial and block.schema:
            import json

            columns = frozenset(f["name"] for f in json.loads(block.schema)["fields"])
            if opts.on_read is not None and block.instant_time:  # written names -> query names
                columns = opts.on_read.query_names(block.instant_time, columns)
        table = decode_data_block(block, opts.schema, on_read=opts.on_read)
        if keyed is not None:
            table = keyed(table)
            if columns is not None:
                columns = columns | {VIRTUAL_KEY_COLUMN}
        if columns is not None:
            table = table.select([n for n in table.column_names if n in columns])
        entries.extend(DataEntry(row, block.is_partial, columns) for row in table.to_pylist())
    key = opts.key_field

    def key_of(row: dict[str, Any]) -> str:
        value = row.get(key)
        if value is None:
            raise SchemaError(f"a record has no {key}; cannot merge it")
        return str(value)

    if opts.info is not None:
        keys = [e.key if isinstance(e, DeleteEntry) else key_of(e.row) for e in entries]
        opts.info.log_keys.append(pa.array(keys, pa.string()))
        opts.info.log_records += len(keys)
        if base is not None:
            opts.info.base_keys = base[opts.key_field].combine_chunks().cast(pa.string())
    base_rows = base.to_pylist() if base is not None else []
    rows = merge_file_group(base_rows, entries, ctx, key_of)
    return pa.Table.from_pylist(rows, schema=opts.schema)
