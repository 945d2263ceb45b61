"""Every metric the daemon exports, in one place (``/metrics``, Prometheus text format).

Labels are bounded: ``table`` (the served tables), ``service`` (compaction, logcompaction,
clustering, clean, archival, rollback, indexing), ``outcome`` (a run's end state) and a few
fixed enumerations. Where Apache Hudi has a metric for the same thing, the name follows it in
Prometheus spelling (Hudi's ``pendingCompactionInstantCount`` → ``hts_pending_instant_count``
with ``service="compaction"``; ``totalRecordsWritten`` → ``hts_total_records_written``;
``lock.acquire.failure`` → ``hts_lock_acquire_failure``; ...). Gauges describing state (pending
instants and their ages, table health, queue depth) are computed when scraped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series: they double the series count and nobody queries them

DURATION_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)
SHORT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class StateCollector(Collector):
    """Gauges read from the daemon's state at scrape time."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        state = self.snapshot()
        requests = CounterMetricFamily(
            "hts_storage_requests",
            "Storage requests (FileIO calls and the reads Parquet and log readers make through its files; "
            "on object stores each is at least one request) per table and kind, Spark tasks' included; "
            "table=_discovery counts the discovery rescans",
            labels=["table", "op"],
        )
        for table, ops in sorted(state.get("requests", {}).items()):
            for op, n in sorted(ops.items()):
                requests.add_metric([table, op], n)
        yield requests
        pending = GaugeMetricFamily(
            "hts_pending_instant_count",
            "Pending instants per table and service (Hudi: pending<Service>InstantCount)",
            labels=["table", "service"],
        )
        oldest = GaugeMetricFamily(
            "hts_oldest_pending_age_seconds",
            "Age in seconds of the oldest pending request per table and service",
            labels=["table", "service"],
        )
        abandoned = GaugeMetricFamily(
            "hts_abandoned_instant_count",
            "Inflight attempts whose heartbeat expired, per table and service",
            labels=["table", "service"],
        )
        for (table, service), (count, age, dead) in sorted(state["pending"].items()):
            pending.add_metric([table, service], count)
            oldest.add_metric([table, service], age)
            abandoned.add_metric([table, service], dead)
        yield pending
        yield oldest
        yield abandoned
        up = GaugeMetricFamily(
            "hts_table_up", "1 when the table opens and is served, 0 otherwise", labels=["table"]
        )
        paused = GaugeMetricFamily("hts_table_paused", "1 when the table is paused", labels=["table"])
        lock = GaugeMetricFamily(
            "hts_lock_state",
            "The table lock's connection state (1 for the current one)",
            labels=["table", "state"],
        )
        for table, info in sorted(state["tables"].items()):
            up.add_metric([table], 1.0 if info["up"] else 0.0)
            paused.add_metric([table], 1.0 if info["paused"] else 0.0)
            if info.get("lock_state"):
                for name in ("connected", "suspended", "lost"):
                    lock.add_metric([table, name], 1.0 if info["lock_state"] == name else 0.0)
        yield up
        yield paused
        yield lock
        tables = GaugeMetricFamily("hts_tables", "Served tables by health", labels=["health"])
        for health, n in sorted(state["health"].items()):
            tables.add_metric([health], n)
        yield tables
        queue = GaugeMetricFamily("hts_queue_depth", "Work items waiting to run", labels=["service"])
        running = GaugeMetricFamily("hts_running_runs", "Runs executing now", labels=["service"])
        for service, (waiting, active) in sorted(state["queue"].items()):
            queue.add_metric([service], waiting)
            running.add_metric([service], active)
        yield queue
        yield running
        tasks = GaugeMetricFamily(
            "hts_spark_job_tasks",
            "Tasks (file groups) of the Spark jobs running now, done and still to do",
            labels=["table", "service", "state"],
        )
        for (table, service), (done, total) in sorted(state["tasks"].items()):
            tasks.add_metric([table, service, "done"], done)
            tasks.add_metric([table, service, "pending"], total - done)
        yield tasks
        score = GaugeMetricFamily(
            "hts_table_health_score",
            "The table's health score: 100 when its services keep up, minus each reason's penalty",
            labels=["table"],
        )
        penalty = GaugeMetricFamily(
            "hts_table_health_penalty",
            "Points the health score loses per reason (service.health.REASONS)",
            labels=["table", "reason"],
        )
        for table, (points, penalties) in sorted(state.get("health_scores", {}).items()):
            score.add_metric([table], points)
            for reason, lost in sorted(penalties.items()):
                penalty.add_metric([table, reason], lost)
        yield score
        yield penalty
        suspended = GaugeMetricFamily(
            "hts_service_suspended",
            "1 when the service is suspended on the table after retry.suspend_after failed runs",
            labels=["table", "service"],
        )
        failing = GaugeMetricFamily(
            "hts_service_consecutive_failures",
            "Consecutive failed runs of the service on the table (0 after a success or a resume)",
            labels=["table", "service"],
        )
        for (table, service), (is_suspended, failures) in sorted(state.get("streaks", {}).items()):
            suspended.add_metric([table, service], 1.0 if is_suspended else 0.0)
            failing.add_metric([table, service], failures)
        yield suspended
        yield failing
        yield GaugeMetricFamily(
            "hts_ready", "1 when the daemon is ready to take work", value=1.0 if state["ready"] else 0.0
        )
        yield GaugeMetricFamily(
            "hts_paused", "1 when all work is paused", value=1.0 if state["paused"] else 0.0
        )
        yield GaugeMetricFamily(
            "hts_leader",
            "1 when this replica schedules by policy (leader or no election)",
            value=1.0 if state["leader"] else 0.0,
        )
        yield GaugeMetricFamily(
            "hts_last_tick_timestamp_seconds",
            "When the last watch tick finished (unix time)",
            value=state["last_tick"],
        )


class Metrics:
    """The daemon's metrics on its own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.runs = Counter(
            "hts_runs",
            "Run attempts by outcome (a retried run counts each attempt)",
            ["table", "service", "outcome"],
            registry=r,
        )
        self.run_duration = Histogram(
            "hts_run_duration_seconds",
            "Run duration (Hudi: <action>.duration)",
            ["table", "service"],
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.records_written = Counter(
            "hts_total_records_written",
            "Records written (Hudi: totalRecordsWritten)",
            ["table", "service"],
            registry=r,
        )
        self.bytes_written = Counter(
            "hts_total_bytes_written",
            "Bytes written (Hudi: totalBytesWritten)",
            ["table", "service"],
            registry=r,
        )
        self.files_written = Counter(
            "hts_total_files_written",
            "Files written (Hudi: totalFilesInsert + totalFilesUpdate)",
            ["table", "service"],
            registry=r,
        )
        self.files_removed = Counter(
            "hts_total_files_deleted",
            "Files deleted (Hudi: clean.numFilesDeleted, rollback.numFilesDeleted)",
            ["table", "service"],
            registry=r,
        )
        self.log_files_compacted = Counter(
            "hts_total_log_files_compacted",
            "Log files compacted (Hudi: totalLogFilesCompacted)",
            ["table", "service"],
            registry=r,
        )
        self.instants_archived = Counter(
            "hts_archive_num_instants_archived",
            "Instants archived (Hudi: archive.numInstantsArchived)",
            ["table"],
            registry=r,
        )
        self.scheduled = Counter(
            "hts_scheduled",
            "Plans written by the daemon (policy or REST)",
            ["table", "service", "trigger"],
            registry=r,
        )
        self.core_seconds = Counter(
            "hts_run_core_seconds",
            "CPU seconds runs used (in process: the worker thread; on Spark: driver plus tasks)",
            ["table", "service"],
            registry=r,
        )
        self.bytes_read = Counter(
            "hts_run_bytes_read",
            "Bytes runs read from storage (driver and tasks, as transferred)",
            ["table", "service"],
            registry=r,
        )
        self.files_read = Counter(
            "hts_run_files_read",
            "Distinct files each run opened for reading, summed over runs",
            ["table", "service"],
            registry=r,
        )
        self.run_storage_requests = Counter(
            "hts_run_storage_requests",
            "Storage requests runs made (driver and tasks)",
            ["table", "service"],
            registry=r,
        )
        self.lock_acquire = Histogram(
            "hts_lock_request_latency_seconds",
            "Time to acquire the table lock (Hudi: lock.request.latency)",
            ["table"],
            buckets=SHORT_BUCKETS,
            registry=r,
        )
        self.lock_failures = Counter(
            "hts_lock_acquire_failure",
            "Failed lock acquisitions (Hudi: lock.acquire.failure)",
            ["table"],
            registry=r,
        )
        self.truetime_wait = Histogram(
            "hts_truetime_skew_wait_seconds",
            "Clock-skew waits of instant-time generation",
            ["table"],
            buckets=SHORT_BUCKETS,
            registry=r,
        )
        self.truetime_issued = Counter("hts_truetime_issued", "Instant times issued", ["table"], registry=r)
        self.truetime_behind = Counter(
            "hts_truetime_clock_behind",
            "Times issued past the high-water mark because the clock was behind it",
            ["table"],
            registry=r,
        )
        self.tick_duration = Histogram(
            "hts_scheduler_tick_duration_seconds", "Watch tick duration", buckets=SHORT_BUCKETS, registry=r
        )
        self.tick_overruns = Counter(
            "hts_scheduler_overruns", "Watch ticks that took longer than their budget", registry=r
        )
        self.table_errors = Counter(
            "hts_table_errors", "Failures to open or read a table, by kind", ["table", "kind"], registry=r
        )
        self.api_requests = Counter(
            "hts_api_requests",
            "API requests by route and status code",
            ["route", "method", "code"],
            registry=r,
        )

    def add_state(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.registry.register(StateCollector(snapshot))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # -- observers ---------------------------------------------------------------------------

    def lock_acquired(self, table_id: str, seconds: float) -> None:
        self.lock_acquire.labels(table_id).observe(seconds)

    def lock_failed(self, table_id: str, seconds: float) -> None:
        self.lock_acquire.labels(table_id).observe(seconds)
        self.lock_failures.labels(table_id).inc()

    def skew_waited(self, table_id: str, seconds: float) -> None:
        self.truetime_wait.labels(table_id).observe(seconds)

    def time_issued(self, table_id: str, *, behind_mark: bool) -> None:
        self.truetime_issued.labels(table_id).inc()
        if behind_mark:
            self.truetime_behind.labels(table_id).inc()

    def count_cost(self, table_id: str, service: str, cost: Mapping[str, Any]) -> None:
        """One attempt's cost (``service.cost``); written bytes and files count on success only
        (``hts_total_bytes_written``)."""
        if not cost:
            return
        self.core_seconds.labels(table_id, service).inc(cost.get("core_seconds") or 0.0)
        for counter, key in (
            (self.bytes_read, "bytes_read"),
            (self.files_read, "files_read"),
            (self.run_storage_requests, "storage_requests"),
        ):
            if cost.get(key) is not None:
                counter.labels(table_id, service).inc(cost[key])

    def names(self) -> Iterable[str]:
        """Every metric family name this registry exports (for tests and docs)."""
        for family in self.registry.collect():
            yield family.name
