"""HFiles: our writer and reader in round trips, lookups and multi-level indexes, corruption, and the
building blocks (checksums, varints, the trailer, gzip).
"""

from __future__ import annotations

import dataclasses
import random
import struct
import zlib
from collections.abc import Iterator

import pytest

from hoodie.errors import CorruptFileError, UnsupportedTableError
from hoodie.file_group.log_block import BlockType as LogBlockType
from hoodie.file_group.log_block import HeaderKey, encode_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.hfile import BlockType, CompressionCodec, HFileReader, Trailer, write_hfile
from hoodie.hfile.blocks import (
    HEADER_SIZE,
    KEY_SUFFIX,
    _gzip,
    _readers_disagree,
    compress,
    decode_vlong,
    encode_key,
    encode_vlong,
)
from hoodie.hfile.checksum import ChecksumType, chunk_checksums, chunk_crc32c, crc32c, crc32c_scalar
from hoodie.hfile.protobuf import decode_varint, encode_varint, to_int64
from hoodie.hfile.trailer import COMPARATOR_CLASS_NAME, TRAILER_SIZE
from tests.unit.hfile_support import flip_byte


def _block_first_keys(r: HFileReader) -> list[bytes]:
    """The first row of every data block, from the blocks themselves (not the index)."""
    out = []
    for block in r.blocks():
        if block.block_type is BlockType.DATA:
            (row_len,) = struct.unpack_from(">h", block.payload, 8)
            out.append(block.payload[10 : 10 + row_len])
    return out


# -- round trips ------------------------------------------------------------------------------------


def _entries(n: int, *, seed: int = 0, prefixes: int = 7) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(seed)
    keys = sorted({f"p{rnd.randrange(prefixes)}/{rnd.getrandbits(40):010x}".encode() for _ in range(n)})
    return [(k, rnd.randbytes(rnd.randrange(0, 300))) for k in keys]


@pytest.mark.parametrize("compression", [CompressionCodec.GZ, CompressionCodec.NONE])
@pytest.mark.parametrize("block_size", [1, 512, 4096, 1 << 20])
def test_round_trip(compression: CompressionCodec, block_size: int) -> None:
    entries = _entries(600)
    data = write_hfile(
        entries,
        file_info={"schema": b"{}", b"bloomFilterTypeCode": b"DYNAMIC_V0"},
        meta_blocks={"bloomFilter": b"AAAA", "another": b"x" * 70000},
        block_size=block_size,
        compression=compression,
    )
    r = HFileReader(data)
    assert list(r.items()) == entries and len(r) == 600
    assert r.trailer.compression_codec is compression
    if block_size in (1, 1 << 20):
        assert len(r.data_index) == (600 if block_size == 1 else 1)
    else:
        assert len(r.data_index) > 10
    # as HBase: a block takes entries until its uncompressed payload reaches the block size
    data_blocks = [b for b in r.blocks() if b.block_type is BlockType.DATA]
    assert all(len(b.payload) >= block_size for b in data_blocks[:-1])
    for key, value in entries:
        assert r.get(key) == value
        assert r.get(key.decode()) == value
    assert r.get(b"p") is None and r.get(b"zzz") is None and r.get(b"") is None
    assert r.meta_block("bloomFilter") == b"AAAA" and r.meta_block("another") == b"x" * 70000
    assert r.meta_block("missing") is None
    assert r.meta_block_names == ["another", "bloomFilter"]
    assert r.file_info[b"schema"] == b"{}" and r.schema == "{}"
    assert r.file_info[b"hfile.LASTKEY"] == encode_key(entries[-1][0])
    (avg_key,) = struct.unpack(">i", r.file_info[b"hfile.AVG_KEY_LEN"])
    assert avg_key == sum(len(k) + 12 for k, _ in entries) // 600
    blocks = list(r.blocks())
    # prevBlockOffset chains the blocks of each type
    last: dict[BlockType, int] = {}
    for b in blocks:
        assert b.header.prev_block_offset == last.get(b.block_type, -1)
        last[b.block_type] = b.offset
        assert b.header.checksum_type == ChecksumType.CRC32C and b.header.bytes_per_checksum == 16384
    assert r.trailer.first_data_block_offset == 0
    assert r.trailer.last_data_block_offset == r.data_index[-1].offset
    assert r.trailer.load_on_open_data_offset == next(
        b.offset for b in blocks if b.block_type is BlockType.ROOT_INDEX
    )


def test_scan_prefix_across_blocks() -> None:
    entries = _entries(3000, seed=3, prefixes=5)
    r = HFileReader(write_hfile(entries, block_size=700))
    assert len(r.data_index) > 50
    for prefix in [
        b"",
        b"p",
        b"p0",
        b"p2/",
        b"p4/8",
        b"p3/0",
        b"a",
        b"q",
        b"p9",
        entries[100][0],
        entries[-1][0],
    ]:
        expected = [kv for kv in entries if kv[0].startswith(prefix)]
        assert list(r.scan_prefix(prefix)) == expected, prefix
        assert list(r.scan_prefix(prefix.decode())) == expected


@pytest.mark.parametrize("fanout", [2, 3, 16])
def test_multi_level_index(fanout: int) -> None:
    entries = _entries(800, seed=5)
    data = write_hfile(entries, block_size=300, index_block_entries=fanout)
    r = HFileReader(data)
    kinds = {b.block_type for b in r.blocks()}
    levels = r.trailer.num_data_index_levels
    assert levels >= 2 and BlockType.LEAF_INDEX in kinds
    assert (BlockType.INTERMEDIATE_INDEX in kinds) == (levels > 2)
    assert r.trailer.data_index_count <= fanout
    assert [e.key for e in r.data_index] == _block_first_keys(r)
    assert list(r.items()) == entries
    for key, value in entries[::7]:
        assert r.get(key) == value
    assert list(r.scan_prefix(b"p3/")) == [kv for kv in entries if kv[0].startswith(b"p3/")]


def test_small_fanout_without_enough_blocks_stays_single_level() -> None:
    entries = _entries(20)
    r = HFileReader(write_hfile(entries, index_block_entries=4))
    assert r.trailer.num_data_index_levels == 1 and list(r.items()) == entries


def test_empty_hfile_like_hbase() -> None:
    r = HFileReader(write_hfile([], file_info={"schema": b"{}"}, meta_blocks={"bloomFilter": b"x"}))
    assert list(r.items()) == [] and len(r) == 0 and r.data_index == ()
    assert r.get(b"a") is None and list(r.scan_prefix(b"")) == []
    assert r.first_key is None and r.last_key is None and b"hfile.LASTKEY" not in r.file_info
    t = r.trailer
    assert (t.first_data_block_offset, t.last_data_block_offset, t.data_index_count) == (-1, -1, 0)
    assert r.bloom_filter == b"x"
    assert BlockType.DATA not in {b.block_type for b in r.blocks()}
    # no meta blocks either: only the load-on-open section and the trailer
    bare = write_hfile([])
    assert [b.block_type for b in HFileReader(bare).blocks()] == [
        BlockType.ROOT_INDEX,
        BlockType.ROOT_INDEX,
        BlockType.FILE_INFO,
    ]


def test_one_entry_and_empty_values() -> None:
    for entries in ([(b"only", b"value")], [(b"a", b""), (b"b", b"")], [(b"", b"empty key")]):
        r = HFileReader(write_hfile(entries))
        assert list(r.items()) == entries
        assert all(r.get(k) == v for k, v in entries)


def test_create_time_and_entries_from_a_generator() -> None:
    gen: Iterator[tuple[bytes, bytes]] = ((f"k{i:03d}".encode(), b"v") for i in range(100))
    r = HFileReader(write_hfile(gen, create_time_ms=1_700_000_000_000))
    assert len(r) == 100
    assert struct.unpack(">q", r.file_info[b"hfile.CREATE_TIME_TS"]) == (1_700_000_000_000,)


def test_writer_rejects_unsorted_duplicate_and_reserved() -> None:
    with pytest.raises(ValueError, match=r"b'b' out of order after b'c'"):
        write_hfile([(b"a", b""), (b"c", b""), (b"b", b"")])
    with pytest.raises(ValueError, match=r"b'a' duplicate after b'a'"):
        write_hfile([(b"a", b"1"), (b"a", b"2")])
    with pytest.raises(ValueError, match="reserved"):
        write_hfile([], file_info={"hfile.LASTKEY": b""})
    with pytest.raises(ValueError, match="reserved"):
        write_hfile([], file_info={b"KEY_VALUE_VERSION": b""})
    with pytest.raises(ValueError, match="longer than"):
        write_hfile([(b"x" * 40000, b"")])
    with pytest.raises(ValueError, match="block size"):
        write_hfile([], block_size=0)


def test_key_layout_in_data_block() -> None:
    r = HFileReader(write_hfile([(b"row", b"val")], compression=CompressionCodec.NONE))
    data = next(b for b in r.blocks() if b.block_type is BlockType.DATA)
    assert data.payload == struct.pack(">iih", 15, 3, 3) + b"row" + KEY_SUFFIX + b"val" + b"\x00"
    assert bytes.fromhex("007fffffffffffffff04") == KEY_SUFFIX


def test_hfile_in_a_log_block() -> None:
    content = write_hfile([(b"k1", b"v1"), (b"k2", b"v2")], file_info={"schema": b"{}"})
    block_bytes = encode_block(
        LogBlockType.HFILE_DATA,
        {HeaderKey.INSTANT_TIME: "20250101000000000", HeaderKey.SCHEMA: "{}"},
        content,
    )
    (block,) = read_blocks(block_bytes, "x.log")
    assert dict(HFileReader.from_log_block(block).items()) == {b"k1": b"v1", b"k2": b"v2"}


# -- corruption ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [CompressionCodec.GZ, CompressionCodec.NONE])
def test_flipped_byte_in_a_data_block(compression: CompressionCodec) -> None:
    data = write_hfile(_entries(200), compression=compression, block_size=2000)
    r = HFileReader(data, source="f.hfile")
    target = r.data_index[3]
    bad = HFileReader(
        flip_byte(data, target.offset + HEADER_SIZE + 40), source="f.hfile"
    )  # opens: index intact
    with pytest.raises(
        CorruptFileError, match=rf"f\.hfile@{target.offset}: DATA block CRC32C checksum mismatch"
    ):
        list(bad.items())
    with pytest.raises(CorruptFileError, match="checksum"):
        for key, _ in list(r.items())[::5]:
            bad.get(key)
    with pytest.raises(CorruptFileError, match="checksum"):
        HFileReader(flip_byte(data, target.offset + target.size - 1)).get(target.key)  # the checksum itself


def test_flipped_byte_in_load_on_open_section() -> None:
    data = write_hfile(_entries(50))
    r = HFileReader(data)
    with pytest.raises(CorruptFileError, match=rf"@{r.trailer.file_info_offset}: FILE_INFO block .*checksum"):
        HFileReader(flip_byte(data, r.trailer.file_info_offset + HEADER_SIZE + 5))
    with pytest.raises(CorruptFileError, match="no HFile block magic"):
        HFileReader(flip_byte(data, r.trailer.load_on_open_data_offset))


@pytest.mark.parametrize("cut", [1, 100, TRAILER_SIZE, TRAILER_SIZE + 50])
def test_truncated_file(cut: int) -> None:
    data = write_hfile(_entries(300), block_size=2000, meta_blocks={"bloomFilter": b"b" * 5000})
    with pytest.raises(CorruptFileError, match=r"short\.hfile"):
        HFileReader(data[:-cut], source="short.hfile")


def test_truncated_at_the_front_and_tiny_inputs() -> None:
    data = write_hfile(_entries(300), block_size=2000)
    with pytest.raises(CorruptFileError, match="HFile"):
        list(HFileReader(data[64:]).items())
    with pytest.raises(CorruptFileError, match="shorter than the 4096-byte HFile trailer"):
        HFileReader(b"")
    with pytest.raises(CorruptFileError, match="no HFile trailer magic"):
        HFileReader(bytes(5000))


def test_bad_trailer_magic_and_version() -> None:
    data = write_hfile(_entries(10))
    start = len(data) - TRAILER_SIZE
    with pytest.raises(CorruptFileError, match=rf"x\.hfile@{start}: no HFile trailer magic"):
        HFileReader(data[:start] + b"TRABLK!$" + data[start + 8 :], source="x.hfile")
    with pytest.raises(UnsupportedTableError, match=r"HFile version 2\.3"):
        HFileReader(data[:-4] + struct.pack(">I", 3 << 24 | 2))


def test_unsupported_codec_is_named() -> None:
    data = write_hfile(_entries(10))
    r = HFileReader(data)
    snappy = dataclasses.replace(r.trailer, compression_codec=CompressionCodec.SNAPPY)
    with pytest.raises(UnsupportedTableError, match=r"codec SNAPPY \(3\)"):
        HFileReader(data[:-TRAILER_SIZE] + snappy.encode(), source="s.hfile")
    with pytest.raises(UnsupportedTableError, match="ZSTD"):
        write_hfile(_entries(3), compression=CompressionCodec.ZSTD)


def test_trailer_lies_are_caught() -> None:
    data = write_hfile(_entries(100), block_size=1000)
    r = HFileReader(data)
    head = data[:-TRAILER_SIZE]
    more = dataclasses.replace(r.trailer, entry_count=r.trailer.entry_count + 1)
    with pytest.raises(CorruptFileError, match="trailer says 101"):
        list(HFileReader(head + more.encode()).items())
    past = dataclasses.replace(r.trailer, load_on_open_data_offset=len(data))
    with pytest.raises(CorruptFileError, match="trailer offsets out of range"):
        HFileReader(head + past.encode())
    wrong = dataclasses.replace(r.trailer, load_on_open_data_offset=r.data_index[1].offset)
    with pytest.raises(CorruptFileError, match="expected a ROOT_INDEX block, found DATA"):
        HFileReader(head + wrong.encode())


# -- building blocks ----------------------------------------------------------------------------------


def test_crc32c() -> None:
    assert crc32c_scalar(b"123456789") == 0xE3069283 == crc32c(b"123456789")
    assert crc32c(b"") == 0
    rnd = random.Random(11)
    for n in (1, 63, 64, 2048, 2049, 16383, 16384, 16385, 50_000, 70_001):
        data = rnd.randbytes(n)
        expected = [crc32c_scalar(data[i : i + 16384]) for i in range(0, n, 16384)]
        assert chunk_crc32c(data, 16384) == expected, n
        assert crc32c(data) == crc32c_scalar(data), n
    data = rnd.randbytes(40000)
    assert chunk_checksums(ChecksumType.CRC32, data, 16384) == [
        zlib.crc32(data[i : i + 16384]) for i in range(0, 40000, 16384)
    ]
    assert chunk_checksums(ChecksumType.NULL, data, 16384) == [0, 0, 0]


def test_vlong_and_varint() -> None:
    known = {0: "00", 127: "7f", -112: "90", 128: "8f80", 255: "8fff", 256: "8e0100", -113: "8770", -1: "ff"}
    for value, hexed in known.items():
        assert encode_vlong(value).hex() == hexed
    for value in [*range(-300, 300), 2**31 - 1, 2**40, -(2**40), 2**63 - 1, -(2**63)]:
        raw = encode_vlong(value)
        assert decode_vlong(raw, 0) == (value, len(raw))
    assert encode_varint(-1) == b"\xff" * 9 + b"\x01"
    assert to_int64(decode_varint(encode_varint(-1), 0)[0]) == -1
    assert decode_varint(encode_varint(300), 0) == (300, 2)


def test_trailer_encoding_matches_hbase() -> None:
    t = Trailer(1, 2, 3, 4, 5, 6, 7, 1, -1, -1, COMPARATOR_CLASS_NAME, CompressionCodec.GZ)
    raw = t.encode()
    assert len(raw) == TRAILER_SIZE and raw[:8] == b'TRABLK"$' and raw[-4:] == bytes.fromhex("03000003")
    assert Trailer.parse(raw, 0, "t") == t


def test_gzip_avoids_the_checksum_count_ambiguity() -> None:
    """A compressed block ending within a few bytes below a 16 KiB boundary is padded (see
    ``_readers_disagree``): hudi-rs sizes the checksums from the whole block and would otherwise
    cut the end off the gzip stream."""
    rnd = random.Random(1)
    blob = rnd.randbytes(17000)
    hits = [n for n in range(16250, 16400) if _readers_disagree(HEADER_SIZE + len(_gzip(blob[:n])))]
    assert hits
    entries = [(b"k", blob[: hits[0] - 21])]  # the 21 bytes of KeyValue framing around the value
    data = write_hfile(entries)
    block = next(HFileReader(data).blocks())
    assert not _readers_disagree(block.header.on_disk_data_size_with_header)
    assert list(HFileReader(data).items()) == entries
    # blocks of several checksum chunks: a wider range to step over, still the same data
    blob = rnd.randbytes(82000)
    padded = 0
    for n in range(81600, 81920):
        if _readers_disagree(HEADER_SIZE + len(_gzip(blob[:n]))):
            out = compress(CompressionCodec.GZ, blob[:n])
            assert not _readers_disagree(HEADER_SIZE + len(out))
            assert zlib.decompress(out, 31) == blob[:n]
            padded += 1
    assert padded
