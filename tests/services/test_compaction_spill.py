"""Bounded-memory compaction: with a tiny ``hoodie.memory.compaction.max.size`` the log records
spill to disk and merge externally; the compacted files equal the in-memory path's row for row."""

from __future__ import annotations

import logging
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import RecordMergeMode, TableType
from hoodie.errors import CorruptLogBlockError, TableServiceError
from hoodie.file_group.log_block import BlockType
from hoodie.file_group.log_reader import read_blocks
from hoodie.read.log_scanner import ScanStats
from hoodie.read.slice_reader import SliceMergeInfo, decode_data_block, read_slice
from hoodie.read.spill import iter_spilled_slice
from hoodie.read.spill_blocks import LazyLogs
from hoodie.read.spill_budget import MAX_SIZE_KEY, SPILL_PATH_KEY, MemoryBudget, resident_bytes
from hoodie.read.spill_keys import bucket_of
from hoodie.schema.avro_arrow import frame_records
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.slice_tasks import SliceTask
from hoodie.table import HoodieTable
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import SCHEMA, new_table, rows

DELETED = pa.schema([*SCHEMA, ("_hoodie_is_deleted", pa.bool_())])


def _table(path: Path, mode: RecordMergeMode, table_type: TableType, block: LogBlockFormat) -> HoodieTable:
    """Inserts, then several log files' worth of updates (some with lower ordering values),
    delete blocks, ``_hoodie_is_deleted`` rows, and re-inserts of deleted keys."""
    table = new_table(path, table_type=table_type, schema=DELETED, merge_mode=mode)
    writer = HoodieWriter(table, options=WriteOptions(log_block_format=block))

    def put(ids: list[int], ts: int, deleted: bool = False) -> None:
        writer.upsert(rows(ids, ts, schema=DELETED, _hoodie_is_deleted=deleted))

    writer.insert(rows(list(range(60)), 10, schema=DELETED, _hoodie_is_deleted=False))
    put(list(range(0, 60, 2)), 20)
    put(list(range(0, 60, 3)), 5)  # lower ordering values: lose under EVENT_TIME_ORDERING
    writer.delete(rows([4, 7, 11, 13], 30).select(["id", "p"]))
    put([6, 12, 18], 40, deleted=True)
    put([4, 7, 60, 61, 62], 50)  # deleted keys come back, new keys arrive
    put(list(range(1, 60, 5)), 45)
    writer.delete(rows([61, 25], 1).select(["id", "p"]))
    return HoodieTable.open(str(path))


def _compact(path: Path, options: dict[str, str]) -> HoodieTable:
    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table, options=options)
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return HoodieTable.open(str(path))


def _new_base_files(table: HoodieTable, instant: str) -> dict[str, pa.Table]:
    out = {}
    for f in sorted(Path(table.base_path).rglob(f"*_{instant}.parquet")):
        data = pq.read_table(f).drop_columns(["_hoodie_file_name"])
        out[f"{f.parent.name}/{f.name.split('_')[0]}"] = data
    return out


def _stats(table: HoodieTable, instant: str) -> list[tuple[object, ...]]:
    meta = table.commit_metadata(table.timeline.get(instant))  # type: ignore[arg-type]
    return sorted(
        (
            s.file_id,
            s.num_writes,
            s.num_deletes,
            s.num_update_writes,
            s.num_inserts,
            s.total_log_records,
            s.total_updated_records_compacted,
            s.total_log_blocks,
            s.total_log_files_compacted,
            s.total_log_size_compacted,
        )
        for s in meta.write_stats()
    )


@pytest.mark.parametrize("mode", [RecordMergeMode.EVENT_TIME_ORDERING, RecordMergeMode.COMMIT_TIME_ORDERING])
@pytest.mark.parametrize("block", [LogBlockFormat.AVRO, LogBlockFormat.PARQUET])
def test_spilled_compaction_equals_the_in_memory_one(
    tmp_path: Path, mode: RecordMergeMode, block: LogBlockFormat, caplog: pytest.LogCaptureFixture
) -> None:
    _table(tmp_path / "mem", mode, TableType.MERGE_ON_READ, block)
    shutil.copytree(tmp_path / "mem", tmp_path / "spill")
    before = hudi_rs_rows(tmp_path / "mem")
    spill_dir = tmp_path / "spill-files"
    spill_dir.mkdir()
    caplog.set_level(logging.INFO, logger="hoodie.read.spill")
    mem = _compact(tmp_path / "mem", {})
    assert "spill into" not in caplog.text  # small logs, default budget: the in-memory path
    spilled = _compact(tmp_path / "spill", {MAX_SIZE_KEY: "64", SPILL_PATH_KEY: str(spill_dir)})
    assert caplog.text.count("spill into") >= 3  # every slice with logs took the spill path
    mem_instant = mem.timeline.completed().last().requested_time  # type: ignore[union-attr]
    spill_instant = spilled.timeline.completed().last().requested_time  # type: ignore[union-attr]
    mem_files = _new_base_files(mem, mem_instant)
    spill_files = _new_base_files(spilled, spill_instant)
    assert mem_files and mem_files.keys() == spill_files.keys()
    for name, data in mem_files.items():
        assert spill_files[name].equals(data), name  # same rows, same meta columns, same order
    assert _stats(mem, mem_instant) == _stats(spilled, spill_instant)
    assert hudi_rs_rows(tmp_path / "spill") == before == hudi_rs_rows(tmp_path / "mem")
    assert list(spill_dir.iterdir()) == []  # the spill files are gone after the task


def _slice_options(table: HoodieTable) -> tuple[SliceTask, list[object]]:
    from hoodie.services.slice_tasks import slice_task_fields

    ctx = ServiceContext(table)
    fields = slice_task_fields(ctx, table.timeline, "99990101000000000", table.latest_schema_json() or {})
    task = SliceTask.of(fields)
    slices = [s for s in table.file_system_view().latest_file_slices() if s.log_files]
    return task, slices  # type: ignore[return-value]


@pytest.mark.parametrize("buckets", [1, 3, 17])
@pytest.mark.parametrize("corrupt", [False, True])
def test_external_merge_equals_the_in_memory_merge_for_any_bucket_count(
    tmp_path: Path, buckets: int, corrupt: bool
) -> None:
    table = _table(
        tmp_path / "t", RecordMergeMode.EVENT_TIME_ORDERING, TableType.MERGE_ON_READ, LogBlockFormat.AVRO
    )
    task, slices = _slice_options(table)
    assert slices
    if corrupt:  # a torn block at the end of a log file: the log files are then read whole
        log_file = slices[0].log_file_paths(table.base_path)[-1]  # type: ignore[attr-defined]
        with open(log_file, "ab") as f:
            f.write(b"#HUDI#" + (1 << 40).to_bytes(8, "big") + b"torn")
    for file_slice in slices:
        mem_info, spill_info, mem_stats = SliceMergeInfo(), SliceMergeInfo(), ScanStats()
        expected = read_slice(
            table.fileio,
            table.base_path,
            file_slice,
            task.read_options(info=mem_info, stats=mem_stats),  # type: ignore[arg-type]
        )
        opts = task.read_options(info=spill_info, stats=ScanStats())
        parts = list(
            iter_spilled_slice(
                table.fileio,
                table.base_path,
                file_slice,
                opts,
                MemoryBudget(1, str(tmp_path)),
                buckets,  # type: ignore[arg-type]
            )
        )
        got = pa.concat_tables(parts) if parts else expected.slice(0, 0)
        assert got.equals(expected)
        assert (opts.stats.total_log_blocks, opts.stats.total_corrupt_blocks, opts.stats.total_log_size) == (
            mem_stats.total_log_blocks,
            mem_stats.total_corrupt_blocks,
            mem_stats.total_log_size,
        )
        assert spill_info.counts == mem_info.counts or (mem_info.counts is None and not spill_info.counts)
    assert [p.name for p in tmp_path.iterdir()] == ["t"]


def test_spill_files_are_removed_when_the_merge_fails_or_stops(tmp_path: Path) -> None:
    table = _table(
        tmp_path / "t", RecordMergeMode.COMMIT_TIME_ORDERING, TableType.MERGE_ON_READ, LogBlockFormat.AVRO
    )
    task, slices = _slice_options(table)
    spill_dir = tmp_path / "spill"
    spill_dir.mkdir()
    budget = MemoryBudget(1, str(spill_dir))
    with_base = next(s for s in slices if s.base_file is not None)  # type: ignore[attr-defined]
    stopped = iter_spilled_slice(table.fileio, table.base_path, with_base, task.read_options(), budget, 4)  # type: ignore[arg-type]
    next(stopped)
    assert len(list(spill_dir.iterdir())) == 1  # the merge is under way: its spill directory exists
    stopped.close()
    assert list(spill_dir.iterdir()) == []
    Path(with_base.base_file_path(table.base_path)).unlink()  # type: ignore[attr-defined]
    failing = iter_spilled_slice(table.fileio, table.base_path, with_base, task.read_options(), budget, 4)  # type: ignore[arg-type]
    with pytest.raises(OSError):
        list(failing)
    assert list(spill_dir.iterdir()) == []


def test_hudis_memory_keys_are_read_and_bad_values_refused(tmp_path: Path) -> None:
    assert MemoryBudget.from_options({}) == MemoryBudget(1024**3, None)
    assert MemoryBudget.from_options(
        {MAX_SIZE_KEY: "1048576", SPILL_PATH_KEY: str(tmp_path)}
    ) == MemoryBudget(1048576, str(tmp_path))
    for options, named in [
        ({MAX_SIZE_KEY: "lots"}, "hoodie.memory.compaction.max.size='lots'"),
        ({MAX_SIZE_KEY: "0"}, "hoodie.memory.compaction.max.size='0'"),
        ({"hoodie.memory.compaction.fraction": "1.5"}, "hoodie.memory.compaction.fraction='1.5'"),
        ({SPILL_PATH_KEY: str(tmp_path / "missing")}, "hoodie.memory.spillable.map.path="),
    ]:
        with pytest.raises(TableServiceError, match=named.replace(".", r"\.").replace("(", r"\(")):
            MemoryBudget.from_options(options)


def test_freed_memory_goes_back_to_the_os_only_near_the_budget() -> None:
    resident = resident_bytes()
    assert resident is not None and resident > 10 * 1024 * 1024  # this process: Python, pyarrow
    assert MemoryBudget(resident // 2).over_release_share()  # over the budget: release
    assert not MemoryBudget(resident * 4).over_release_share()  # far below it: reuse the pages


def test_compaction_with_bad_memory_keys_writes_nothing(tmp_path: Path) -> None:
    table = _table(
        tmp_path / "t", RecordMergeMode.COMMIT_TIME_ORDERING, TableType.MERGE_ON_READ, LogBlockFormat.AVRO
    )
    ctx = ServiceContext(table, options={MAX_SIZE_KEY: "-5"})
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    files = sorted(p for p in (tmp_path / "t").rglob("*") if p.is_file())
    with pytest.raises(TableServiceError, match="max.size='-5'"):
        execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    assert sorted(p for p in (tmp_path / "t").rglob("*") if p.is_file()) == files


def test_keys_spread_over_buckets_deterministically() -> None:
    keys = pa.array([f"key-{i:08d}" for i in range(10_000)] + ["", "é"])
    first, again = bucket_of(keys, 7), bucket_of(keys.slice(0), 7)
    assert (first == again).all() and set(first.tolist()) == set(range(7))
    assert min(int((first == b).sum()) for b in range(7)) > 1_000  # roughly even
    assert (bucket_of(keys.slice(5, 20), 7) == first[5:25]).all()  # independent of the array's offset


@pytest.mark.parametrize("window", [7, 100, 1 << 20])
def test_large_blocks_decode_a_window_at_a_time_as_read_whole(tmp_path: Path, window: int) -> None:
    table = _table(
        tmp_path / "t", RecordMergeMode.COMMIT_TIME_ORDERING, TableType.MERGE_ON_READ, LogBlockFormat.AVRO
    )
    task, slices = _slice_options(table)
    schema = task.schema
    decoded = 0
    for file_slice in slices:
        for path in file_slice.log_file_paths(table.base_path):  # type: ignore[attr-defined]
            lazy = LazyLogs(table.fileio, small_block=0, window=window)
            size, blocks = lazy.read(path)
            whole = read_blocks(table.fileio.read_bytes(path), path)
            assert size == Path(path).stat().st_size
            assert [(b.block_type, b.header, b.offset, b.size) for b in blocks] == [
                (b.block_type, b.header, b.offset, b.size) for b in whole
            ]
            for lazy_block, block in zip(blocks, whole, strict=True):
                assert lazy.content(lazy_block).content == block.content
                if block.block_type is BlockType.AVRO_DATA:
                    parts = list(lazy.iter_avro(lazy_block, schema))
                    assert pa.concat_tables(parts).equals(decode_data_block(block, schema))
                    decoded += 1
    assert decoded >= 5


@pytest.mark.parametrize("window", [7, 1 << 20])
def test_a_large_block_whose_last_record_overruns_its_content_is_refused(tmp_path: Path, window: int) -> None:
    table = _table(
        tmp_path / "t", RecordMergeMode.COMMIT_TIME_ORDERING, TableType.MERGE_ON_READ, LogBlockFormat.AVRO
    )
    task, slices = _slice_options(table)
    path = next(p for s in slices for p in s.log_file_paths(table.base_path))  # type: ignore[attr-defined]
    lazy = LazyLogs(table.fileio, small_block=0, window=window)
    _, blocks = lazy.read(path)
    block = next(b for b in blocks if b.block_type is BlockType.AVRO_DATA)
    at, length = lazy.content_range(block) or (0, 0)
    raw = bytearray(Path(path).read_bytes())
    starts, _ = frame_records(bytes(raw[at + 8 : at + length]))
    last = at + 8 + starts[-1] - 4  # the last record's int32 length
    (n,) = struct.unpack_from(">i", raw, last)
    struct.pack_into(">i", raw, last, n + 3)  # now 3 bytes longer than the block's content holds
    Path(path).write_bytes(bytes(raw))
    with pytest.raises(CorruptLogBlockError, match=r"Avro block truncated \(\d+ bytes left over\)"):
        list(lazy.iter_avro(block, task.schema))


def test_cdc_tables_stay_on_the_in_memory_path(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from hoodie.config.table_config import update_table_properties

    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(0, 30, 2), 2))
    writer.delete(rows([3, 5], 3).select(["id", "p"]))
    update_table_properties(
        HoodieTable.open(str(path)).fileio,
        str(path / ".hoodie"),
        {
            "hoodie.table.cdc.enabled": "true",
            "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        },
    )
    before = hudi_rs_rows(path)
    caplog.set_level(logging.INFO, logger="hoodie.read.spill")
    done = _compact(path, {MAX_SIZE_KEY: "64"})
    assert "spill into" not in caplog.text  # the CDC log needs the before images: in memory
    instant = done.timeline.completed().last().requested_time  # type: ignore[union-attr]
    meta = done.commit_metadata(done.timeline.get(instant))  # type: ignore[arg-type]
    assert all(s.cdc_stats for s in meta.write_stats() if s.total_log_files_compacted)
    assert hudi_rs_rows(path) == before
