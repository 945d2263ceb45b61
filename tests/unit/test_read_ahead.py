"""ReadAhead: a source taken on a thread ahead of its consumer, in order, errors where they happened;
slice reads that stop early or fail leave no reading thread behind."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie.io.fileio import LocalFileIO
from hoodie.io.requests import RequestCounter, counting
from hoodie.read.read_ahead import ReadAhead
from hoodie.read.reader import TableReader, table_schema
from hoodie.read.slice_reader import iter_read_slice
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.tables import new_table, rows


def test_items_in_order_and_taken_before_asked() -> None:
    taken: list[int] = []
    first_taken = threading.Event()

    def source() -> Iterator[int]:
        for i in range(10):
            taken.append(i)
            first_taken.set()
            yield i

    ahead = ReadAhead(source(), depth=3)
    assert first_taken.wait(10)  # the thread starts taking when the object is made
    assert list(ahead) == list(range(10))
    assert taken == list(range(10))


def test_holds_at_most_depth_items_ahead() -> None:
    taken: list[int] = []
    gate = threading.Semaphore(0)

    def source() -> Iterator[int]:
        for i in range(100):
            taken.append(i)
            gate.release()
            yield i

    with ReadAhead(source(), depth=2) as ahead:
        for _ in range(2):
            assert gate.acquire(timeout=10)
        assert not gate.acquire(timeout=0.2)  # blocked: two items wait for the consumer
        assert taken == [0, 1]
        assert next(ahead) == 0
        assert gate.acquire(timeout=10)
        assert not gate.acquire(timeout=0.2)
        assert taken == [0, 1, 2]


def test_error_raised_at_the_item_that_failed_and_source_closed() -> None:
    closed = threading.Event()

    def source() -> Iterator[int]:
        try:
            yield 1
            yield 2
            raise OSError("base file gone at item 3")
        finally:
            closed.set()

    ahead = ReadAhead(source(), depth=4)
    assert next(ahead) == 1
    assert next(ahead) == 2
    with pytest.raises(OSError, match="item 3"):
        next(ahead)
    assert closed.is_set()
    with pytest.raises(StopIteration):
        next(ahead)


def test_close_stops_taking_and_closes_the_source_on_the_callers_thread() -> None:
    closed_on: list[str] = []

    def source() -> Iterator[int]:
        try:
            yield from range(1_000_000)
        finally:
            closed_on.append(threading.current_thread().name)

    ahead = ReadAhead(source(), depth=2, name="test-ahead")
    assert next(ahead) == 0
    ahead.close()
    assert closed_on == [threading.current_thread().name]
    assert not [t for t in threading.enumerate() if t.name.startswith("test-ahead")]
    with pytest.raises(StopIteration):
        next(ahead)


def test_reads_on_the_thread_count_for_the_callers_counter(tmp_path: Path) -> None:
    fileio = LocalFileIO()
    path = str(tmp_path / "f.bin")
    fileio.write_bytes(path, b"x" * 100)

    def source() -> Iterator[bytes]:
        with fileio.open_input(path) as f:
            yield f.read(60)
            yield f.read(40)

    counter = RequestCounter()
    with counting(counter):
        got = list(ReadAhead(source(), depth=2))
    assert got == [b"x" * 60, b"x" * 40]
    assert counter.snapshot() == {"open": 1, "read": 2}


def test_depth_must_be_positive() -> None:
    with pytest.raises(ValueError, match="depth must be at least 1, not 0"):
        ReadAhead(iter([1]), depth=0)


def _base_read_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("hts-base-read")]


def _table_with_logs(path: Path) -> HoodieTable:
    table = new_table(path)
    writer = HoodieWriter(table)
    writer.bulk_insert(rows(range(30), ts=1, partitions=1))
    writer.upsert(rows(range(0, 30, 3), ts=2, partitions=1))
    table = HoodieTable.open(str(path))
    (s,) = table.file_system_view().latest_file_slices(None)
    assert s.log_files and s.base_file_path(table.base_path)
    return table


def test_slice_read_stopped_early_leaves_no_thread(tmp_path: Path) -> None:
    table = _table_with_logs(tmp_path / "t")
    reader = TableReader(table)
    view = table.file_system_view(timeline=reader.timeline)
    opts = reader._options(view, table_schema(table), None)
    (s,) = view.latest_file_slices(None)
    parts = iter_read_slice(table.fileio, table.base_path, s, opts)
    assert next(parts).num_rows
    assert _base_read_threads()
    parts.close()
    assert not _base_read_threads()


def test_unreadable_base_file_fails_the_read_and_leaves_no_thread(tmp_path: Path) -> None:
    table = _table_with_logs(tmp_path / "t")
    (s,) = table.file_system_view().latest_file_slices(None)
    base = s.base_file_path(table.base_path)
    assert base is not None
    Path(base).write_bytes(b"not a parquet file")
    with pytest.raises(pa.ArrowInvalid, match="Parquet"):
        TableReader(table).snapshot()
    assert not _base_read_threads()
