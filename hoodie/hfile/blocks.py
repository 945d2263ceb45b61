"""HFile v3 blocks: header, compression, checksums, and the payloads of data and index blocks.

Every block is a 33-byte header, the (possibly compressed) payload, then one checksum per
``bytesPerChecksum`` bytes of header plus on-disk payload::

    magic                           8 bytes (see :class:`BlockType`)
    onDiskSizeWithoutHeader         int32   on-disk payload + checksum bytes
    uncompressedSizeWithoutHeader   int32   payload before compression
    prevBlockOffset                 int64   previous block of the same type, or -1
    checksumType                    int8    :class:`~hoodie.hfile.checksum.ChecksumType`
    bytesPerChecksum                int32   16384
    onDiskDataSizeWithHeader        int32   33 + on-disk payload

All integers are big-endian. A data block payload is a run of KeyValues::

    int32 keyLength | int32 valueLength | key | value [| int16 tagsLength | tags] [| VLong memstoreTS]

where the key is ``int16 rowLength | row | int8 familyLength (0) | int64 timestamp
(0x7FFFFFFFFFFFFFFF) | int8 type (4, Put)``. Hudi's record key is the row; the rest is constant.
Tags are present when the file info has ``MAX_TAGS_LEN``, the memstore timestamp when
``KEY_VALUE_VERSION`` is 1 (Hudi always writes it, as the single byte 0).

A root index entry (data index, meta index) is ``int64 blockOffset | int32 blockOnDiskSize |
VLong keyLength | key``. Leaf and intermediate index blocks (multi-level data indexes) hold
``int32 entryCount | int32[entryCount + 1] entry offsets | entries``, each entry
``int64 blockOffset | int32 blockOnDiskSize | key`` with its length implied by the offsets.
VLong is Hadoop's ``WritableUtils`` variable-length long.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from itertools import chain, repeat

from hoodie.errors import CorruptFileError, UnsupportedTableError
from hoodie.hfile.checksum import ChecksumType, chunk_checksums

HEADER_SIZE = 33
BYTES_PER_CHECKSUM = 16384
CHECKSUM_SIZE = 4

_HEADER = struct.Struct(">8siiqbii")
_KV_LENGTHS = struct.Struct(">iih")
_ENTRY = struct.Struct(">qi")
_I32 = struct.Struct(">i")

LATEST_TIMESTAMP = 0x7FFFFFFFFFFFFFFF
KEY_TYPE_PUT = 4
KEY_SUFFIX = b"\x00" + struct.pack(">q", LATEST_TIMESTAMP) + bytes([KEY_TYPE_PUT])
"""What follows the row in every key Hudi writes: no family, latest timestamp, Put."""

MAX_ROW_LENGTH = 0x7FFF


class BlockType(Enum):
    """HBase's block types by their 8-byte magic."""

    DATA = b"DATABLK*"
    ENCODED_DATA = b"DATABLKE"
    LEAF_INDEX = b"IDXLEAF2"
    BLOOM_CHUNK = b"BLMFBLK2"
    META = b"METABLKc"
    INTERMEDIATE_INDEX = b"IDXINTE2"
    ROOT_INDEX = b"IDXROOT2"
    FILE_INFO = b"FILEINF2"
    GENERAL_BLOOM_META = b"BLMFMET2"
    DELETE_FAMILY_BLOOM_META = b"DFBLMET2"
    TRAILER = b'TRABLK"$'
    INDEX_V1 = b"IDXBLK)+"

    @property
    def magic(self) -> bytes:
        return self.value


_BY_MAGIC = {t.value: t for t in BlockType}


class CompressionCodec(IntEnum):
    """HBase's ``Compression.Algorithm`` ids, as stored in the trailer. Hudi writes GZ."""

    LZO = 0
    GZ = 1
    NONE = 2
    SNAPPY = 3
    LZ4 = 4
    BZIP2 = 5
    ZSTD = 6


SUPPORTED_CODECS = (CompressionCodec.GZ, CompressionCodec.NONE)

# HBase and Hudi write each block as one gzip member with this fixed header (no name, mtime 0,
# OS 0) around a level-6 deflate stream; Python's gzip module would write a different header.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x00"
GZIP_LEVEL = 6
_EMPTY_STORED_BLOCK = b"\x00\x00\x00\xff\xff"  # not final, stored, LEN 0, NLEN 0xFFFF


@dataclass(frozen=True, slots=True)
class BlockHeader:
    block_type: BlockType
    on_disk_size_without_header: int
    uncompressed_size_without_header: int
    prev_block_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int

    @property
    def on_disk_size(self) -> int:
        """The whole block on disk: header, payload and checksums."""
        return HEADER_SIZE + self.on_disk_size_without_header


@dataclass(frozen=True, slots=True)
class Block:
    """A decoded block: its offset in the file, its header and its uncompressed payload."""

    offset: int
    header: BlockHeader
    payload: bytes

    @property
    def block_type(self) -> BlockType:
        return self.header.block_type


# -- Hadoop VLong --------------------------------------------------------------------------------


def encode_vlong(value: int) -> bytes:
    """Hadoop ``WritableUtils.writeVLong``."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    marker = -112
    if value < 0:
        value = ~value
        marker = -120
    tmp = value
    while tmp:
        tmp >>= 8
        marker -= 1
    size = -(marker + 120) if marker < -120 else -(marker + 112)
    return struct.pack(">b", marker) + value.to_bytes(size, "big")


def decode_vlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The Hadoop VLong at ``pos`` and the position after it (IndexError if truncated)."""
    first = buf[pos]
    signed = first - 256 if first > 127 else first
    if signed >= -112:
        return signed, pos + 1
    size = -119 - signed if signed < -120 else -111 - signed
    end = pos + size
    if end > len(buf):
        raise IndexError("VLong runs past the buffer")
    value = int.from_bytes(buf[pos + 1 : end], "big")
    return (~value if signed < -120 else value), end


# -- keys ----------------------------------------------------------------------------------------


def encode_key(row: bytes) -> bytes:
    """The full KeyValue key Hudi writes for ``row``."""
    return struct.pack(">h", len(row)) + row + KEY_SUFFIX


def row_of(key: bytes | memoryview) -> bytes:
    """The row of a KeyValue key (``int16 rowLength | row | ...``); ValueError if malformed."""
    if len(key) < 2:
        raise ValueError(f"key of {len(key)} bytes has no row length")
    length = (key[0] << 8) | key[1]
    if length > len(key) - 2:
        raise ValueError(f"row length {length} runs past the {len(key)}-byte key")
    return bytes(key[2 : 2 + length])


# -- compression ---------------------------------------------------------------------------------


def _gzip(raw: bytes) -> bytes:
    """One gzip member as HBase and Hudi write it."""
    deflater = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -15)
    return _GZIP_HEADER + deflater.compress(raw) + deflater.flush() + _gzip_trailer(raw)


def _gzip_trailer(raw: bytes) -> bytes:
    return struct.pack("<II", zlib.crc32(raw), len(raw) & 0xFFFFFFFF)


def _checksum_chunks(size: int, bytes_per_checksum: int) -> int:
    return -(-size // bytes_per_checksum)


def _readers_disagree(data_size_with_header: int) -> bool:
    """Whether hudi-rs and Hudi's Java reader would count the checksums of this block wrongly.

    HBase sizes the checksum area from ``onDiskDataSizeWithHeader``; hudi-rs (and Hudi's Java
    reader) from the whole on-disk size, checksums included. The two counts differ only when the
    data ends within a few bytes below a chunk boundary; hudi-rs would then cut the end off a
    compressed payload.
    """
    chunks = _checksum_chunks(data_size_with_header, BYTES_PER_CHECKSUM)
    on_disk = data_size_with_header + CHECKSUM_SIZE * chunks
    return _checksum_chunks(on_disk, BYTES_PER_CHECKSUM) != chunks


def compress(codec: CompressionCodec, raw: bytes, level: int = GZIP_LEVEL) -> bytes:
    """The on-disk payload for ``raw`` (GZ as HBase writes it, at deflate ``level``, or NONE)."""
    if codec is CompressionCodec.NONE:
        return raw
    if codec is CompressionCodec.GZ:
        deflater = zlib.compressobj(level, zlib.DEFLATED, -15)
        head = _GZIP_HEADER + deflater.compress(raw)
        tail = _gzip_trailer(raw)
        out = head + deflater.copy().flush() + tail
        if not _readers_disagree(HEADER_SIZE + len(out)):
            return out
        # Lengthen the stream without changing its data: a sync flush leaves it byte-aligned,
        # then empty stored blocks go in until the block ends outside the ambiguous range.
        head += deflater.flush(zlib.Z_SYNC_FLUSH)
        end = deflater.flush()
        padding = b""
        while _readers_disagree(HEADER_SIZE + len(head) + len(padding) + len(end) + len(tail)):
            padding += _EMPTY_STORED_BLOCK
        return head + padding + end + tail
    raise UnsupportedTableError(
        f"writing HFile compression codec {codec.name} ({int(codec)}) is not supported"
    )


def decompress(codec: CompressionCodec, data: bytes | memoryview, expected: int, where: str) -> bytes:
    """The uncompressed payload; CorruptFileError if it does not decode to ``expected`` bytes."""
    if codec is CompressionCodec.NONE:
        raw = bytes(data)
    elif codec is CompressionCodec.GZ:
        parts = []
        rest = bytes(data)
        try:
            while rest:
                inflater = zlib.decompressobj(31)
                parts.append(inflater.decompress(rest))
                if not inflater.eof:
                    raise CorruptFileError(f"{where}: truncated gzip payload")
                rest = inflater.unused_data
        except zlib.error as e:
            raise CorruptFileError(f"{where}: gzip payload does not decode: {e}") from e
        raw = b"".join(parts)
    else:
        raise UnsupportedTableError(
            f"{where}: HFile compression codec {codec.name} ({int(codec)}) is not supported "
            "(only GZ and NONE, as hudi-rs)"
        )
    if len(raw) != expected:
        raise CorruptFileError(f"{where}: payload is {len(raw)} bytes uncompressed, header says {expected}")
    return raw


# -- whole blocks --------------------------------------------------------------------------------


def parse_header(buf: bytes | memoryview, where: str) -> BlockHeader:
    if len(buf) < HEADER_SIZE:
        raise CorruptFileError(f"{where}: truncated block header ({len(buf)} of {HEADER_SIZE} bytes)")
    magic, on_disk, uncompressed, prev, checksum_type, per_checksum, data_size = _HEADER.unpack_from(buf, 0)
    block_type = _BY_MAGIC.get(magic)
    if block_type is None:
        raise CorruptFileError(f"{where}: no HFile block magic (found {magic!r})")
    if on_disk < 0 or uncompressed < 0 or not HEADER_SIZE <= data_size <= HEADER_SIZE + on_disk:
        raise CorruptFileError(
            f"{where}: {block_type.name} block header has inconsistent sizes "
            f"(on disk {on_disk}, uncompressed {uncompressed}, data with header {data_size})"
        )
    return BlockHeader(block_type, on_disk, uncompressed, prev, checksum_type & 0xFF, per_checksum, data_size)


def verify_checksums(header: BlockHeader, buf: bytes | memoryview, where: str) -> None:
    """Check the checksum area of the block in ``buf`` (which starts at the block's header)."""
    try:
        kind = ChecksumType(header.checksum_type)
    except ValueError as e:
        raise CorruptFileError(
            f"{where}: {header.block_type.name} block has unknown checksum type {header.checksum_type}"
        ) from e
    per = header.bytes_per_checksum
    if per <= 0:
        raise CorruptFileError(f"{where}: {header.block_type.name} block has bytesPerChecksum {per}")
    data_size = header.on_disk_data_size_with_header
    chunks = _checksum_chunks(data_size, per)
    if header.on_disk_size - data_size != CHECKSUM_SIZE * chunks:
        raise CorruptFileError(
            f"{where}: {header.block_type.name} block has {header.on_disk_size - data_size} checksum bytes, "
            f"expected {CHECKSUM_SIZE * chunks} for {data_size} bytes"
        )
    if kind is ChecksumType.NULL:
        return
    stored = struct.unpack_from(f">{chunks}I", buf, data_size)
    computed = chunk_checksums(kind, memoryview(buf)[:data_size], per)
    for i, (want, got) in enumerate(zip(stored, computed, strict=True)):
        if want != got:
            raise CorruptFileError(
                f"{where}: {header.block_type.name} block {kind.name} checksum mismatch in chunk {i} "
                f"(stored {want:08x}, computed {got:08x})"
            )


def decode_block(
    buf: bytes | memoryview, offset: int, codec: CompressionCodec, source: str, *, verify: bool = True
) -> Block:
    """The block whose header starts ``buf`` (``buf`` may run on past the block)."""
    where = f"{source}@{offset}"
    header = parse_header(buf, where)
    if len(buf) < header.on_disk_size:
        raise CorruptFileError(
            f"{where}: truncated {header.block_type.name} block ({len(buf)} of {header.on_disk_size} bytes)"
        )
    if verify:
        verify_checksums(header, buf, where)
    data = memoryview(buf)[HEADER_SIZE : header.on_disk_data_size_with_header]
    payload = decompress(codec, data, header.uncompressed_size_without_header, where)
    return Block(offset, header, payload)


def encode_block(
    block_type: BlockType,
    payload: bytes,
    codec: CompressionCodec,
    prev_block_offset: int = -1,
    level: int = GZIP_LEVEL,
) -> bytes:
    """A whole block as HBase writes it: header, compressed payload, CRC32C per 16 KiB."""
    data = compress(codec, payload, level)
    data_size = HEADER_SIZE + len(data)
    chunks = _checksum_chunks(data_size, BYTES_PER_CHECKSUM)
    header = _HEADER.pack(
        block_type.magic,
        len(data) + CHECKSUM_SIZE * chunks,
        len(payload),
        prev_block_offset,
        int(ChecksumType.CRC32C),
        BYTES_PER_CHECKSUM,
        data_size,
    )
    body = header + data
    sums = chunk_checksums(ChecksumType.CRC32C, body, BYTES_PER_CHECKSUM)
    return body + struct.pack(f">{chunks}I", *sums)


# -- data block payloads -------------------------------------------------------------------------


def encode_entries(rows: Sequence[bytes], values: Sequence[bytes]) -> tuple[list[bytes], list[int]]:
    """The KeyValues of :func:`encode_entry` for whole lists, as (heads, entry sizes): entry ``i``
    is ``heads[i]``, ``rows[i]``, ``KEY_SUFFIX``, ``values[i]`` and a zero memstore timestamp.
    No Python call per entry: the metadata table writes hundreds of thousands at a time."""
    row_lens = list(map(len, rows))
    value_lens = list(map(len, values))
    suffix = 2 + len(KEY_SUFFIX)
    heads = list(map(_KV_LENGTHS.pack, [n + suffix for n in row_lens], value_lens, row_lens))
    fixed = _KV_LENGTHS.size + len(KEY_SUFFIX) + 1
    sizes = [fixed + r + v for r, v in zip(row_lens, value_lens, strict=True)]
    return heads, sizes


def join_entries(heads: Sequence[bytes], rows: Sequence[bytes], values: Sequence[bytes]) -> bytes:
    """The data-block payload of the entries :func:`encode_entries` prepared."""
    return b"".join(
        chain.from_iterable(zip(heads, rows, repeat(KEY_SUFFIX), values, repeat(b"\x00"), strict=False))
    )


def encode_entry(row: bytes, value: bytes) -> bytes:
    """One KeyValue with Hudi's constant key suffix and a zero memstore timestamp."""
    return b"".join(
        (
            _KV_LENGTHS.pack(len(row) + 2 + len(KEY_SUFFIX), len(value), len(row)),
            row,
            KEY_SUFFIX,
            value,
            b"\x00",
        )
    )


def parse_data_block(
    payload: bytes, where: str, *, memstore_ts: bool = True, tags: bool = False
) -> tuple[list[bytes], list[bytes]]:
    """The rows and values of a data block payload, in stored order."""
    rows: list[bytes] = []
    values: list[bytes] = []
    pos = 0
    end = len(payload)
    unpack = _KV_LENGTHS.unpack_from
    try:
        while pos < end:
            key_len, value_len, row_len = unpack(payload, pos)
            key_start = pos + 8
            value_start = key_start + key_len
            pos = value_start + value_len
            if key_len < 2 + row_len or row_len < 0 or value_len < 0 or pos > end:
                raise CorruptFileError(
                    f"{where}: malformed KeyValue at payload offset {key_start - 8} "
                    f"(key {key_len} bytes, row {row_len}, value {value_len}; payload {end})"
                )
            rows.append(payload[key_start + 2 : key_start + 2 + row_len])
            values.append(payload[value_start:pos])
            if tags:
                (tags_len,) = struct.unpack_from(">H", payload, pos)
                pos += 2 + tags_len
            if memstore_ts:
                _, pos = decode_vlong(payload, pos)
    except (struct.error, IndexError) as e:
        raise CorruptFileError(f"{where}: data block payload ends inside a KeyValue") from e
    if pos != end:
        raise CorruptFileError(f"{where}: data block payload ends inside a KeyValue")
    return rows, values


# -- index block payloads ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """A block index entry: the block's first key (a row for data indexes, the name for the meta
    index), and where the block is (offset and whole on-disk size)."""

    key: bytes
    offset: int
    size: int


def encode_root_index(entries: list[tuple[bytes, int, int]]) -> bytes:
    """A root index payload from ``(key bytes as stored, offset, on-disk size)``."""
    parts = []
    for key, offset, size in entries:
        parts.append(_ENTRY.pack(offset, size))
        parts.append(encode_vlong(len(key)))
        parts.append(key)
    return b"".join(parts)


def parse_root_index(payload: bytes, count: int, where: str) -> list[tuple[bytes, int, int]]:
    """``count`` root index entries as ``(key bytes as stored, offset, on-disk size)``."""
    out = []
    pos = 0
    try:
        for _ in range(count):
            offset, size = _ENTRY.unpack_from(payload, pos)
            key_len, pos = decode_vlong(payload, pos + 12)
            if key_len < 0 or pos + key_len > len(payload):
                raise CorruptFileError(f"{where}: root index key of {key_len} bytes runs past the block")
            out.append((payload[pos : pos + key_len], offset, size))
            pos += key_len
    except (struct.error, IndexError) as e:
        raise CorruptFileError(f"{where}: root index block holds fewer than {count} entries") from e
    return out


def encode_nonroot_index(entries: list[tuple[bytes, int, int]]) -> bytes:
    """A leaf or intermediate index payload from ``(key bytes, offset, on-disk size)``."""
    body = []
    offsets = [0]
    for key, offset, size in entries:
        body.append(_ENTRY.pack(offset, size) + key)
        offsets.append(offsets[-1] + 12 + len(key))
    return struct.pack(f">i{len(offsets)}i", len(entries), *offsets) + b"".join(body)


def parse_nonroot_index(payload: bytes, where: str) -> list[tuple[bytes, int, int]]:
    """The entries of a leaf or intermediate index payload."""
    try:
        (count,) = _I32.unpack_from(payload, 0)
        if count < 0 or 4 * (count + 2) > len(payload):
            raise CorruptFileError(f"{where}: index block claims {count} entries")
        offsets = struct.unpack_from(f">{count + 1}i", payload, 4)
        base = 4 * (count + 2)
        out = []
        for i in range(count):
            start, stop = base + offsets[i], base + offsets[i + 1]
            if not start + 12 <= stop <= len(payload):
                raise CorruptFileError(f"{where}: index entry {i} lies outside the block")
            offset, size = _ENTRY.unpack_from(payload, start)
            out.append((payload[start + 12 : stop], offset, size))
        return out
    except struct.error as e:
        raise CorruptFileError(f"{where}: truncated index block") from e
