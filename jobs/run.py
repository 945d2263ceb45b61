"""What ``hts schedule|execute|run`` does: a table service on one table, once, through the
orchestrator (:mod:`hoodie.services.orchestrator`), with a summary to print.

``schedule`` writes a plan; ``execute`` runs the service's REQUESTED instants and recovers its
abandoned INFLIGHT ones (a live heartbeat means another process is on it: that instant is
skipped and reported); ``run`` does both. ``--dry-run`` computes the plan(s) and writes nothing.
Tasks run on Spark (``local[*]`` unless a master is given) or, with master ``in-process``, in
this process. The table is opened once per command; ``hoodie.write.lock.wait_time_ms`` bounds
every wait for its lock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodie.services import orchestrator
from hoodie.services.base import ExecutionResult, LocalRunner, Runner, ServiceContext
from hoodie.services.orchestrator import ServiceOutcome
from hoodie.table import HoodieTable
from hoodie.transaction.lock import LockProvider

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

    @classmethod
    def of(cls, outcome: ServiceOutcome, table: HoodieTable) -> RunSummary:
        summary = cls(outcome.service.value, table.base_path, executed=list(outcome.executed))
        if outcome.scheduled is not None:
            summary.scheduled = outcome.scheduled.instant_time
            summary.reason = outcome.scheduled.reason
            summary.plans.append(outcome.scheduled.plan_json())
        summary.plans.extend({"instant": ts, "would_execute": True} for ts in outcome.would_execute)
        summary.skipped.update(outcome.skipped)
        return summary

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
    table: HoodieTable | str,
    options: Mapping[str, str] | None,
    storage_options: Mapping[str, str] | None,
    lock: LockProvider | None,
) -> ServiceContext:
    storage = dict(storage_options or {})
    opened = table if isinstance(table, HoodieTable) else HoodieTable.open(table, **storage)
    return orchestrator.service_context(opened, options or {}, lock=lock, storage_options=storage)


def schedule(
    service_name: str,
    table: HoodieTable | str,
    options: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
    storage_options: Mapping[str, str] | None = None,
    lock: LockProvider | None = None,
) -> RunSummary:
    ctx = _context(table, options, storage_options, lock)
    return RunSummary.of(orchestrator.schedule(ctx, service_name, dry_run=dry_run), ctx.table)


def execute(
    service_name: str,
    table: HoodieTable | str,
    options: Mapping[str, str] | None = None,
    *,
    instant: str | None = None,
    dry_run: bool = False,
    spark_master: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    runner: Callable[[], Runner] | None = None,
    lock: LockProvider | None = None,
) -> RunSummary:
    ctx = _context(table, options, storage_options, lock)
    outcome = orchestrator.execute(
        ctx, service_name, runner or runner_factory(spark_master), instant=instant, dry_run=dry_run
    )
    return RunSummary.of(outcome, ctx.table)


def run(
    service_name: str,
    table: HoodieTable | str,
    options: Mapping[str, str] | None = None,
    *,
    dry_run: bool = False,
    spark_master: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    lock: LockProvider | None = None,
) -> RunSummary:
    ctx = _context(table, options, storage_options, lock)
    outcome = orchestrator.run(ctx, service_name, runner_factory(spark_master), dry_run=dry_run)
    return RunSummary.of(outcome, ctx.table)
