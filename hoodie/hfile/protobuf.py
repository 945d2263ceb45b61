"""The two protobuf messages of an HFile, encoded and decoded by hand (no protobuf dependency).

``TrailerProto`` (HBase's ``FileTrailerProto``), every field optional::

     1 file_info_offset              uint64     8 num_data_index_levels    uint32
     2 load_on_open_data_offset      uint64     9 first_data_block_offset  uint64
     3 uncompressed_data_index_size  uint64    10 last_data_block_offset   uint64
     4 total_uncompressed_bytes      uint64    11 comparator_class_name    string
     5 data_index_count              uint32    12 compression_codec        uint32
     6 meta_index_count              uint32    13 encryption_key           bytes
     7 entry_count                   uint64

``InfoProto`` (the file info): ``repeated BytesBytesPair map_entry = 1`` with
``BytesBytesPair { bytes first = 1; bytes second = 2; }``.

Both are stored "delimited": a varint byte length, then the message. Negative int64 values (the
first/last data block offsets of an empty file are -1) travel as their 64-bit two's complement.
"""

from __future__ import annotations

from collections.abc import Iterable

_VARINT = 0
_I64 = 1
_LEN = 2
_I32 = 5


class ProtobufError(ValueError):
    """The bytes are not the protobuf message expected (the caller names the file)."""


def encode_varint(value: int) -> bytes:
    """Unsigned LEB128; negative values as their 64-bit two's complement (10 bytes)."""
    if value < 0:
        value &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def decode_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise ProtobufError("varint runs past the end of the buffer")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def to_int64(value: int) -> int:
    """A decoded varint read as a signed int64."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value


def iter_fields(buf: bytes | memoryview) -> Iterable[tuple[int, int | bytes]]:
    """``(field number, value)`` for every field of a message: ints for varints, bytes otherwise."""
    pos = 0
    n = len(buf)
    while pos < n:
        key, pos = decode_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        if wire == _VARINT:
            value, pos = decode_varint(buf, pos)
            yield number, value
        elif wire == _LEN:
            length, pos = decode_varint(buf, pos)
            if pos + length > n:
                raise ProtobufError(f"field {number}: length {length} runs past the message")
            yield number, bytes(buf[pos : pos + length])
            pos += length
        elif wire in (_I64, _I32):
            size = 8 if wire == _I64 else 4
            if pos + size > n:
                raise ProtobufError(f"field {number}: fixed-width value runs past the message")
            yield number, bytes(buf[pos : pos + size])
            pos += size
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")


def encode_varint_field(number: int, value: int) -> bytes:
    return encode_varint(number << 3 | _VARINT) + encode_varint(value)


def encode_bytes_field(number: int, value: bytes) -> bytes:
    return encode_varint(number << 3 | _LEN) + encode_varint(len(value)) + value


def delimited(message: bytes) -> bytes:
    """``message`` preceded by its varint length (protobuf's writeDelimitedTo)."""
    return encode_varint(len(message)) + message


def read_delimited(buf: bytes | memoryview, pos: int) -> tuple[bytes, int]:
    """The length-delimited message at ``pos`` and the position after it."""
    length, pos = decode_varint(buf, pos)
    if pos + length > len(buf):
        raise ProtobufError(f"delimited message of {length} bytes runs past the buffer")
    return bytes(buf[pos : pos + length]), pos + length


def encode_info(pairs: Iterable[tuple[bytes, bytes]]) -> bytes:
    """An ``InfoProto`` holding ``pairs`` in the given order."""
    parts = []
    for first, second in pairs:
        pair = encode_bytes_field(1, first) + encode_bytes_field(2, second)
        parts.append(encode_bytes_field(1, pair))
    return b"".join(parts)


def decode_info(message: bytes | memoryview) -> list[tuple[bytes, bytes]]:
    """The ``(first, second)`` pairs of an ``InfoProto``, in stored order."""
    out = []
    for number, value in iter_fields(message):
        if number != 1:
            continue
        if not isinstance(value, bytes):
            raise ProtobufError("map_entry is not a length-delimited field")
        first = second = b""
        for inner, item in iter_fields(value):
            if not isinstance(item, bytes):
                raise ProtobufError(f"BytesBytesPair field {inner} is not bytes")
            if inner == 1:
                first = item
            elif inner == 2:
                second = item
        out.append((first, second))
    return out
