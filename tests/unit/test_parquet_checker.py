"""Hudi's ParquetBinaryCopyChecker (hoodie.parquet.checker) over real Parquet files, its repetition
map's quirks included, and Hadoop-framed LZ4 pages (parquet-mr's LZ4) in and out."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import CorruptFileError
from hoodie.parquet import footer as f
from hoodie.parquet.checker import UnsupportedSchema, file_info, verify_files
from hoodie.parquet.pages import (
    LZ4_HADOOP,
    LZ4_MAX_INPUT,
    LZ4_RAW,
    lz4_block_length,
    lz4_hadoop_compress,
    lz4_hadoop_decompress,
    transcode_chunk,
)
from hoodie.parquet.thrift import BINARY, I32, LIST, STRUCT, Struct, TList, Value, decode_struct


def _write(path: Path, schema: pa.Schema, rows: list[dict[str, object]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def _check(*paths: Path) -> str | None:
    return verify_files([file_info(f.read_footer(p.read_bytes(), str(p)), str(p)) for p in paths])


def _list(nullable_elements: bool) -> pa.DataType:
    return pa.list_(pa.field("element", pa.int64(), nullable=nullable_elements))


def test_one_repetition_per_field_across_the_files(tmp_path: Path) -> None:
    strict = pa.schema([("id", pa.string()), ("l", _list(False))])
    loose = pa.schema([("id", pa.string()), ("l", _list(True))])
    a = _write(tmp_path / "a.parquet", strict, [{"id": "a", "l": [1]}])
    b = _write(tmp_path / "b.parquet", loose, [{"id": "b", "l": [2, None]}])
    assert _check(a, a) is None
    reason = _check(a, b)
    assert (
        reason is not None and "'.list.element'" in reason and "REQUIRED" in reason and "OPTIONAL" in reason
    )
    required_id = _write(
        tmp_path / "c.parquet", pa.schema([pa.field("id", pa.string(), False)]), [{"id": "c"}]
    )
    optional_id = _write(tmp_path / "d.parquet", pa.schema([("id", pa.string())]), [{"id": "d"}])
    assert "'.id'" in str(_check(required_id, optional_id))


def test_lists_under_one_parent_share_hudis_key_and_the_later_one_wins(tmp_path: Path) -> None:
    # Hudi keys a list's element as parent + ".list.element", without the list's name: in one file
    # the later list's element repetition replaces the earlier one's (a HashMap put). Here the files
    # differ only in the first list's element repetition, which Hudi's map never sees: it copies.
    first = pa.schema([("a", _list(False)), ("b", _list(True))])
    second = pa.schema([("a", _list(True)), ("b", _list(True))])
    x = _write(tmp_path / "x.parquet", first, [{"a": [1], "b": [None]}])
    y = _write(tmp_path / "y.parquet", second, [{"a": [None], "b": [2]}])
    assert _check(x, y) is None
    # ... while the later list's difference is seen.
    third = pa.schema([("a", _list(True)), ("b", _list(False))])
    z = _write(tmp_path / "z.parquet", third, [{"a": [None], "b": [2]}])
    assert "'.list.element'" in str(_check(x, z))


def test_maps_and_structs_keys(tmp_path: Path) -> None:
    loose = pa.schema([("m", pa.map_(pa.string(), pa.int64())), ("s", pa.struct([("q", pa.int32())]))])
    strict = pa.schema(
        [
            ("m", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
            ("s", pa.struct([pa.field("q", pa.int32(), nullable=False)])),
        ]
    )
    a = _write(tmp_path / "a.parquet", loose, [{"m": {"k": 1}, "s": {"q": 1}}])
    b = _write(tmp_path / "b.parquet", strict, [{"m": {"k": 1}, "s": {"q": 1}}])
    assert "'.key_value.value'" in str(_check(a, b))
    only_struct = pa.schema([("s", pa.struct([pa.field("q", pa.int32(), nullable=False)]))])
    c = _write(tmp_path / "c.parquet", only_struct, [{"s": {"q": 1}}])
    only_loose = pa.schema([("s", pa.struct([("q", pa.int32())]))])
    d = _write(tmp_path / "d.parquet", only_loose, [{"s": {"q": 1}}])
    assert "'.s.q'" in str(_check(c, d))  # Hudi recurses under parent + "." + the group's name


def _element(name: str, repetition: int, *, children: int = 0, physical: int | None = None) -> Struct:
    element = Struct()
    if physical is not None:
        element.set(f.SE_TYPE, I32, physical)
    element.set(f.SE_REPETITION, I32, repetition)
    element.set(f.SE_NAME, BINARY, name.encode())
    if children:
        element.set(f.SE_NUM_CHILDREN, I32, children)
    return element


def test_a_list_without_a_group_level_is_what_hudis_checker_fails_on() -> None:
    # A two-level list whose repeated level is a primitive not named "array" passes Hudi's schema
    # check, then its repetition walk throws (asGroupType on a primitive): refused here.
    listed = _element("l", f.OPTIONAL, children=1)
    listed.set(f.SE_CONVERTED_TYPE, I32, f.CONVERTED_LIST)
    elements: list[Value] = [
        _element("schema", f.REQUIRED, children=1),
        listed,
        _element("item", f.REPEATED, physical=f.INT64),
    ]
    meta = Struct()
    meta.set(f.FMD_SCHEMA, LIST, TList(STRUCT, elements))
    info = file_info(meta, "legacy.parquet")
    assert info.refusal is None
    with pytest.raises(UnsupportedSchema, match="legacy.parquet: list column 'l' has no group level"):
        verify_files([info])
    elements[2] = _element("array", f.REPEATED, physical=f.INT64)
    assert "two-level 'array' layout" in str(file_info(meta, "old.parquet").refusal)


def test_hadoop_lz4_frames_round_trip_and_parquet_mrs_split_frames_read() -> None:
    small = b"abc" * 1000
    framed = lz4_hadoop_compress(small)
    assert int.from_bytes(framed[:4], "big") == len(small)
    assert int.from_bytes(framed[4:8], "big") == len(framed) - 8
    assert lz4_hadoop_decompress(framed, len(small)) == small
    big = os.urandom(LZ4_MAX_INPUT // 2) * 3  # longer than parquet-mr's frame input: still one frame
    framed = lz4_hadoop_compress(big)
    assert int.from_bytes(framed[:4], "big") == len(big)
    assert int.from_bytes(framed[4:8], "big") == len(framed) - 8
    assert lz4_block_length(framed[8:]) == len(big)
    assert lz4_hadoop_decompress(framed, len(big)) == big
    # parquet-mr's split: the raw length once, then a compressed length and block per piece
    raw = pa.Codec("lz4_raw")
    pieces = [big[i : i + LZ4_MAX_INPUT] for i in range(0, len(big), LZ4_MAX_INPUT)]
    split = len(big).to_bytes(4, "big")
    for piece in pieces:
        block = raw.compress(piece).to_pybytes()
        split += len(block).to_bytes(4, "big") + block
    assert len(pieces) == 2 and lz4_hadoop_decompress(split, len(big)) == big
    with pytest.raises(CorruptFileError):
        lz4_hadoop_decompress(split, len(big) + 1)


def _pages(chunk: bytes) -> int:
    count, pos = 0, 0
    while pos < len(chunk):
        header, body = decode_struct(chunk, pos)
        pos = body + header.get_int(3)
        count += 1
    return count


def test_lz4_raw_pages_reframed_as_hadoop_lz4_read_back(tmp_path: Path) -> None:
    table = pa.table({"v": pa.array([f"value-{i % 97}" for i in range(5000)]), "n": pa.array(range(5000))})
    src = tmp_path / "raw.parquet"
    pq.write_table(table, src, compression="lz4", data_page_size=4096)
    data = src.read_bytes()
    meta = f.read_footer(data, str(src))
    rg = meta.get_list(f.FMD_ROW_GROUPS)[0]
    assert isinstance(rg, f.Struct)
    for chunk in rg.get_list(f.RG_COLUMNS):
        assert isinstance(chunk, f.Struct)
        cm = chunk.get_struct(f.CC_META)
        assert cm is not None and cm.get_int(f.CM_CODEC) == LZ4_RAW
        start, length = f.chunk_range(cm)
        moved = transcode_chunk(
            data[start : start + length], cm.get_int(f.CM_NUM_VALUES), LZ4_RAW, LZ4_HADOOP
        )
        back = transcode_chunk(moved.data, cm.get_int(f.CM_NUM_VALUES), LZ4_HADOOP, LZ4_RAW)
        assert back.uncompressed_size == moved.uncompressed_size
