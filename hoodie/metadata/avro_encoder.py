"""Avro binary encoders compiled from a schema, for the metadata table's hot paths.

fastavro's generic writer costs ~25-50 µs per HoodieMetadataRecord (it walks the schema and
resolves unions for every datum); a commit touching 1,000 files writes ~20,000 of them (column and
partition statistics). :func:`compile_encoder` walks the schema once and generates a Python
function per record type, its fields written in line (closures for maps, arrays and unions of
several types): the same bytes for the values it accepts, several times faster.

It accepts exactly: ``None`` for a null branch, ``(name, value)`` or a lone non-null branch for
unions, ``str``/``bytes``/``bool``/``int``/``float`` for the primitives, dicts with every field for
records, dicts for maps and lists for arrays. Anything else (logical types given as Python
objects, missing fields, ambiguous unions) raises :class:`Unsupported`, and the caller falls back
to fastavro, which also reports errors as it always has.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Unsupported", "compile_encoder", "zigzag"]

Writer = Callable[[Any, list[bytes]], None]
"""Appends the encoding of a value to a list of byte strings."""

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")


class Unsupported(Exception):
    """The value is outside what the compiled encoder writes: use fastavro."""


def zigzag(n: int) -> bytes:
    """An Avro ``int`` or ``long``: zigzag, then a base-128 varint."""
    z = (n << 1) ^ (n >> 63)
    if z < 0x80:
        return bytes((z,))
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _write_null(value: Any, out: list[bytes]) -> None:
    if value is not None:
        raise Unsupported


def _write_boolean(value: Any, out: list[bytes]) -> None:
    if type(value) is not bool:
        raise Unsupported
    out.append(b"\x01" if value else b"\x00")


def _integer(low: int, high: int) -> Writer:
    def write(value: Any, out: list[bytes]) -> None:
        if type(value) is not int or not low <= value <= high:
            raise Unsupported
        out.append(zigzag(value))

    return write


def _real(packer: struct.Struct) -> Writer:
    def write(value: Any, out: list[bytes]) -> None:
        if type(value) is not float and type(value) is not int:
            raise Unsupported
        out.append(packer.pack(value))

    return write


def _write_bytes(value: Any, out: list[bytes]) -> None:
    if type(value) is not bytes:
        raise Unsupported
    out.append(zigzag(len(value)))
    out.append(value)


def _write_string(value: Any, out: list[bytes]) -> None:
    if type(value) is not str:
        raise Unsupported
    data = value.encode("utf-8")
    out.append(zigzag(len(data)))
    out.append(data)


_PRIMITIVES: dict[str, Writer] = {
    "null": _write_null,
    "boolean": _write_boolean,
    "int": _integer(_INT_MIN, _INT_MAX),
    "long": _integer(_LONG_MIN, _LONG_MAX),
    "float": _real(_FLOAT),
    "double": _real(_DOUBLE),
    "bytes": _write_bytes,
    "string": _write_string,
}


def _unsupported(value: Any, out: list[bytes]) -> None:
    raise Unsupported


def _type_name(node: Any, namespace: str) -> str:
    if isinstance(node, str):
        return node if "." in node or node in _PRIMITIVES else f"{namespace}.{node}" if namespace else node
    name = node.get("name")
    if name is None:
        return str(node.get("type"))
    ns = node.get("namespace", namespace)
    return name if "." in name or not ns else f"{ns}.{name}"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _record(node: Mapping[str, Any], named: dict[str, Writer], namespace: str) -> Writer:
    ns = node.get("namespace", namespace)
    fields: list[tuple[str, Writer]] = []

    def write(value: Any, out: list[bytes]) -> None:
        if type(value) is not dict:
            raise Unsupported
        try:
            for name, field_writer in fields:
                field_writer(value[name], out)
        except KeyError:
            raise Unsupported from None

    named[_type_name(node, namespace)] = write  # before the fields: records may refer to themselves
    for field in node["fields"]:
        fields.append((field["name"], _compile(field["type"], named, ns)))
    return write


def _union(branches: list[Any], named: dict[str, Writer], namespace: str) -> Writer:
    writers = [_compile(b, named, namespace) for b in branches]
    names = [_type_name(b, namespace) for b in branches]
    index = {n: i for i, n in enumerate(names)} | {_short(n): i for i, n in enumerate(names)}
    null_at = names.index("null") if "null" in names else None
    others = [i for i, n in enumerate(names) if n != "null"]
    lone = others[0] if len(others) == 1 else None
    null_tag = zigzag(null_at) if null_at is not None else b""
    tags = [zigzag(i) for i in range(len(branches))]

    def write(value: Any, out: list[bytes]) -> None:
        if value is None:
            if null_at is None:
                raise Unsupported
            out.append(null_tag)
            return
        if type(value) is tuple and len(value) == 2 and type(value[0]) is str:
            at = index.get(value[0])
            if at is None:
                raise Unsupported
            out.append(tags[at])
            writers[at](value[1], out)
            return
        if lone is None:
            raise Unsupported
        out.append(tags[lone])
        writers[lone](value, out)

    return write


def _map(values: Writer) -> Writer:
    def write(value: Any, out: list[bytes]) -> None:
        if type(value) is not dict:
            raise Unsupported
        if value:
            out.append(zigzag(len(value)))
            for key, item in value.items():
                _write_string(key, out)
                values(item, out)
        out.append(b"\x00")

    return write


def _array(items: Writer) -> Writer:
    def write(value: Any, out: list[bytes]) -> None:
        if type(value) is not list:
            raise Unsupported
        if value:
            out.append(zigzag(len(value)))
            for item in value:
                items(item, out)
        out.append(b"\x00")

    return write


def _compile(node: Any, named: dict[str, Writer], namespace: str) -> Writer:
    if isinstance(node, list):
        return _union(node, named, namespace)
    if isinstance(node, str):
        if node in _PRIMITIVES:
            return _PRIMITIVES[node]
        full = _type_name(node, namespace)
        found = named.get(full) or next((w for n, w in named.items() if _short(n) == node), None)
        if found is None:
            raise ValueError(f"unknown Avro type {node!r}")
        return found
    kind = node.get("type")
    if node.get("logicalType") is not None and kind != "string":
        # Python objects for logical types (dates, decimals, timestamps): fastavro converts them.
        base = _compile(kind, named, namespace)

        def logical(value: Any, out: list[bytes]) -> None:
            if type(value) not in (int, bytes):
                raise Unsupported
            base(value, out)

        return logical
    if kind == "record":
        return _record(node, named, namespace)
    if kind == "map":
        return _map(_compile(node["values"], named, namespace))
    if kind == "array":
        return _array(_compile(node["items"], named, namespace))
    if kind in ("enum", "fixed"):
        named[_type_name(node, namespace)] = _unsupported
        return _unsupported
    if isinstance(kind, (str, list, dict)):
        return _compile(kind, named, namespace)
    raise ValueError(f"unknown Avro schema node {node!r}")


# -- straight-line code for records ---------------------------------------------------------------

_SMALL = {n: zigzag(n) for n in range(-64, 64)}


class _Source:
    """Python source of one function per record type, with the closures above for the rest."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {
            "Unsupported": Unsupported,
            "zigzag": zigzag,
            "_SMALL": _SMALL,
            "_DOUBLE": _DOUBLE.pack,
            "_FLOAT": _FLOAT.pack,
        }
        self.records: dict[str, str] = {}  # full record name -> its function's name
        self.named: dict[str, Writer] = {}  # for the closure compiler
        self.serial = 0

    def const(self, value: Any) -> str:
        name = f"_k{len(self.consts)}"
        self.consts[name] = value
        return name

    def fresh(self) -> str:
        self.serial += 1
        return f"x{self.serial}"

    def record(self, node: Mapping[str, Any], namespace: str) -> str:
        """The name of the function writing record ``node`` (generated on first use)."""
        full = _type_name(node, namespace)
        if full in self.records:
            return self.records[full]
        fn = self.records[full] = f"_record{len(self.records)}"
        self.named[full] = _unsupported  # closures met inside refer back through generated code only
        ns = node.get("namespace", namespace)
        body: list[str] = []
        for field in node["fields"]:
            x = self.fresh()
            body.append(f"{x} = v[{field['name']!r}]")
            body += self.value(field["type"], x, ns)
        lines = [f"def {fn}(v, out):", "    if type(v) is not dict:", "        raise Unsupported"]
        lines += ["    a = out.append", "    try:"]
        lines += [f"        {line}" for line in body]
        lines += ["    except KeyError:", "        raise Unsupported from None"]
        self.lines += lines
        return fn

    def value(self, node: Any, x: str, namespace: str) -> list[str]:
        """Statements writing the value held in variable ``x`` (``a`` appends, ``out`` is the list)."""
        if isinstance(node, str) and node in _PRIMITIVES:
            return self.primitive(node, x)
        if isinstance(node, str):
            full = _type_name(node, namespace)
            target = next((n for n in self.records if n in (full, node) or _short(n) == node), None)
            if target is None:
                return self.closure(node, x, namespace)
            return [f"{self.records[target]}({x}, out)"]
        if isinstance(node, list):
            return self.union(node, x, namespace)
        kind = node.get("type")
        if kind == "record":
            return [f"{self.record(node, namespace)}({x}, out)"]
        if kind in _PRIMITIVES and node.get("logicalType") is None:
            return self.primitive(kind, x)
        return self.closure(node, x, namespace)

    def closure(self, node: Any, x: str, namespace: str) -> list[str]:
        return [f"{self.const(_compile(node, self.named, namespace))}({x}, out)"]

    def primitive(self, kind: str, x: str) -> list[str]:
        bad = ["    raise Unsupported"]
        if kind == "null":
            return [f"if {x} is not None:", *bad]
        if kind == "boolean":
            true, false = "    a(b'\\x01')", "    a(b'\\x00')"
            return [f"if {x} is True:", true, f"elif {x} is False:", false, "else:", *bad]
        if kind in ("int", "long"):
            low, high = (_INT_MIN, _INT_MAX) if kind == "int" else (_LONG_MIN, _LONG_MAX)
            return [
                f"if type({x}) is not int or not {low} <= {x} <= {high}:",
                *bad,
                f"a(_SMALL[{x}] if -64 <= {x} < 64 else zigzag({x}))",
            ]
        if kind in ("float", "double"):
            pack = "_FLOAT" if kind == "float" else "_DOUBLE"
            return [f"if type({x}) is not float and type({x}) is not int:", *bad, f"a({pack}({x}))"]
        data = x if kind == "bytes" else f"{x}_utf8"
        check = "bytes" if kind == "bytes" else "str"
        out = [f"if type({x}) is not {check}:", *bad]
        if kind == "string":
            out.append(f"{data} = {x}.encode('utf-8')")
        out += [f"a(_SMALL[len({data})] if len({data}) < 64 else zigzag(len({data})))", f"a({data})"]
        return out

    def union(self, branches: list[Any], x: str, namespace: str) -> list[str]:
        names = [_type_name(b, namespace) for b in branches]
        if len(branches) != 2 or "null" not in names:
            return self.closure(branches, x, namespace)
        at = 1 - names.index("null")
        other, other_name = branches[at], names[at]
        accepted = self.const(frozenset((other_name, _short(other_name))))
        null_tag, tag = self.const(zigzag(names.index("null"))), self.const(zigzag(at))
        inner = self.value(other, x, namespace)
        return [
            f"if {x} is None:",
            f"    a({null_tag})",
            "else:",
            f"    if type({x}) is tuple:",
            f"        if len({x}) != 2 or {x}[0] not in {accepted}:",
            "            raise Unsupported",
            f"        {x} = {x}[1]",
            f"    a({tag})",
            *(f"    {line}" for line in inner),
        ]


def compile_encoder(schema: Mapping[str, Any]) -> Callable[[Any], bytes]:
    """A function writing a datum of ``schema`` (a record) as Avro binary (raises
    :class:`Unsupported`). Each record type becomes one generated function, its fields written
    in line; maps, arrays, unions of several types and logical types use the closures above."""
    source = _Source()
    top = source.record(dict(schema), "")
    namespace: dict[str, Any] = dict(source.consts)
    exec(compile("\n".join(source.lines), "<hoodie avro encoder>", "exec"), namespace)
    writer = namespace[top]

    def encode(value: Any) -> bytes:
        out: list[bytes] = []
        writer(value, out)
        return b"".join(out)

    return encode
