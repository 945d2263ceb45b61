"""hudi-rs reads the HFiles we write, as metadata-table base files and at a checksum boundary."""

from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.hfile import CompressionCodec, HFileReader, write_hfile
from hoodie.hfile.blocks import HEADER_SIZE, _gzip, _readers_disagree
from tests.conftest import fixture_path
from tests.unit.hfile_support import MDT_TABLE, rewrite_args


def _hudi_rs_read(mdt: Path, relative: str) -> Any:
    from hudi import HudiFileGroupReader

    return HudiFileGroupReader(str(mdt)).read_file_slice_from_paths(relative, [])


@pytest.fixture()
def empty_mdt(fixture_root: Path, tmp_path: Path) -> Path:
    """A bare metadata-table directory: hudi-rs needs only its hoodie.properties to read a file."""
    mdt = tmp_path / "t" / ".hoodie" / "metadata"
    (mdt / ".hoodie").mkdir(parents=True)
    shutil.copy(
        fixture_path(fixture_root, MDT_TABLE) / ".hoodie" / "metadata" / ".hoodie" / "hoodie.properties",
        mdt / ".hoodie" / "hoodie.properties",
    )
    return mdt


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"compression": CompressionCodec.NONE},
        {"block_size": 200, "index_block_entries": 3},
        {"block_size": 100, "index_block_entries": 2},
    ],
    ids=["gz", "none", "multi-level", "deep"],
)
@pytest.mark.parametrize("partition", ["files", "column_stats"])
def test_hudi_rs_reads_our_hfiles(
    fixture_root: Path, empty_mdt: Path, partition: str, options: dict[str, Any]
) -> None:
    source_mdt = fixture_path(fixture_root, MDT_TABLE) / ".hoodie" / "metadata"
    original = max((source_mdt / partition).glob("*.hfile"), key=lambda p: p.stat().st_size)
    theirs = HFileReader(original.read_bytes())
    ours = write_hfile(theirs.items(), **rewrite_args(theirs), **options)
    if "index_block_entries" in options:
        assert HFileReader(ours).trailer.num_data_index_levels > 1
    (empty_mdt / partition).mkdir()
    (empty_mdt / partition / original.name).write_bytes(ours)
    expected = _hudi_rs_read(source_mdt, f"{partition}/{original.name}")
    got = _hudi_rs_read(empty_mdt, f"{partition}/{original.name}")
    assert got.num_rows == len(theirs) > 0
    assert got.equals(expected)


def test_hudi_rs_reads_a_block_at_a_checksum_boundary(fixture_root: Path, empty_mdt: Path) -> None:
    source = next((fixture_path(fixture_root, MDT_TABLE) / ".hoodie" / "metadata" / "files").glob("*.hfile"))
    schema_json = HFileReader(source.read_bytes()).schema
    assert schema_json is not None
    schema = fastavro.parse_schema(json.loads(schema_json))
    blob = random.Random(2).randbytes(17000)

    def record(n: int) -> bytes:
        buf = io.BytesIO()
        bloom = {"type": "DYNAMIC_V0", "timestamp": "1", "bloomFilter": blob[:n], "isDeleted": False}
        fastavro.schemaless_writer(buf, schema, {"key": "", "type": 4, "BloomFilterMetadata": bloom})
        return buf.getvalue()

    from hoodie.hfile.blocks import encode_entry

    n = next(
        n
        for n in range(16200, 16400)
        if _readers_disagree(HEADER_SIZE + len(_gzip(encode_entry(b"k", record(n)))))
    )
    data = write_hfile([(b"k", record(n))], file_info={"schema": schema_json.encode()})
    (empty_mdt / "bloom_filters").mkdir()
    (empty_mdt / "bloom_filters" / "bloom-filters-0000-0_0-1-1_00000000000000000.hfile").write_bytes(data)
    got = _hudi_rs_read(empty_mdt, "bloom_filters/bloom-filters-0000-0_0-1-1_00000000000000000.hfile")
    assert got.num_rows == 1
    assert got.column("BloomFilterMetadata").to_pylist()[0]["bloomFilter"] == blob[:n]
