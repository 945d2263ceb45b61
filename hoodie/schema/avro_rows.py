"""The per-record Avro codec (fastavro): the fallback of the vectorized codec, and its oracle.

fastavro reads and writes the *physical* values (the schema's logical types stripped), so no
Python ``datetime``/``Decimal`` objects are made and no value is limited to their ranges. Arrow
does the logical conversion, with the same vectorized helpers the fast path uses.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

from hoodie.schema.avro_types import (
    AvroType,
    arrow_field,
    arrow_type,
    decimal_from_be_binary,
    decimal_from_be_matrix,
    decimal_minimal_lengths,
    decimal_to_be_matrix,
    validity_buffer,
)


def _strip_logical(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_logical(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_strip_logical(s) for s in schema]
    return schema


@lru_cache(maxsize=64)
def _physical_schema(text: str) -> Any:
    return fastavro.parse_schema(_strip_logical(json.loads(text)))


def _mask(arr: pa.Array) -> pa.Array | None:
    return arr.is_null() if arr.null_count else None


def _valid(arr: pa.Array) -> np.ndarray | None:
    return np.asarray(arr.is_valid()) if arr.null_count else None


def _has_logical(node: AvroType) -> bool:
    if node.logical is not None or node.kind in ("enum", "map"):
        return True
    return any(_has_logical(child) for child in _children(node))


def _children(node: AvroType) -> list[AvroType]:
    if node.kind == "record":
        return [f.type for f in node.fields]
    if node.kind == "union":
        return list(node.branches)
    if node.kind in ("array", "map"):
        return [node.child]
    return []


def from_physical(node: AvroType, arr: pa.Array) -> pa.Array:
    """An array of the physical Arrow type of ``node`` as its logical Arrow type."""
    node = node.non_null()
    target = arrow_type(node)
    if arr.type == target and not _has_logical(node):
        return arr
    kind, logical = node.kind, node.logical
    if kind == "record":
        children = [from_physical(f.type, arr.field(i)) for i, f in enumerate(node.fields)]
        if not children:
            return arr
        fields = [arrow_field(f.name, f.type) for f in node.fields]
        return pa.StructArray.from_arrays(children, fields=fields, mask=_mask(arr))
    if kind == "array":
        values = from_physical(node.child, arr.values)
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=_mask(arr))
    if kind == "map":
        items = from_physical(node.child, arr.items)
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, type=target, mask=_mask(arr))
    if logical == "decimal" and kind == "fixed":
        width = node.size
        data = arr.buffers()[1]
        matrix = np.frombuffer(data, np.uint8, len(arr) * width, arr.offset * width).reshape(-1, width)
        return decimal_from_be_matrix(matrix, node.precision, node.scale, _valid(arr))
    if logical == "decimal":
        return decimal_from_be_binary(arr, node.precision, node.scale)
    if kind in ("int", "long") and logical is not None:
        return arr.view(target)
    return arr.cast(target)


def to_physical(node: AvroType, arr: pa.Array) -> pa.Array:
    """An array of the logical Arrow type of ``node`` as its physical Arrow type."""
    node = node.non_null()
    target = arrow_type(node, raw=True)
    if arr.type == target and not _has_logical(node):
        return arr
    kind, logical = node.kind, node.logical
    if kind == "record":
        children = [to_physical(f.type, arr.field(i)) for i, f in enumerate(node.fields)]
        if not children:
            return arr
        fields = [arrow_field(f.name, f.type, raw=True) for f in node.fields]
        return pa.StructArray.from_arrays(children, fields=fields, mask=_mask(arr))
    if kind == "array":
        values = to_physical(node.child, arr.values)
        return pa.ListArray.from_arrays(arr.offsets, values, type=target, mask=_mask(arr))
    if kind == "map":
        items = to_physical(node.child, arr.items)
        return pa.MapArray.from_arrays(arr.offsets, arr.keys, items, type=target, mask=_mask(arr))
    if logical == "decimal":
        size = node.size if kind == "fixed" else arr.type.byte_width
        matrix = decimal_to_be_matrix(arr, size, "decimal")
        if kind == "fixed":
            buffers = [validity_buffer(_valid(arr)), pa.py_buffer(matrix)]
            return pa.Array.from_buffers(target, len(arr), buffers)
        lengths = decimal_minimal_lengths(matrix)
        rows = [bytes(row[size - n :]) for row, n in zip(matrix, lengths, strict=True)]
        return pa.array(rows, pa.binary(), mask=np.asarray(arr.is_null()))
    if kind in ("int", "long") and logical is not None:
        return arr.view(target)
    return arr.cast(target)


def decode_rows(
    payload: bytes | memoryview,
    starts: np.ndarray,
    ends: np.ndarray,
    record: AvroType,
    *,
    writer_json: str,
    wanted: frozenset[str],
) -> dict[str, list[pa.Array]]:
    """Decode each datum with fastavro; same result shape as the vectorized decoder."""
    schema = _physical_schema(writer_json)
    view = memoryview(payload)
    rows: list[dict[str, Any]] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        stream = io.BytesIO(view[start:end])
        row: dict[str, Any] = fastavro.schemaless_reader(stream, schema, None)  # type: ignore[assignment]
        rows.append(row)
        if stream.tell() != end - start:
            raise ValueError(f"Avro datum at byte {start} does not end at its recorded length")
    columns: dict[str, list[pa.Array]] = {}
    for field in record.fields:
        if field.name in wanted:
            physical = pa.array([row[field.name] for row in rows], arrow_type(field.type, raw=True))
            columns[field.name] = [from_physical(field.type, physical)]
    return columns


def _python(node: AvroType, value: Any) -> Any:
    """Arrow's Python value as fastavro wants it (maps as dicts)."""
    if value is None:
        return None
    node = node.non_null()
    if node.kind == "record":
        return {f.name: _python(f.type, value[f.name]) for f in node.fields}
    if node.kind == "array":
        return [_python(node.child, v) for v in value]
    if node.kind == "map":
        return {k: _python(node.child, v) for k, v in value}
    return value


def encode_rows(table: pa.Table, record: AvroType, writer_json: str) -> list[bytes]:
    """Encode each row with fastavro. ``table`` holds the record's fields as its Arrow types."""
    schema = _physical_schema(writer_json)
    columns = []
    for field in record.fields:
        physical = to_physical(field.type, table.column(field.name).combine_chunks())
        values = physical.to_pylist()
        if _has_collections(field.type):
            values = [_python(field.type, v) for v in values]
        columns.append(values)
    names = [f.name for f in record.fields]
    out = []
    for row in zip(*columns, strict=True) if columns else ([()] * table.num_rows):
        stream = io.BytesIO()
        fastavro.schemaless_writer(stream, schema, dict(zip(names, row, strict=True)))
        out.append(stream.getvalue())
    return out


def _has_collections(node: AvroType) -> bool:
    return node.kind == "map" or any(_has_collections(c) for c in _children(node))
