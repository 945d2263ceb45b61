"""Log files: block framing, headers, every fixture block, and corrupt or truncated blocks."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hoodie.errors import CorruptLogBlockError
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block, rollback_block
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import CorruptBlockReport, read_blocks


def _fixture_logs(root: Path) -> list[Path]:
    out = []
    for dirpath, _, files in os.walk(root):
        if "/.hoodie" in dirpath:
            continue
        out.extend(Path(dirpath) / f for f in files if LogFile.parse(f) is not None)
    return sorted(out)


def test_every_fixture_log_parses_into_known_blocks(fixture_root: Path) -> None:
    logs = _fixture_logs(fixture_root)
    assert len(logs) == 26
    kinds: set[BlockType] = set()
    for path in logs:
        report = CorruptBlockReport()
        blocks = read_blocks(path.read_bytes(), str(path), report)
        assert blocks and len(report) == 0
        for b in blocks:
            kinds.add(b.block_type)
            assert b.instant_time is not None and len(b.instant_time) == 17
            if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE):
                assert b.schema is not None and b.schema.startswith("{")
        assert sum(b.size for b in blocks) == path.stat().st_size
    assert kinds == {BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE, BlockType.COMMAND}


def test_worked_example_v8_avro_block(fixture_root: Path) -> None:
    path = next(
        p
        for p in _fixture_logs(fixture_root)
        if p.name.startswith(".8aa68f7e") and "20251220210130911" in p.name
    )
    data = path.read_bytes()
    assert len(data) == 1145
    (block,) = read_blocks(data, str(path))
    assert block.block_type is BlockType.AVRO_DATA
    assert block.instant_time == "20251220210130911"
    assert len(block.content) == 233
    assert block.content[:12] == bytes.fromhex("00000003 00000001 000000dd")
    again = read_blocks(encode_block(block.block_type, block.header, block.content), "x")[0]
    assert (again.header, again.content) == (block.header, block.content)


def test_v6_rollback_command_block_is_byte_identical(fixture_root: Path) -> None:
    path = next(p for p in _fixture_logs(fixture_root) if p.name.endswith(".log.2_1-0-1"))
    assert rollback_block("20250126040936578", "20250126040826878") == path.read_bytes()
    (block,) = read_blocks(path.read_bytes(), str(path))
    assert block.is_rollback and block.target_instant_time == "20250126040826878"


def _two_blocks() -> tuple[bytes, bytes]:
    a = encode_block(
        BlockType.AVRO_DATA, {HeaderKey.INSTANT_TIME: "1" * 17, HeaderKey.SCHEMA: "{}"}, b"x" * 40
    )
    b = encode_block(BlockType.DELETE, {HeaderKey.INSTANT_TIME: "2" * 17}, b"y" * 20)
    return a, b


def test_truncated_last_block_becomes_a_reported_corrupt_block() -> None:
    a, b = _two_blocks()
    data = a + b[:-10]
    report = CorruptBlockReport()
    blocks = read_blocks(data, "f.log", report)
    assert [x.block_type for x in blocks] == [BlockType.AVRO_DATA, BlockType.CORRUPT]
    assert report.locations == [("f.log", len(a), len(b) - 10)]


def test_garbage_inside_a_block_is_skipped_up_to_the_next_magic() -> None:
    a, b = _two_blocks()
    broken = bytearray(a)
    broken[-3] ^= 0xFF  # damage the trailing length
    blocks = read_blocks(bytes(broken) + b, "f.log", CorruptBlockReport())
    assert [x.block_type for x in blocks] == [BlockType.CORRUPT, BlockType.DELETE]
    assert blocks[1].instant_time == "2" * 17


def test_a_block_whose_length_runs_past_the_end_is_corrupt() -> None:
    a, _ = _two_blocks()
    broken = bytearray(a)
    broken[6:14] = (10_000).to_bytes(8, "big")
    (block,) = read_blocks(bytes(broken), "f.log")
    assert block.is_corrupt and block.size == len(a)


def test_a_file_without_the_magic_is_rejected_with_its_name_and_offset() -> None:
    with pytest.raises(CorruptLogBlockError, match=r"bad\.log: no log block magic .* at offset 0"):
        read_blocks(b"PAR1 not a log", "bad.log")


def test_unknown_block_type_and_header_key_are_named() -> None:
    a, _ = _two_blocks()
    wrong_type = bytearray(a)
    wrong_type[18:22] = (42).to_bytes(4, "big")
    with pytest.raises(CorruptLogBlockError, match="unknown log block type id 42"):
        read_blocks(bytes(wrong_type), "f.log")
    wrong_key = bytearray(a)
    wrong_key[26:30] = (99).to_bytes(4, "big")
    with pytest.raises(CorruptLogBlockError, match="unknown log block header key id 99"):
        read_blocks(bytes(wrong_key), "f.log")


def _block(ts: str, compacted: str = "") -> Any:
    from hoodie.file_group.log_block import LogBlock

    header = {HeaderKey.INSTANT_TIME: ts}
    if compacted:
        header[HeaderKey.COMPACTED_BLOCK_TIMES] = compacted
    return LogBlock(BlockType.AVRO_DATA, header, b"", 0, 0, "f")


def test_log_compacted_blocks_replace_the_blocks_they_cover() -> None:
    from hoodie.read.log_scanner import apply_log_compaction

    blocks = [_block("100"), _block("200"), _block("300"), _block("250", "100,200"), _block("400")]
    order = [b.instant_time for b in apply_log_compaction(blocks)]
    # 250 compacted 100 and 200: it takes 200's place, before 300, and 100/200 are gone.
    assert order == ["250", "300", "400"]


def test_log_compaction_is_transitive() -> None:
    from hoodie.read.log_scanner import apply_log_compaction

    blocks = [_block("100"), _block("200"), _block("150", "100"), _block("300"), _block("350", "150,200")]
    assert [b.instant_time for b in apply_log_compaction(blocks)] == ["350", "300"]
