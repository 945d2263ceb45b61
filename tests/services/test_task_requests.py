"""Storage requests of slice tasks (compaction, log compaction), counted per task: each file the
plan names is asked for once, the log files are read once, the timeline is never listed or read
(the driver sends what the task reads by, schema-on-read versions included), and a written base
file's size is not asked for.

On an object store each FileIO call is at least one HTTP request; executors run many tasks, so a
request per task more is a request per file group more.
"""

from __future__ import annotations

import os
from pathlib import Path

from hoodie.io import usage
from hoodie.io.requests import counting
from hoodie.models.compaction import CompactionOperation
from hoodie.services.base import LocalRunner, ServiceContext, Task, TaskFunction, TaskResult
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.compaction_plan import slice_of
from hoodie.services.logcompaction import (
    LogCompactionPolicy,
    execute_log_compaction,
    schedule_log_compaction,
)
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.tables import new_table, rows


class CountingRunner(LocalRunner):
    """Runs each task in this process, counting the storage requests it makes."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[tuple[Task, dict[str, int]]] = []
        self.files_read: list[set[str]] = []

    def run(self, fn: TaskFunction, tasks: list[Task], description: str) -> list[TaskResult]:  # type: ignore[override]
        out: list[TaskResult] = []
        for task in tasks:
            with counting() as requests, usage.measure() as used:
                out.extend(super().run(fn, [task], description))
            self.tasks.append((task, requests.snapshot()))
            self.files_read.append({Path(f).name for f in used.read_from})
        return out


def _table(path: Path) -> HoodieTable:
    """Three partitions; slices of a base file and one or two log files."""
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(0, 30, 2), 2))
    writer.upsert(rows([1, 5, 7], 3))
    return HoodieTable.open(str(path))


def test_a_compaction_task_asks_each_file_once_and_never_reads_the_timeline(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    ctx = ServiceContext(table)
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    runner = CountingRunner()
    execute_compaction(ctx, scheduled.instant_time, runner)

    assert len(runner.tasks) == 3
    two_logs = 0
    for n, (task, requests) in enumerate(runner.tasks):
        file_slice = slice_of(CompactionOperation.from_avro(task["operation"]))
        assert file_slice.base_file is not None
        logs = len(file_slice.log_files)
        two_logs += logs == 2
        opened = 1 if n == 0 else 0  # hoodie.properties: an executor opens the table once per process
        # info: the base file and each log file, once (the plan names them; the merge learns the
        # log files' sizes from that check); read: each log file once, and the base file by the
        # Parquet reader's own ranged reads (a footer, then column chunks: as many as pyarrow
        # makes); open: the base file; write: the marker and the new base file; no listing, no
        # timeline or commit file read.
        base_reads = requests.pop("read") - logs - opened
        assert requests == {"info": 1 + logs, "open": 1, "write": 2, "mkdir": 1} and base_reads >= 1
        expected = {file_slice.base_file.name, *(lf.name for lf in file_slice.log_files)}
        assert runner.files_read[n] == expected | ({"hoodie.properties"} if opened else set())
    assert two_logs == 2  # the partitions whose slices have two log files

    done = HoodieTable.open(str(path)).reload().completed().last()
    assert done is not None and done.requested_time == scheduled.instant_time
    stats = HoodieTable.open(str(path)).commit_metadata(done).partition_to_write_stats
    written = [s for group in stats.values() for s in group]
    assert len(written) == 3
    for stat in written:  # the size comes from the bytes written, and is the file's
        assert stat.file_size_in_bytes == stat.total_write_bytes == os.path.getsize(path / stat.path)


def test_a_log_compaction_task_asks_each_log_file_once_and_never_reads_the_timeline(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    ctx = ServiceContext(table)
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy(blocks_threshold=2))
    assert scheduled is not None and scheduled.instant_time is not None
    runner = CountingRunner()
    execute_log_compaction(ctx, scheduled.instant_time, runner)

    assert runner.tasks
    for n, (task, requests) in enumerate(runner.tasks):
        logs = len(slice_of(CompactionOperation.from_avro(task["operation"])).log_files)
        assert logs == 2
        opened = 1 if n == 0 else 0
        # info: each log file once; read: each once; list: the slice's partition only (the new
        # log file takes the next version of its name there); no timeline or commit file read.
        assert (requests["info"], requests["read"], requests["list"]) == (logs, logs + opened, 1)
