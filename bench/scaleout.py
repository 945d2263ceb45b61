"""Spark scale-out: compaction and clustering of 64 file groups on a standalone cluster with two
workers against one (one core each), the same plan on a fresh copy of the table each run.

The time is the execution of an already scheduled plan, with the Spark session started and its
executors warmed first (net of start-up). This machine has two cores, shared by the driver, the
workers and the Python workers: the ratio shows how the work spreads over executors, not what two
machines would give.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.data import DATA_SCHEMA, KEY, ORDERING, make_rows
from bench.spark_cluster import spark_env, standalone_cluster

FILE_GROUPS = 64
ROWS_PER_GROUP = 20_000
UPDATE_FRACTION = 0.2
DATA_VERSION = "v1"
#: Clustering: two file groups per clustering group, so 32 tasks.
CLUSTERING_OPTIONS = {
    "hoodie.clustering.plan.strategy.max.num.groups": str(FILE_GROUPS),
    "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 40),
}


@dataclass(frozen=True)
class ScaleOut:
    file_groups: int
    rows: int
    compaction: dict[int, list[float]]
    """Seconds per run, by number of workers."""
    clustering: dict[int, list[float]]


def _build(path: Path, table_type: Any, *, updates: bool) -> None:
    from hoodie.config.table_config import RecordMergeMode, TableVersion
    from hoodie.write.create import create_table
    from hoodie.write.options import WriteOptions
    from hoodie.write.writer import HoodieWriter

    table = create_table(
        str(path),
        table_name="bench_scaleout",
        table_type=table_type,
        schema=DATA_SCHEMA,
        record_key_fields=[KEY],
        ordering_fields=[ORDERING],
        merge_mode=RecordMergeMode.EVENT_TIME_ORDERING,
        table_version=TableVersion.EIGHT,
    )
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    rng = np.random.default_rng(20_261_125)
    for k in range(FILE_GROUPS):  # small files off: every insert is a new file group
        ids = np.arange(k * ROWS_PER_GROUP, (k + 1) * ROWS_PER_GROUP, dtype=np.int64)
        writer.insert(make_rows(ids, 1_000_000 + rng.integers(0, 1_000_000, len(ids)), rng))
    if updates:
        total = FILE_GROUPS * ROWS_PER_GROUP
        ids = np.sort(rng.choice(total, int(total * UPDATE_FRACTION), replace=False)).astype(np.int64)
        writer.upsert(make_rows(ids, 3_000_000 + rng.integers(0, 1_000_000, len(ids)), rng))


def ensure_tables(cache_dir: Path, *, log: Callable[[str], None] = print) -> tuple[Path, Path]:
    """The MERGE_ON_READ table to compact and the COPY_ON_WRITE table to cluster (cached)."""
    from hoodie.config.table_config import TableType

    root = cache_dir / f"scaleout-{DATA_VERSION}-{FILE_GROUPS}x{ROWS_PER_GROUP}"
    if not (root / "done.json").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        log(f"generating two tables of {FILE_GROUPS} file groups x {ROWS_PER_GROUP:,} rows into {root} ...")
        _build(root / "mor", TableType.MERGE_ON_READ, updates=True)
        _build(root / "cow", TableType.COPY_ON_WRITE, updates=False)
        (root / "done.json").write_text(json.dumps({"file_groups": FILE_GROUPS, "rows": ROWS_PER_GROUP}))
    return root / "mor", root / "cow"


def _fresh(table: Path, scratch: Path) -> Path:
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(table, scratch)
    return scratch


def _compaction(table: Path, scratch: Path, runner: Any) -> float:
    from hoodie.services.base import ServiceContext
    from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
    from hoodie.table import HoodieTable

    ctx = ServiceContext(HoodieTable.open(str(_fresh(table, scratch))))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    started = time.perf_counter()
    execute_compaction(ctx, scheduled.instant_time, runner)
    return time.perf_counter() - started


def _clustering(table: Path, scratch: Path, runner: Any) -> float:
    from hoodie.services.base import ServiceContext
    from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
    from hoodie.table import HoodieTable

    path = _fresh(table, scratch)
    file_bytes = min(p.stat().st_size for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)
    options = {
        **CLUSTERING_OPTIONS,
        "hoodie.clustering.plan.strategy.max.bytes.per.group": str(2 * file_bytes),
    }
    ctx = ServiceContext(HoodieTable.open(str(path)), options=options)
    scheduled = schedule_clustering(ctx, ClusteringPolicy.from_options(options))
    assert scheduled is not None and scheduled.instant_time is not None
    started = time.perf_counter()
    execute_clustering(ctx, scheduled.instant_time, runner)
    return time.perf_counter() - started


def time_scaleout(cache_dir: Path, repeat: int, *, log: Callable[[str], None] = print) -> ScaleOut:
    """Each service on one worker, then on two, ``repeat`` runs each."""
    from jobs.spark import SparkRunner, spark_session

    mor, cow = ensure_tables(cache_dir, log=log)
    scratch = cache_dir / "scratch" / "scaleout"
    compaction: dict[int, list[float]] = {}
    clustering: dict[int, list[float]] = {}
    for workers in (1, 2):
        cluster_dir = scratch / f"cluster-{workers}"
        shutil.rmtree(cluster_dir, ignore_errors=True)
        cluster_dir.mkdir(parents=True)
        env = spark_env(cluster_dir)
        with standalone_cluster(cluster_dir, workers=workers, cores=1, memory="2g") as master:
            conf = {
                "spark.local.dir": env["SPARK_LOCAL_DIRS"],
                "spark.cores.max": str(workers),
                "spark.pyspark.python": sys.executable,
            }
            spark = spark_session(master, conf=conf, app_name=f"hts-bench-scaleout-{workers}")
            try:
                spark.sparkContext.setLogLevel("ERROR")
                spark.range(8).repartition(workers * 2).collect()  # executors and Python workers up
                runner = SparkRunner(spark)
                compaction[workers] = [
                    _compaction(mor, scratch / "compaction", runner) for _ in range(repeat)
                ]
                clustering[workers] = [
                    _clustering(cow, scratch / "clustering", runner) for _ in range(repeat)
                ]
            finally:
                spark.stop()
    return ScaleOut(FILE_GROUPS, FILE_GROUPS * ROWS_PER_GROUP, compaction, clustering)
