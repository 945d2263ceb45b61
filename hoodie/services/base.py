"""What every table service shares: the context it runs in, and how its per-file-group work runs.

Per-file-group work is a top-level function taking a JSON-able task dict and returning a JSON-able
result dict, so that the same function runs in process (:class:`LocalRunner`) or on Spark
executors (``jobs.spark.SparkRunner``), where it is found by module and name.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from hoodie.errors import TableServiceError
from hoodie.models.base import AvroRecord
from hoodie.models.commit import WriteStat
from hoodie.services.registry import ALL, PendingWork, ServiceKind, spec_of
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import Requirement, StillInflight, Transaction, commit, lock_owner, transaction
from hoodie.transaction.heartbeat import HeartbeatConfig
from hoodie.transaction.lock import InProcessLockProvider, LockProvider
from hoodie.transaction.time_generator import TimeSource, WaitBasedTimeGenerator

log = logging.getLogger(__name__)

Task = dict[str, Any]
TaskResult = dict[str, Any]
TaskFunction = Callable[[Task], TaskResult]
Progress = Callable[[int, int], None]


class Runner(Protocol):
    """Runs a task function over tasks, one task per file group, and returns results in task order."""

    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]: ...


class JobCancelled(TableServiceError):
    """The execution was cancelled (by an operator, or because the daemon is stopping)."""


@dataclass
class LocalRunner:
    """Runs tasks one after another in this process (tests, small tables, the CLI without Spark).

    Setting ``cancel`` stops it before the next task with :class:`JobCancelled`.
    """

    progress: Progress | None = None
    cancel: threading.Event | None = None

    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
        out: list[TaskResult] = []
        if self.progress is not None:
            self.progress(0, len(tasks))
        for done, task in enumerate(tasks, start=1):
            if self.cancel is not None and self.cancel.is_set():
                raise JobCancelled(f"{description}: cancelled after {done - 1} of {len(tasks)} task(s)")
            out.append(fn(task))
            if self.progress is not None:
                self.progress(done, len(tasks))
        return out


CRASH_ENV = "HTS_CRASH_AT"
CRASH_ACTION_ENV = "HTS_CRASH_ACTION"


def crash_point(name: str) -> None:
    """Stop this process at ``name`` when ``HTS_CRASH_AT`` says so (crash-safety tests only).

    Points every service passes: ``<service>.after_inflight``, ``<service>.task_mid_write`` (a
    data file half written), ``<service>.task_after_write``, ``<service>.before_complete``.
    ``HTS_CRASH_ACTION`` says what happens there: ``exit`` (default; the process exits at once,
    as if killed), ``stall`` (it hangs, for a test to ``kill -9`` it), or ``pause:<seconds>``.
    """
    target = os.environ.get(CRASH_ENV)
    if not target or target != name:
        return
    action = os.environ.get(CRASH_ACTION_ENV, "exit")
    if action == "stall":
        log.error("crash point %s reached: stalling as %s asked", name, CRASH_ENV)
        while True:
            time.sleep(3600)
    if action.startswith("pause:"):
        log.warning("crash point %s reached: pausing %s s", name, action[6:])
        time.sleep(float(action[6:]))
        return
    log.error("crash point %s reached: exiting as %s asked", name, CRASH_ENV)
    os._exit(97)


_TABLES: dict[tuple[str, tuple[tuple[str, str], ...]], HoodieTable] = {}
_TABLES_GUARD = threading.Lock()


def open_table_for_task(task: Task) -> HoodieTable:
    """The table a task works on, opened once per process (executors run many tasks)."""
    uri = str(task["table_uri"])
    options = {str(k): str(v) for k, v in (task.get("storage_options") or {}).items()}
    key = (uri, tuple(sorted(options.items())))
    with _TABLES_GUARD:
        table = _TABLES.get(key)
        if table is None:
            table = _TABLES[key] = HoodieTable.open(uri, **options)
    return table


@dataclass
class ServiceContext:
    """A table plus how to lock it, mint instant times, and configure the service (Hudi keys)."""

    table: HoodieTable
    options: Mapping[str, str] = field(default_factory=dict)
    lock: LockProvider | None = None
    time_source: TimeSource | None = None
    storage_options: Mapping[str, str] = field(default_factory=dict)
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    lock_timeout_s: float = 60.0
    owned_instants: set[str] = field(default_factory=set)
    """Pending instants this context claimed (``hoodie.services.claim``): their live heartbeat is ours."""
    claim_checks: dict[str, Requirement] = field(default_factory=dict)
    """Per claimed instant, what its commit must also meet: not taken over (``hoodie.services.claim``)."""
    shape_checked: str | None = None
    """The service whose shape check let this context execute: its commits check it again."""

    def __post_init__(self) -> None:
        if self.lock is None:
            self.lock = InProcessLockProvider(self.table.base_path)
        if self.time_source is None:
            self.time_source = WaitBasedTimeGenerator(self.lock, self.table.tz)

    @property
    def table_lock(self) -> LockProvider:
        assert self.lock is not None
        return self.lock

    def new_instant_time(self, *, lock_held: bool = False) -> str:
        assert self.time_source is not None
        return self.time_source.new_instant_time(lock_held=lock_held)

    def task_base(self) -> Task:
        """The fields every task of this table carries."""
        return {
            "table_uri": self.table.uri() if self.table.fileio.scheme != "file" else self.table.base_path,
            "storage_options": dict(self.storage_options),
        }

    def request(
        self, timeline: ActiveTimeline, action: Action, plan: AvroRecord, reason: str, *, dry_run: bool
    ) -> Scheduled:
        """Write ``plan`` as ``<new time>.<action>.requested``, or on a dry run only return it.

        Call with the table lock held and ``timeline`` freshly loaded under it, so that the new
        instant time is later than everything the plan was made from.
        """
        if dry_run:
            return Scheduled(None, plan, reason)
        instant_time = self.new_instant_time(lock_held=True)
        timeline.create_requested(
            Instant(instant_time, action, State.REQUESTED), plan.to_bytes(self.table.table_version)
        )
        return Scheduled(instant_time, plan, reason)

    def check_shape(self, service: str) -> None:
        """Refuse ``service`` when the table's shape (:mod:`hoodie.shape`) says so, before any write."""
        self.table.shape(self.options).check(service)

    def sync_metadata(self, timeline: ActiveTimeline, instant: Instant, payload: bytes) -> None:
        """Update the metadata table for ``instant`` (lock held; before the instant completes)."""
        from hoodie.metadata.sync import sync_metadata_table

        sync_metadata_table(
            self.table, timeline, instant, payload, lambda: self.new_instant_time(lock_held=True)
        )

    def complete(
        self,
        instant: Instant,
        payload: bytes,
        *requirements: Requirement,
    ) -> Instant:
        """Complete ``instant`` through :func:`~hoodie.transaction.commit.commit`: under the table lock,
        still inflight and ``requirements`` met on a fresh timeline, the metadata table updated;
        then the metadata table's upkeep."""

        def sync(fresh: ActiveTimeline, current: Instant) -> None:
            self.sync_metadata(fresh, current, payload)
            crash_point("metadata.before_data_complete")

        return commit(
            self.table,
            instant,
            payload,
            completion_time=self.completion_time,
            lock=self.table_lock,
            timeout_s=self.lock_timeout_s,
            requirements=[
                *self.claim_requirements(instant),
                StillInflight(),
                *self.shape_requirements(),
                *requirements,
            ],
            sync=sync,
            upkeep=self.maintain_metadata,
        )

    def claim_requirements(self, instant: Instant) -> list[Requirement]:
        """The requirement of this context's claim on ``instant``, checked first: a taken-over attempt
        is refused as such even once the other executor has completed the instant."""
        check = self.claim_checks.get(instant.requested_time)
        return [] if check is None else [check]

    def shape_requirements(self) -> list[Requirement]:
        """The commit requirement that the shape still allows what this context executes (if any)."""
        from hoodie.shape.table_shape import ShapeAllows

        return [] if self.shape_checked is None else [ShapeAllows(self.shape_checked, self.options)]

    def completion_time(self, timeline: ActiveTimeline) -> str | None:
        """A completion time minted under the lock (timeline layout 2), or None (layout 1)."""
        return self.new_instant_time(lock_held=True) if timeline.layout >= 2 else None

    def transaction(self) -> AbstractContextManager[Transaction]:
        """Hold the table lock; commits inside complete under it (see ``hoodie.transaction.commit``)."""
        return transaction(self.table_lock, lock_owner(self.table), self.lock_timeout_s)

    def maintain_metadata(self) -> None:
        """After a commit (lock released): run the metadata table's services that are due.

        They are found through the service registry (the ``metadata`` service), not imported:
        they are built from the services that import this module.
        """
        service = service_named(UPKEEP_SERVICE)
        if not isinstance(service, CommitUpkeep):
            raise TableServiceError(f"the {UPKEEP_SERVICE} service does not run after commits")
        service.after_commit(self)


@dataclass(frozen=True)
class Scheduled:
    """A plan and the instant it was requested at (None for a dry run), with why it was made."""

    instant_time: str | None
    plan: AvroRecord
    reason: str

    def plan_json(self) -> dict[str, Any]:
        """The plan as Hudi's Avro field names and values (what ``--dry-run`` prints)."""
        return self.plan.to_avro()


@dataclass(frozen=True)
class ExecutionResult:
    """A completed table-service instant, what it wrote, and anything else worth reporting."""

    instant: Instant
    write_stats: list[WriteStat] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


class TableService(Protocol):
    """The shape every table service has (compaction, clustering, clean, rollback, ...)."""

    name: str

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        """Plan with ``ctx.options`` and write the REQUESTED instant; None when there is nothing to do."""

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        """This service's REQUESTED and INFLIGHT instants, oldest first."""

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        """Run one requested (or abandoned inflight) instant to completion."""


@runtime_checkable
class CommitUpkeep(Protocol):
    """A service that runs right after every commit, as Hudi runs the metadata table's inline."""

    def after_commit(self, ctx: ServiceContext) -> None: ...


UPKEEP_SERVICE = ServiceKind.METADATA.value
"""The service every commit runs after it (:meth:`ServiceContext.maintain_metadata`)."""

SERVICES: dict[str, TableService] = {}
KNOWN_SERVICES = ALL
"""Every service's name (``hoodie.services.registry``)."""


def _shape_checked(service: TableService) -> None:
    """Make ``service``'s schedule and execute check the table's shape first: registration is the one
    place every caller (``jobs.run``, the daemon's executor) reaches a service through."""
    schedule, execute = service.schedule, service.execute

    @functools.wraps(schedule)
    def checked_schedule(ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        ctx.check_shape(service.name)
        return schedule(ctx, dry_run=dry_run)

    @functools.wraps(execute)
    def checked_execute(ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        ctx.check_shape(service.name)
        previous, ctx.shape_checked = ctx.shape_checked, service.name  # its commit checks again
        try:
            return execute(ctx, instant_time, runner)
        finally:
            ctx.shape_checked = previous

    object.__setattr__(service, "schedule", checked_schedule)
    object.__setattr__(service, "execute", checked_execute)


def register_service(service: TableService) -> TableService:
    spec_of(service.name)  # every implementation has its spec
    _shape_checked(service)
    SERVICES[service.name] = service
    return service


def service_named(name: str) -> TableService:
    """The service called ``name`` (its module is imported on first use)."""
    import importlib

    if name not in SERVICES and name in ALL:
        importlib.import_module(f"hoodie.services.{name}")
    if name not in SERVICES:
        raise TableServiceError(
            f"unknown table service {name!r} (known: {', '.join(sorted(SERVICES)) or 'none'})"
        )
    return SERVICES[name]


class HeartbeatPending(Protocol):
    """``pending`` of a service whose pending work is judged by heartbeats (``EXPIRED_HEARTBEATS``)."""

    def pending(
        self, table: HoodieTable, timeline: ActiveTimeline, heartbeat: HeartbeatConfig | None = None
    ) -> list[Instant]: ...


def pending_work(
    service: TableService, table: HoodieTable, timeline: ActiveTimeline, heartbeat: HeartbeatConfig
) -> list[Instant]:
    """``service``'s pending instants, found as its spec says (given the writers' heartbeat settings)."""
    how = spec_of(service.name).pending
    if how is PendingWork.NONE:
        return []
    if how is PendingWork.EXPIRED_HEARTBEATS:
        return list(cast(HeartbeatPending, service).pending(table, timeline, heartbeat=heartbeat))
    return list(service.pending(table, timeline))
