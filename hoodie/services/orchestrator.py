"""Running a table service on one table: schedule, execute, run or trigger, each giving a
:class:`ServiceOutcome`.

The CLI (``jobs.run``) and the daemon (``service.executor``) both run services through here; they
differ only in where tasks run (the :class:`~hoodie.services.base.Runner` they pass) and in what
they record of the outcome. How each service's work is found and whether its plan goes on the
timeline come from its spec (:mod:`hoodie.services.registry`).

- ``schedule`` writes a plan (a REQUESTED instant), or on a dry run only returns it.
- ``execute`` runs the service's pending instants (REQUESTED, or INFLIGHT and abandoned); one whose
  heartbeat another process keeps alive is skipped and reported.
- ``run`` schedules, then executes: what was just planned when the plan never goes on the timeline
  (archival, the metadata table's services), else every pending instant.
- ``trigger`` plans now and executes that plan alone (or, with nothing to plan, the oldest requested
  plan nobody else claimed), as the daemon's REST trigger does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from hoodie.errors import InstantBusyError, InvalidInputError, TableServiceError
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    Scheduled,
    ServiceContext,
    pending_work,
    service_named,
)
from hoodie.services.registry import ServiceKind, spec_of
from hoodie.table import HoodieTable
from hoodie.transaction.heartbeat import HeartbeatConfig
from hoodie.transaction.lock import LockProvider
from hoodie.transaction.time_generator import TimeSource

log = logging.getLogger(__name__)

LOCK_WAIT_KEY = "hoodie.write.lock.wait_time_ms"
DEFAULT_LOCK_WAIT_MS = 60_000
"""Hudi's default wait for the table lock (LockConfiguration's lock acquire wait timeout)."""

RunnerFactory = Callable[[], Runner]
"""Makes the runner on first need (Spark starts only when there are tasks to run)."""
Claim = Callable[[str], str | None]
"""Claims an instant for the caller: None when it may carry the instant out, else who does."""


def lock_wait_s(options: Mapping[str, str]) -> float:
    """How long to wait for the table lock: ``hoodie.write.lock.wait_time_ms``, in seconds."""
    raw = options.get(LOCK_WAIT_KEY)
    if raw is None:
        return DEFAULT_LOCK_WAIT_MS / 1000
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInputError(f"{LOCK_WAIT_KEY}={raw!r} is not a number of milliseconds") from None
    if value < 0:
        raise InvalidInputError(f"{LOCK_WAIT_KEY}={raw!r} must not be negative")
    return value / 1000


def service_context(
    table: HoodieTable,
    options: Mapping[str, str],
    *,
    lock: LockProvider | None = None,
    time_source: TimeSource | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> ServiceContext:
    """A context configured from ``options`` (Hudi keys): the writers' heartbeat and the lock wait."""
    return ServiceContext(
        table,
        options=dict(options),
        lock=lock,
        time_source=time_source,
        storage_options=dict(storage_options or {}),
        heartbeat=HeartbeatConfig.from_options(options),
        lock_timeout_s=lock_wait_s(options),
    )


@dataclass
class ServiceOutcome:
    """What one schedule, execute, run or trigger did."""

    service: ServiceKind
    scheduled: Scheduled | None = None
    """The plan made (its instant is None on a dry run, or for a trigger another run carries out)."""
    executed: list[ExecutionResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Instants not executed, and why (another process beats for them, another run claimed them)."""
    would_execute: list[str] = field(default_factory=list)
    """On a dry run: the pending instants an execute would run."""
    note: str | None = None
    """Why nothing (more) was done, when that needs saying."""

    @property
    def scheduled_instant(self) -> str | None:
        return self.scheduled.instant_time if self.scheduled is not None else None


def _kind(name: str | ServiceKind) -> ServiceKind:
    return spec_of(name).kind


def schedule(ctx: ServiceContext, name: str | ServiceKind, *, dry_run: bool = False) -> ServiceOutcome:
    kind = _kind(name)
    return ServiceOutcome(kind, scheduled=service_named(kind.value).schedule(ctx, dry_run=dry_run))


def _runner_of(kind: ServiceKind, runner: RunnerFactory) -> Runner:
    """The runner ``kind`` executes on; none is made (no Spark started) for a service that runs no tasks."""
    return runner() if spec_of(kind).runs_tasks else LocalRunner()


def execute_instant(
    ctx: ServiceContext, name: str | ServiceKind, instant: str, runner: RunnerFactory
) -> ExecutionResult:
    """Execute ``instant``; the service refuses one that is no longer pending or is running elsewhere."""
    kind = _kind(name)
    return service_named(kind.value).execute(ctx, instant, _runner_of(kind, runner))


def execute(
    ctx: ServiceContext,
    name: str | ServiceKind,
    runner: RunnerFactory,
    *,
    instant: str | None = None,
    dry_run: bool = False,
    outcome: ServiceOutcome | None = None,
) -> ServiceOutcome:
    """Execute every pending instant of the service (or ``instant``, which must be pending)."""
    kind = _kind(name)
    service = service_named(kind.value)
    out = outcome or ServiceOutcome(kind)
    pending = [i.requested_time for i in pending_work(service, ctx.table, ctx.table.reload(), ctx.heartbeat)]
    if instant is not None:
        if instant not in pending:
            raise TableServiceError(
                f"{ctx.table.base_path}: no pending {kind.value} at {instant} (pending: {pending or 'none'})"
            )
        pending = [instant]
    if dry_run:
        out.would_execute.extend(pending)
        return out
    for ts in pending:
        try:
            out.executed.append(service.execute(ctx, ts, _runner_of(kind, runner)))
        except InstantBusyError as e:
            out.skipped[ts] = str(e)
            log.warning("%s", e)
    return out


def run(
    ctx: ServiceContext, name: str | ServiceKind, runner: RunnerFactory, *, dry_run: bool = False
) -> ServiceOutcome:
    """Schedule, then execute."""
    kind = _kind(name)
    out = schedule(ctx, kind, dry_run=dry_run)
    if dry_run:
        return out
    if not spec_of(kind).plans_on_timeline:  # its plan never goes on the timeline: run what was planned
        if out.scheduled_instant is not None:
            out.executed.append(execute_instant(ctx, kind, out.scheduled_instant, runner))
        else:
            out.note = "nothing due"
        return out
    return execute(ctx, kind, runner, outcome=out)


def trigger(
    ctx: ServiceContext,
    name: str | ServiceKind,
    runner: RunnerFactory,
    *,
    instant: str | None = None,
    claim: Claim | None = None,
) -> ServiceOutcome:
    """Plan now (unless ``instant`` is named) and execute that plan alone.

    The instant planned (or picked) is claimed for the caller first, so that nothing else (the
    daemon's watcher) runs it too; with nothing to plan, the oldest requested plan nobody else
    claimed is executed. A service whose plan never goes on the timeline is simply run.
    """
    kind = _kind(name)
    if not spec_of(kind).plans_on_timeline:
        return run(ctx, kind, runner)
    take: Claim = claim or (lambda _instant: None)
    out = ServiceOutcome(kind)
    if instant is None:
        out = schedule(ctx, kind)
        instant = out.scheduled_instant
        owner = take(instant) if instant is not None else None
        if owner is not None:  # cannot happen while the watcher waits for planners; never run twice
            assert instant is not None
            out.skipped[instant] = f"run by {owner}"
            return out
    if instant is None:
        service = service_named(kind.value)
        taken: list[str] = []
        for requested in pending_work(service, ctx.table, ctx.table.reload(), ctx.heartbeat):
            if not requested.is_requested:
                continue
            other = take(requested.requested_time)
            if other is None:
                instant = requested.requested_time
                break
            taken.append(other)
        if instant is None:
            out.note = "nothing to plan or execute"
            if taken:
                out.note = f"nothing to plan; the pending plans are run by {', '.join(taken)}"
            return out
    out.executed.append(execute_instant(ctx, kind, instant, runner))
    return out
