"""The query types: snapshot (optionally as of an instant), read-optimized, and incremental.

Every query returns a ``pyarrow.Table`` with the table's schema as of the query instant, meta
fields first when the table populates them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config.table_config import TableKeys
from hoodie.errors import SchemaError, UnsupportedShapeError
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_reader import CorruptBlockReport
from hoodie.file_group.view import FileSystemView
from hoodie.keygen import ValueFormat, virtual_record_keys
from hoodie.keygen.factory import CONSISTENT_LOGICAL_TIMESTAMP, java_bool
from hoodie.merge.resolve import resolve_merge_config
from hoodie.read.log_scanner import InstantRange, ScanStats
from hoodie.read.slice_reader import QUERY_READ_AHEAD, SliceReadOptions, read_parquet, read_slice
from hoodie.schema.avro_arrow import add_meta_fields, avro_to_arrow_schema
from hoodie.schema.evolution import unreadable_by_name
from hoodie.schema.internal_schema import (
    LATEST_SCHEMA_KEY,
    SchemaHistory,
    SchemaOnRead,
    parse_internal_schema,
)
from hoodie.schema.meta_fields import COMMIT_TIME_METADATA_FIELD
from hoodie.shape.matrix import Shape
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline

if TYPE_CHECKING:
    from hoodie.table import HoodieTable

log = logging.getLogger(__name__)


@dataclass
class ReadResult:
    """What a read returns besides rows: corrupt blocks met, and log-scan counters."""

    report: CorruptBlockReport
    stats: ScanStats


def table_schema(table: HoodieTable, as_of: str | None = None) -> pa.Schema:
    """The Arrow schema of the table as of ``as_of`` (meta fields first if populated)."""
    avro = table.latest_schema_json(as_of)
    if avro is None:
        return pa.schema([])
    if table.config.populate_meta_fields:
        avro = add_meta_fields(avro)
    return avro_to_arrow_schema(avro)


def virtual_key_function(table: HoodieTable) -> Callable[[pa.Table], pa.Array] | None:
    """How a reader rebuilds the record keys of a table without meta fields (None with meta fields)."""
    if table.config.populate_meta_fields:
        return None
    fields = table.config.record_key_fields
    consistent = java_bool(table.config.props.get(CONSISTENT_LOGICAL_TIMESTAMP))
    fmt = ValueFormat(consistent_logical_timestamp=consistent)
    return lambda rows: virtual_record_keys(rows, fields, fmt)


#: Operations whose commits cannot change the schema (``WriteOperationType.canUpdateSchema``).
_KEEP_SCHEMA = frozenset({"CLUSTER", "COMPACT", "INDEX", "LOG_COMPACT"})


def schema_on_read(
    table: HoodieTable, timeline: ActiveTimeline | None = None, as_of: str | None = None
) -> SchemaOnRead | None:
    """How to read the files of a schema-on-read table: each with its own schema version,
    matched by column id to the query version, which is the ``latest_schema`` of the last
    completed write (as of ``as_of``) that can change the schema
    (``TableSchemaResolver.getTableInternalSchemaFromCommitMetadata``). None when that write
    carries none: Hudi then reads by name, and so does hts."""
    writes = (timeline or table.timeline).completed().writes()
    if as_of is not None:
        writes = writes.before(as_of, inclusive=True)
    query_text = None
    for instant in reversed(writes.instants):
        meta = table.commit_metadata(instant, timeline)
        if (meta.operation_type or "").upper() not in _KEEP_SCHEMA:
            query_text = (meta.extra_metadata or {}).get(LATEST_SCHEMA_KEY)
            break
    if not query_text:
        return None

    def latest_schemas() -> dict[str, str]:
        out = {}
        for instant in writes:
            text = (table.commit_metadata(instant, timeline).extra_metadata or {}).get(LATEST_SCHEMA_KEY)
            if text:
                out[instant.requested_time] = text
        return out

    history = SchemaHistory.load(
        table.fileio, table.paths.meta, [i.requested_time for i in writes], latest_schemas
    )
    if history is None:  # the query version itself should be one
        raise SchemaError(
            f"{table.base_path}: {LATEST_SCHEMA_KEY} in the commit metadata, but no schema version "
            "of the table's history could be read from it"
        )
    return SchemaOnRead(history, parse_internal_schema(query_text, f"{table.base_path}: {LATEST_SCHEMA_KEY}"))


#: (base path, completed writes) -> what :func:`_unreadable` found: a table's files change only
#: with its completed writes, so writers and services check each timeline once.
_READABILITY: dict[tuple[str, tuple[tuple[str, str | None], ...]], tuple[list[str], str]] = {}


def _unreadable(table: HoodieTable, tl: ActiveTimeline) -> tuple[list[str], str]:
    on_read = schema_on_read(table, tl)
    if on_read is not None:
        return on_read.unreadable(), on_read.history.source
    latest = table.latest_schema_json()
    problems: list[str] = []
    seen: set[str] = set()
    for instant in tl.completed().writes() if latest is not None else ():
        text = table.commit_metadata(instant, tl).schema
        if not text or text in seen:
            continue
        seen.add(text)
        assert latest is not None
        problems += [f"{instant.requested_time}: {p}" for p in unreadable_by_name(json.loads(text), latest)]
    return problems, "the commits' schema"


def unreadable_schemas(table: HoodieTable, timeline: ActiveTimeline) -> tuple[list[str], str]:
    """What makes files of ``table`` unreadable with its latest schema as Hudi reads them, and where
    that was seen: a type change outside the promotions hts implements between a version of a
    schema-on-read table and the query version, or (otherwise) between the schema of a completed
    write and the latest one. The table's shape (``hoodie.shape``) refuses on it."""
    writes = timeline.completed().writes()
    key = (table.base_path, tuple((i.requested_time, i.completion_time) for i in writes))
    found = _READABILITY.get(key)
    if found is None:
        found = _unreadable(table, timeline)
        if len(_READABILITY) >= 256:
            _READABILITY.clear()
        _READABILITY[key] = found
    return found


class TableReader:
    """Reads one table; create one per query (it snapshots the timeline when created)."""

    def __init__(self, table: HoodieTable) -> None:
        self.table = table
        self.timeline = table.reload()
        self.result = ReadResult(CorruptBlockReport(), ScanStats())

    def _options(self, view: FileSystemView, schema: pa.Schema, as_of: str | None) -> SliceReadOptions:
        merge = resolve_merge_config(self.table.config)
        latest = as_of
        if latest is None:
            last = self.timeline.completed().writes().last()
            latest = last.requested_time if last else None
        return SliceReadOptions(
            schema=schema,
            merge=merge,
            table_version=self.table.table_version,
            is_committed=view.is_committed,
            latest_instant=latest,
            report=self.result.report,
            stats=self.result.stats,
            on_read=schema_on_read(self.table, self.timeline, as_of),
            virtual_keys=virtual_key_function(self.table),
            base_read_ahead=QUERY_READ_AHEAD,
        )

    def _read_slices(self, slices: Iterable[FileSlice], opts: SliceReadOptions) -> pa.Table:
        parts = [read_slice(self.table.fileio, self.table.base_path, s, opts) for s in slices]
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return opts.schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def snapshot(self, as_of: str | None = None, partitions: Sequence[str] | None = None) -> pa.Table:
        """The latest merged records, or those as of ``as_of`` (time travel, inclusive)."""
        schema = table_schema(self.table, as_of)
        view = self.table.file_system_view(as_of, self.timeline)
        opts = self._options(view, schema, as_of)
        out = self._read_slices(view.latest_file_slices(partitions), opts)
        if len(self.result.report):
            log.warning(
                "%s: %d corrupt log block(s) skipped: %s",
                self.table.base_path,
                len(self.result.report),
                self.result.report.locations,
            )
        return out

    def read_file_slices(self, slices: Iterable[FileSlice]) -> pa.Table:
        """The merged records of ``slices`` (slices of this reader's timeline)."""
        schema = table_schema(self.table)
        view = self.table.file_system_view(timeline=self.timeline)
        return self._read_slices(slices, self._options(view, schema, None))

    def read_optimized(self, as_of: str | None = None, partitions: Sequence[str] | None = None) -> pa.Table:
        """Base files only (for MERGE_ON_READ, records not yet compacted are not seen)."""
        schema = table_schema(self.table, as_of)
        view = self.table.file_system_view(as_of, self.timeline)
        on_read = schema_on_read(self.table, self.timeline, as_of)
        parts = []
        for s in view.latest_base_files(partitions):
            path = s.base_file_path(self.table.base_path)
            if path is not None:
                parts.append(read_parquet(self.table.fileio, path, schema, on_read=on_read))
        parts = [p for p in parts if p.num_rows]
        if not parts:
            return schema.empty_table()
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def incremental(self, start_exclusive: str | None, end_inclusive: str | None = None) -> pa.Table:
        """Records written by instants in ``(start, end]``, each in its latest state as of ``end``.

        For timeline layout 2 (table versions 8+) the bounds are compared with completion times,
        as Hudi 1.x does; for layout 1 with requested times.
        """
        if not self.table.config.populate_meta_fields:
            # Hudi's incremental relations (IncrementalRelation, MergeOnReadIncrementalRelation) refuse
            # such tables: without _hoodie_commit_time no row says which instant wrote it.
            raise UnsupportedShapeError(
                self.table.base_path,
                Shape.VIRTUAL_KEYS.value,
                f"{TableKeys.POPULATE_META_FIELDS.key}=false",
                "read (incremental)",
                "Hudi's incremental queries select rows by their _hoodie_commit_time, which a table "
                'without meta fields does not keep (IncrementalRelation: "Incremental queries are not '
                'supported when meta fields are disabled")',
            )
        writes = self.timeline.completed().writes()
        if self.table.paths.layout >= 2:
            in_range = InstantRange(start_exclusive, end_inclusive)
            chosen = [i for i in writes if (i.completion_time or i.requested_time) in in_range]
        else:
            chosen = list(writes.between(start_exclusive, end_inclusive))
        if not chosen:
            return table_schema(self.table).empty_table()
        commit_times = sorted({i.requested_time for i in chosen})
        # Everything completed by the end bound is visible; read as of the newest such instant.
        visible = [
            i
            for i in writes
            if end_inclusive is None
            or normalize(i.completion_time or i.requested_time) <= normalize(end_inclusive)
        ]
        as_of = max((i.requested_time for i in visible), key=normalize) if visible else None
        touched = self._touched_partitions(chosen)
        merged = self.snapshot(as_of, partitions=touched)
        if not merged.num_rows or COMMIT_TIME_METADATA_FIELD not in merged.column_names:
            return merged
        mask = pc.is_in(merged[COMMIT_TIME_METADATA_FIELD], value_set=pa.array(commit_times, pa.string()))
        return merged.filter(mask)

    def _touched_partitions(self, instants: Iterable[object]) -> list[str]:
        partitions: set[str] = set()
        for instant in instants:
            meta = self.table.commit_metadata(instant, self.timeline)  # type: ignore[arg-type]
            partitions.update(meta.partitions())
        existing = set(self.table.file_system_view(None, self.timeline).partitions())
        return sorted(partitions & existing)


def read_snapshot(table: HoodieTable, as_of: str | None = None) -> pa.Table:
    return TableReader(table).snapshot(as_of)


def read_optimized(table: HoodieTable, as_of: str | None = None) -> pa.Table:
    return TableReader(table).read_optimized(as_of)


def read_incremental(
    table: HoodieTable, start_exclusive: str | None, end_inclusive: str | None = None
) -> pa.Table:
    return TableReader(table).incremental(start_exclusive, end_inclusive)
