"""The Thrift compact protocol, as Parquet uses it for its footer and page headers.

A struct decodes to a :class:`Struct`: field id -> ``(compact type, value)``, in wire order, so a
footer can be read, a few fields changed, and written back with every field it did not touch
(unknown ones included) byte-for-byte the same. Values are Python ints, floats, bools, bytes,
:class:`Struct`, or ``TList`` / ``TMap`` for containers (which keep their element types).

Wire format (Apache Thrift's ``TCompactProtocol``): a field header is one byte
``delta << 4 | type`` when the id is 1..15 above the previous one, else the type byte followed
by the id as a zigzag varint; a struct ends with byte 0. Integers are zigzag ULEB128 varints,
binaries a varint length then the bytes, doubles 8 bytes little-endian. A list header is one
byte ``size << 4 | element type`` (size < 15) or ``0xF0 | type`` then the size as a varint.
Booleans in a field live in the header's type (1 true, 2 false), in a list as one byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Union

from hoodie.errors import CorruptFileError

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)

Value = Union[int, float, bool, bytes, "Struct", "TList", "TMap"]


@dataclass
class TList:
    """A list or set with its element type."""

    element_type: int
    items: list[Value]
    kind: int = LIST


@dataclass
class TMap:
    key_type: int
    value_type: int
    items: list[tuple[Value, Value]]


@dataclass
class Struct:
    """A decoded struct: ``fields[id] = (compact type, value)`` in the order read."""

    fields: dict[int, tuple[int, Value]] = field(default_factory=dict)

    def get(self, fid: int) -> Value | None:
        entry = self.fields.get(fid)
        return None if entry is None else entry[1]

    def get_int(self, fid: int, default: int | None = None) -> int:
        value = self.get(fid)
        if value is None:
            if default is None:
                raise CorruptFileError(f"thrift field {fid} is missing")
            return default
        if not isinstance(value, int):
            raise CorruptFileError(f"thrift field {fid} is {type(value).__name__}, expected an integer")
        return value

    def get_struct(self, fid: int) -> Struct | None:
        value = self.get(fid)
        return value if isinstance(value, Struct) else None

    def get_list(self, fid: int) -> list[Value]:
        value = self.get(fid)
        return value.items if isinstance(value, TList) else []

    def set(self, fid: int, ttype: int, value: Value) -> None:
        self.fields[fid] = (ttype, value)

    def drop(self, *fids: int) -> None:
        for fid in fids:
            self.fields.pop(fid, None)


class Decoder:
    """Reads compact-protocol values from ``data`` starting at ``pos``."""

    def __init__(self, data: bytes | memoryview, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _byte(self) -> int:
        if self.pos >= len(self.data):
            raise CorruptFileError(f"thrift data ends early at byte {self.pos}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        result = 0
        shift = 0
        while True:
            b = self._byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise CorruptFileError(f"thrift varint too long at byte {self.pos}")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptFileError(f"thrift value of {n} bytes at byte {self.pos} runs past the data")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, ttype: int) -> Value:
        if ttype in (BOOL_TRUE, BOOL_FALSE):  # only inside containers: one byte
            return self._byte() == BOOL_TRUE
        if ttype == BYTE:
            b = self._byte()
            return b - 256 if b > 127 else b
        if ttype in (I16, I32, I64):
            return self.zigzag()
        if ttype == DOUBLE:
            return float(struct.unpack("<d", self._take(8))[0])
        if ttype == BINARY:
            return self._take(self.varint())
        if ttype in (LIST, SET):
            header = self._byte()
            size, etype = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return TList(etype, [self.value(etype) for _ in range(size)], ttype)
        if ttype == MAP:
            size = self.varint()
            if size == 0:
                return TMap(0, 0, [])
            types = self._byte()
            kt, vt = types >> 4, types & 0x0F
            return TMap(kt, vt, [(self.value(kt), self.value(vt)) for _ in range(size)])
        if ttype == STRUCT:
            return self.struct()
        raise CorruptFileError(f"unknown thrift compact type {ttype} at byte {self.pos}")

    def struct(self) -> Struct:
        out = Struct()
        last = 0
        while True:
            header = self._byte()
            if header == 0:
                return out
            ttype = header & 0x0F
            delta = header >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            if ttype in (BOOL_TRUE, BOOL_FALSE):
                out.fields[fid] = (ttype, ttype == BOOL_TRUE)
            else:
                out.fields[fid] = (ttype, self.value(ttype))


class Encoder:
    """Writes compact-protocol values into a growing buffer."""

    def __init__(self) -> None:
        self.out = bytearray()

    def varint(self, n: int) -> None:
        while True:
            if n < 0x80:
                self.out.append(n)
                return
            self.out.append((n & 0x7F) | 0x80)
            n >>= 7

    def zigzag(self, n: int, bits: int = 64) -> None:
        self.varint(((n << 1) ^ (n >> (bits - 1))) & ((1 << bits) - 1))

    def value(self, ttype: int, value: Value) -> None:
        if ttype in (BOOL_TRUE, BOOL_FALSE):
            self.out.append(BOOL_TRUE if value else BOOL_FALSE)
        elif ttype == BYTE:
            assert isinstance(value, int)
            self.out.append(value & 0xFF)
        elif ttype in (I16, I32, I64):
            assert isinstance(value, int) and not isinstance(value, bool)
            self.zigzag(value, 64 if ttype == I64 else 32)
        elif ttype == DOUBLE:
            assert isinstance(value, (int, float))
            self.out += struct.pack("<d", float(value))
        elif ttype == BINARY:
            assert isinstance(value, bytes)
            self.varint(len(value))
            self.out += value
        elif ttype in (LIST, SET):
            assert isinstance(value, TList)
            n = len(value.items)
            if n < 15:
                self.out.append(n << 4 | value.element_type)
            else:
                self.out.append(0xF0 | value.element_type)
                self.varint(n)
            for item in value.items:
                self.value(value.element_type, item)
        elif ttype == MAP:
            assert isinstance(value, TMap)
            self.varint(len(value.items))
            if value.items:
                self.out.append(value.key_type << 4 | value.value_type)
                for k, v in value.items:
                    self.value(value.key_type, k)
                    self.value(value.value_type, v)
        elif ttype == STRUCT:
            assert isinstance(value, Struct)
            self.struct(value)
        else:
            raise ValueError(f"unknown thrift compact type {ttype}")

    def struct(self, s: Struct) -> None:
        last = 0
        for fid in sorted(s.fields):
            ttype, value = s.fields[fid]
            if ttype in (BOOL_TRUE, BOOL_FALSE):
                ttype = BOOL_TRUE if value else BOOL_FALSE
            delta = fid - last
            if 0 < delta <= 15:
                self.out.append(delta << 4 | ttype)
            else:
                self.out.append(ttype)
                self.zigzag(fid, 16)
            last = fid
            if ttype not in (BOOL_TRUE, BOOL_FALSE):
                self.value(ttype, value)
        self.out.append(0)


def decode_struct(data: bytes | memoryview, pos: int = 0) -> tuple[Struct, int]:
    """The struct at ``pos`` and the position just after it."""
    decoder = Decoder(data, pos)
    return decoder.struct(), decoder.pos


def encode_struct(s: Struct) -> bytes:
    encoder = Encoder()
    encoder.struct(s)
    return bytes(encoder.out)
