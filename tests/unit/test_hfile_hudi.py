"""HFiles Apache Hudi wrote: every metadata-table HFile in the fixtures (base files and HFILE_DATA
log blocks) reads, and our writer against Hudi's bytes.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import struct
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.bloom import deserialize_bloom_filter
from hoodie.errors import CorruptFileError
from hoodie.file_group.log_block import BlockType as LogBlockType
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import read_blocks
from hoodie.hfile import BlockType, CompressionCodec, HFileReader, write_hfile
from hoodie.hfile.blocks import HEADER_SIZE, _gzip
from hoodie.hfile.checksum import ChecksumType
from hoodie.hfile.trailer import COMPARATOR_CLASS_NAME
from hoodie.io.fileio import LocalFileIO
from tests.conftest import fixture_path
from tests.unit.hfile_support import MDT_TABLE, flip_byte, rewrite_args

WRITER_FILE_INFO = {
    b"KEY_VALUE_VERSION",
    b"MAX_MEMSTORE_TS_KEY",
    b"hfile.AVG_KEY_LEN",
    b"hfile.AVG_VALUE_LEN",
    b"hfile.CREATE_TIME_TS",
}
# MDT partition directory -> the HoodieMetadataRecord type its records carry (files: 2, and 1
# for __all_partitions__).
RECORD_TYPES = {"column_stats": 3, "partition_stats": 6, "record_index": 5, "secondary_index": 7}


# -- fixtures -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FixtureHFile:
    source: str
    data: bytes
    partition: str  # the MDT partition directory
    base_name: str | None  # the file name for base files, None for log blocks


def _mdt_partition(path: Path) -> str:
    parts = path.parts
    return parts[parts.index("metadata") + 1]


def _fixture_hfiles(root: Path) -> list[FixtureHFile]:
    out = []
    for dirpath, _, files in os.walk(root):
        here = Path(dirpath)
        if "metadata" not in here.parts or ".hoodie" not in here.parts:
            continue
        for name in sorted(files):
            path = here / name
            if name.endswith(".hfile"):
                out.append(FixtureHFile(str(path), path.read_bytes(), _mdt_partition(path), name))
            elif LogFile.parse(name) is not None:
                for block in read_blocks(path.read_bytes(), str(path)):
                    if block.block_type is LogBlockType.HFILE_DATA:
                        source = f"{path}@{block.offset}"
                        out.append(FixtureHFile(source, block.content, _mdt_partition(path), None))
    return sorted(out, key=lambda f: f.source)


@pytest.fixture(scope="module")
def fixture_hfiles(fixture_root: Path) -> list[FixtureHFile]:
    return _fixture_hfiles(fixture_root)


def _decode(schema: Any, value: bytes) -> dict[str, Any]:
    record: dict[str, Any] = fastavro.schemaless_reader(io.BytesIO(value), schema, schema)
    return record


# -- reading what Hudi wrote ----------------------------------------------------------------------


def test_fixture_hfile_inventory(fixture_hfiles: list[FixtureHFile]) -> None:
    base = [f for f in fixture_hfiles if f.base_name is not None]
    logs = [f for f in fixture_hfiles if f.base_name is None]
    assert len(base) == 54
    assert len(logs) == 123
    versions = {HFileReader(f.data).trailer.minor_version for f in fixture_hfiles}
    assert versions == {0, 3}  # Hudi 1.1's own writer (3.0) and HBase's in Hudi 1.0 (3.3)
    assert any(len(HFileReader(f.data)) == 0 for f in base)


def test_every_fixture_hfile_reads(fixture_hfiles: list[FixtureHFile]) -> None:
    all_partitions_seen = 0
    for f in fixture_hfiles:
        r = HFileReader(f.data, source=f.source)
        t = r.trailer
        assert (t.major_version, t.comparator_class_name) == (3, COMPARATOR_CLASS_NAME), f.source
        assert t.compression_codec is CompressionCodec.GZ and t.num_data_index_levels == 1
        items = list(r.items())
        keys = [k for k, _ in items]
        assert len(items) == t.entry_count == len(r), f.source
        assert all(a < b for a, b in itertools.pairwise(keys)), f.source
        for key, value in items:
            assert r.get(key) == value
            assert r.get(key + b"\x00") is None
        assert r.get(b"") is None
        assert r.first_key == (keys[0] if keys else None)
        assert r.last_key == (keys[-1] if keys else None)
        assert set(r.file_info) >= WRITER_FILE_INFO, f.source
        assert bool(r.file_info.get(b"hfile.LASTKEY")) == bool(keys)
        assert r.schema is not None
        schema = fastavro.parse_schema(json.loads(r.schema))
        expected = next((code for prefix, code in RECORD_TYPES.items() if f.partition.startswith(prefix)), 2)
        for key, value in items:
            record = _decode(schema, value)
            assert record["key"] == ""
            if f.partition == "files":
                assert record["type"] == (1 if key == b"__all_partitions__" else 2)
            else:
                assert record["type"] == expected, (f.source, key)
            if f.base_name is None:
                assert record["_hoodie_file_name"] is None
            else:
                assert record["_hoodie_file_name"] in (None, f.base_name)
        if f.partition == "files" and f.base_name is not None:
            assert b"__all_partitions__" in keys
            all_partitions_seen += 1
        # every block in file order decodes and verifies (CRC32C in 3.3 files, NULL in 3.0)
        blocks = list(r.blocks())
        types = [b.block_type for b in blocks]
        assert types[-1] is BlockType.FILE_INFO and types.count(BlockType.ROOT_INDEX) == 2
        assert types.count(BlockType.DATA) == len(r.data_index) == (1 if keys else 0)
        expected_checksum = ChecksumType.CRC32C if t.minor_version == 3 else ChecksumType.NULL
        assert {b.header.checksum_type for b in blocks} == {expected_checksum}
    assert all_partitions_seen == 5


def test_fixture_base_hfiles_carry_bloom_filters(fixture_hfiles: list[FixtureHFile]) -> None:
    for f in fixture_hfiles:
        r = HFileReader(f.data, source=f.source)
        keys = list(r.keys())
        if f.base_name is None:
            assert r.meta_block_names == [] and r.bloom_filter is None
            continue
        assert r.meta_block_names == ["bloomFilter"]
        text = r.bloom_filter
        assert text is not None
        bloom = deserialize_bloom_filter(text, r.file_info[b"bloomFilterTypeCode"].decode())
        assert all(bloom.might_contain(k.decode()) for k in keys)
        assert r.file_info[b"minRecordKey"] == (keys[0] if keys else b"")
        assert r.file_info[b"maxRecordKey"] == (keys[-1] if keys else b"")


def test_fixture_hfile_through_fileio(fixture_root: Path) -> None:
    path = next(
        fixture_path(fixture_root, MDT_TABLE).joinpath(".hoodie", "metadata", "column_stats").glob("*.hfile")
    )
    in_memory = HFileReader(path.read_bytes(), source=str(path))
    ranged = HFileReader.open(LocalFileIO(), str(path))
    assert list(ranged.items()) == list(in_memory.items())
    assert ranged.file_info == in_memory.file_info and ranged.bloom_filter == in_memory.bloom_filter
    prefix = next(in_memory.keys())[:12]
    assert list(ranged.scan_prefix(prefix)) == [kv for kv in in_memory.items() if kv[0].startswith(prefix)]
    with pytest.raises(FileNotFoundError):
        HFileReader.open(LocalFileIO(), str(path) + ".missing")


def test_from_log_block_names_the_block(fixture_root: Path) -> None:
    files = fixture_path(fixture_root, MDT_TABLE) / ".hoodie" / "metadata" / "files"
    log = next(
        p for p in sorted(files.iterdir()) if LogFile.parse(p.name) is not None and "_0-0-0" not in p.name
    )
    blocks = read_blocks(log.read_bytes(), str(log))
    hfile_block = next(b for b in blocks if b.block_type is LogBlockType.HFILE_DATA)
    r = HFileReader.from_log_block(hfile_block)
    assert r.source == f"{log}@{hfile_block.offset}:HFILE_DATA"
    assert b"__all_partitions__" in r
    assert r.schema == hfile_block.schema  # the block header's SCHEMA is also in the file info
    other = dataclasses.replace(hfile_block, block_type=LogBlockType.DELETE)
    with pytest.raises(ValueError, match="DELETE"):
        HFileReader.from_log_block(other)


# -- our writer against Hudi's bytes ---------------------------------------------------------------


def test_rewriting_hbase_written_hfiles_is_byte_identical(fixture_hfiles: list[FixtureHFile]) -> None:
    """Hudi 1.0 wrote its HFiles through HBase (version 3.3): ours are the same bytes."""
    hbase = [f for f in fixture_hfiles if HFileReader(f.data).trailer.minor_version == 3]
    assert len(hbase) == 24 + 35
    for f in hbase:
        r = HFileReader(f.data, source=f.source)
        ours = write_hfile(r.items(), **rewrite_args(r))
        assert ours == f.data, f.source


def test_rewriting_hudi_native_hfiles_keeps_entries_and_payloads(fixture_hfiles: list[FixtureHFile]) -> None:
    """Hudi 1.1's own writer (3.0): same entries, file info, data and meta payloads, trailer counts."""
    native = [f for f in fixture_hfiles if HFileReader(f.data).trailer.minor_version == 0]
    assert native
    for f in native:
        theirs = HFileReader(f.data, source=f.source)
        ours = HFileReader(write_hfile(theirs.items(), **rewrite_args(theirs)))
        assert list(ours.items()) == list(theirs.items())
        assert ours.schema == theirs.schema
        for key in (
            b"hfile.AVG_VALUE_LEN",
            b"KEY_VALUE_VERSION",
            b"MAX_MEMSTORE_TS_KEY",
            b"bloomFilterTypeCode",
        ):
            assert ours.file_info.get(key) == theirs.file_info.get(key), key
        # Hudi 1.1 counts only the row in the average key length; HBase the whole key
        n = len(theirs)
        (their_avg,) = struct.unpack(">i", theirs.file_info[b"hfile.AVG_KEY_LEN"])
        (our_avg,) = struct.unpack(">i", ours.file_info[b"hfile.AVG_KEY_LEN"])
        assert our_avg == (their_avg + 12 if n else 0)

        def payloads(r: HFileReader, kind: BlockType) -> list[bytes]:
            return [b.payload for b in r.blocks() if b.block_type is kind]

        assert payloads(ours, BlockType.DATA) == payloads(theirs, BlockType.DATA)
        assert payloads(ours, BlockType.META) == payloads(theirs, BlockType.META)
        for field in ("data_index_count", "meta_index_count", "entry_count", "num_data_index_levels"):
            assert getattr(ours.trailer, field) == getattr(theirs.trailer, field), field
        assert ours.trailer.first_data_block_offset == theirs.trailer.first_data_block_offset


def test_gzip_payload_bytes_match_hudi(fixture_hfiles: list[FixtureHFile]) -> None:
    """Every fixture block, GZ-compressed by us, is the same bytes as Hudi's (both writers)."""
    count = 0
    for f in fixture_hfiles[:40]:
        r = HFileReader(f.data)
        for block in r.blocks():
            on_disk = f.data[
                block.offset + HEADER_SIZE : block.offset + block.header.on_disk_data_size_with_header
            ]
            assert _gzip(block.payload) == on_disk
            count += 1
    assert count > 100


def test_flipped_byte_in_a_null_checksum_file(fixture_hfiles: list[FixtureHFile]) -> None:
    f = next(
        f
        for f in fixture_hfiles
        if HFileReader(f.data).trailer.minor_version == 0 and len(HFileReader(f.data))
    )
    bad = HFileReader(flip_byte(f.data, HEADER_SIZE + 30), source="native.hfile")  # gzip's own CRC catches it
    with pytest.raises(CorruptFileError, match=r"native\.hfile@0: "):
        list(bad.items())
