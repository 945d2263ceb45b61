"""Avro <-> Arrow: table schemas as Hudi writes them, and the record codec of Avro log blocks.

Schemas
    :func:`avro_to_arrow_schema` gives the Arrow schema a reader sees (the types of the
    Spark-written Parquet base files). :func:`arrow_to_avro_schema` gives the Avro schema Hudi
    writes: record ``<table>_record`` in namespace ``hoodie.<table>``, nested records and decimal
    ``fixed`` types named the way Spark's ``SchemaConverters`` names them, nullable fields as
    ``["null", T]`` with ``"default": null`` (commit metadata, log block headers) or as
    ``[T, "null"]`` (``hoodie.table.create.schema``), see :class:`NullOrder`.

Records
    An Avro data block (content version 3) is ``int32 3, int32 count`` then ``count`` times
    ``int32 length, datum``. :func:`decode_avro_block_content` / :func:`decode_avro_records`
    decode datums into an Arrow table of a target schema (missing fields become nulls, extra
    fields are dropped, types are promoted as Hudi allows, see :func:`conform`);
    :func:`encode_avro_block_content` /
    :func:`encode_avro_records` do the reverse. Both run vectorized over all records
    (:mod:`hoodie.schema.avro_decoder`, :mod:`hoodie.schema.avro_encoder`), with a per-record
    fastavro path as the fallback (``vectorized=False`` forces it).
"""

from __future__ import annotations

import enum
import json
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import numpy as np
import pyarrow as pa

from hoodie.errors import CorruptFileError, SchemaError
from hoodie.schema import avro_rows
from hoodie.schema.avro_decoder import Unsupported, decode_datums
from hoodie.schema.avro_encoder import encode_datums
from hoodie.schema.avro_types import (
    AvroType,
    arrow_field,
    arrow_type,
    decimal_fixed_size,
    parse_record,
    schema_json,
)
from hoodie.schema.java_text import java_double_text, java_float_text
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS
from hoodie.schema.meta_fields import HOODIE_META_COLUMNS as META_FIELDS  # the name tests import

__all__ = [
    "AVRO_BLOCK_VERSION",
    "META_FIELDS",
    "NullOrder",
    "add_meta_fields",
    "arrow_to_avro_schema",
    "avro_to_arrow_schema",
    "conform",
    "decimal_fixed_size",
    "decode_avro_block_content",
    "decode_avro_records",
    "encode_avro_block_content",
    "encode_avro_records",
    "promotion",
    "schema_to_json",
]

#: The content version of Avro data blocks written by every supported table version.
AVRO_BLOCK_VERSION: Final = 3

_ENCODE_ROWS = 65536
_I32 = struct.Struct(">i")
_HEADER = struct.Struct(">ii")
_CORRUPT: Final = (EOFError, IndexError, ValueError, OverflowError, struct.error, pa.ArrowException)


class NullOrder(enum.Enum):
    """Where ``null`` goes in the union of a nullable field."""

    #: ``["null", T]`` with ``"default": null``: commit metadata and log block SCHEMA headers.
    FIRST = "first"
    #: ``[T, "null"]`` without a default: ``hoodie.table.create.schema`` (Spark's converter).
    LAST = "last"


# -- schemas ------------------------------------------------------------------------------------


def avro_to_arrow_schema(avro: Mapping[str, Any] | str) -> pa.Schema:
    """The Arrow schema of the Avro record schema ``avro`` (JSON text or parsed JSON)."""
    record = parse_record(avro)
    return pa.schema([arrow_field(f.name, f.type) for f in record.fields])


def _meta_field(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def add_meta_fields(avro: Mapping[str, Any] | str) -> dict[str, Any]:
    """``avro`` with the five meta fields first (any meta fields it had are replaced)."""
    if isinstance(avro, str):
        text = avro
        try:
            avro = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"Avro schema is not valid JSON ({exc}): {text[:200]!r}") from exc
    fields = avro.get("fields") if isinstance(avro, Mapping) else None
    if not isinstance(avro, Mapping) or avro.get("type") != "record" or not isinstance(fields, list):
        raise SchemaError(f"expected an Avro record schema, got {json.dumps(avro)[:200]!r}")
    kept = [f for f in fields if f.get("name") not in HOODIE_META_COLUMNS]
    out = dict(avro)
    out["fields"] = [_meta_field(name) for name in HOODIE_META_COLUMNS] + kept
    return out


def schema_to_json(avro: Mapping[str, Any]) -> str:
    """Compact JSON, as Java's ``Schema.toString()`` prints it (the form Hudi stores)."""
    return json.dumps(avro, separators=(",", ":"), ensure_ascii=False)


def arrow_to_avro_schema(
    schema: pa.Schema, record_name: str, namespace: str, *, null_order: NullOrder = NullOrder.FIRST
) -> dict[str, Any]:
    """The Avro record schema Hudi writes for the Arrow ``schema``.

    ``record_name``/``namespace`` are ``<table>_record`` / ``hoodie.<table>`` for a table schema.
    With :attr:`NullOrder.FIRST`, top-level string meta fields come out exactly as
    :func:`add_meta_fields` writes them.
    """
    return _record(list(schema), record_name, namespace, null_order, record_name, top=True)


def _record(
    fields: Sequence[pa.Field], name: str, namespace: str, order: NullOrder, path: str, *, top: bool = False
) -> dict[str, Any]:
    child_ns = f"{namespace}.{name}" if namespace else name
    out: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        out["namespace"] = namespace
    avro_fields = []
    for field in fields:
        where = f"{path}.{field.name}"
        top_meta = top and field.name in HOODIE_META_COLUMNS and order is NullOrder.FIRST
        if top_meta and pa.types.is_string(field.type) and field.nullable:
            avro_fields.append(_meta_field(field.name))
            continue
        avro_type = _wrap(field.type, field.nullable, field.name, child_ns, order=order, path=where)
        entry: dict[str, Any] = {"name": field.name, "type": avro_type}
        if order is NullOrder.FIRST and (field.nullable or avro_type == "null"):
            entry["default"] = None
        avro_fields.append(entry)
    out["fields"] = avro_fields
    return out


def _wrap(typ: pa.DataType, nullable: bool, name: str, namespace: str, *, order: NullOrder, path: str) -> Any:
    inner = _avro_type(typ, name, namespace, order, path)
    if not nullable or inner == "null":
        return inner
    return ["null", inner] if order is NullOrder.FIRST else [inner, "null"]


def _named_fixed(name: str, namespace: str, size: int) -> dict[str, Any]:
    # Spark names every fixed "<namespace>.<field>.fixed", so the JSON carries name "fixed"
    return {
        "type": "fixed",
        "name": "fixed",
        "namespace": f"{namespace}.{name}" if namespace else name,
        "size": size,
    }


def _avro_type(typ: pa.DataType, name: str, namespace: str, order: NullOrder, path: str) -> Any:
    t = pa.types
    if t.is_dictionary(typ):
        return _avro_type(typ.value_type, name, namespace, order, path)
    if t.is_null(typ):
        return "null"
    if t.is_boolean(typ):
        return "boolean"
    if t.is_int8(typ) or t.is_int16(typ) or t.is_int32(typ) or t.is_uint8(typ) or t.is_uint16(typ):
        return "int"
    if t.is_int64(typ) or t.is_uint32(typ) or t.is_uint64(typ):
        return "long"
    if t.is_float16(typ) or t.is_float32(typ):
        return "float"
    if t.is_float64(typ):
        return "double"
    if t.is_string(typ) or t.is_large_string(typ) or t.is_string_view(typ):
        return "string"
    if t.is_binary(typ) or t.is_large_binary(typ) or t.is_binary_view(typ):
        return "bytes"
    if t.is_fixed_size_binary(typ) and not t.is_decimal(typ):
        return _named_fixed(name, namespace, typ.byte_width)
    if t.is_decimal(typ):
        out = _named_fixed(name, namespace, decimal_fixed_size(typ.precision))
        out.update(logicalType="decimal", precision=typ.precision, scale=typ.scale)
        return out
    if t.is_date(typ):
        return {"type": "int", "logicalType": "date"}
    if t.is_time32(typ):
        return {"type": "int", "logicalType": "time-millis"}
    if t.is_time64(typ):
        return {"type": "long", "logicalType": "time-micros"}
    if t.is_timestamp(typ):
        unit = {"s": "millis", "ms": "millis", "us": "micros", "ns": "nanos"}[typ.unit]
        local = "" if typ.tz is not None else "local-"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if t.is_list(typ) or t.is_large_list(typ) or t.is_fixed_size_list(typ) or t.is_list_view(typ):
        value = typ.value_field
        return {
            "type": "array",
            "items": _wrap(value.type, value.nullable, name, namespace, order=order, path=path),
        }
    if t.is_map(typ):
        if not (t.is_string(typ.key_type) or t.is_large_string(typ.key_type)):
            raise SchemaError(f"{path}: Avro map keys are strings, not {typ.key_type}")
        item = typ.item_field
        return {
            "type": "map",
            "values": _wrap(item.type, item.nullable, name, namespace, order=order, path=path),
        }
    if t.is_struct(typ):
        return _record(list(typ), name, namespace, order, path)
    raise SchemaError(f"{path}: Arrow type {typ} has no Avro equivalent")


# -- evolution ----------------------------------------------------------------------------------


def promotion(source: pa.DataType, target: pa.DataType) -> str | None:
    """How a reader sees ``source`` data as ``target`` under Hudi's type promotions, or None.

    The set is Hudi's (``HoodieAvroUtils.rewritePrimaryTypeWithDiffSchemaType``, on top of Avro's
    own resolution of int -> long -> float -> double and bytes <-> string): int -> long / float /
    double / string, long -> float / double / string, float -> double / string, double -> string,
    bytes <-> string, and decimal widening (no digit lost on either side of the point).
    """
    t = pa.types
    textual = (t.is_string, t.is_large_string)
    binary = (t.is_binary, t.is_large_binary, t.is_fixed_size_binary)
    if t.is_null(source):
        return "cast"
    if t.is_integer(source):
        if t.is_integer(target):
            return "cast" if t.is_signed_integer(target) and target.bit_width >= source.bit_width else None
        if t.is_floating(target):
            return "round"  # Java's (float) / (double) of an int or long: the nearest
        return "decimal_text" if any(f(target) for f in textual) else None
    if t.is_floating(source):
        if t.is_floating(target) and target.bit_width > source.bit_width:
            return "float_via_text"
        if any(f(target) for f in textual):
            return "java_text"
        return None
    if t.is_decimal(source) and t.is_decimal(target):
        integral: bool = target.precision - target.scale >= source.precision - source.scale
        return "cast" if integral and target.scale >= source.scale else None
    if any(f(source) for f in textual) and any(f(target) for f in (*textual, *binary[:2])):
        return "cast"
    if any(f(source) for f in binary) and any(f(target) for f in (*textual, *binary[:2])):
        return "cast"  # bytes -> string decodes UTF-8, as Avro's resolution of bytes to string does
    return None


def _java_texts(arr: pa.Array, text: Callable[[float], str]) -> pa.Array:
    values = arr.to_numpy(zero_copy_only=False)
    valid = np.asarray(arr.is_valid()) if arr.null_count else None
    out = [None if valid is not None and not valid[i] else text(v) for i, v in enumerate(values)]
    return pa.array(out, pa.string())


def _promote(arr: pa.Array, target: pa.DataType, how: str) -> pa.Array:
    if how == "round":
        return arr.cast(target, safe=False)
    if how == "java_text":
        texts = _java_texts(arr, java_float_text if arr.type.bit_width == 32 else java_double_text)
        return texts.cast(target)
    if how == "float_via_text":
        # float -> double goes through the float's text (HoodieAvroUtils: Double.valueOf(f + ""),
        # HoodieInternalRowUtils alike), so 1.1f reads as 1.1, not 1.100000023841858
        return _java_texts(arr, java_float_text).cast(target)
    return arr.cast(target, safe=True)  # "cast" and "decimal_text"


def conform(arr: pa.Array, target: pa.DataType, where: str, *, promote_only: bool = True) -> pa.Array:
    """``arr`` as ``target``: struct fields matched by name (missing ones null), leaves cast.

    With ``promote_only`` (reading), a leaf may only be promoted (:func:`promotion`); otherwise
    (writing) any safe Arrow cast is allowed, e.g. ``timestamp[s]`` to ``timestamp[ms]``.
    """
    if arr.type == target:
        return arr
    t = pa.types
    mask = pa.array(~np.asarray(arr.is_valid())) if arr.null_count else None
    if t.is_struct(target) and t.is_struct(arr.type):
        names = {arr.type.field(i).name: i for i in range(arr.type.num_fields)}
        children = []
        for field in target:
            if field.name in names:
                child = arr.field(names[field.name])
                children.append(
                    conform(child, field.type, f"{where}.{field.name}", promote_only=promote_only)
                )
            elif field.nullable:
                children.append(pa.nulls(len(arr), field.type))
            else:
                raise SchemaError(f"{where}.{field.name}: non-nullable field is missing from the data")
        if not children:  # a record without fields: only validity to carry over
            return pa.array([{} if v else None for v in np.asarray(arr.is_valid()).tolist()], target)
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if t.is_map(target) and t.is_map(arr.type):
        keys = conform(arr.keys, target.key_type, f"{where}.key", promote_only=promote_only)
        items = conform(arr.items, target.item_type, f"{where}.value", promote_only=promote_only)
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    if t.is_list(target) and (t.is_list(arr.type) or t.is_large_list(arr.type)):
        values = conform(arr.values, target.value_type, f"{where}[]", promote_only=promote_only)
        offsets = arr.offsets.cast(pa.int32())
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    how = promotion(arr.type, target) if promote_only else "cast"
    if how is None:
        raise SchemaError(
            f"{where}: data of type {arr.type} cannot be read as {target} (not one of Hudi's type promotions)"
        )
    try:
        return _promote(arr, target, how)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaError(f"{where}: cannot convert {arr.type} to {target}: {exc}") from exc


# -- decoding -----------------------------------------------------------------------------------


def _frame(content: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each datum of ``{int32 length, datum}`` records filling ``content``."""
    size = len(content)
    unpack = struct.Struct(">i").unpack_from
    starts: list[int] = []
    append = starts.append
    pos = 0
    try:
        while pos < size:
            append(pos + 4)
            length = unpack(content, pos)[0]
            if length < 0:
                raise CorruptFileError(f"negative Avro record length {length} at byte {pos}")
            pos += 4 + length
    except struct.error as exc:
        raise CorruptFileError(f"Avro record length truncated at byte {pos} of {size}") from exc
    return _check_frames(np.array(starts, np.int64), pos, size)


def _check_frames(starts: np.ndarray, end: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    ends = np.empty_like(starts)
    if len(starts):
        ends[:-1] = starts[1:] - 4
        ends[-1] = end
    if end > size or (len(starts) and (ends < starts).any()):
        raise CorruptFileError(f"Avro record lengths run past the {size} bytes of the block content")
    return starts, ends


def frame_records(buf: bytes | memoryview, pos: int = 0, count: int | None = None) -> tuple[list[int], int]:
    """The records of an Avro block's content from ``pos``, each an ``int32`` big-endian length and
    that many bytes: the starts of the complete ones (at most ``count``), and where the first record
    not taken begins (so a record ends 4 bytes before the next one starts)."""
    unpack = _I32.unpack_from
    starts: list[int] = []
    take = starts.append
    size = len(buf)
    try:
        for _ in range(count if count is not None else (size - pos) // 4):
            n = unpack(buf, pos)[0]  # struct.error past the end
            end = pos + 4 + n
            if end > size or n < 0:
                if n < 0:
                    raise CorruptFileError(f"negative Avro record length {n} at byte {pos}")
                break
            take(pos + 4)
            pos = end
    except struct.error:
        pass
    return starts, pos


def _block_frames(content: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
    if len(content) < _HEADER.size:
        raise CorruptFileError(f"Avro block content of {len(content)} bytes has no header")
    version, count = _HEADER.unpack_from(content, 0)
    if version != AVRO_BLOCK_VERSION:
        raise CorruptFileError(f"Avro block content version {version} is not supported (only 3)")
    if count < 0 or count > (len(content) - _HEADER.size) // 4:
        raise CorruptFileError(f"Avro block record count {count} does not fit {len(content)} bytes")
    starts, pos = frame_records(content, _HEADER.size, count)
    if len(starts) < count:
        raise CorruptFileError(f"Avro record lengths run past the {len(content)} bytes of the block content")
    return _check_frames(np.array(starts, np.int64), pos, len(content))


def decode_avro_block_content(
    content: bytes | memoryview,
    writer_schema: Mapping[str, Any] | str,
    arrow_schema: pa.Schema,
    *,
    vectorized: bool = True,
    source: str = "",
) -> pa.Table:
    """Decode the content of an AVRO_DATA block (version 3) into a table of ``arrow_schema``.

    ``source`` (the block's file and offset) leads the message of a column that cannot be read.
    """
    starts, ends = _block_frames(content)
    return _decode(content, starts, ends, writer_schema, arrow_schema, vectorized=vectorized, source=source)


def decode_avro_records(
    payload: bytes | memoryview,
    offsets: Sequence[tuple[int, int]] | np.ndarray | None,
    writer_schema: Mapping[str, Any] | str,
    arrow_schema: pa.Schema,
    *,
    vectorized: bool = True,
) -> pa.Table:
    """Decode Avro binary datums of ``payload`` into a table of ``arrow_schema``.

    ``offsets`` holds one ``(start, length)`` per datum (a sequence or an (n, 2) integer array);
    ``None`` means the payload is ``{int32 length, datum}`` records back to back, as in a block.
    """
    if offsets is None:
        starts, ends = _frame(payload)
    else:
        pairs = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
        starts, ends = pairs[:, 0].copy(), pairs[:, 0] + pairs[:, 1]
        if len(pairs) and (pairs.min() < 0 or ends.max() > len(payload)):
            raise CorruptFileError(f"Avro datum offsets fall outside the {len(payload)}-byte payload")
        if len(pairs) > 1 and (starts[1:] < ends[:-1]).any():
            vectorized = False  # overlapping or unordered datums: the row path handles any layout
    return _decode(payload, starts, ends, writer_schema, arrow_schema, vectorized=vectorized)


def _decode(
    payload: bytes | memoryview,
    starts: np.ndarray,
    ends: np.ndarray,
    writer_schema: Mapping[str, Any] | str,
    arrow_schema: pa.Schema,
    *,
    vectorized: bool,
    source: str = "",
) -> pa.Table:
    record = parse_record(writer_schema)
    writer_fields = {f.name: f for f in record.fields}
    wanted = frozenset(name for name in arrow_schema.names if name in writer_fields)
    for name in wanted:
        arrow_type(writer_fields[name].type)  # SchemaError early for unsupported writer types
    columns: dict[str, list[pa.Array]]
    try:
        if vectorized:
            try:
                columns = decode_datums(payload, starts, ends, record, wanted)
            except Unsupported:
                vectorized = False
        if not vectorized:
            writer_json = schema_json(writer_schema)
            columns = avro_rows.decode_rows(
                payload, starts, ends, record, writer_json=writer_json, wanted=wanted
            )
    except _CORRUPT as exc:
        raise CorruptFileError(
            f"undecodable Avro datums of {record.name!r} ({len(starts)} records): {exc}"
        ) from exc
    arrays: list[pa.ChunkedArray] = []
    for field in arrow_schema:
        if field.name not in columns:
            if not field.nullable:
                raise SchemaError(f"field {field.name!r} is not in the writer schema and not nullable")
            arrays.append(pa.chunked_array([pa.nulls(len(starts), field.type)], field.type))
            continue
        where = f"{source}: {field.name}" if source else field.name
        chunks = [conform(c, field.type, where) for c in columns[field.name]]
        column = pa.chunked_array(chunks, field.type)
        if not field.nullable and column.null_count:
            raise SchemaError(f"field {field.name!r} is not nullable but the data holds nulls")
        arrays.append(column)
    return pa.Table.from_arrays(arrays, schema=arrow_schema)


# -- encoding -----------------------------------------------------------------------------------


def _prepare(table: pa.Table, record: AvroType) -> pa.Table:
    """The table's columns in the record's field order, as the Arrow types of the Avro schema."""
    names = {f.name for f in record.fields}
    extra = [name for name in table.column_names if name not in names]
    if extra:
        raise SchemaError(f"columns {extra} are not in the Avro schema {record.name!r}")
    table = table.combine_chunks()
    arrays, fields = [], []
    for field in record.fields:
        target = arrow_field(field.name, field.type)
        if field.name in table.column_names:
            column = table.column(field.name)
            chunk = column.chunk(0) if column.num_chunks else pa.array([], column.type)
            arrays.append(conform(chunk, target.type, field.name, promote_only=False))
        elif target.nullable:
            arrays.append(pa.nulls(table.num_rows, target.type))
        else:
            raise SchemaError(f"column {field.name!r} is missing and Avro field is not nullable")
        fields.append(target.with_nullable(True))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _encode(table: pa.Table, avro_schema: Mapping[str, Any] | str, framed: bool) -> list[pa.Array]:
    record = parse_record(avro_schema)
    prepared = _prepare(table, record)
    return [encode_datums(batch, record, framed=framed) for batch in prepared.to_batches(_ENCODE_ROWS)]


def encode_avro_records(
    table: pa.Table, avro_schema: Mapping[str, Any] | str, *, vectorized: bool = True
) -> list[bytes]:
    """The Avro binary datum of every row of ``table`` under ``avro_schema``."""
    if not vectorized:
        record = parse_record(avro_schema)
        return avro_rows.encode_rows(_prepare(table, record), record, schema_json(avro_schema))
    out: list[bytes] = []
    for datums in _encode(table, avro_schema, framed=False):
        out.extend(datums.to_pylist())
    return out


def encode_avro_block_content(
    table: pa.Table, avro_schema: Mapping[str, Any] | str, *, vectorized: bool = True
) -> bytes:
    """The content of an AVRO_DATA block (version 3) holding every row of ``table``."""
    header = _HEADER.pack(AVRO_BLOCK_VERSION, table.num_rows)
    if not vectorized:
        datums = encode_avro_records(table, avro_schema, vectorized=False)
        return b"".join([header, *(struct.pack(">i", len(d)) + d for d in datums)])
    parts: list[bytes | memoryview] = [header]
    for framed in _encode(table, avro_schema, framed=True):
        _, offsets_buffer, data = framed.buffers()
        if data is not None and len(framed):
            kind = np.int64 if pa.types.is_large_binary(framed.type) else np.int32
            first, last = np.frombuffer(offsets_buffer, kind)[[framed.offset, framed.offset + len(framed)]]
            parts.append(memoryview(data)[int(first) : int(last)])
    return b"".join(parts)


def iter_avro_block_content(
    content: bytes | memoryview,
    writer_schema: Mapping[str, Any] | str,
    arrow_schema: pa.Schema,
    *,
    rows: int,
    source: str = "",
) -> Iterator[pa.Table]:
    """:func:`decode_avro_block_content` in parts of at most ``rows`` records, in block order
    (memory holds one decoded part, not the whole block)."""
    starts, ends = _block_frames(content)
    for i in range(0, len(starts), max(1, rows)):
        yield _decode(
            content,
            starts[i : i + rows],
            ends[i : i + rows],
            writer_schema,
            arrow_schema,
            vectorized=True,
            source=source,
        )
