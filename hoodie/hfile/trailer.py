"""The fixed 4096-byte HFile trailer: ``TRABLK"$``, a delimited ``TrailerProto``, zero padding,
and the version as the last four bytes, ``(minor << 24) | major`` (HBase writes 3.3)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hoodie.errors import CorruptFileError, UnsupportedTableError
from hoodie.hfile.blocks import CompressionCodec
from hoodie.hfile.protobuf import (
    ProtobufError,
    delimited,
    encode_bytes_field,
    encode_varint_field,
    iter_fields,
    read_delimited,
    to_int64,
)

TRAILER_SIZE = 4096
TRAILER_MAGIC = b'TRABLK"$'
MAJOR_VERSION = 3
MINOR_VERSION = 3
COMPARATOR_CLASS_NAME = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"

_FIELDS = (
    "file_info_offset",
    "load_on_open_data_offset",
    "uncompressed_data_index_size",
    "total_uncompressed_bytes",
    "data_index_count",
    "meta_index_count",
    "entry_count",
    "num_data_index_levels",
    "first_data_block_offset",
    "last_data_block_offset",
)


@dataclass(frozen=True, slots=True)
class Trailer:
    """The trailer's fields (offsets of an empty file's data blocks are -1)."""

    file_info_offset: int
    load_on_open_data_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator_class_name: str
    compression_codec: CompressionCodec
    major_version: int = MAJOR_VERSION
    minor_version: int = MINOR_VERSION

    def encode(self) -> bytes:
        """The 4096 trailer bytes (fields 1-12; Hudi never writes the encryption key, 13)."""
        message = b"".join(encode_varint_field(i, getattr(self, name)) for i, name in enumerate(_FIELDS, 1))
        message += encode_bytes_field(11, self.comparator_class_name.encode())
        message += encode_varint_field(12, int(self.compression_codec))
        body = TRAILER_MAGIC + delimited(message)
        if len(body) > TRAILER_SIZE - 4:
            raise ValueError(f"HFile trailer of {len(body)} bytes does not fit in {TRAILER_SIZE}")
        version = struct.pack(">I", (self.minor_version << 24) | self.major_version)
        return body + bytes(TRAILER_SIZE - 4 - len(body)) + version

    @classmethod
    def parse(cls, buf: bytes | memoryview, offset: int, source: str) -> Trailer:
        """The trailer in ``buf`` (exactly the file's last 4096 bytes, found at ``offset``)."""
        where = f"{source}@{offset}"
        if bytes(buf[:8]) != TRAILER_MAGIC:
            raise CorruptFileError(
                f"{where}: no HFile trailer magic (found {bytes(buf[:8])!r}; truncated or not an HFile)"
            )
        (version,) = struct.unpack_from(">I", buf, TRAILER_SIZE - 4)
        major, minor = version & 0x00FFFFFF, version >> 24
        if major != MAJOR_VERSION:
            raise UnsupportedTableError(f"{where}: HFile version {major}.{minor} is not supported (only 3)")
        try:
            message, _ = read_delimited(memoryview(buf)[: TRAILER_SIZE - 4], 8)
            values: dict[int, int | bytes] = dict(iter_fields(message))
        except ProtobufError as e:
            raise CorruptFileError(f"{where}: HFile trailer does not decode: {e}") from e

        def number(field: int, default: int = 0) -> int:
            value = values.get(field, default)
            if not isinstance(value, int):
                raise CorruptFileError(f"{where}: HFile trailer field {field} is not a varint")
            return to_int64(value)

        codec_id = number(12, int(CompressionCodec.NONE))
        try:
            codec = CompressionCodec(codec_id)
        except ValueError as e:
            raise CorruptFileError(f"{where}: unknown HFile compression codec id {codec_id}") from e
        comparator = values.get(11, b"")
        return cls(
            file_info_offset=number(1),
            load_on_open_data_offset=number(2),
            uncompressed_data_index_size=number(3),
            total_uncompressed_bytes=number(4),
            data_index_count=number(5),
            meta_index_count=number(6),
            entry_count=number(7),
            num_data_index_levels=number(8, 1),
            first_data_block_offset=number(9),
            last_data_block_offset=number(10),
            comparator_class_name=comparator.decode(errors="replace")
            if isinstance(comparator, bytes)
            else "",
            compression_codec=codec,
            major_version=major,
            minor_version=minor,
        )
