"""The daemon's work half: recording a run for each piece of work, and the workers that carry it out.

A run is recorded once per piece of work: submitting work that is queued or running already
(the same instant, the same trigger) returns that work's run and records nothing, and a REST
trigger's run claims the instant it plans, so one instant never has two runs. Workers take items
from the queue, run them through the executor, record the outcome in the run history and the
metrics, retry with backoff what may succeed later, and queue the execution of plans a policy
check wrote.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from hoodie.services.registry import ServiceKind
from service.cost import add_costs
from service.errors import NotFound
from service.executor import TAKEN_OVER, Executor, Outcome
from service.locks import LockState
from service.metrics import Metrics
from service.queue import WorkItem, WorkQueue
from service.registry import Registry
from service.settings import Settings
from service.store import Run, RunKind, RunState, RunStore, ServiceStreak

log = logging.getLogger("hts.daemon")


def tags(**fields: Any) -> dict[str, Any]:
    """A log call's structured fields (those that are set)."""
    return {"extra": {k: v for k, v in fields.items() if v is not None}}


CANCELLED = (
    "cancelled by an operator (run {run}); not retried until triggered again "
    "(POST /v1/tables/{{id}}/{service} with this instant) or the daemon restarts"
)


class RunLoop:
    """Submitting and running work; :class:`service.daemon.Daemon` owns the state it uses."""

    settings: Settings
    registry: Registry
    store: RunStore
    queue: WorkQueue
    executor: Executor
    metrics: Metrics
    gave_up: dict[tuple[str, str], str]
    streaks: dict[tuple[str, str], ServiceStreak]
    stopping: bool
    _submitting: threading.Lock
    _closing: threading.Event

    def _create_run(
        self, item: WorkItem, table_path: str, idempotency_key: str | None = None
    ) -> tuple[Run, bool]:
        return self.store.create(
            table_id=item.table_id,
            table_path=table_path,
            service=item.service,
            kind=item.kind,
            instant=item.instant,
            trigger=item.trigger,
            idempotency_key=idempotency_key,
        )

    def submit(
        self, item: WorkItem, *, decision: str, idempotency_key: str | None = None
    ) -> tuple[Run, bool]:
        """Record a run for ``item`` and queue it; when the same work (the same instant, or the same
        trigger) is queued or running already, or the idempotency key was used, that run and False,
        recording nothing: one instant, one run."""
        entry = self.registry.get(item.table_id)
        if entry is None:
            raise NotFound(f"no table {item.table_id!r}")
        with self._submitting:  # the check and the record, one submit at a time
            earlier = self.store.by_idempotency_key(idempotency_key) if idempotency_key else None
            if earlier is not None:
                return earlier, False
            queued = self.queue.find(item.key)
            existing = self.store.get(queued.run_id) if queued and queued.run_id is not None else None
            if existing is not None:
                if idempotency_key:  # a retry with this key after that run finished gets it again
                    self.store.remember_key(idempotency_key, existing.id)
                return existing, False
            run, _ = self._create_run(item, entry.uri, idempotency_key)
            item.run_id = run.id
            if queued is not None or not self.queue.submit(item)[1]:  # a policy check, not recorded
                self.store.update(
                    run.id,
                    state=RunState.SKIPPED,
                    finished_at=time.time(),
                    error=f"the same work is queued already: a {item.service} policy check",
                )
                skipped = self.store.get(run.id)
                assert skipped is not None
                return skipped, False
        log.info(
            "queued %s %s on %s: %s",
            item.service,
            item.instant or item.kind,
            item.table_id,
            decision,
            **tags(
                table=item.table_id,
                service=item.service,
                instant=item.instant,
                run=run.id,
                trigger=item.trigger,
                decision="queue",
            ),
        )
        return run, True

    @property
    def suspended(self) -> dict[tuple[str, str], str]:
        """(table, service) -> why it is suspended there, for every suspended service (like ``gave_up``)."""
        return {
            key: f"suspended after {s.consecutive_failures} consecutive failed runs "
            f"(last: run {s.last_run}: {s.last_error})"
            for key, s in list(self.streaks.items())
            if s.suspended
        }

    def suspension(self, table_id: str, service: str) -> ServiceStreak | None:
        """The suspension of ``service`` on the table (after ``retry.suspend_after`` failed runs), if any."""
        streak = self.streaks.get((table_id, service))
        return streak if streak is not None and streak.suspended else None

    def _count_outcome(self, item: WorkItem, outcome: Outcome) -> None:
        """A finished run extends (failed) or ends (succeeded) its (table, service)'s failure streak;
        a policy check that planned nothing (it leaves no run) ends a streak of failed policy checks."""
        if outcome.state not in (RunState.FAILED, RunState.SUCCEEDED):
            return
        failed = outcome.state is RunState.FAILED
        key = (item.table_id, item.service)
        if failed and item.run_id is None:
            return  # cannot be: a failure is always recorded as a run first
        streak = self.streaks.get(key)
        if not failed and (streak is None or streak.consecutive_failures == 0):
            return  # nothing to end: no row written for tables that never failed
        if item.run_id is None and not self._ends_streak(streak):
            return
        before = self.streaks.get(key)
        streak = self.store.record_outcome(
            item.table_id,
            item.service,
            item.run_id,
            failed=failed,
            error=outcome.error,
            suspend_after=self.settings.retry.suspend_after,
        )
        self.streaks[key] = streak
        if streak.suspended and (before is None or not before.suspended):
            log.error(
                "%s suspended on %s after %d consecutive failed runs (last: run %d: %s); "
                "nothing is scheduled or executed there until POST /v1/tables/%s/services/%s/resume",
                item.service,
                item.table_id,
                streak.consecutive_failures,
                item.run_id,
                outcome.error,
                item.table_id,
                item.service,
                **tags(table=item.table_id, service=item.service, run=item.run_id, decision="suspend"),
            )

    def _ends_streak(self, streak: ServiceStreak | None) -> bool:
        """Whether a policy check that planned nothing ends ``streak``: only a streak of failed policy
        checks (its planning works again); it says nothing about a plan whose execution keeps failing."""
        last = self.store.get(streak.last_run) if streak is not None and streak.last_run is not None else None
        return last is not None and last.kind is RunKind.SCHEDULE

    def _claim(self, item: WorkItem, instant: str) -> WorkItem | None:
        """``item`` planned (or picked) ``instant`` and carries it out: its run is that instant's."""
        owner = self.queue.claim(item, instant)
        if owner is None and item.run_id is not None:
            self.store.update(item.run_id, instant=instant)
        return owner

    def _eligible(self, item: WorkItem) -> bool:
        entry = self.registry.get(item.table_id)
        if entry is None or entry.paused or entry.table is None or entry.error is not None:
            return False
        return entry.lock is None or entry.lock.state is LockState.CONNECTED

    def _work(self) -> None:
        while not self._closing.is_set():
            item = self.queue.take(self._eligible, timeout_s=1.0)
            if item is not None:
                self._run(item)

    def _run(self, item: WorkItem) -> None:
        entry = self.registry.get(item.table_id)
        quiet = item.run_id is None  # a policy check: recorded only when it does something
        started_at, started = time.time(), time.monotonic()
        if item.run_id is not None:
            self.store.update(
                item.run_id, state=RunState.RUNNING, started_at=started_at, attempts=item.attempts
            )
            log.info(
                "running %s %s on %s (attempt %d)",
                item.service,
                item.instant or item.kind,
                item.table_id,
                item.attempts,
                **tags(table=item.table_id, service=item.service, instant=item.instant, run=item.run_id),
            )
        suspended = self.suspension(item.table_id, item.service)
        if entry is None:
            outcome = Outcome(RunState.SKIPPED, {"reason": "table no longer served"})
        elif suspended is not None:
            outcome = Outcome(
                RunState.SKIPPED,
                {"reason": "suspended"},
                f"{item.service} is suspended on {item.table_id} after "
                f"{suspended.consecutive_failures} consecutive failed runs",
            )
            if quiet:
                self.queue.finish(item, 0.0)
                return
        else:
            outcome = self.executor.run(item, entry)
        seconds = time.monotonic() - started
        succeeded = outcome.state is RunState.SUCCEEDED
        if quiet and succeeded and not outcome.scheduled and outcome.result is None:
            log.debug(
                "%s policy of %s: %s",
                item.service,
                item.table_id,
                outcome.details.get("reason", "nothing due"),
                **tags(table=item.table_id, service=item.service),
            )
            self._count_outcome(item, outcome)  # a policy check that worked ends a failure streak
            self.queue.finish(item, seconds)
            return
        if item.run_id is None:
            assert entry is not None
            run, _ = self._create_run(item, entry.uri)
            item.run_id = run.id
            self.store.update(run.id, started_at=started_at, attempts=item.attempts)
        fields = tags(table=item.table_id, service=item.service, instant=item.instant, run=item.run_id)
        self._record(item, outcome, seconds)
        self._add_cost(item.run_id, outcome)
        retry = self.settings.retry
        if (
            outcome.state is RunState.FAILED
            and outcome.retry
            and item.attempts < retry.max_attempts
            and not self.stopping
        ):
            delay = min(retry.backoff_max_s, retry.backoff_initial_s * 2 ** (item.attempts - 1))
            self.store.update(
                item.run_id, state=RunState.QUEUED, error=outcome.error, details=outcome.details
            )
            log.warning(
                "%s %s on %s failed (attempt %d of %d), retrying in %.1f s: %s",
                item.service,
                item.instant or item.kind,
                item.table_id,
                item.attempts,
                retry.max_attempts,
                delay,
                outcome.error,
                **fields,
            )
            self.queue.finish(item, seconds, retry_in=delay)
            return
        target = (item.table_id, item.target) if item.target is not None else None
        if outcome.state is RunState.FAILED and target is not None:
            self.gave_up[target] = f"gave up after repeated failures: {outcome.error or 'failed'}"
        taken_over = outcome.details.get("reason") == TAKEN_OVER  # the other executor carries it on
        if (
            outcome.state is RunState.CANCELLED
            and target is not None
            and not self.stopping
            and not taken_over
        ):
            self.gave_up[target] = CANCELLED.format(run=item.run_id, service=item.service)
        self._count_outcome(item, outcome)
        details = dict(outcome.details)
        if item.progress != (0, 0):
            details["tasks_done"], details["tasks_total"] = item.progress
        self.store.update(
            item.run_id,
            state=outcome.state,
            finished_at=time.time(),
            error=outcome.error,
            details=details,
        )
        level = logging.ERROR if outcome.state is RunState.FAILED else logging.INFO
        log.log(
            level,
            "%s %s on %s %s in %.1f s%s",
            item.service,
            item.instant or item.kind,
            item.table_id,
            outcome.state.value,
            seconds,
            f": {outcome.error}" if outcome.error else "",
            **fields,
        )
        item.result = {"state": outcome.state.value, **details}
        self.queue.finish(item, seconds)
        if entry is not None and not self.stopping:
            for service, instant in outcome.scheduled:
                self.submit(
                    WorkItem(
                        entry.id, service, RunKind.EXECUTE, instant, item.trigger, entry.config.priority
                    ),
                    decision=f"planned by run {item.run_id}",
                )

    def _add_cost(self, run_id: int, outcome: Outcome) -> None:
        """Add this attempt's cost to the run's (a retried run's cost is all its attempts')."""
        if not outcome.cost:
            return
        earlier = self.store.get(run_id)
        self.store.update(run_id, cost=add_costs(earlier.cost if earlier is not None else None, outcome.cost))

    def _record(self, item: WorkItem, outcome: Outcome, seconds: float) -> None:
        m = self.metrics
        table, service = item.table_id, item.service
        m.runs.labels(table, service, outcome.state.value).inc()
        m.run_duration.labels(table, service).observe(seconds)
        m.count_cost(table, service, outcome.cost)
        if outcome.state is not RunState.SUCCEEDED:
            return
        d = outcome.details
        m.records_written.labels(table, service).inc(d.get("records_written", 0) or 0)
        m.bytes_written.labels(table, service).inc(d.get("bytes_written", 0) or 0)
        m.files_written.labels(table, service).inc(d.get("files_written", 0) or 0)
        m.log_files_compacted.labels(table, service).inc(d.get("log_files_compacted", 0) or 0)
        m.files_removed.labels(table, service).inc(d.get("files_deleted", 0) or 0)
        if service == ServiceKind.ARCHIVAL:
            m.instants_archived.labels(table).inc(d.get("archived", 0) or 0)
        if item.kind in (RunKind.SCHEDULE, RunKind.TRIGGER) and d.get("scheduled"):
            m.scheduled.labels(table, service, item.trigger.value).inc()
