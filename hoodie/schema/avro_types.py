"""Avro schemas as a resolved tree, and the Arrow type of every node.

:func:`parse_avro` turns Avro JSON into :class:`AvroType` nodes with named-type references
inlined, so the codecs never look names up. :func:`arrow_type` gives the Arrow type a reader
sees for a node (the types of Spark-written Parquet base files); :func:`raw_arrow_type` gives
the physical type fastavro hands back when logical types are stripped. The decimal helpers
convert between Arrow decimals and Avro's big-endian two's-complement bytes, vectorized.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final, Literal

import numpy as np
import pyarrow as pa

from hoodie.errors import SchemaError

Kind = Literal[
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "bytes",
    "string",
    "fixed",
    "enum",
    "record",
    "array",
    "map",
    "union",
]

PRIMITIVES: Final[frozenset[str]] = frozenset(
    {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
)

#: Logical type -> the Avro kinds it may annotate (anything else is ignored, as the spec says).
_LOGICAL_BASES: Final[dict[str, frozenset[str]]] = {
    "decimal": frozenset({"bytes", "fixed"}),
    "date": frozenset({"int"}),
    "time-millis": frozenset({"int"}),
    "time-micros": frozenset({"long"}),
    "timestamp-millis": frozenset({"long"}),
    "timestamp-micros": frozenset({"long"}),
    "timestamp-nanos": frozenset({"long"}),
    "local-timestamp-millis": frozenset({"long"}),
    "local-timestamp-micros": frozenset({"long"}),
    "local-timestamp-nanos": frozenset({"long"}),
    "uuid": frozenset({"string"}),
}

_TIMESTAMPS: Final[dict[str, tuple[str, str | None]]] = {
    "timestamp-millis": ("ms", "UTC"),
    "timestamp-micros": ("us", "UTC"),
    "timestamp-nanos": ("ns", "UTC"),
    "local-timestamp-millis": ("ms", None),
    "local-timestamp-micros": ("us", None),
    "local-timestamp-nanos": ("ns", None),
}

_PRIMITIVE_ARROW: Final[dict[str, pa.DataType]] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


@dataclass(frozen=True, slots=True, eq=False)
class AvroField:
    """One field of an Avro record."""

    name: str
    type: AvroType


@dataclass(frozen=True, slots=True, eq=False)
class AvroType:
    """One node of a resolved Avro schema. Only the attributes of its ``kind`` are set."""

    kind: Kind
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    size: int = 0
    name: str = ""
    symbols: tuple[str, ...] = ()
    fields: tuple[AvroField, ...] = ()
    items: AvroType | None = None
    branches: tuple[AvroType, ...] = ()

    @property
    def child(self) -> AvroType:
        """The items of an array or the values of a map."""
        if self.items is None:
            raise SchemaError(f"Avro {self.kind} {self.name!r} has no items or values")
        return self.items

    def nullable_split(self) -> tuple[int, AvroType] | None:
        """For a union of ``null`` and one other type: (index of that type, that type)."""
        if self.kind != "union" or len(self.branches) != 2:
            return None
        kinds = [b.kind for b in self.branches]
        if kinds.count("null") != 1:
            return None
        index = 1 - kinds.index("null")
        return index, self.branches[index]

    def non_null(self) -> AvroType:
        """The type inside a union of ``null`` and one other type; any other type itself."""
        split = self.nullable_split()
        return split[1] if split is not None else self


def _split_name(name: str, namespace: str) -> tuple[str, str]:
    if "." in name:
        ns, _, short = name.rpartition(".")
        return f"{ns}.{short}", ns
    return (f"{namespace}.{name}" if namespace else name), namespace


class _Parser:
    def __init__(self) -> None:
        self.named: dict[str, AvroType] = {}
        self.defining: set[str] = set()

    def parse(self, schema: Any, namespace: str) -> AvroType:
        if isinstance(schema, str):
            return self._reference(schema, namespace)
        if isinstance(schema, list):
            return AvroType("union", branches=tuple(self.parse(b, namespace) for b in schema))
        if not isinstance(schema, Mapping):
            raise SchemaError(f"not an Avro schema: {schema!r}")
        kind = schema.get("type")
        if isinstance(kind, (list, Mapping)):
            return self.parse(kind, namespace)
        if kind in PRIMITIVES:
            return self._logical(AvroType(kind), schema)
        if kind in ("record", "error"):
            return self._record(schema, namespace)
        if kind == "enum":
            full, _ = self._name(schema, namespace)
            symbols = tuple(str(s) for s in schema.get("symbols", ()))
            return self._register(full, AvroType("enum", name=full, symbols=symbols))
        if kind == "fixed":
            full, _ = self._name(schema, namespace)
            size = schema.get("size")
            if not isinstance(size, int) or size < 0:
                raise SchemaError(f"Avro fixed {full!r} has an invalid size {size!r}")
            return self._register(full, self._logical(AvroType("fixed", name=full, size=size), schema))
        if kind == "array":
            return AvroType("array", items=self.parse(schema.get("items"), namespace))
        if kind == "map":
            return AvroType("map", items=self.parse(schema.get("values"), namespace))
        if isinstance(kind, str):
            return self._reference(kind, namespace)
        raise SchemaError(f"Avro schema has an invalid type {kind!r}")

    def _name(self, schema: Mapping[str, Any], namespace: str) -> tuple[str, str]:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise SchemaError(f"named Avro type without a name: {dict(schema)!r}")
        ns = schema.get("namespace")
        return _split_name(name, ns if isinstance(ns, str) else namespace)

    def _register(self, full: str, node: AvroType) -> AvroType:
        if full in self.named:
            raise SchemaError(f"Avro type {full!r} is defined twice")
        self.named[full] = node
        return node

    def _reference(self, name: str, namespace: str) -> AvroType:
        if name in PRIMITIVES:
            return AvroType(name)  # type: ignore[arg-type]
        for candidate in (_split_name(name, namespace)[0], name):
            if candidate in self.defining:
                raise SchemaError(f"recursive Avro type {candidate!r} is not supported")
            if candidate in self.named:
                return self.named[candidate]
        raise SchemaError(f"unknown Avro type {name!r}")

    def _record(self, schema: Mapping[str, Any], namespace: str) -> AvroType:
        full, ns = self._name(schema, namespace)
        raw_fields = schema.get("fields")
        if not isinstance(raw_fields, list):
            raise SchemaError(f"Avro record {full!r} has no field list")
        self.defining.add(full)
        fields: list[AvroField] = []
        seen: set[str] = set()
        for raw in raw_fields:
            name = raw.get("name") if isinstance(raw, Mapping) else None
            if not isinstance(name, str) or name in seen:
                raise SchemaError(f"Avro record {full!r} has an invalid or repeated field {raw!r}")
            seen.add(name)
            fields.append(AvroField(name, self.parse(raw.get("type"), ns)))
        self.defining.discard(full)
        return self._register(full, AvroType("record", name=full, fields=tuple(fields)))

    @staticmethod
    def _logical(node: AvroType, schema: Mapping[str, Any]) -> AvroType:
        logical = schema.get("logicalType")
        if not isinstance(logical, str) or node.kind not in _LOGICAL_BASES.get(logical, ()):
            return node
        if logical != "decimal":
            return AvroType(node.kind, logical=logical, size=node.size, name=node.name)
        precision, scale = schema.get("precision"), schema.get("scale", 0)
        if not isinstance(precision, int) or not isinstance(scale, int) or not 0 <= scale <= precision:
            return node
        if precision < 1 or (node.kind == "fixed" and precision > max_precision_for_size(node.size)):
            return node
        return AvroType(
            node.kind, logical="decimal", precision=precision, scale=scale, size=node.size, name=node.name
        )


def max_precision_for_size(size: int) -> int:
    """The largest decimal precision a two's-complement number of ``size`` bytes always holds."""
    return len(str(2 ** (8 * size - 1) - 1)) - 1 if size > 0 else 0


def decimal_fixed_size(precision: int) -> int:
    """Spark's minimal byte count for a decimal of ``precision`` digits (``minBytesForPrecision``)."""
    if precision < 1:
        raise SchemaError(f"decimal precision must be positive, got {precision}")
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def schema_json(avro: Mapping[str, Any] | str) -> str:
    """The canonical key of a schema for caching: its compact JSON text."""
    if isinstance(avro, str):
        return avro
    return json.dumps(avro, separators=(",", ":"))


@lru_cache(maxsize=128)
def _parse_cached(text: str) -> AvroType:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"Avro schema is not valid JSON ({exc}): {text[:200]!r}") from exc
    return _Parser().parse(raw, "")


def parse_avro(avro: Mapping[str, Any] | str) -> AvroType:
    """Resolve an Avro schema (JSON text or parsed JSON) into an :class:`AvroType` tree."""
    return _parse_cached(schema_json(avro))


def parse_record(avro: Mapping[str, Any] | str) -> AvroType:
    """Like :func:`parse_avro`, requiring a record at the top."""
    node = parse_avro(avro)
    if node.kind != "record":
        raise SchemaError(f"expected an Avro record schema, got {node.kind!r}")
    return node


def _decimal_type(precision: int, scale: int) -> pa.DataType:
    return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)


def arrow_type(node: AvroType, *, raw: bool = False) -> pa.DataType:
    """The Arrow type for ``node``; with ``raw``, the physical type (logical types stripped)."""
    kind, logical = node.kind, node.logical
    if kind == "union":
        split = node.nullable_split()
        if split is not None:
            return arrow_type(split[1], raw=raw)
        if all(b.kind == "null" for b in node.branches):
            return pa.null()
        names = [b.name or b.kind for b in node.branches]
        raise SchemaError(f"Avro union of {names} is not supported (only a type and null)")
    if kind == "record":
        return pa.struct([arrow_field(f.name, f.type, raw=raw) for f in node.fields])
    if kind == "array":
        return pa.list_(arrow_field("element", node.child, raw=raw))
    if kind == "map":
        key = pa.field("key", pa.string(), nullable=False)
        return pa.map_(key, arrow_field("value", node.child, raw=raw))
    if kind == "enum":
        return pa.string()
    if logical == "decimal":
        if raw:
            return pa.binary(node.size) if kind == "fixed" else pa.binary()
        return _decimal_type(node.precision, node.scale)
    if kind == "fixed":
        return pa.binary(node.size)
    if raw or logical is None or logical == "uuid":
        return _PRIMITIVE_ARROW[kind]
    if logical == "date":
        return pa.date32()
    if logical == "time-millis":
        return pa.time32("ms")
    if logical == "time-micros":
        return pa.time64("us")
    unit, tz = _TIMESTAMPS[logical]
    return pa.timestamp(unit, tz=tz)


def arrow_field(name: str, node: AvroType, *, raw: bool = False) -> pa.Field:
    """An Arrow field: nullable exactly when the Avro type is a union with null (or null)."""
    nullable = node.kind == "null" or (node.kind == "union" and any(b.kind == "null" for b in node.branches))
    return pa.field(name, arrow_type(node, raw=raw), nullable=nullable)


# -- decimals <-> big-endian two's complement -------------------------------------------------


def _width(precision: int) -> int:
    return 16 if precision <= 38 else 32


def validity_buffer(valid: np.ndarray | None) -> pa.Buffer | None:
    """An Arrow validity bitmap for a boolean mask (None when every slot is valid)."""
    if valid is None or valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def decimal_from_be_matrix(
    mat: np.ndarray, precision: int, scale: int, valid: np.ndarray | None = None
) -> pa.Array:
    """Decimals from an (n, size) uint8 matrix of big-endian two's-complement values."""
    rows, size = mat.shape
    width = _width(precision)
    out = np.empty((rows, width), np.uint8)
    if size > width:  # a roomy fixed: the extra leading bytes must be sign extension
        sign = (mat[:, size - width : size - width + 1].view(np.int8) >> 7).view(np.uint8)
        if not (mat[:, : size - width] == sign).all():
            raise OverflowError(f"decimal({precision},{scale}) value does not fit {width} bytes")
        mat = mat[:, size - width :]
        size = width
    out[:, :size] = mat[:, ::-1]
    if size < width:
        out[:, size:] = (mat[:, :1].view(np.int8) >> 7).view(np.uint8) if size else 0
    buffers = [validity_buffer(valid), pa.py_buffer(out)]
    return pa.Array.from_buffers(_decimal_type(precision, scale), rows, buffers)


def decimal_from_be_binary(arr: pa.Array, precision: int, scale: int) -> pa.Array:
    """Decimals from a binary array of minimal big-endian two's-complement values (Avro ``bytes``)."""
    width = _width(precision)
    valid = np.asarray(arr.is_valid()) if arr.null_count else None
    filled = arr.fill_null(b"") if arr.null_count else arr
    buffers = filled.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, len(filled) + 1, filled.offset * 4).astype(np.int64)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(1, np.uint8)
    starts, ends = offsets[:-1], offsets[1:]
    lengths = ends - starts
    if lengths.size and lengths.max() > width:
        raise OverflowError(f"decimal({precision},{scale}) bytes longer than {width}")
    padded = np.concatenate([data, np.zeros(width, np.uint8)])
    idx = ends[:, None] - width + np.arange(width)
    inside = idx >= starts[:, None]
    first = padded[np.minimum(starts, len(padded) - 1)]
    sign = np.where((lengths > 0) & (first >= 0x80), 0xFF, 0).astype(np.uint8)
    mat = np.where(inside, padded[np.clip(idx, 0, len(padded) - 1)], sign[:, None]).astype(np.uint8)
    return decimal_from_be_matrix(mat, precision, scale, valid)


def decimal_le_matrix(arr: pa.Array) -> np.ndarray:
    """The (n, 16|32) little-endian value matrix of a decimal array (null slots hold zeros)."""
    width = arr.type.byte_width
    buf = arr.buffers()[1]
    mat = np.frombuffer(buf, np.uint8, len(arr) * width, arr.offset * width).reshape(len(arr), width)
    if arr.null_count:
        mat = np.where(np.asarray(arr.is_valid())[:, None], mat, 0).astype(np.uint8)
    return mat


def decimal_to_be_matrix(arr: pa.Array, size: int, where: str) -> np.ndarray:
    """Big-endian two's-complement rows of ``size`` bytes; raises if a value needs more."""
    le = decimal_le_matrix(arr)
    width = le.shape[1]
    if size < width:
        sign = (le[:, size - 1 : size].view(np.int8) >> 7).view(np.uint8)
        if not (le[:, size:] == sign).all():
            raise SchemaError(f"{where}: a decimal value does not fit the Avro fixed of {size} bytes")
        return np.ascontiguousarray(le[:, size - 1 :: -1])
    out = np.empty((len(arr), size), np.uint8)
    out[:, size - width :] = le[:, ::-1]
    out[:, : size - width] = (le[:, width - 1 :].view(np.int8) >> 7).view(np.uint8)
    return out


def decimal_minimal_lengths(be: np.ndarray) -> np.ndarray:
    """Bytes each big-endian row needs as a minimal two's complement (Java ``toByteArray``)."""
    rows, width = be.shape
    sign = (be[:, :1].view(np.int8) >> 7).view(np.uint8)
    # byte j is redundant when it equals the sign byte and byte j+1 carries the same sign bit
    redundant = (be[:, :-1] == sign) & ((be[:, 1:] >> 7) == (sign & 1))
    lead = np.cumprod(redundant, axis=1).sum(axis=1) if width > 1 else np.zeros(rows, np.int64)
    lengths: np.ndarray = (width - lead).astype(np.int64)
    return lengths
