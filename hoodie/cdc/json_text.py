"""The JSON text of CDC images, as Spark's CDC query prints them.

Two printers, because Hudi's reader uses two (``CDCFileGroupIterator``):

- images read from a CDC log in ``DATA_BEFORE_AFTER`` mode, and the before image of
  ``DATA_BEFORE``, go through Avro's ``GenericData.toString``: ``{"f": v, "g": w}`` with a space
  after each colon and comma; a missing image prints as the text ``null``;
- images read from data files (inferred changes, and the images ``OP_KEY_ONLY``/``DATA_BEFORE``
  look up) go through ``InternalRowToJsonStringConverter`` (Jackson): compact
  ``{"f":v,"g":w}``, meta columns left out; a missing image is SQL NULL.

Values are the raw Avro/Spark ones: timestamps as their long, dates as days. Decimals print as
plain numbers (UNCONFIRMED against Spark's printing of its ``Decimal``).
"""

from __future__ import annotations

import base64
import decimal
import math
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.schema.java_text import java_double_text, java_float_text

_AVRO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _avro_string(text: str) -> str:
    """Avro's ``writeEscapedString``: named escapes, ``\\uXXXX`` for other control characters."""
    out = []
    for ch in text:
        if ch in _AVRO_ESCAPES:
            out.append(_AVRO_ESCAPES[ch])
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or 0x2000 <= ord(ch) <= 0x20FF:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _jackson_string(text: str) -> str:
    out = []
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20:
            out.append(
                {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(ch, f"\\u{ord(ch):04X}")
            )
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class Float32(float):
    """A value of a ``float`` (32-bit) column: Java prints it with ``Float.toString``."""


def _number(value: float) -> str | None:
    if math.isnan(value) or math.isinf(value):
        return None
    return java_float_text(value) if isinstance(value, Float32) else java_double_text(value)


def avro_text(value: Any) -> str:
    """``GenericData.toString`` of a datum (records as dicts in field order)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = _number(value)
        return text if text is not None else f'"{java_double_text(value)}"'
    if isinstance(value, str):
        return _avro_string(value)
    if isinstance(value, bytes):
        return '{"bytes": ' + _avro_string(value.decode("latin-1")) + "}"
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_avro_string(str(k))}: {avro_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(avro_text(v) for v in value) + "]"
    return _avro_string(str(value))


def jackson_text(value: Any) -> str:
    """Jackson's compact JSON of a Spark value (binary as base64, NaN as a string)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = _number(value)
        return text if text is not None else f'"{java_double_text(value)}"'
    if isinstance(value, str):
        return _jackson_string(value)
    if isinstance(value, bytes):
        return '"' + base64.b64encode(value).decode() + '"'
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_jackson_string(str(k))}:{jackson_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(jackson_text(v) for v in value) + "]"
    return _jackson_string(str(value))


def _raw(arr: pa.Array) -> pa.Array:
    """Timestamps as their long and dates as days (the values Avro and Spark rows hold)."""
    t = arr.type
    if pa.types.is_timestamp(t):
        return pc.cast(arr, pa.int64())
    if pa.types.is_date32(t):
        return pc.cast(arr, pa.int32())
    if pa.types.is_struct(t):
        children = [_raw(arr.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(
            children, names=[t.field(i).name for i in range(t.num_fields)], mask=arr.is_null()
        )
    return arr


def _floats32(rows: list[dict[str, Any]], names: list[str]) -> None:
    for row in rows:
        for name in names:
            value = row.get(name)
            if value is not None:
                row[name] = Float32(value)


def image_values(table: pa.Table, columns: list[str]) -> list[dict[str, Any]]:
    """Rows of ``table`` (only ``columns``) as dicts of raw values, in column order."""
    arrays = []
    for name in columns:
        col = table[name]
        arrays.append(_raw(col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col))
    rows: list[dict[str, Any]] = pa.Table.from_arrays(arrays, names=columns).to_pylist()
    _floats32(rows, [n for n, a in zip(columns, arrays, strict=True) if pa.types.is_float32(a.type)])
    return rows


def struct_values(arr: pa.Array) -> list[dict[str, Any] | None]:
    """Values of a struct column (an image column of a CDC block), raw."""
    values: list[dict[str, Any] | None] = _raw(arr).to_pylist()
    t = arr.type
    floats = [t.field(i).name for i in range(t.num_fields) if pa.types.is_float32(t.field(i).type)]
    _floats32([v for v in values if v is not None], floats)
    return values
