"""Clustering benchmark: binary-copy clustering against the decode-rewrite floor.

The table: COPY_ON_WRITE v8, one partition of ``files`` small file groups (inserts of the read
benchmark's rows, snappy), which the size-based planner puts into one clustering group.
Ours: the clustering scheduled with Hudi's ``SparkBinaryCopyClusteringExecutionStrategy``, then
executed in process on a fresh copy of the table each run (scheduling not timed). Our
decode-rewrite (``SparkSortAndSizeExecutionStrategy``) is timed the same way, once, for reference.
Floor: pyarrow reads every input file, sets ``_hoodie_file_name`` and writes one snappy file:
the least any decode-rewrite of the group can cost.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.data import BASE_COMPRESSION, DATA_SCHEMA, KEY, ORDERING, make_rows
from hoodie.schema.meta_fields import FILENAME_METADATA_FIELD, RECORD_KEY_METADATA_FIELD

TARGET_VS_FLOOR = 0.3
DATA_VERSION = "v1"
BINARY_COPY = "org.apache.hudi.client.clustering.run.strategy.SparkBinaryCopyClusteringExecutionStrategy"
REWRITE = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"


@dataclass(frozen=True)
class ClusteringTimes:
    rows: int
    files: int
    input_bytes: int
    binary_copy: list[float]
    rewrite: list[float]
    floor: list[float]


def ensure_table(cache_dir: Path, rows: int, files: int, *, log: Any = print) -> Path:
    """The benchmark table (cached under ``cache_dir``), written with our writer."""
    from hoodie.config.table_config import RecordMergeMode, TableType, TableVersion
    from hoodie.write.create import create_table
    from hoodie.write.options import WriteOptions
    from hoodie.write.writer import HoodieWriter

    root = cache_dir / f"clustering-{DATA_VERSION}-{rows}r-{files}f-{BASE_COMPRESSION}"
    if (root / "done.json").exists():
        return root / "table"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log(f"generating {files} file groups of {rows // files:,} rows into {root} ...")
    started = time.perf_counter()
    table = create_table(
        str(root / "table"),
        table_name="bench_cow",
        table_type=TableType.COPY_ON_WRITE,
        schema=DATA_SCHEMA,
        record_key_fields=[KEY],
        ordering_fields=[ORDERING],
        merge_mode=RecordMergeMode.EVENT_TIME_ORDERING,
        table_version=TableVersion.EIGHT,
    )
    options = WriteOptions(
        parquet_compression=BASE_COMPRESSION, small_file_limit=0, max_file_size=rows * 4096
    )
    writer = HoodieWriter(table, options=options)
    rng = np.random.default_rng(20_251_125)
    per_file = rows // files
    for k in range(files):
        ids = np.arange(k * per_file, (k + 1) * per_file, dtype=np.int64)
        writer.insert(make_rows(ids, 1_000_000 + rng.integers(0, 1_000_000, per_file), rng))
    (root / "done.json").write_text(json.dumps({"rows": rows, "files": files}))
    log(f"  generated in {time.perf_counter() - started:.1f}s")
    return root / "table"


def _fresh(table: Path, scratch: Path) -> Path:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(table, scratch)
    for p in scratch.rglob("*.parquet"):
        p.read_bytes()  # warm page cache for every side alike
    return scratch


def _base_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


def run_ours(table: Path, scratch: Path, strategy: str) -> float:
    from hoodie.services.base import LocalRunner, ServiceContext
    from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
    from hoodie.table import HoodieTable

    path = _fresh(table, scratch)
    options = {
        "hoodie.clustering.execution.strategy.class": strategy,
        "hoodie.parquet.compression.codec": BASE_COMPRESSION,
    }
    ctx = ServiceContext(HoodieTable.open(str(path)), options=options)
    scheduled = schedule_clustering(ctx, ClusteringPolicy.from_options(options))
    assert scheduled is not None and scheduled.instant_time is not None
    started = time.perf_counter()
    execute_clustering(ctx, scheduled.instant_time, LocalRunner())
    return time.perf_counter() - started


def run_floor(table: Path, out: Path) -> float:
    from hoodie.file_group.base_file_writer import set_constant

    inputs = _base_files(table)
    for p in inputs:
        p.read_bytes()
    started = time.perf_counter()
    data = pa.concat_tables([pq.read_table(p) for p in inputs])
    data = set_constant(data, FILENAME_METADATA_FIELD, out.name)
    pq.write_table(data, out, compression=BASE_COMPRESSION, store_schema=False)
    return time.perf_counter() - started


def time_clustering(cache_dir: Path, rows: int, files: int, repeat: int) -> ClusteringTimes:
    table = ensure_table(cache_dir, rows, files)
    import pandas  # noqa: F401  (pyarrow imports it on its first Parquet write: keep that out of the timings)

    scratch = cache_dir / "scratch-clustering"
    copy, rewrite, floor = [], [], []
    for k in range(repeat):
        copy.append(run_ours(table, scratch / "copy", BINARY_COPY))
        if k == 0:  # for reference only: once is enough (it is the slow one)
            rewrite.append(run_ours(table, scratch / "rewrite", REWRITE))
        floor.append(run_floor(table, scratch / "floor.parquet"))
    check_same_rows(scratch / "copy", scratch / "rewrite")
    size = sum(p.stat().st_size for p in _base_files(table))
    shutil.rmtree(scratch, ignore_errors=True)
    return ClusteringTimes(rows, files, size, copy, rewrite, floor)


def check_same_rows(copied: Path, rewritten: Path) -> None:
    """The two clusterings' live files hold the same rows (all columns but the file name)."""
    from hoodie.read.reader import TableReader
    from hoodie.table import HoodieTable

    def rows(path: Path) -> pa.Table:
        data = TableReader(HoodieTable.open(str(path))).snapshot().drop_columns([FILENAME_METADATA_FIELD])
        return data.sort_by(RECORD_KEY_METADATA_FIELD)

    if not rows(copied).equals(rows(rewritten)):
        raise RuntimeError("binary-copy clustering and the rewrite disagree on the table's rows")
