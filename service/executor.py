"""Runs work items: table services on one long-lived SparkSession (or in process).

This is the only daemon module that reaches Spark (through ``jobs.spark``). The session starts
on the first run that needs it and serves every run after it, from several worker threads at
once (Spark schedules their jobs side by side; ``spark.scheduler.mode`` is FAIR unless
configured). Master ``in-process`` runs tasks in the worker thread instead (small tables, tests).

Each run builds a fresh :class:`~hoodie.services.base.ServiceContext` over the table's shared
lock and TrueTime clock and runs the service through the orchestrator the CLI uses too
(:mod:`hoodie.services.orchestrator`); this module only maps its outcome (or its error) to the
run's :class:`Outcome`, which goes to the run store and the metrics.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodie.errors import (
    HoodieError,
    InstantBusyError,
    InstantNotPendingError,
    InstantTakenOverError,
    UnsupportedShapeError,
)
from hoodie.io import usage
from hoodie.io.requests import counting
from hoodie.services import orchestrator
from hoodie.services.base import ExecutionResult, JobCancelled, LocalRunner, Runner, ServiceContext
from hoodie.table import HoodieTable
from hoodie.transaction.lock import LockError
from service.cost import run_cost
from service.queue import WorkItem
from service.registry import TableEntry
from service.settings import SparkSettings
from service.store import RunKind, RunState

log = logging.getLogger(__name__)

IN_PROCESS = "in-process"
TAKEN_OVER = "taken over"
"""Why a run was cancelled when another executor took its instant over (``hoodie.services.claim``)."""


class SparkHolder:
    """The daemon's one SparkSession, created on first use."""

    def __init__(self, settings: SparkSettings) -> None:
        self.settings = settings
        self._spark: Any = None
        self._guard = threading.Lock()
        self.started_at: float | None = None

    @property
    def in_process(self) -> bool:
        return self.settings.master == IN_PROCESS

    def session(self) -> Any:
        with self._guard:
            if self._spark is None:
                from jobs.spark import spark_session

                conf = {"spark.scheduler.mode": "FAIR", **self.settings.conf}
                log.info("starting Spark (%s)", self.settings.master)
                self._spark = spark_session(self.settings.master, conf, app_name="hts-daemon")
                self.started_at = time.time()
            return self._spark

    def runner(self, cancel: threading.Event, progress: Callable[[int, int], None]) -> Runner:
        if self.in_process:
            return LocalRunner(progress=progress, cancel=cancel)
        from jobs.spark import SparkRunner

        master = self.settings.master
        ship = not master.startswith("local")
        return SparkRunner(self.session(), progress=progress, ship_code=ship, cancel=cancel)

    def stop(self) -> None:
        with self._guard:
            if self._spark is not None:
                try:
                    self._spark.stop()
                finally:
                    self._spark = None


class RunFailed(Exception):
    """A run ended in failure; ``retry`` says whether trying again could help."""

    def __init__(self, message: str, *, retry: bool) -> None:
        super().__init__(message)
        self.retry = retry


Claim = Callable[[WorkItem, str], WorkItem | None]
"""Claims an instant for a running item: None when it may carry it out, else the item that does."""


@dataclass
class Outcome:
    state: RunState
    """How the run ended: succeeded, skipped, cancelled or failed."""
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    retry: bool = False
    scheduled: list[tuple[str, str]] = field(default_factory=list)
    """(service, instant) plans this run wrote that still need executing."""
    result: ExecutionResult | None = None
    cost: dict[str, Any] = field(default_factory=dict)
    """What this attempt used (``service.cost``)."""


def context_for(entry: TableEntry, options: Mapping[str, str]) -> ServiceContext:
    """A fresh context on ``entry``'s table with its shared lock and clock."""
    assert entry.table is not None
    table = HoodieTable.open(entry.uri, **entry.config.storage_options)
    table.adopt_shapes(entry.table)  # the watcher keeps the entry's shape current: no re-listing
    return orchestrator.service_context(
        table,
        options,
        lock=entry.lock,
        time_source=entry.clock,
        storage_options=entry.config.storage_options,
    )


def summarize(result: ExecutionResult) -> dict[str, Any]:
    stats = result.write_stats
    return {
        "instant": result.instant.requested_time,
        "completed": result.instant.completion_time,
        "action": result.instant.action.value,
        "files_written": len(stats),
        "records_written": sum(s.num_writes or 0 for s in stats),
        "bytes_written": sum(s.total_write_bytes or 0 for s in stats),
        "log_files_compacted": sum(s.total_log_files_compacted or 0 for s in stats),
        **{k: v for k, v in result.details.items() if k not in ("archived_instants",)},
    }


class Executor:
    """Turns a work item into service calls and an :class:`Outcome`."""

    def __init__(self, spark: SparkHolder, claim: Claim | None = None) -> None:
        self.spark = spark
        self.claim: Claim = claim or (lambda _item, _instant: None)

    def run(self, item: WorkItem, entry: TableEntry) -> Outcome:
        """Carry out ``item``, measuring what it costs (``service.cost``); its storage requests
        count for the table too."""
        with counting(entry.requests), usage.measure() as used:
            outcome = self._outcome(item, entry)
        outcome.cost = run_cost(used, outcome.details)
        return outcome

    def _outcome(self, item: WorkItem, entry: TableEntry) -> Outcome:
        options = entry.options(item.options)
        failed = RunState.FAILED
        try:
            ctx = context_for(entry, options)
            if item.kind is RunKind.EXECUTE:
                return self._execute(item, ctx)
            if item.kind is RunKind.SCHEDULE:
                return self._schedule(item, ctx)
            if item.kind is RunKind.TRIGGER:
                return self._trigger(item, ctx)
            return self._run(item, ctx)  # RunKind.RUN: archival, metadata, in one go
        except InstantBusyError as e:
            return Outcome(RunState.SKIPPED, {"reason": "running elsewhere"}, str(e))
        except InstantNotPendingError as e:
            return Outcome(RunState.SKIPPED, {"reason": "no longer pending"}, str(e))
        except JobCancelled as e:
            return Outcome(RunState.CANCELLED, {}, str(e))
        except InstantTakenOverError as e:
            # Our heartbeat was late and another executor (a replica, or Apache Hudi's writer) rolled
            # the attempt back and runs the instant: not the table's failure, so it is no failed run
            # towards auto-suspend, not retried here, and the instant is not given up on.
            details = {"reason": TAKEN_OVER, "rollback": e.rollback}
            return Outcome(RunState.CANCELLED, details, f"{type(e).__name__}: {e}")
        except RunFailed as e:
            return Outcome(failed, {}, str(e), retry=e.retry)
        except LockError as e:
            return Outcome(failed, {"reason": "lock"}, f"{type(e).__name__}: {e}", retry=True)
        except UnsupportedShapeError as e:  # the table's shape refuses this service: retrying cannot help
            return Outcome(failed, {"reason": "refused"}, f"{type(e).__name__}: {e}", retry=False)
        except HoodieError as e:
            return Outcome(failed, {}, f"{type(e).__name__}: {e}", retry=True)
        except OSError as e:
            return Outcome(failed, {"reason": "storage"}, f"{type(e).__name__}: {e}", retry=True)
        except Exception as e:  # a bug: record it, keep the daemon serving
            log.exception("run of %s on %s failed unexpectedly", item.service, item.table_id)
            return Outcome(failed, {}, f"{type(e).__name__}: {e}", retry=True)

    def _runner(self, item: WorkItem) -> Runner:
        def progress(done: int, total: int) -> None:
            item.progress = (done, total)

        return self.spark.runner(item.cancel, progress)

    def _execute(self, item: WorkItem, ctx: ServiceContext) -> Outcome:
        if item.instant is None:
            raise RunFailed(f"{item.service}: no instant to execute", retry=False)
        result = orchestrator.execute_instant(ctx, item.service, item.instant, lambda: self._runner(item))
        return Outcome(RunState.SUCCEEDED, summarize(result), result=result)

    def _schedule(self, item: WorkItem, ctx: ServiceContext) -> Outcome:
        scheduled = orchestrator.schedule(ctx, item.service).scheduled
        if scheduled is None or scheduled.instant_time is None:
            return Outcome(RunState.SUCCEEDED, {"scheduled": None, "reason": "nothing due"})
        return Outcome(
            RunState.SUCCEEDED,
            {"scheduled": scheduled.instant_time, "reason": scheduled.reason},
            scheduled=[(item.service, scheduled.instant_time)],
        )

    def _trigger(self, item: WorkItem, ctx: ServiceContext) -> Outcome:
        """The REST trigger: plan now (unless an instant is named), then execute that plan.

        The instant it plans (or picks) is claimed for this run, so that the watcher does not
        queue it again; a retry executes the claimed plan instead of planning another.
        """

        def claim(instant: str) -> str | None:
            owner = self.claim(item, instant)
            return f"run {owner.run_id}" if owner is not None else None

        done = orchestrator.trigger(
            ctx, item.service, lambda: self._runner(item), instant=item.target, claim=claim
        )
        planned = done.scheduled_instant
        if not done.executed:
            reason = next(iter(done.skipped.values()), None) or done.note or "nothing to plan or execute"
            return Outcome(RunState.SUCCEEDED, {"scheduled": planned, "reason": reason})
        (result,) = done.executed
        details = {**summarize(result), "scheduled": planned}
        if done.scheduled is not None:
            details["reason"] = done.scheduled.reason
        return Outcome(RunState.SUCCEEDED, details, result=result)

    def _run(self, item: WorkItem, ctx: ServiceContext) -> Outcome:
        """Archival and the metadata table's services: their plan never goes on the timeline."""
        done = orchestrator.run(ctx, item.service, lambda: self._runner(item))
        if not done.executed:
            return Outcome(RunState.SUCCEEDED, {"archived": 0, "reason": "nothing due"})
        (result,) = done.executed
        return Outcome(RunState.SUCCEEDED, summarize(result), result=result)
