"""Secondary indexes (``secondary_index_<name>`` metadata partitions) kept current on writes.

A secondary index maps ``<value>$<record key>`` (both escaped, ``keys.secondary_index_key``) to
a live or deleted entry. As Hudi 1.x does for a commit
(``SecondaryIndexRecordGenerationUtils``), each file group the commit writes is read as it was
before the commit and as it is with the commit's new files; a key whose value changed or that
went away has its old entry deleted (``isDeleted``), and a new or changed value gets a live
entry. Table services do not change values, and the entries name no file, so compaction,
clustering and clean leave secondary indexes alone.

A value is the Java ``toString`` of the value Spark holds (Hudi builds secondary indexes only
with Spark): strings as they are, ints and longs in decimal (dates as days, timestamps as
microseconds, timestamp-millis columns included), doubles as ``Double.toString``
(``keys.java_double_text``), booleans as ``true``/``false``; null is a lone NUL character.
Entries change only when that text changes (0.0 to -0.0 does; NaN to NaN does not), as Hudi
compares the texts. A column may be a field of a nested record (``info.city``; null when a
record on the way is null). Float, decimal and bytes columns are refused, as Hudi refuses them,
naming the index and column.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import UnsupportedTableError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_file import LogFile
from hoodie.merge.resolve import resolve_merge_config
from hoodie.metadata.keys import secondary_index_key, secondary_index_shard_key
from hoodie.metadata.records import MetadataPartition, Payload, secondary_index_payload
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.read.reader import schema_on_read, table_schema
from hoodie.read.slice_reader import SliceReadOptions, read_slice
from hoodie.schema.avro_types import AvroType, parse_record
from hoodie.schema.java_text import java_double_text
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD
from hoodie.timeline.timeline import ActiveTimeline

if TYPE_CHECKING:
    from hoodie.table import HoodieTable

__all__ = [
    "SecondaryIndex",
    "column_values",
    "live_secondary_entries",
    "secondary_entries",
    "secondary_index_updates",
    "secondary_indexes",
    "shard_keys",
]

_SUPPORTED = {"string", "int", "long", "double", "boolean"}


@dataclass(frozen=True)
class SecondaryIndex:
    partition: str
    column: str


def secondary_indexes(table: HoodieTable, partitions: list[str]) -> list[SecondaryIndex]:
    """The secondary indexes among ``partitions``, each with its column; raises naming an index
    hts cannot keep current (no single identity source column, or a column type it refuses)."""
    wanted = [p for p in partitions if p.startswith(MetadataPartition.SECONDARY_PREFIX)]
    if not wanted:
        return []
    defs = table.index_definitions()
    schema = table.latest_schema_json()
    root = parse_record(schema) if schema else None
    out = []
    for partition in wanted:
        definition = defs.get(partition) or {}
        sources = definition.get("sourceFields") or []
        function = definition.get("indexFunction") or "identity"
        if len(sources) != 1 or function != "identity":
            raise UnsupportedTableError(
                f"{table.base_path}: secondary index {partition} has source fields {sources} and function "
                f"{function!r}; hts keeps single-column identity indexes only"
            )
        column = str(sources[0])
        value = _field_type(root, column)
        if value is None:
            raise UnsupportedTableError(
                f"{table.base_path}: secondary index {partition}: no column {column!r}"
            )
        if value.kind not in _SUPPORTED or value.logical == "decimal":
            raise UnsupportedTableError(
                f"{table.base_path}: secondary index {partition} is on {column!r} of Avro type "
                f"{value.kind}{'/' + value.logical if value.logical else ''}; hts keeps secondary indexes "
                "on string, int, long (dates, timestamps), double and boolean columns only"
            )
        out.append(SecondaryIndex(partition, column))
    return out


def _field_type(root: AvroType | None, column: str) -> AvroType | None:
    """The (non-null) type of ``column``, a dotted path into nested records; None if absent."""
    node = root
    for name in column.split("."):
        if node is None or node.kind != "record":
            return None
        node = next((f.type.non_null() for f in node.fields if f.name == name), None)
    return node


def column_values(data: pa.Table, column: str) -> pa.ChunkedArray:
    """The values of ``column`` in ``data``, a dotted path reaching into nested records (null
    where a record on the way is null, as Hudi's nested-field lookup gives)."""
    first, *rest = column.split(".")
    values = data.column(first)
    for name in rest:
        values = pc.struct_field(values, name)
    return values


def shards_by_value(table: HoodieTable, partition: str) -> bool:
    """Whether secondary index ``partition`` places entries by their value alone (index
    definition version V2, as Hudi 1.1 writes; V1 and definitions without a version hash the
    whole key)."""
    definition = table.index_definitions().get(partition) or {}
    return str(definition.get("version") or "V1").upper() >= "V2"


def shard_keys(table: HoodieTable, partition: str, keys: list[str]) -> list[str]:
    """The strings whose hash picks each key's file group in metadata partition ``partition``."""
    if partition.startswith(MetadataPartition.SECONDARY_PREFIX) and shards_by_value(table, partition):
        return [secondary_index_shard_key(k) for k in keys]
    return keys


def _texts(values: pa.Array | pa.ChunkedArray) -> list[str | None]:
    """Each value's text in a secondary-index key (None for null)."""
    if pa.types.is_timestamp(values.type) and values.type.unit in ("s", "ms"):
        values = values.cast(pa.timestamp("us", values.type.tz))  # Spark holds microseconds
    if pa.types.is_temporal(values.type):  # dates as days, timestamps as their long
        values = values.cast(pa.int32() if values.type.bit_width == 32 else pa.int64())
    if pa.types.is_floating(values.type):
        return [None if v is None else java_double_text(v) for v in values.to_pylist()]
    if pa.types.is_boolean(values.type):
        return [None if v is None else ("true" if v else "false") for v in values.to_pylist()]
    return [None if v is None else str(v) for v in values.to_pylist()]


def _values(
    table: HoodieTable, file_slice: FileSlice, opts: SliceReadOptions, columns: list[str]
) -> dict[str, list[str | None]]:
    """Record key -> the indexed columns' texts in one file slice."""
    data = read_slice(table.fileio, table.base_path, file_slice, opts)
    if data.num_rows == 0:
        return {}
    picked = [_texts(column_values(data, c)) for c in columns]
    keys = data.column(RECORD_KEY_METADATA_FIELD).to_pylist()
    return {str(k): [p[i] for p in picked] for i, k in enumerate(keys)}


def secondary_index_updates(
    table: HoodieTable,
    timeline: ActiveTimeline,
    instant_time: str,
    metadata: CommitMetadata,
    indexes: list[SecondaryIndex],
) -> dict[str, dict[str, Payload]]:
    """The entries a write commit changes in each secondary index (deletes before inserts)."""
    if not indexes:
        return {}
    view = table.file_system_view(timeline=timeline)
    columns = [i.column for i in indexes]
    schema = table_schema(table)
    merge = resolve_merge_config(table.config)
    on_read = schema_on_read(table, timeline)

    def opts(with_instant: bool) -> SliceReadOptions:
        return SliceReadOptions(
            schema=schema,
            merge=merge,
            table_version=table.table_version,
            is_committed=lambda ts: view.is_committed(ts) or (with_instant and ts == instant_time),
            latest_instant=instant_time if with_instant else None,
            on_read=on_read,
        )

    before_opts, after_opts = opts(False), opts(True)
    groups: dict[tuple[str, str], list[str]] = {}
    for stat in metadata.write_stats():
        if stat.file_id:
            name = (stat.path or "").rsplit("/", 1)[-1]
            groups.setdefault((stat.partition_path or "", stat.file_id), []).append(name)
    if isinstance(metadata, ReplaceCommitMetadata):
        for partition, file_id in metadata.replaced_file_ids():
            groups.setdefault((partition, file_id), [])
    latest = {
        (s.partition_path, s.file_id): s for p in {p for p, _ in groups} for s in view.latest_file_slices([p])
    }
    before: dict[str, list[str | None]] = {}
    after: dict[str, list[str | None]] = {}
    for (partition, file_id), names in groups.items():
        current = latest.get((partition, file_id))
        if current is not None:
            before.update(_values(table, current, before_opts, columns))
        if not names:  # replaced by an insert overwrite: its keys are gone
            continue
        new_base = next((b for n in names if (b := BaseFile.parse(n, 0)) is not None), None)
        new_logs = tuple(lf for n in names if (lf := LogFile.parse(n, 0)) is not None)
        if new_base is not None:
            written = FileSlice(partition, file_id, new_base.commit_time, new_base, ())
        else:
            base = current if current is not None else FileSlice(partition, file_id, instant_time, None, ())
            written = FileSlice(
                partition, file_id, base.base_instant_time, base.base_file, (*base.log_files, *new_logs)
            )
        after.update(_values(table, written, after_opts, columns))
    out: dict[str, dict[str, Payload]] = {}
    for position, index in enumerate(indexes):
        entries = out.setdefault(index.partition, {})
        for key, values in before.items():
            new = after.get(key)
            if new is None or new[position] != values[position]:
                entries[secondary_index_key(values[position], key)] = secondary_index_payload(deleted=True)
        for key, values in after.items():
            old = before.get(key)
            if old is None or old[position] != values[position]:
                entries[secondary_index_key(values[position], key)] = secondary_index_payload()
    return {p: e for p, e in out.items() if e}


def secondary_entries(keys: list[str], data: pa.Table, column: str) -> list[str]:
    """The entries of the records of ``data`` (with ``keys``) in an index on ``column``."""
    return [secondary_index_key(v, k) for k, v in zip(keys, _texts(column_values(data, column)), strict=True)]


def live_secondary_entries(snapshot: pa.Table, column: str) -> set[str]:
    """Every entry a secondary index on ``column`` holds for ``snapshot`` (for checks)."""
    keys = [str(k) for k in snapshot.column(RECORD_KEY_METADATA_FIELD).to_pylist()]
    return set(secondary_entries(keys, snapshot, column))
