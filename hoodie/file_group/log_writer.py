"""Writing log blocks and log files.

Data blocks carry the writer schema (meta fields included) in their SCHEMA header; Avro blocks
hold Avro binary datums, Parquet blocks a whole Parquet file. Delete blocks hold a
``HoodieDeleteRecordList`` whose ordering values use Hudi's wrapper unions (``IntWrapper(0)`` is
the default ordering value SQL DELETE writes).
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import UnsupportedTableError
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.merge.log_entries import arrow_family
from hoodie.models.codec import load_schema
from hoodie.schema.avro_arrow import encode_avro_block_content

DELETE_BLOCK_VERSION = 3
WRAPPER_NAMESPACE = "org.apache.hudi.avro.model."


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


OrderingWrapper = tuple[str, dict[str, Any]]
"""An ordering value in Hudi's Avro wrapper: the wrapper's full name and its record."""

DEFAULT_ORDERING: OrderingWrapper = (WRAPPER_NAMESPACE + "IntWrapper", {"value": 0})


def delete_block_content(
    keys: Sequence[str],
    partitions: Sequence[str],
    ordering: Sequence[OrderingWrapper | None] | None,
    table_version: int,
) -> bytes:
    """The content of a DELETE block; a missing ordering value is the default ``IntWrapper(0)``
    (``ordering`` holds :func:`ordering_wrappers`)."""
    records = [
        {
            "recordKey": key,
            "partitionPath": partitions[i],
            "orderingVal": (ordering[i] if ordering is not None else None) or DEFAULT_ORDERING,
        }
        for i, key in enumerate(keys)
    ]
    schema = fastavro.parse_schema(load_schema("HoodieDeleteRecordList", table_version))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {"deleteRecordList": records})
    payload = buf.getvalue()
    return struct.pack(">ii", DELETE_BLOCK_VERSION, len(payload)) + payload


def delete_block(
    keys: Sequence[str],
    partitions: Sequence[str],
    ordering: Sequence[OrderingWrapper | None] | None,
    instant_time: str,
    writer_schema: Mapping[str, Any],
    table_version: int,
) -> bytes:
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.SCHEMA: json.dumps(writer_schema, separators=(",", ":")),
    }
    return encode_block(
        BlockType.DELETE, header, delete_block_content(keys, partitions, ordering, table_version)
    )


ORDERING_WRAPPERS = {  # Hudi's Avro wrapper of an ordering value, by the value's Arrow family
    "bool": "BooleanWrapper",
    "int": "IntWrapper",
    "long": "LongWrapper",
    "float": "FloatWrapper",
    "double": "DoubleWrapper",
    "string": "StringWrapper",
    "bytes": "BytesWrapper",
    "date": "IntWrapper",  # days: Spark's rows hold a date as an Integer
    "decimal": "DecimalWrapper",
    "timestamp": "LongWrapper",  # microseconds: Spark's rows hold a timestamp as a Long
}


def ordering_wrappers(column: pa.ChunkedArray | pa.Array) -> list[OrderingWrapper | None]:
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


def ordering_array_wrappers(columns: Sequence[pa.ChunkedArray | pa.Array]) -> list[OrderingWrapper | None]:
    """The ordering value of each row of several ordering fields (1.1), as Hudi writes a delete's:
    an ``ArrayWrapper`` of each field's wrapper (``HoodieAvroUtils.wrapValueIntoAvro`` of an
    ``ArrayComparable``), a null field being the default ``IntWrapper(0)`` (``OrderingValues``)."""
    per_field = [ordering_wrappers(c) for c in columns]
    return [
        (WRAPPER_NAMESPACE + "ArrayWrapper", {"wrappedValues": [w or DEFAULT_ORDERING for w in row]})
        for row in zip(*per_field, strict=True)
    ]
