"""Metadata-table benchmark: the metadata-table update of a commit that touches 1,000 files,
against the data write of that commit.

A partitioned MERGE_ON_READ table takes an insert that creates 1,000 base files (one per
partition, 200 records each), then an upsert of every record, which appends a log file to each
of them. It runs twice: with the statistics partitions (``files``, ``column_stats``,
``partition_stats``), then adding ``record_index``, whose cost grows with the records written,
not the files. (``bloom_filters`` is left out: each record holds a base file's whole footer
filter, ~0.4 MB at Hudi's default sizing, which is why Hudi leaves it off by default too.) For
each commit the writer's time splits into the metadata-table update (``sync_metadata_table``
under the table lock, before the data instant completes, which asks the writer for the record
keys it added or moved) and everything else (the data write); the metadata table's own services
after the commit are timed apart. Each ratio comes from one run.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

TARGET_SHARE = 0.20
"""The metadata-table update may cost at most this share of the commit's data write time."""
FILES = 1000
ROWS_PER_FILE = 200
STATISTICS = ("column_stats", "partition_stats")
WITH_RECORD_INDEX = (*STATISTICS, "record_index")


@dataclass
class CommitTimes:
    name: str
    files: int
    total: float = 0.0
    metadata: float = 0.0
    services: float = 0.0

    @property
    def data(self) -> float:
        return self.total - self.metadata - self.services

    @property
    def share(self) -> float:
        return self.metadata / self.data


@dataclass
class _Clock:
    seconds: dict[str, float] = field(default_factory=dict)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

        return timed


@contextmanager
def _timed_metadata(clock: _Clock) -> Iterator[None]:
    """Time the writer's metadata-table update and the metadata services after its commits."""
    from hoodie.metadata import services
    from hoodie.write import writer

    sync, maintain = writer.sync_metadata_table, services.maintain_metadata_table
    writer.sync_metadata_table = clock.wrap("metadata", sync)  # asks the writer for its key changes
    services.maintain_metadata_table = clock.wrap("services", maintain)
    try:
        yield
    finally:
        writer.sync_metadata_table = sync
        services.maintain_metadata_table = maintain


def _rows(ts: int, files: int, rows_per_file: int) -> pa.Table:
    ids = range(files * rows_per_file)
    return pa.table(
        {
            "id": [f"key-{i:08d}" for i in ids],
            "ts": pa.array([ts] * len(ids), pa.int64()),
            "amount": pa.array([float(i % 997) for i in ids]),
            "city": [f"city-{i % 31}" for i in ids],
            "p": [f"p{i % files:04d}" for i in ids],
        }
    )


def _table_with(path: Path, partitions: tuple[str, ...]) -> Any:
    """An empty table whose metadata table has ``files`` and ``partitions``, empty."""
    from hoodie.config.table_config import TableType
    from hoodie.metadata.init import build_partition, free_init_instant_time, set_metadata_partitions
    from hoodie.metadata.table import open_metadata_table
    from hoodie.services.base import ServiceContext
    from hoodie.write.create import create_table

    table = create_table(
        str(path),
        table_name="mdt_bench",
        table_type=TableType.MERGE_ON_READ,
        schema=_rows(0, 1, 1).schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        metadata_table=True,
    )
    ctx = ServiceContext(table)
    for partition in partitions:
        at = free_init_instant_time(open_metadata_table(table).reload())
        build_partition(table, partition, {}, at, ctx.new_instant_time)
    set_metadata_partitions(table, add=partitions)
    return table


def time_commits(
    root: Path,
    files: int = FILES,
    rows_per_file: int = ROWS_PER_FILE,
    partitions: tuple[str, ...] = WITH_RECORD_INDEX,
) -> list[CommitTimes]:
    """Time an insert creating ``files`` base files, then an upsert logging to each of them."""
    from hoodie.write.writer import HoodieWriter

    path = root / "metadata-bench"
    shutil.rmtree(path, ignore_errors=True)
    writer = HoodieWriter(_table_with(path, partitions))
    out = []
    for name, op, ts in (("insert", writer.insert, 1), ("upsert", writer.upsert, 2)):
        clock = _Clock()
        data = _rows(ts, files, rows_per_file)
        with _timed_metadata(clock):
            started = time.perf_counter()
            result = op(data)
            total = time.perf_counter() - started
        out.append(
            CommitTimes(
                name,
                len(result.write_stats),
                total,
                clock.seconds.get("metadata", 0.0),
                clock.seconds.get("services", 0.0),
            )
        )
    shutil.rmtree(path, ignore_errors=True)
    return out
