"""Scheduling and executing table services on one table: what ``hts schedule|execute|run`` does.

``schedule`` writes a plan; ``execute`` runs the service's REQUESTED instants and recovers its
abandoned INFLIGHT ones (a live heartbeat means another process is on it: that instant is
skipped and reported); ``run`` does both. ``--dry-run`` computes the plan(s) and writes nothing.
Tasks run on Spark (``local[*]`` unless a master is given) or, with master ``in-process``, in
this process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodie.errors import TableServiceError
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    ServiceContext,
    pending_work,
    service_named,
)
from hoodie.services.claim import InstantBusyError
from hoodie.table import HoodieTable
from hoodie.transaction.heartbeat import HeartbeatConfig
from hoodie.transaction.lock import LockProvider

log = logging.getLogger(__name__)

IN_PROCESS = "in-process"


@dataclass
class RunSummary:
    """What a schedule/execute/run call did."""

    service: str
    table: str
    scheduled: str | None = None
    reason: str | None = None
    plans: list[dict[str, Any]] = field(default_factory=list)
    executed: list[ExecutionResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "service": self.service,
            "table": self.table,
            "scheduled": self.scheduled,
            "reason": self.reason,
            "plans": self.plans,
            "executed": [
                {
                    "instant": r.instant.requested_time,
                    "completed": r.instant.completion_time,
                    "action": r.instant.action.value,
                    "files_written": len(r.write_stats),
                    **r.details,
                }
                for r in self.executed
            ],
            "skipped": self.skipped,
        }


def runner_factory(
    master: str | None, progress: Callable[[int, int], None] | None = None
) -> Callable[[], Runner]:
    """A lazy runner: Spark starts only when there is work to run."""
    made: list[Runner] = []

    def make() -> Runner:
        if not made:
            if master == IN_PROCESS:
                made.append(LocalRunner(progress))
            else:
                from jobs.spark import SparkRunner, spark_session

                spark = spark_session(master)
                ship = master is not None and not master.startswith("local")
                made.append(SparkRunner(spark, progress=progress, ship_code=ship))
        return made[0]

    return make


def _context(
    table_uri: str,
    options: Mapping[str, str],
    storage_options: Mapping[str, str],
    lock: LockProvider | None = None,
) -> ServiceContext:
    table = HoodieTable.open(table_uri, **storage_options)
    return ServiceContext(
        table,
        options=dict(options),
        lock=lock,
        storage_options=dict(storage_options),
        heartbeat=HeartbeatConfig.from_options(options),
    )


def schedule(
    service_name: str,
    table_uri: str,
    options: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
    storage_options: Mapping[str, str] | None = None,
    lock: LockProvider | None = None,
) -> RunSummary:
    service = service_named(service_name)
    ctx = _context(table_uri, options or {}, storage_options or {}, lock)
    summary = RunSummary(service_name, ctx.table.base_path)
    scheduled = service.schedule(ctx, dry_run=dry_run)
    if scheduled is not None:
        summary.scheduled = scheduled.instant_time
        summary.reason = scheduled.reason
        summary.plans.append(scheduled.plan_json())
    return summary


def execute(
    service_name: str,
    table_uri: str,
    options: Mapping[str, str] | None = None,
    *,
    instant: str | None = None,
    dry_run: bool = False,
    spark_master: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    runner: Callable[[], Runner] | None = None,
    summary: RunSummary | None = None,
    lock: LockProvider | None = None,
) -> RunSummary:
    service = service_named(service_name)
    ctx = _context(table_uri, options or {}, storage_options or {}, lock)
    summary = summary or RunSummary(service_name, ctx.table.base_path)
    timeline = ctx.table.reload()
    pending = [i.requested_time for i in pending_work(service, ctx.table, timeline, ctx.heartbeat)]
    if instant is not None:
        if instant not in pending:
            raise TableServiceError(
                f"{ctx.table.base_path}: no pending {service_name} at {instant} "
                f"(pending: {pending or 'none'})"
            )
        pending = [instant]
    if dry_run:
        for ts in pending:
            summary.plans.append({"instant": ts, "would_execute": True})
        return summary
    make_runner = runner or runner_factory(spark_master)
    for ts in pending:
        try:
            summary.executed.append(service.execute(ctx, ts, make_runner()))
        except InstantBusyError as e:
            summary.skipped[ts] = str(e)
            log.warning("%s", e)
    return summary


def run(
    service_name: str,
    table_uri: str,
    options: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
    spark_master: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    lock: LockProvider | None = None,
) -> RunSummary:
    summary = schedule(
        service_name, table_uri, options, dry_run=dry_run, storage_options=storage_options, lock=lock
    )
    if dry_run:
        return summary
    service = service_named(service_name)
    ctx = _context(table_uri, options or {}, storage_options or {}, lock)
    pending = {i.requested_time for i in pending_work(service, ctx.table, ctx.table.reload(), ctx.heartbeat)}
    if summary.scheduled is not None and summary.scheduled not in pending:
        # A service whose plan never goes on the timeline (archival): run what was just planned.
        summary.executed.append(service.execute(ctx, summary.scheduled, runner_factory(spark_master)()))
        return summary
    return execute(
        service_name,
        table_uri,
        options,
        spark_master=spark_master,
        storage_options=storage_options,
        summary=summary,
        lock=lock,
    )
