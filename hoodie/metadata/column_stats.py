"""The metadata table's ``column_stats`` and ``partition_stats`` payloads, as Apache Hudi 1.x writes them.

A payload is a ``HoodieMetadataColumnStats`` dict in fastavro's reading convention (wrapped values
are ``(full wrapper name, {"value": v})``). Which columns, and how each value is wrapped, follow
Apache Hudi (paths in ``apache/hudi``):

* Columns (``ColumnStatsIndexer.getColumnsToIndex``): the ``sourceFields`` of the ``column_stats``
  index definition; by default the meta fields ``_hoodie_commit_time``, ``_hoodie_partition_path``,
  ``_hoodie_record_key`` (a sorted map), then the first 32 data columns whose type is supported.
* Base files (``ParquetUtils.readColumnStatsFromMetadata``): the Parquet footer as parquet-mr reads
  it, row groups merged; ``valueCount``/``totalSize``/``totalUncompressedSize`` are the chunk's
  value count and compressed/uncompressed sizes. parquet-mr's reader turns a float/double ``+0.0``
  minimum into ``-0.0``, a ``-0.0`` maximum into ``+0.0`` and drops NaN bounds; a chunk without
  min/max yields Java's primitive defaults (``0``, ``0.0``, ``false``) and ``null`` for binaries,
  which Hudi records as they are.
* Log files (``collectColumnRangeMetadata``): every record of the data blocks, compared the way
  Avro's ``GenericData.compare`` does; sizes are 0; a log without records has null bounds and zero
  counts (value type ``NULL`` in table version 9).
* Table version 8 (index version V1) wraps by the Java class of the value
  (``HoodieAvroWrapperUtils.wrapValueIntoAvro``): decimals become ``DecimalWrapper`` (decimal(30,15)),
  Parquet/Avro dates ``DateWrapper``, timestamps and times stay longs/ints. Table version 9 (index
  version V2, ``org.apache.hudi.stats.ValueType``) stores primitives plus ``valueType``: decimals are
  ``BytesWrapper`` of the unscaled two's-complement value with ``additionalInfo`` ``"p,s"``, dates
  ``IntWrapper`` of epoch days, timestamps ``LongWrapper`` in their own unit.
* Merging payloads and aggregating partitions: ``column_ranges``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.errors import SchemaError, UnsupportedTableError
from hoodie.file_group.log_block import BlockType
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import read_blocks
from hoodie.io.fileio import join
from hoodie.metadata.column_ranges import (
    V2_WRAPPERS,
    WRAPPER_NAMESPACE,
    ValueType,
    range_merge,
    signed_bytes_key,
)
from hoodie.read.slice_reader import decode_data_block
from hoodie.schema.avro_arrow import add_meta_fields
from hoodie.schema.avro_types import AvroType, arrow_field, parse_record
from hoodie.schema.meta_fields import (
    COMMIT_TIME_METADATA_FIELD,
    HOODIE_META_COLUMNS_WITH_OPERATION,
    PARTITION_PATH_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
)

if TYPE_CHECKING:
    import pyarrow.parquet as pqt

    from hoodie.io.fileio import FileIO
    from hoodie.table import HoodieTable

__all__ = [
    "ALWAYS_INDEXED_META_COLUMNS",
    "MAX_COLUMNS_TO_INDEX",
    "default_indexed_columns",
    "file_column_stats",
    "indexed_columns",
    "tombstone",
]

#: Meta fields always indexed when meta fields are populated, in Java's (sorted) map order.
ALWAYS_INDEXED_META_COLUMNS: Final = (
    COMMIT_TIME_METADATA_FIELD,
    PARTITION_PATH_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
)
#: ``hoodie.metadata.index.column.stats.max.columns.to.index`` default.
MAX_COLUMNS_TO_INDEX: Final = 32
_DECIMAL_MAX_PRECISION: Final = 30  # DecimalWrapper is decimal(30, 15)
_DECIMAL_MAX_SCALE: Final = 15
_SUPPORTED_VERSIONS: Final = (8, 9)


#: ``ValueType.fromSchema``: Avro logical types, then Avro kinds.
_TIMESTAMPS: Final = tuple(f"{p}timestamp-{u}" for p in ("", "local-") for u in ("millis", "micros", "nanos"))
_AVRO_LOGICAL_TYPES: Final = {
    name: ValueType[name.upper().replace("-", "_")]
    for name in ("date", "time-millis", "time-micros", "uuid", *_TIMESTAMPS)
}
_AVRO_KINDS: Final = {
    kind: ValueType[kind.upper()]
    for kind in ("null", "boolean", "int", "long", "float", "double", "string", "bytes", "fixed")
}


@dataclass(frozen=True, slots=True)
class _Typing:
    """How one column's values are wrapped: the wrapper and, in table version 9, the value type."""

    wrapper: str
    value_type: ValueType | None  # None: table version 8 (no valueType field)
    scale: int = 0
    precision: int = 0

    def value_type_info(self) -> dict[str, Any]:
        assert self.value_type is not None
        info = f"{self.precision},{self.scale}" if self.value_type is ValueType.DECIMAL else None
        return {"typeOrdinal": int(self.value_type), "additionalInfo": info}


def _check_version(table_version: int) -> bool:
    """True for index version V2 (valueType present), False for V1."""
    if table_version not in _SUPPORTED_VERSIONS:
        raise UnsupportedTableError(
            f"column stats of table version {table_version} are not supported (only {_SUPPORTED_VERSIONS})"
        )
    return table_version >= 9


# -- columns --------------------------------------------------------------------------------------


def _supported(node: AvroType) -> bool:
    """``isColumnTypeSupported`` for Avro records: no record/array/map/enum, decimals within (30,15)."""
    node = node.non_null()
    if node.logical == "decimal" and (
        node.precision + (_DECIMAL_MAX_SCALE - node.scale) > _DECIMAL_MAX_PRECISION
        or node.scale > _DECIMAL_MAX_SCALE
    ):
        return False
    return node.kind not in ("record", "array", "map", "enum", "union")


def default_indexed_columns(
    table_schema_json: Mapping[str, Any] | None,
    *,
    populate_meta_fields: bool = True,
    max_columns: int = MAX_COLUMNS_TO_INDEX,
) -> list[str]:
    """Hudi's default: the three meta fields, then the first ``max_columns`` supported data columns."""
    columns = list(ALWAYS_INDEXED_META_COLUMNS) if populate_meta_fields else []
    if table_schema_json is None:
        return columns
    skip = set(HOODIE_META_COLUMNS_WITH_OPERATION)
    data = [f for f in parse_record(table_schema_json).fields if f.name not in skip and _supported(f.type)]
    return columns + [f.name for f in data[:max_columns]]


def indexed_columns(table: HoodieTable) -> list[str]:
    """Columns Hudi indexes in ``column_stats``: the index definition's ``sourceFields``, else the default."""
    definition = table.index_definitions().get("column_stats")
    if definition is not None:
        return [str(c) for c in definition.get("sourceFields") or []]
    return default_indexed_columns(
        table.latest_schema_json(), populate_meta_fields=table.config.populate_meta_fields
    )


# -- wrapping -------------------------------------------------------------------------------------


def _java_bytes(value: int) -> bytes:
    """``BigInteger.toByteArray``: minimal big-endian two's complement."""
    size = ((value if value >= 0 else ~value).bit_length() + 8) // 8
    return value.to_bytes(size, "big", signed=True)


def _decimal_v1(unscaled: int, scale: int, column: str) -> Decimal:
    """The value of a ``DecimalWrapper``: the decimal moved to scale 15 without rounding."""
    if scale <= _DECIMAL_MAX_SCALE:
        at15 = unscaled * 10 ** (_DECIMAL_MAX_SCALE - scale)
    else:
        at15, rest = divmod(unscaled, 10 ** (scale - _DECIMAL_MAX_SCALE))
        if rest:
            raise SchemaError(f"column {column!r}: decimal of scale {scale} cannot be stored at scale 15")
    if len(str(abs(at15))) > _DECIMAL_MAX_PRECISION:
        raise SchemaError(f"column {column!r}: decimal {unscaled}e-{scale} exceeds precision 30 at scale 15")
    return Decimal(at15).scaleb(-_DECIMAL_MAX_SCALE)


def _wrap(typing: _Typing, value: Any, column: str) -> tuple[str, dict[str, Any]] | None:
    if value is None:
        return None
    if typing.wrapper == "DecimalWrapper":
        value = _decimal_v1(value, typing.scale, column)
    elif typing.value_type is ValueType.DECIMAL:
        value = _java_bytes(value)
    return WRAPPER_NAMESPACE + typing.wrapper, {"value": value}


def _payload(
    file_name: str,
    column: str,
    bounds: tuple[Any, Any],
    counts: tuple[int, int, int, int],
    typing: _Typing,
) -> dict[str, Any]:
    null_count, value_count, total_size, total_uncompressed = counts
    out: dict[str, Any] = {
        "fileName": file_name,
        "columnName": column,
        "minValue": _wrap(typing, bounds[0], column),
        "maxValue": _wrap(typing, bounds[1], column),
        "valueCount": value_count,
        "nullCount": null_count,
        "totalSize": total_size,
        "totalUncompressedSize": total_uncompressed,
        "isDeleted": False,
        "isTightBound": False,
    }
    if typing.value_type is not None:
        out["valueType"] = typing.value_type_info()
    return out


_EMPTY_V1: Final = _Typing("", None)
_EMPTY_V2: Final = _Typing("", ValueType.NULL)


# -- Parquet base files ---------------------------------------------------------------------------

#: What parquet-mr's ``genericGetMin()`` returns for statistics without min/max (Java field defaults).
_PHYSICAL_DEFAULTS: Final[dict[str, Any]] = dict(BOOLEAN=False, INT32=0, INT64=0, FLOAT=0.0, DOUBLE=0.0)
_TIME_UNITS: Final = {"milliseconds": 0, "microseconds": 1, "nanoseconds": 2}


def _utf8(raw: Any) -> str:
    return bytes(raw).decode("utf-8", "replace")


def _unscaled(raw: Any) -> int:
    return raw if isinstance(raw, int) else int.from_bytes(bytes(raw), "big", signed=True)


def _parquet_typing(col: pqt.ColumnSchema, v2: bool, where: str) -> tuple[_Typing, Callable[[Any], Any]]:
    """The wrapping of a Parquet leaf column and the conversion of its raw statistics values."""
    phys = col.physical_type
    ident: Callable[[Any], Any] = lambda raw: raw  # noqa: E731
    if not v2:  # ParquetUtils.convertToNativeJavaType, then wrap by Java class
        converted = col.converted_type
        if converted == "DECIMAL":
            return _Typing("DecimalWrapper", None, col.scale, col.precision), _unscaled
        if converted == "DATE":
            return _Typing("DateWrapper", None), ident
        if converted == "UTF8":
            return _Typing("StringWrapper", None), _utf8
        simple = {"BYTE_ARRAY": "BytesWrapper", "INT32": "IntWrapper", "INT64": "LongWrapper"}
        simple |= {"BOOLEAN": "BooleanWrapper", "FLOAT": "FloatWrapper", "DOUBLE": "DoubleWrapper"}
        if phys not in simple:
            raise SchemaError(f"{where}: Hudi cannot wrap {phys} column statistics (table version 8)")
        return _Typing(simple[phys], None), (bytes if phys == "BYTE_ARRAY" else ident)
    logical = json.loads(col.logical_type.to_json())
    kind = logical.get("Type", "None")
    vtype: ValueType
    convert = ident
    if kind == "None":  # ValueType.fromParquetPrimitiveType
        plain = {"INT64": ValueType.LONG, "INT32": ValueType.INT, "BOOLEAN": ValueType.BOOLEAN}
        plain |= {"BYTE_ARRAY": ValueType.BYTES, "FLOAT": ValueType.FLOAT, "DOUBLE": ValueType.DOUBLE}
        plain |= {"FIXED_LEN_BYTE_ARRAY": ValueType.FIXED}
        if phys not in plain:
            raise SchemaError(f"{where}: Hudi has no column-stats value type for {phys}")
        vtype = plain[phys]
        convert = bytes if vtype in (ValueType.BYTES, ValueType.FIXED) else ident
    elif kind == "String":
        vtype, convert = ValueType.STRING, _utf8
    elif kind == "Decimal":
        return _Typing("BytesWrapper", ValueType.DECIMAL, col.scale, col.precision), _unscaled
    elif kind == "Date":
        vtype = ValueType.DATE
    elif kind in ("Time", "Timestamp") and logical.get("timeUnit") in _TIME_UNITS:
        unit = _TIME_UNITS[logical["timeUnit"]]
        if kind == "Time":
            if unit == 2:
                raise SchemaError(f"{where}: Hudi does not support nanosecond TIME column statistics")
            vtype = (ValueType.TIME_MILLIS, ValueType.TIME_MICROS)[unit]
        else:
            utc = bool(logical.get("isAdjustedToUTC"))
            vtype = ValueType(
                (ValueType.TIMESTAMP_MILLIS if utc else ValueType.LOCAL_TIMESTAMP_MILLIS) + unit
            )
    else:
        raise SchemaError(f"{where}: Hudi does not support {kind} column statistics (table version 9)")
    return _Typing(V2_WRAPPERS[vtype], vtype), convert


def _chunk_payload(
    file_name: str, chunk: pqt.ColumnChunkMetaData, col: pqt.ColumnSchema, v2: bool, where: str
) -> dict[str, Any]:
    typing, convert = _parquet_typing(col, v2, where)
    phys = col.physical_type
    stats = chunk.statistics if chunk.is_stats_set else None
    has_values = stats is not None and stats.has_min_max
    if stats is not None and has_values:
        lo, hi = stats.min_raw, stats.max_raw
        if phys in ("FLOAT", "DOUBLE"):  # parquet-mr Statistics.getBuilderForReading
            if math.isnan(lo) or math.isnan(hi):
                lo, hi, has_values = 0.0, 0.0, False
            else:
                lo = -0.0 if lo == 0.0 else lo
                hi = 0.0 if hi == 0.0 else hi
    else:  # genericGetMin() of statistics without min/max: Java's field defaults
        lo = hi = _PHYSICAL_DEFAULTS.get(phys)
    lo = None if lo is None else convert(lo)
    hi = None if hi is None else convert(hi)
    nulls_set = stats is not None and stats.has_null_count
    if not has_values and not nulls_set:  # Statistics.isEmpty()
        null_count = chunk.num_values
    else:
        null_count = stats.null_count if nulls_set and stats is not None else -1
    counts = (null_count, chunk.num_values, chunk.total_compressed_size, chunk.total_uncompressed_size)
    return _payload(file_name, chunk.path_in_schema, (lo, hi), counts, typing)


def _parquet_stats(
    fileio: FileIO, path: str, file_name: str, columns: Sequence[str], v2: bool
) -> list[dict[str, Any]]:
    with fileio.open_input(path) as f:
        meta = pq.ParquetFile(f).metadata
    return _footer_stats(meta, path, file_name, columns, v2)


def footer_column_stats(
    footer: pq.FileMetaData, file_name: str, columns: Sequence[str], *, table_version: int
) -> list[dict[str, Any]]:
    """:func:`file_column_stats` of a base file from its footer as the writer wrote it."""
    return _footer_stats(footer, file_name, file_name, columns, _check_version(table_version))


def _footer_stats(
    meta: pq.FileMetaData, path: str, file_name: str, columns: Sequence[str], v2: bool
) -> list[dict[str, Any]]:
    wanted = set(columns)
    merged: dict[str, dict[str, Any]] = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for i in range(group.num_columns):
            chunk = group.column(i)
            name = chunk.path_in_schema
            if name not in wanted:
                continue
            payload = _chunk_payload(file_name, chunk, meta.schema.column(i), v2, f"{path} column {name!r}")
            merged[name] = range_merge(merged[name], payload) if name in merged else payload
    return [merged[c] for c in columns if c in merged]


# -- log files ------------------------------------------------------------------------------------


def _avro_typing(node: AvroType, v2: bool, column: str) -> _Typing:
    if node.logical == "decimal":
        if v2:
            return _Typing("BytesWrapper", ValueType.DECIMAL, node.scale, node.precision)
        return _Typing("DecimalWrapper", None, node.scale, node.precision)
    if v2:  # ValueType.fromSchema
        vtype = _AVRO_LOGICAL_TYPES.get(node.logical or "") or _AVRO_KINDS.get(node.kind)
        if vtype is None:
            raise SchemaError(f"column {column!r}: Hudi has no column-stats value type for Avro {node.kind}")
        return _Typing(V2_WRAPPERS.get(vtype, ""), vtype)
    if node.logical == "date":
        return _Typing("DateWrapper", None)
    if node.kind == "fixed":
        raise SchemaError(f"column {column!r}: Hudi cannot wrap Avro fixed statistics (table version 8)")
    simple = {"boolean": "BooleanWrapper", "int": "IntWrapper", "long": "LongWrapper"}
    simple |= {"float": "FloatWrapper", "double": "DoubleWrapper"}
    simple |= {"string": "StringWrapper", "bytes": "BytesWrapper"}
    return _Typing(simple.get(node.kind, ""), None)


def _java_float_bounds(values: np.ndarray) -> tuple[float, float]:
    """Min and max under ``Double.compare``: NaN above everything, ``-0.0`` below ``+0.0``."""
    nan = np.isnan(values)
    finite = values[~nan]
    if finite.size == 0:
        return math.nan, math.nan
    lo, hi = float(finite.min()), float(finite.max())
    if lo == 0.0:
        lo = -0.0 if bool(np.signbit(finite[finite == 0]).any()) else 0.0
    if hi == 0.0:
        hi = 0.0 if bool((~np.signbit(finite[finite == 0])).any()) else -0.0
    return lo, (math.nan if bool(nan.any()) else hi)


def _decimal_unscaled(value: Decimal, scale: int) -> int:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    magnitude = int("".join(map(str, digits)) or "0") * 10 ** (exponent + scale)
    return int(-magnitude if sign else magnitude)


def _column_bounds(arr: pa.ChunkedArray, node: AvroType) -> tuple[Any, Any]:
    """Min and max of the non-null values, as ``GenericData.compare`` orders them."""
    values = arr.drop_null()
    if len(values) == 0:
        return None, None
    typ = values.type
    if node.logical == "decimal":
        bounds = pc.min_max(values)
        return _decimal_unscaled(bounds["min"].as_py(), node.scale), _decimal_unscaled(
            bounds["max"].as_py(), node.scale
        )
    if pa.types.is_floating(typ):
        return _java_float_bounds(values.to_numpy())
    if pa.types.is_binary(typ) or pa.types.is_fixed_size_binary(typ):
        items = values.to_pylist()
        key: Callable[[bytes], bytes] = signed_bytes_key if node.kind == "bytes" else bytes
        return min(items, key=key), max(items, key=key)
    if pa.types.is_temporal(typ):
        values = values.cast(pa.int32() if typ.bit_width == 32 else pa.int64())
    bounds = pc.min_max(values)
    return bounds["min"].as_py(), bounds["max"].as_py()


def _log_stats(
    fileio: FileIO,
    path: str,
    file_name: str,
    columns: Sequence[str],
    table_schema_json: Mapping[str, Any],
    v2: bool,
) -> list[dict[str, Any]]:
    fields, present, schema = _log_columns(columns, table_schema_json)
    blocks = read_blocks(fileio.read_bytes(path), path)
    rolled_back = {b.target_instant_time for b in blocks if b.is_rollback}
    data = [
        b
        for b in blocks
        if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA) and b.instant_time not in rolled_back
    ]
    parts = [decode_data_block(b, schema) for b in data]
    table = pa.concat_tables(parts) if parts else schema.empty_table()
    return _records_stats(table, file_name, fields, present, v2)


def _log_columns(
    columns: Sequence[str], table_schema_json: Mapping[str, Any]
) -> tuple[dict[str, AvroType], list[str], pa.Schema]:
    return _parsed_log_columns(tuple(columns), json.dumps(table_schema_json, sort_keys=True))


@lru_cache(maxsize=64)  # one schema for every file of a commit
def _parsed_log_columns(
    columns: tuple[str, ...], schema_text: str
) -> tuple[dict[str, AvroType], list[str], pa.Schema]:
    record = parse_record(add_meta_fields(json.loads(schema_text)))
    fields = {f.name: f.type for f in record.fields}
    present = [c for c in columns if c in fields]
    return fields, present, pa.schema([arrow_field(c, fields[c]) for c in present])


def log_records_stats(
    records: pa.Table,
    file_name: str,
    columns: Sequence[str],
    table_schema_json: Mapping[str, Any],
    *,
    table_version: int,
) -> list[dict[str, Any]]:
    """:func:`file_column_stats` of a log file whose single data block holds ``records`` (the
    writer has them in memory: reading the file back would decode them again)."""
    v2 = _check_version(table_version)
    fields, present, schema = _log_columns(columns, table_schema_json)
    table = records.select(present).cast(schema)
    return _records_stats(table, file_name, fields, present, v2)


def _records_stats(
    table: pa.Table, file_name: str, fields: Mapping[str, AvroType], present: Sequence[str], v2: bool
) -> list[dict[str, Any]]:
    rows = table.num_rows
    out: list[dict[str, Any]] = []
    for column in present:
        if rows == 0:  # HoodieColumnRangeMetadata.createEmpty
            empty = _EMPTY_V2 if v2 else _EMPTY_V1
            out.append(_payload(file_name, column, (None, None), (0, 0, 0, 0), empty))
            continue
        value_node = fields[column].non_null()
        typing = _avro_typing(value_node, v2, column)
        arr = table.column(column)
        if _supported(value_node):
            bounds, nulls = _column_bounds(arr, value_node), arr.null_count
        else:  # unsupported values count as nulls
            bounds, nulls = (None, None), rows
        out.append(_payload(file_name, column, bounds, (nulls, rows, 0, 0), typing))
    return out


def file_column_stats(
    fileio: FileIO,
    base_path: str,
    partition_path: str,
    file_name: str,
    columns: Sequence[str],
    table_schema_json: dict[str, Any],
    *,
    table_version: int,
) -> list[dict[str, Any]]:
    """One ``HoodieMetadataColumnStats`` dict per column for one data file (base ``.parquet`` or log file).

    ``table_schema_json`` is the table's Avro schema (meta fields optional): log records are read
    with it, and it types their values. Columns the file does not have are left out, as Hudi does.
    """
    v2 = _check_version(table_version)
    path = join(base_path, partition_path, file_name) if partition_path else join(base_path, file_name)
    if file_name.endswith(".parquet"):
        return _parquet_stats(fileio, path, file_name, columns, v2)
    if LogFile.parse(file_name) is not None:
        return _log_stats(fileio, path, file_name, columns, table_schema_json, v2)
    raise UnsupportedTableError(f"{path}: column stats exist only for .parquet base files and log files")


def partition_tombstone(column: str, *, table_version: int = 9) -> dict[str, Any]:
    """The partition stats of a partition a DELETE_PARTITION dropped: ``HoodieColumnRangeMetadata.stub``
    with an empty file name, ``isDeleted`` and ``isTightBound`` (HoodieTableMetadataUtil's partition
    stats of a delete-partition commit, HoodieMetadataPayload.createPartitionStatsRecords)."""
    v2 = _check_version(table_version)
    out = _payload("", column, (None, None), (-1, -1, -1, -1), _EMPTY_V2 if v2 else _EMPTY_V1)
    out["isDeleted"] = True
    out["isTightBound"] = True
    return out


def tombstone(partition_path: str, file_name: str, column: str, *, table_version: int = 9) -> dict[str, Any]:
    """The stats of a deleted file (``HoodieColumnRangeMetadata.stub``, ``isDeleted=true``).

    Hudi 1.x writes a payload with ``isDeleted`` as a delete of its key (``HoodieMetadataPayload``
    marks it ``isDeletedRecord``); ``partition_path`` only goes into that key.
    """
    if not file_name or "/" in file_name:
        raise ValueError(f"not a file name in partition {partition_path!r}: {file_name!r}")
    v2 = _check_version(table_version)
    out = _payload(file_name, column, (None, None), (-1, -1, -1, -1), _EMPTY_V2 if v2 else _EMPTY_V1)
    out["isDeleted"] = True
    return out
