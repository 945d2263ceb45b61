"""Compaction benchmark: our compaction of the generated file group against the pyarrow floor.

Ours: the table's compaction scheduled, then executed on Spark (``local[*]``, started and warmed
before timing, so the time is net of Spark start-up), on a fresh copy of the table each run.
Floor: pyarrow reads the base file and a Parquet file of the same updates, keeps the latest row
per key, and writes one Parquet file with the same codec. Memory: one compaction task
(``compact_file_group``) in a fresh process, peak RSS above the post-import baseline, against
the Arrow size of the slice it writes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.data import BenchData

TARGET_VS_FLOOR = 1.5
TARGET_MEMORY = 3.0
TARGET_CDC = 1.5
"""Compaction of a CDC table (DATA_BEFORE_AFTER: the CDC log is written too) / the same without CDC."""
KEY = "key"


@dataclass(frozen=True)
class CompactionTimes:
    ours_spark: list[float]
    ours_in_process: list[float]
    ours_cdc_in_process: list[float]
    floor: list[float]


def _copy(data: BenchData, scratch: Path) -> Path:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(data.table_path, scratch)
    # Read every file once so both sides start from a warm page cache.
    for p in scratch.rglob("*"):
        if p.is_file():
            p.read_bytes()
    return scratch


def _schedule(path: Path, compression: str) -> tuple[Any, str]:
    from hoodie.services.base import ServiceContext
    from hoodie.services.compaction import CompactionPolicy, schedule_compaction
    from hoodie.table import HoodieTable

    ctx = ServiceContext(
        HoodieTable.open(str(path)), options={"hoodie.parquet.compression.codec": compression}
    )
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return ctx, scheduled.instant_time


def _enable_cdc(path: Path) -> None:
    """Make the copy a CDC table, as ``hoodie.table.cdc.enabled`` with the fullest logging mode."""
    from hoodie.config.table_config import update_table_properties
    from hoodie.io.fileio import LocalFileIO

    update_table_properties(
        LocalFileIO(),
        str(path / ".hoodie"),
        {
            "hoodie.table.cdc.enabled": "true",
            "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        },
    )


def run_ours(data: BenchData, scratch: Path, runner: Any, *, cdc: bool = False) -> float:
    from hoodie.services.compaction import execute_compaction

    path = _copy(data, scratch)
    if cdc:
        _enable_cdc(path)
    ctx, instant = _schedule(path, data.compression)
    start = time.perf_counter()
    execute_compaction(ctx, instant, runner)
    return time.perf_counter() - start


def run_floor(data: BenchData, out: Path) -> float:
    start = time.perf_counter()
    base = pq.read_table(data.base_file)
    updates = pq.read_table(data.updates_parquet).select(base.column_names)
    keep = pc.invert(pc.is_in(base[KEY], value_set=updates[KEY]))
    merged = pa.concat_tables([base.filter(keep), updates])
    pq.write_table(merged, out, compression=data.compression)
    return time.perf_counter() - start


def time_compaction(data: BenchData, repeat: int, scratch_root: Path) -> CompactionTimes:
    from hoodie.services.base import LocalRunner
    from jobs.spark import SparkRunner, spark_session

    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    spark.range(4).repartition(2).collect()  # start executors and Python workers
    runner = SparkRunner(spark)
    ours: list[float] = []
    local: list[float] = []
    local_cdc: list[float] = []
    floor: list[float] = []
    for _ in range(repeat):
        ours.append(run_ours(data, scratch_root / "spark", runner))
        local.append(run_ours(data, scratch_root / "local", LocalRunner()))
        local_cdc.append(run_ours(data, scratch_root / "local-cdc", LocalRunner(), cdc=True))
        _copy(data, scratch_root / "floor")
        floor.append(run_floor(data, scratch_root / "floor.parquet"))
    return CompactionTimes(ours, local, local_cdc, floor)


# -- memory of one compaction task, in a fresh process -----------------------------------------


def task_for_memory(data: BenchData, scratch: Path) -> dict[str, Any]:
    """A scheduled compaction's single task, as the executor would send it."""
    from hoodie.read.reader import table_schema
    from hoodie.schema.avro_arrow import add_meta_fields
    from hoodie.timeline.instant import Action, Instant, State

    path = _copy(data, scratch)
    ctx, instant = _schedule(path, data.compression)
    table = ctx.table
    timeline = table.reload()
    plan = table.compaction_plan(instant, timeline)
    timeline.transition_to_inflight(Instant(instant, Action.COMPACTION, State.REQUESTED))
    completed = timeline.reload().completed().writes()
    (op,) = plan.operations or ()
    return {
        "table_uri": str(path),
        "storage_options": {},
        "instant_time": instant,
        "arrow_schema": table_schema(table).serialize().to_pybytes().hex(),
        "avro_schema": json.dumps(add_meta_fields(table.latest_schema_json() or {})),
        "completed_instants": [i.requested_time for i in completed],
        "timeline_start": None,
        "latest_instant": completed.last().requested_time if completed.last() else None,
        "compression": data.compression,
        "schema_on_read": None,  # the bench's table reads by name
        "operation": op.to_avro(),
        "write_token": "0-0-0",
    }


def measure_task_memory(data: BenchData, scratch: Path) -> dict[str, Any]:
    task_file = scratch.parent / "compaction-task.json"
    task_file.write_text(json.dumps(task_for_memory(data, scratch)))
    done = subprocess.run(
        [sys.executable, "-m", "bench.compaction", str(task_file)], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _child(task_path: str) -> None:
    from bench.measure import reset_peak, status_kb  # the read benchmark's helpers
    from hoodie.services.compaction import compact_file_group

    task = json.loads(Path(task_path).read_text())
    reset = reset_peak()
    baseline = (status_kb("VmRSS") if reset else status_kb("VmHWM")) * 1024
    start = time.perf_counter()
    result = compact_file_group(task)
    seconds = time.perf_counter() - start
    peak = status_kb("VmHWM") * 1024
    print(
        json.dumps(
            {
                "peak_rss_delta": peak - baseline,
                "output_nbytes": result["bytes"],
                "rows": result["rows"],
                "seconds": seconds,
            }
        )
    )


if __name__ == "__main__":
    _child(sys.argv[1])
