"""What a compaction run read, as the storage layer transferred it (issue 17's cost per run): the
files it opened for reading, the bytes its reads returned and its requests, in process and on
Spark ``local[2]`` (where each task reports its counts back in its result)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.io import usage
from hoodie.io.fileio import LocalFileIO, join
from hoodie.io.requests import counting
from hoodie.read.spill_budget import MAX_SIZE_KEY, SPILL_PATH_KEY
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.tables import COALESCE_HOLE, FOOTER_READ, new_table, rows


def _scheduled(path: Path) -> tuple[HoodieTable, str, set[str]]:
    """A table with a compaction scheduled; the base and log files its plan names."""
    table = new_table(path)
    writer = HoodieWriter(table)
    writer.insert(rows(range(60), 1))
    writer.upsert(rows(range(0, 60, 2), 2))
    writer.upsert(rows(range(0, 60, 3), 3))
    table = HoodieTable.open(str(path))
    scheduled = schedule_compaction(ServiceContext(table), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    instant = scheduled.instant_time
    plan = table.compaction_plan(instant, table.reload())
    files: set[str] = set()
    for op in plan.operations or ():
        partition = join(table.base_path, op.partition_path or "")
        files.update(join(partition, name) for name in op.delta_file_paths or ())
        if op.data_file_path:
            files.add(join(partition, op.data_file_path))
    assert len(files) > len(plan.operations or ()) >= 3, "every slice has a base file and logs"
    return table, instant, files


def _compacted(
    path: Path, runner: Any, options: dict[str, str] | None = None
) -> tuple[usage.Usage, dict[str, int], set[str], str | None]:
    """The run's usage and requests, the plan's files, and the data file the run's shape check reads
    the schema of (the operation meta field, looked for as ``TableSchemaResolver.hasOperationField``
    does: a file of the latest commit with data, here one of the plan's log files)."""
    _table, instant, plan_files = _scheduled(path)
    probe = HoodieTable.open(str(path)).shape().operation_probe
    with counting() as requests, usage.measure() as used:
        execute_compaction(
            ServiceContext(HoodieTable.open(str(path)), options=options or {}), instant, runner
        )
    return used, requests.snapshot(), plan_files, probe.read if probe is not None else None


def _check_reads(
    used: usage.Usage,
    requests: dict[str, int],
    plan_files: set[str],
    base: str,
    *,
    logs_whole: bool = True,
    shape_read: str | None = None,
) -> None:
    read = used.read_from
    assert plan_files <= read.keys(), "every base and log file of the plan is read"
    others = read.keys() - plan_files
    meta = join(base, ".hoodie") + "/"
    assert others and all(p.startswith(meta) for p in others), (
        f"besides the plan's files only timeline, plan and table files are read: {sorted(others)}"
    )
    assert used.files_read == len(read) and used.bytes_read == sum(read.values()) > 0
    # Each file read took at least one request that opened or read it.
    assert requests.get("read", 0) + requests.get("open", 0) >= used.files_read
    for path in plan_files:
        size = os.path.getsize(path)
        if path.endswith(".parquet"):  # a footer, then the column chunks: about the file once
            row_groups = pq.ParquetFile(path).metadata.num_row_groups
            bound = size + FOOTER_READ + COALESCE_HOLE * row_groups
            assert size // 2 < read[path] <= bound, (path, read[path], size)
        elif path == shape_read:  # a small log file: read whole by the shape check, then by the merge
            assert read[path] == 2 * size, (path, read[path], size)
        elif logs_whole:  # a log file, read whole once
            assert read[path] == size, (path, read[path], size)
        else:  # the external merge reads a log file by ranges: block headers, then the blocks
            assert read[path] >= size, (path, read[path], size)
    for path in others:  # timeline and plan files, read whole (some more than once)
        size = os.path.getsize(path)
        assert read[path] % size == 0 if size else read[path] == 0, (path, read[path], size)
    assert used.transfers_counted and used.requests_counted


def test_a_compaction_in_process_reads_the_plan_files_and_the_timeline(tmp_path: Path) -> None:
    used, requests, plan_files, shape_read = _compacted(tmp_path / "t", LocalRunner())
    assert shape_read in plan_files and ".log." in shape_read  # the upsert's logs: no base file
    _check_reads(used, requests, plan_files, str(tmp_path / "t"), shape_read=shape_read)
    assert requests == used.requests_by_op, "the run's cost and the request counter see the same requests"
    assert used.storage_requests == sum(requests.values())


def test_a_spilling_compaction_counts_the_base_files_its_read_ahead_thread_reads(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "spill").mkdir()
    spill = {MAX_SIZE_KEY: "64", SPILL_PATH_KEY: str(tmp_path / "spill")}
    with caplog.at_level(logging.INFO):
        used, requests, plan_files, _shape_read = _compacted(tmp_path / "t", LocalRunner(), spill)
    assert "spill into" in caplog.text, "the external merge ran, base batches decoded ahead on a thread"
    _check_reads(used, requests, plan_files, str(tmp_path / "t"), logs_whole=False)


def test_reading_a_footer_and_one_column_counts_the_bytes_read_not_the_file_size(tmp_path: Path) -> None:
    path = str(tmp_path / "two.parquet")
    n = 200_000
    pq.write_table(pa.table({"a": pa.array(range(n)), "b": pa.array(range(n, 2 * n))}), path)
    size = os.path.getsize(path)
    fileio = LocalFileIO()
    with counting() as counter, usage.measure() as used, fileio.open_input(path) as f:
        pf = pq.ParquetFile(f)
        chunk = pf.metadata.row_group(0).column(0).total_compressed_size
        assert pf.read(columns=["a"]).num_rows == n
    assert chunk <= used.bytes_read < size // 2 + FOOTER_READ, (used.bytes_read, chunk, size)
    assert used.read_from == {path: used.bytes_read} and used.files_read == 1
    requests = counter.snapshot()
    assert requests["open"] == 1 and requests["read"] >= 2, "the footer, then the column chunk"
    assert used.requests_by_op == requests


def test_nothing_counting_leaves_the_file_as_the_store_gives_it(tmp_path: Path) -> None:
    table, _instant, plan_files = _scheduled(tmp_path / "t")
    base = next(p for p in sorted(plan_files) if p.endswith(".parquet"))
    with table.fileio.open_input(base) as f:
        assert type(f).__name__ != "PythonFile", "no counting wrapper when nobody counts"
        assert pq.ParquetFile(f).metadata.num_rows > 0


def test_a_compaction_on_spark_reports_the_files_its_tasks_read(tmp_path: Path, spark_runner: Any) -> None:
    local, _local_requests, local_plan, _ = _compacted(tmp_path / "local", LocalRunner())
    spark, spark_requests, spark_plan, shape_read = _compacted(tmp_path / "spark", spark_runner)
    _check_reads(spark, spark_requests, spark_plan, str(tmp_path / "spark"), shape_read=shape_read)
    assert len(spark_plan) == len(local_plan)
    assert spark.files_read == local.files_read, (sorted(spark.read_from), sorted(local.read_from))
    assert spark_requests == spark.requests_by_op, "the tasks' requests count for the table's counter too"
