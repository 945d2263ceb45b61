"""BaseFileWriter.encode_ahead (set by the spilled compaction): row groups encoded on a thread
give the same file content, row groups and footer keys as encoding in the caller's thread."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.file_group.base_file_writer import BaseFileWriter
from hoodie.io.fileio import LocalFileIO

AVRO = {"type": "record", "name": "r", "fields": [{"name": "_hoodie_record_key", "type": "string"}]}


def _write(path: Path, parts: list[pa.Table], ahead: bool) -> pq.ParquetFile:
    writer = BaseFileWriter(LocalFileIO(), str(path), AVRO, row_group_rows=250)
    writer.encode_ahead = ahead
    for part in parts:
        writer.write(part)
    result = writer.close()
    assert result.num_records == sum(p.num_rows for p in parts)
    return pq.ParquetFile(path)


def test_encoding_ahead_writes_the_same_file(tmp_path: Path) -> None:
    parts = [
        pa.table({"_hoodie_record_key": [f"k{i:05d}" for i in range(start, start + 120)], "v": range(120)})
        for start in range(0, 1200, 120)
    ]
    plain, ahead = _write(tmp_path / "a.parquet", parts, False), _write(tmp_path / "b.parquet", parts, True)
    assert ahead.read().equals(plain.read())
    assert ahead.metadata.num_row_groups == plain.metadata.num_row_groups > 3
    assert ahead.metadata.metadata == plain.metadata.metadata  # bloom filter, min/max keys, schema


def test_an_encoding_failure_surfaces_at_close(tmp_path: Path) -> None:
    writer = BaseFileWriter(LocalFileIO(), str(tmp_path / "c.parquet"), AVRO, row_group_rows=10)
    writer.encode_ahead = True
    writer.write(pa.table({"_hoodie_record_key": [f"k{i}" for i in range(10)], "v": range(10)}))
    with pytest.raises(ValueError, match="schema does not match"):  # a part unlike the file
        writer.write(pa.table({"_hoodie_record_key": [f"k{i}" for i in range(10)], "v": ["x"] * 10}))
        writer.close()


def test_a_smaller_dictionary_limit_falls_back_to_plain_sooner_with_the_same_rows(tmp_path: Path) -> None:
    # The spilled compaction shrinks the dictionary limit with its smaller row groups.
    part = pa.table(
        {"_hoodie_record_key": [f"key-{i:08d}" for i in range(5000)], "v": [i % 3 for i in range(5000)]}
    )
    files = {}
    for limit in (None, 4096):
        writer = BaseFileWriter(LocalFileIO(), str(tmp_path / f"{limit}.parquet"), AVRO, row_group_rows=5000)
        writer.dictionary_pagesize_limit = limit
        writer.write(part)
        writer.close()
        files[limit] = pq.ParquetFile(tmp_path / f"{limit}.parquet")
    default, small = files[None], files[4096]
    assert small.read().equals(default.read())
    assert small.metadata.metadata == default.metadata.metadata  # bloom filter, min/max keys
    # The dictionary page (before the first data page) of the key column stops at the limit.
    default_key, small_key = (f.metadata.row_group(0).column(0) for f in (default, small))
    default_dict = default_key.data_page_offset - default_key.dictionary_page_offset
    small_dict = small_key.data_page_offset - small_key.dictionary_page_offset
    assert small_dict < default_dict / 3
    default_v, small_v = (f.metadata.row_group(0).column(1) for f in (default, small))
    assert small_v.total_compressed_size == default_v.total_compressed_size  # 3 values: a dictionary
