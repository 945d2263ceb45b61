"""Column chunks as pages: re-compressing a chunk's pages without decoding their values.

Each page is a compact-Thrift ``PageHeader`` (``type``, ``uncompressed_page_size``,
``compressed_page_size``, ``crc``, then the header of its kind) followed by
``compressed_page_size`` bytes. A v1 data page and a dictionary page compress their whole body;
a v2 data page keeps its repetition and definition levels uncompressed in front and compresses
the values only when ``is_compressed`` (default true). Changing the codec therefore rewrites
each page's body and header (a new size; the CRC, which covered the old bytes, is dropped), as
parquet-mr's ``CompressionConverter`` does when Hudi's binary copy meets a chunk whose codec is
not the table's (``HoodieParquetBinaryCopyBase.processChunk``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from hoodie.errors import CorruptFileError
from hoodie.parquet.thrift import BOOL_TRUE, I32, Struct, decode_struct, encode_struct

# PageHeader fields and page types
PH_TYPE, PH_UNCOMPRESSED, PH_COMPRESSED, PH_CRC, PH_DATA_V2 = 1, 2, 3, 4, 8
DATA_PAGE, INDEX_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 1, 2, 3
# DataPageHeaderV2 fields
V2_DEF_LENGTH, V2_REP_LENGTH, V2_IS_COMPRESSED = 5, 6, 7

# parquet CompressionCodec -> pyarrow codec name (LZO has none here; Hadoop-framed LZ4, 5, is
# raw LZ4 blocks in Hadoop's frames, see below)
ARROW_CODECS = {0: None, 1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}
LZ4_HADOOP = 5
LZ4_RAW = 7
WRITABLE_CODECS = frozenset({*ARROW_CODECS, LZ4_HADOOP})
"""The codecs pages can be re-compressed from and to here (all but LZO)."""
# Hadoop's Lz4Codec (what parquet-mr's CompressionCodecName.LZ4 names) frames LZ4 blocks through a
# BlockCompressorStream with io.compression.codec.lz4.buffersize = 256 KiB: input of at most
# LZ4_MAX_INPUT bytes (the buffer less Lz4Compressor's overhead, size / 255 + 16) becomes one frame,
# ``u32 BE raw length | u32 BE compressed length | LZ4 block``; a longer page gets the raw length
# once, then one ``u32 BE compressed length | LZ4 block`` per LZ4_MAX_INPUT bytes. Both are read
# here. hts writes every page as ONE frame, as Arrow's Lz4HadoopCodec does: parquet-mr (Spark's
# reader, tested), pyarrow and hudi-rs read that, while hudi-rs (arrow-rs) fails on parquet-mr's
# split frames ("the offset to copy is not contained in the decompressed buffer").
LZ4_BUFFER = 256 * 1024
LZ4_MAX_INPUT = LZ4_BUFFER - (LZ4_BUFFER // 255 + 16)


@dataclass(frozen=True, slots=True)
class TranscodedChunk:
    data: bytes
    dictionary_offset: int | None
    """Offset of the dictionary page within ``data`` (None if there is none)."""
    data_offset: int
    """Offset of the first data page within ``data``."""
    uncompressed_size: int


def _lz4_length(block: bytes | memoryview, pos: int, length: int) -> tuple[int, int]:
    """An LZ4 sequence's literal or match length from its 4-bit nibble: 15 continues in the bytes at
    ``pos`` (each added, until one is not 255). The length and where the sequence goes on."""
    if length == 15:
        while True:
            extra = block[pos]
            pos += 1
            length += extra
            if extra != 255:
                break
    return length, pos


def lz4_block_length(block: bytes | memoryview) -> int:
    """How many bytes an LZ4 block decompresses to (walking its sequences, not decoding them)."""
    pos, out, end = 0, 0, len(block)
    while pos < end:
        token = block[pos]
        pos += 1
        literals, pos = _lz4_length(block, pos, token >> 4)
        pos += literals
        out += literals
        if pos >= end:
            break  # the last sequence has literals only
        pos += 2  # match offset
        match, pos = _lz4_length(block, pos, token & 15)
        out += match + 4
    if pos != end:
        raise CorruptFileError("an LZ4 block runs past its frame")
    return out


def lz4_hadoop_compress(data: bytes | memoryview) -> bytes:
    """``data`` as one frame of Hadoop's LZ4 framing (see LZ4_BUFFER for why one)."""
    block: bytes = pa.Codec("lz4_raw").compress(data).to_pybytes()
    return struct.pack(">II", len(data), len(block)) + block


def lz4_hadoop_decompress(data: bytes | memoryview, size: int) -> bytes:
    """The ``size`` bytes of a page in Hadoop's LZ4 framing (each frame's blocks under its length)."""
    raw = pa.Codec("lz4_raw")
    view = memoryview(data)
    out = bytearray()
    pos = 0
    while pos < len(view):
        if pos + 8 > len(view):
            raise CorruptFileError("a Hadoop LZ4 frame header runs past its page")
        (expected,) = struct.unpack(">I", view[pos : pos + 4])
        pos += 4
        produced = 0
        while produced < expected:
            (length,) = struct.unpack(">I", view[pos : pos + 4])
            block = view[pos + 4 : pos + 4 + length]
            pos += 4 + length
            n = lz4_block_length(block)
            out += raw.decompress(block, n).to_pybytes() if n else b""
            produced += n
        if produced != expected:
            raise CorruptFileError(f"a Hadoop LZ4 frame holds {produced} bytes, its header says {expected}")
    if len(out) != size:
        raise CorruptFileError(f"an LZ4 page holds {len(out)} bytes, its header says {size}")
    return bytes(out)


Codec = tuple[Callable[[bytes], bytes], Callable[[bytes, int], bytes]]


def _codec(code: int) -> Codec | None:
    """``(compress, decompress)`` of a parquet codec; None for UNCOMPRESSED."""
    if code == LZ4_HADOOP:
        return lz4_hadoop_compress, lz4_hadoop_decompress
    if code not in ARROW_CODECS:
        raise CorruptFileError(f"parquet compression codec {code} cannot be re-compressed here")
    name = ARROW_CODECS[code]
    if name is None:
        return None
    codec = pa.Codec(name)
    return (
        lambda data: codec.compress(data).to_pybytes(),
        lambda data, size: codec.decompress(data, size).to_pybytes(),
    )


def can_transcode(source: int, target: int) -> bool:
    return source in WRITABLE_CODECS and target in WRITABLE_CODECS


def transcode_chunk(chunk: bytes | memoryview, num_values: int, source: int, target: int) -> TranscodedChunk:
    """The pages of ``chunk`` (all ``num_values`` values) re-compressed from ``source`` to ``target``."""
    decompressor, compressor = _codec(source), _codec(target)
    out = bytearray()
    dictionary_offset: int | None = None
    data_offset: int | None = None
    uncompressed_total = 0
    pos = 0
    seen = 0
    while pos < len(chunk):
        header, body_start = decode_struct(chunk, pos)
        size = header.get_int(PH_COMPRESSED)
        raw_size = header.get_int(PH_UNCOMPRESSED)
        body = bytes(chunk[body_start : body_start + size])
        if len(body) != size:
            raise CorruptFileError(f"a page of {size} bytes at chunk byte {pos} runs past the chunk")
        pos = body_start + size
        kind = header.get_int(PH_TYPE)
        prefix = b""
        compressed = True
        if kind == DATA_PAGE_V2:
            v2 = header.get_struct(PH_DATA_V2)
            if v2 is None:
                raise CorruptFileError("a v2 data page has no DataPageHeaderV2")
            levels = v2.get_int(V2_DEF_LENGTH, 0) + v2.get_int(V2_REP_LENGTH, 0)
            prefix, body, raw_size = body[:levels], body[levels:], raw_size - levels
            flag = v2.get(V2_IS_COMPRESSED)
            compressed = flag is None or bool(flag)
            v2.set(V2_IS_COMPRESSED, BOOL_TRUE, compressor is not None)
            seen += v2.get_int(1)
        elif kind == DATA_PAGE:
            data_header = header.get_struct(5)
            seen += data_header.get_int(1) if data_header is not None else 0
        plain = body if decompressor is None or not compressed else decompressor[1](body, raw_size)
        body = plain if compressor is None else compressor[0](plain)
        new_header = Struct(dict(header.fields))
        new_header.drop(PH_CRC)
        new_header.set(PH_COMPRESSED, I32, len(prefix) + len(body))
        encoded = encode_struct(new_header)
        if kind == DICTIONARY_PAGE and dictionary_offset is None:
            dictionary_offset = len(out)
        elif kind in (DATA_PAGE, DATA_PAGE_V2) and data_offset is None:
            data_offset = len(out)
        uncompressed_total += len(encoded) + header.get_int(PH_UNCOMPRESSED)
        out += encoded
        out += prefix
        out += body
    if data_offset is None or seen != num_values:
        raise CorruptFileError(
            f"a column chunk holds {seen} values in its data pages, its metadata says {num_values}"
        )
    return TranscodedChunk(bytes(out), dictionary_offset, data_offset, uncompressed_total)
