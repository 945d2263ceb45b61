"""Writing log blocks and log files.

Data blocks carry the writer schema (meta fields included) in their SCHEMA header; Avro blocks
hold Avro binary datums, Parquet blocks a whole Parquet file. Delete blocks hold a
``HoodieDeleteRecordList`` whose ordering values use Hudi's wrapper unions (``IntWrapper(0)`` is
the default ordering value SQL DELETE writes).
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import SchemaError, UnsupportedTableError
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.merge.vectorized import arrow_family
from hoodie.models.codec import load_schema
from hoodie.schema.avro_arrow import encode_avro_block_content

DELETE_BLOCK_VERSION = 3
WRAPPER_NAMESPACE = "org.apache.hudi.avro.model."
_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def avro_data_block(table: pa.Table, writer_schema: Mapping[str, Any], instant_time: str) -> bytes:
    """An AVRO_DATA block of ``table``'s rows."""
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.SCHEMA: json.dumps(writer_schema, separators=(",", ":")),
    }
    return encode_block(BlockType.AVRO_DATA, header, encode_avro_block_content(table, writer_schema))


def parquet_data_block(
    table: pa.Table, writer_schema: Mapping[str, Any], instant_time: str, compression: str = "gzip"
) -> bytes:
    """A PARQUET_DATA block of ``table``'s rows (the content is a complete Parquet file)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, compression=compression, use_compliant_nested_type=True)
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.SCHEMA: json.dumps(writer_schema, separators=(",", ":")),
    }
    return encode_block(BlockType.PARQUET_DATA, header, sink.getvalue())


def _wrapper(value: Any, arrow_type: pa.DataType | None) -> tuple[str, dict[str, Any]] | None:
    """Hudi's ordering-value wrapper for ``value`` of a column of ``arrow_type``."""
    if value is None:
        return None
    t = arrow_type
    if t is None:
        if isinstance(value, bool):
            return (WRAPPER_NAMESPACE + "BooleanWrapper", {"value": value})
        if isinstance(value, int):
            return (
                (WRAPPER_NAMESPACE + "LongWrapper", {"value": value})
                if abs(value) >= 2**31
                else (WRAPPER_NAMESPACE + "IntWrapper", {"value": value})
            )
        if isinstance(value, float):
            return (WRAPPER_NAMESPACE + "DoubleWrapper", {"value": value})
        return (WRAPPER_NAMESPACE + "StringWrapper", {"value": str(value)})
    if pa.types.is_boolean(t):
        return (WRAPPER_NAMESPACE + "BooleanWrapper", {"value": bool(value)})
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return (WRAPPER_NAMESPACE + "IntWrapper", {"value": int(value)})
    if pa.types.is_integer(t):
        return (WRAPPER_NAMESPACE + "LongWrapper", {"value": int(value)})
    if pa.types.is_float32(t):
        return (WRAPPER_NAMESPACE + "FloatWrapper", {"value": float(value)})
    if pa.types.is_floating(t):
        return (WRAPPER_NAMESPACE + "DoubleWrapper", {"value": float(value)})
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return (WRAPPER_NAMESPACE + "StringWrapper", {"value": str(value)})
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return (WRAPPER_NAMESPACE + "BytesWrapper", {"value": bytes(value)})
    if pa.types.is_date(t):
        days = (value - _EPOCH_DATE).days if isinstance(value, dt.date) else int(value)
        return (WRAPPER_NAMESPACE + "DateWrapper", {"value": days})
    if pa.types.is_decimal(t):
        return (
            WRAPPER_NAMESPACE + "DecimalWrapper",
            {"value": decimal.Decimal(value).quantize(decimal.Decimal(1).scaleb(-15))},
        )
    if pa.types.is_timestamp(t):
        if isinstance(value, dt.datetime):
            moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
            micros = (moment - _EPOCH) // dt.timedelta(microseconds=1)
        else:
            micros = int(value)
        return (WRAPPER_NAMESPACE + "TimestampMicrosWrapper", {"value": micros})
    raise SchemaError(f"ordering values of type {t} cannot be written to a delete block")


DEFAULT_ORDERING = (WRAPPER_NAMESPACE + "IntWrapper", {"value": 0})


def delete_block_content(
    keys: Sequence[str],
    partitions: Sequence[str],
    ordering_values: Sequence[Any] | None,
    ordering_type: pa.DataType | None,
    table_version: int,
) -> bytes:
    """The content of a DELETE block; ``ordering_values`` None writes the default ``IntWrapper(0)``."""
    records = []
    for i, key in enumerate(keys):
        ordering: Any = DEFAULT_ORDERING
        if ordering_values is not None:
            wrapped = _wrapper(ordering_values[i], ordering_type)
            ordering = DEFAULT_ORDERING if wrapped is None else wrapped
        records.append({"recordKey": key, "partitionPath": partitions[i], "orderingVal": ordering})
    schema = fastavro.parse_schema(load_schema("HoodieDeleteRecordList", table_version))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {"deleteRecordList": records})
    payload = buf.getvalue()
    return struct.pack(">ii", DELETE_BLOCK_VERSION, len(payload)) + payload


def delete_block(
    keys: Sequence[str],
    partitions: Sequence[str],
    ordering_values: Sequence[Any] | None,
    ordering_type: pa.DataType | None,
    instant_time: str,
    writer_schema: Mapping[str, Any],
    table_version: int,
) -> bytes:
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.SCHEMA: json.dumps(writer_schema, separators=(",", ":")),
    }
    content = delete_block_content(keys, partitions, ordering_values, ordering_type, table_version)
    return encode_block(BlockType.DELETE, header, content)


ORDERING_WRAPPERS = {  # Hudi's Avro wrapper of an ordering value, by the value's Arrow family
    "bool": "BooleanWrapper",
    "int": "IntWrapper",
    "long": "LongWrapper",
    "float": "FloatWrapper",
    "double": "DoubleWrapper",
    "string": "StringWrapper",
    "bytes": "BytesWrapper",
    "date": "DateWrapper",
    "decimal": "DecimalWrapper",
    "timestamp": "TimestampMicrosWrapper",
}


def ordering_wrappers(column: pa.ChunkedArray) -> list[tuple[str, dict[str, Any]] | None]:
    """Hudi's ordering-value wrapper of each value of ``column`` (None where it is null)."""
    family = arrow_family(column.type)
    wrapper = ORDERING_WRAPPERS.get(family)
    if wrapper is None:
        raise UnsupportedTableError(
            f"ordering values of type {column.type} cannot be written to a delete block"
        )
    if family == "date":
        column = column.cast(pa.date32()).cast(pa.int32())  # days since the epoch
    elif family == "timestamp":
        column = column.cast(pa.timestamp("us", column.type.tz)).cast(pa.int64())  # micros
    elif family == "decimal":
        column = column.cast(pa.decimal128(30, 15))  # DecimalWrapper's precision and scale
    return [None if v is None else (WRAPPER_NAMESPACE + wrapper, {"value": v}) for v in column.to_pylist()]
