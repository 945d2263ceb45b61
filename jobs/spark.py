"""Running table-service tasks on Apache Spark.

The driver plans and commits; each task (one file group) is a DataFrame row holding the task as
JSON, processed with ``mapInArrow`` — no RDD API, so the same code runs over Spark Connect. The
task function is found on the executor by module and name, so the ``hoodie`` package must be
importable there: installed in the executors' Python, or shipped as a zip (``ship_code``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from hoodie.io import requests, usage
from hoodie.services.base import JobCancelled, Progress, Task, TaskFunction, TaskResult

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
_INDEX = "__task_index"


def spark_session(
    master: str | None = None, conf: Mapping[str, str] | None = None, app_name: str = "hts"
) -> SparkSession:
    """A SparkSession for ``master``: ``local[*]``, ``spark://``, ``k8s://`` or ``sc://`` (Spark Connect)."""
    master = master or os.environ.get("HTS_SPARK_MASTER") or DEFAULT_MASTER
    # Python workers must run this interpreter (it has pyarrow and the project installed).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("sc://"):
        return SparkSession.builder.remote(master).appName(app_name).getOrCreate()
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.pyspark.driver.python", sys.executable)
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def package_zip(target_dir: str | None = None) -> str:
    """A zip of the ``hoodie`` and ``jobs`` packages, for executors without the project installed."""
    root = Path(__file__).resolve().parents[1]
    out = Path(target_dir or tempfile.mkdtemp(prefix="hts-pyfiles-")) / "hts_code.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("hoodie", "jobs"):
            for path in (root / package).rglob("*"):
                if path.is_file() and "__pycache__" not in path.parts:
                    zf.write(path, path.relative_to(root))
    return str(out)


def _is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _apply(module: str, name: str, threads: int) -> Any:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # PySpark sets OMP_NUM_THREADS to spark.task.cpus in Python workers, and Arrow sizes its
        # thread pool from it; a job with fewer tasks than cores gives each task its share.
        pa.set_cpu_count(threads)
        # This closure is pickled by value, so nothing has imported ``jobs`` on the executor yet:
        # importing it registers S3's conditional PUT with hoodie's FileIO there too.
        importlib.import_module("jobs.objectstore").install()
        fn = getattr(importlib.import_module(module), name)
        for batch in batches:
            results = []
            for text in batch.column(0).to_pylist():
                task = json.loads(text)
                with usage.measure(process_cpu=True) as used:  # reported back: the run's cost
                    result = fn(task)
                result[_INDEX] = task[_INDEX]
                result[usage.COST_KEY] = used.to_json()
                results.append(json.dumps(result))
            yield pa.RecordBatch.from_pydict({"result": pa.array(results, pa.string())})

    return run


@dataclass
class SparkRunner:
    """Runs task functions as Spark tasks, one partition per task; reports progress while it runs.

    Setting ``cancel`` interrupts the running Spark job (its job group, or its tag over Spark
    Connect) and makes :meth:`run` raise :class:`~hoodie.services.base.JobCancelled`.
    """

    spark: SparkSession
    progress: Progress | None = None
    ship_code: bool = False
    cancel: threading.Event | None = None
    _shipped: bool = field(default=False, init=False)

    def _ship(self) -> None:
        if self._shipped or not self.ship_code:
            return
        path = package_zip()
        if _is_connect(self.spark):
            self.spark.addArtifacts(path, pyfile=True)
        else:
            self.spark.sparkContext.addPyFile(path)
        self._shipped = True

    def _threads_per_task(self, tasks: int) -> int:
        """The executor cores each task may use when the job runs fewer tasks than there are cores."""
        if _is_connect(self.spark):
            return 1
        cores = max(1, int(self.spark.sparkContext.defaultParallelism))
        return max(1, cores // max(1, min(tasks, cores)))

    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
        if not tasks:
            return []
        self._ship()
        rows = [(json.dumps({**t, _INDEX: i}),) for i, t in enumerate(tasks)]
        df = self.spark.createDataFrame(rows, "task string").repartition(len(rows))
        mapped = df.mapInArrow(
            _apply(fn.__module__, fn.__qualname__, self._threads_per_task(len(rows))), "result string"
        )
        group = f"hts-{uuid.uuid4().hex}"
        watcher = _ProgressWatcher(
            self.spark, len(rows), description, self.progress, self.cancel, lambda: self._interrupt(group)
        )
        if self.cancel is not None and self.cancel.is_set():
            raise JobCancelled(f"{description}: cancelled before it started")
        if _is_connect(self.spark):
            self.spark.addTag(group)
        else:
            self.spark.sparkContext.setJobGroup(group, description, interruptOnCancel=True)
        watcher.start()
        try:
            collected = mapped.collect()
        except Exception as e:
            if self.cancel is not None and self.cancel.is_set():
                raise JobCancelled(f"{description}: cancelled while running") from e
            raise
        finally:
            watcher.stop()
            if _is_connect(self.spark):
                self.spark.removeTag(group)
        results = [json.loads(r[0]) for r in collected]
        results.sort(key=lambda r: r.pop(_INDEX))
        self._report_cost(results, group)
        if self.progress is not None:
            self.progress(len(results), len(rows))
        return results

    def _report_cost(self, results: list[TaskResult], group: str) -> None:
        """Add the job's cost to the run measuring it (``hoodie.io.usage``): what each task counted
        at storage, and as CPU the tasks' executor run time from Spark's status store (each task
        holds one core while it runs), or, without it (Spark Connect), the CPU time each task
        measured in its Python worker."""
        costs = [usage.Usage.from_json(r.pop(usage.COST_KEY, {})) for r in results]
        if not usage.measuring():
            return
        ran = self._executor_run_seconds(group)
        for cost in costs:
            if ran is not None:
                cost.cpu_seconds = 0.0
            requests.report(cost)  # its storage requests count for the table too
        if ran is not None:
            usage.add_to_current(usage.Usage(cpu_seconds=ran))

    def _executor_run_seconds(self, group: str) -> float | None:
        """The executor run time of the job group's stages (Spark's StageData.executorRunTime), once
        the status store has the jobs' end; None over Spark Connect or when it cannot tell."""
        if _is_connect(self.spark):
            return None
        sc = self.spark.sparkContext
        tracker = sc.statusTracker()
        try:
            # The job's end is posted to the listener bus before collect() returns; the status store
            # records it on the bus's own thread a moment later (Python cannot be called back from
            # it without a py4j callback server). Measured: the first look finds it recorded. When
            # it does not, look again after 1 ms, 2 ms, ... (at most 50 ms apart, 5 s in all).
            deadline = time.monotonic() + 5.0
            pause = 0.001
            jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
            while any(j is None or j.status in ("RUNNING", "UNKNOWN") for j in jobs):
                if time.monotonic() > deadline:
                    return None
                time.sleep(pause)
                pause = min(0.05, pause * 2)
                jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
            jvm, gateway = sc._jvm, sc._gateway
            if jvm is None or gateway is None:
                return None
            store = sc._jsc.sc().statusStore()
            no_quantiles = gateway.new_array(jvm.double, 0)
            total_ms = 0
            for stage in {s for j in jobs if j is not None for s in j.stageIds}:
                attempts = store.stageData(stage, False, jvm.java.util.ArrayList(), False, no_quantiles)
                found = attempts.iterator()
                while found.hasNext():
                    total_ms += int(found.next().executorRunTime())
        except Exception as e:  # py4j: a Spark whose status store differs; the tasks' CPU time is used
            log.debug("no executor run time for job group %s: %s", group, e)
            return None
        return total_ms / 1000.0

    def _interrupt(self, group: str) -> None:
        log.warning("cancelling Spark job group %s", group)
        if _is_connect(self.spark):
            self.spark.interruptTag(group)
        else:
            self.spark.sparkContext.cancelJobGroup(group)


class _ProgressWatcher:
    """Logs stage progress (tasks done of total, i.e. file groups) while a job runs, and
    interrupts the job once ``cancel`` is set."""

    def __init__(
        self,
        spark: SparkSession,
        total: int,
        description: str,
        progress: Progress | None,
        cancel: threading.Event | None,
        interrupt: Callable[[], None],
    ) -> None:
        self.spark = spark
        self.total = total
        self.description = description
        self.progress = progress
        self.cancel = cancel
        self.interrupt = interrupt
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="hts-spark-progress")
        self._thread.start()

    def _cancelled(self) -> bool:
        if self.cancel is None or not self.cancel.is_set():
            return False
        self.interrupt()
        return True

    def _run(self) -> None:
        if _is_connect(self.spark):  # no status tracker over Connect: only watch for cancellation
            while not self._stop.wait(0.5):
                if self._cancelled():
                    return
            return
        tracker = self.spark.sparkContext.statusTracker()
        last = -1
        while not self._stop.wait(0.5):
            if self._cancelled():
                return
            done = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None and info.numTasks == self.total:
                    done = max(done, info.numCompletedTasks)
            if done != last:
                last = done
                log.info("%s: %d/%d file groups done", self.description, done, self.total)
                if self.progress is not None:
                    self.progress(done, self.total)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
