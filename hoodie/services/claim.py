"""Taking a pending instant for execution, so that two executors never run the same plan.

Two executors on one compaction plan corrupt a table: each rolls back the other's files
(HUDI-7503). Hudi's answer, which this module follows, is to start the executor's heartbeat
inside a transaction and to refuse a plan that another live executor already beats for:

1. under the table lock, reload the timeline and find the instant still pending;
2. refuse (:class:`InstantBusyError`) when its heartbeat file is fresh: another process, ours or
   Apache Hudi's, is on it;
3. otherwise start our heartbeat before releasing the lock, and only then touch the instant.

Every later look at the instant by another executor (even one that reads the timeline just
after our inflight file appears) therefore sees a live heartbeat. A cancelled attempt
(:class:`JobCancelled`) is undone before the claim is released, while the heartbeat still
keeps others away; a failed one is left for whoever claims the instant next, which rolls the
attempt back once our heartbeat has expired.

A heartbeat can be late on a loaded machine, though: another executor then finds it expired, rolls
our attempt back (a rollback instant whose plan names our instant: Hudi's
``HoodieTable.rollbackInflightCompaction`` and its clustering and log-compaction siblings) and runs
the plan itself, while we still run. The claim therefore keeps clock-free evidence of its own
attempt, and the attempt never completes once it was taken over:

* every file the attempt writes carries the claim's attempt id as the stage id of its write token
  (``<task>-<attempt>-<n>``), so that two attempts of one plan never write the same file name and
  each can tell its own files from the other's;
* when the attempt goes inflight (:meth:`Claim.go_inflight`) the claim records the rollback instants
  already on the timeline; the commit requirement :class:`NotTakenOver`, checked first under the
  table lock, before the metadata table's update and the completed file are written, refuses with
  :class:`~hoodie.errors.InstantTakenOverError` when a rollback instant (requested, inflight or
  completed) that names our instant has appeared since, or when our heartbeat went late (it may have
  been found expired, as Apache Hudi's ``HeartbeatUtils.abortIfHeartbeatExpired`` aborts). Services
  that never call ``go_inflight`` (clean, indexing, the metadata table's compaction, whose re-runs
  record no rollback instant) get the heartbeat half only;
* a refused attempt deletes exactly the files (and markers) carrying its attempt id, never the other
  executor's, leaves the instant and the heartbeat file to the executor that took it over, and is
  never undone by a rollback of its own; the attempt that completes the instant removes the marked
  files of any other attempt (:meth:`Claim.finish`), in case the refused one never runs again.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from hoodie.errors import InstantBusyError, InstantNotPendingError, InstantTakenOverError
from hoodie.file_group.base_file import BaseFile, write_token
from hoodie.file_group.log_file import LogFile
from hoodie.io.fileio import join
from hoodie.models.rollback import RollbackMetadata
from hoodie.services.base import JobCancelled, Runner, ServiceContext, Task, TaskFunction, TaskResult
from hoodie.services.recovery import read_plan
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.heartbeat import Heartbeat, is_heartbeat_expired
from hoodie.transaction.lock import locked
from hoodie.write.markers import WriteMarkers

log = logging.getLogger(__name__)

__all__ = [
    "Claim",
    "InstantBusyError",
    "InstantTakenOverError",
    "JobCancelled",
    "NotTakenOver",
    "claim_instant",
    "require_pending",
]


UndoAttempt = Callable[[Instant], object]


def new_attempt_id() -> int:
    """A random id for one attempt, used as the stage id of its write tokens (a positive 31-bit int,
    as Spark's stage ids are): clock-free, and two attempts of one plan practically never share one."""
    return secrets.randbelow(2**31 - 2) + 1


def rollback_times(timeline: ActiveTimeline) -> frozenset[str]:
    """The requested times of every rollback instant on ``timeline``, in any state."""
    return frozenset(i.requested_time for i in timeline.actions(Action.ROLLBACK))


def rollback_target(table: HoodieTable, timeline: ActiveTimeline, rollback: Instant) -> str | None:
    """The requested time of the instant ``rollback`` rolls back: its plan's ``instantToRollback``
    (``HoodieRollbackPlan``), or, without a requested file, its completed metadata's ``commitsRollback``."""
    ts = rollback.requested_time
    if State.REQUESTED in timeline.states_of(ts, Action.ROLLBACK):
        info = read_plan(table, timeline, ts).instant_to_rollback
        return None if info is None else info.commit_time
    if rollback.is_completed:
        data = timeline.read_state(ts, State.COMPLETED, Action.ROLLBACK)
        done = RollbackMetadata.from_bytes(data, table.table_version, f"rollback {ts}")
        return done.commits_rollback[0] if done.commits_rollback else None
    return None


@dataclass
class Claim:
    """An instant this process executes; use as a context manager around the execution."""

    ctx: ServiceContext
    instant: Instant
    """The instant as found when claimed: REQUESTED, or INFLIGHT from an abandoned attempt."""
    heartbeat: Heartbeat
    undo: UndoAttempt | None = None
    """How to undo a cancelled attempt that went inflight (none: leave it for the next run)."""
    service: str = ""
    attempt: int = field(default_factory=new_attempt_id)
    """This attempt's id: the stage id of every write token it uses (:meth:`write_token`)."""
    seen_rollbacks: frozenset[str] | None = None
    """Rollback instants on the timeline when the attempt went inflight (None: not inflight yet)."""
    partitions: frozenset[str] = frozenset()
    """The partitions the attempt writes in (where a refused attempt looks for its own files)."""
    _released: bool = field(default=False, init=False)
    _stopped: bool = field(default=False, init=False)
    """The attempt stopped as taken over (or late): the heartbeat file may be another executor's."""

    def __enter__(self) -> Claim:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if exc is not None and (
                isinstance(exc, InstantTakenOverError) or self.heartbeat.check_late() or self._taken_over()
            ):
                self._stopped = True
                self.discard_attempt()
            elif isinstance(exc, JobCancelled) and self.undo is not None:
                self._undo_cancelled()
        finally:
            self.release()

    def _taken_over(self) -> bool:
        """Whether an attempt that failed had been taken over (then the instant and the heartbeat file
        are another executor's: neither is touched); True when the timeline cannot be read to tell."""
        if self.seen_rollbacks is None:
            return False
        try:
            return self.taken_over_by(self.ctx.table.reload()) is not None
        except Exception:  # cannot tell: leave the heartbeat file, drop only our own files
            log.exception("%s: could not tell whether the failed attempt was taken over", self._name())
            return True

    # -- writing --------------------------------------------------------------------------------

    def write_token(self, task: int, n: int = 0) -> str:
        """The write token of the ``n``-th file of task ``task``: ``<task>-<attempt>-<n>``."""
        return write_token(task, self.attempt, n)

    def owns(self, file_name: str) -> bool:
        """Whether ``file_name`` (a base or log file) was written by this attempt (its write token)."""
        parsed = BaseFile.parse(file_name) or LogFile.parse(file_name)
        token = parsed.write_token if parsed is not None else None
        parts = (token or "").split("-")
        return len(parts) == 3 and parts[1] == str(self.attempt)

    def go_inflight(
        self, timeline: ActiveTimeline, partitions: Iterable[str] = (), payload: bytes = b""
    ) -> Instant:
        """Move the claimed (REQUESTED) instant to INFLIGHT on ``timeline`` (freshly loaded, after any
        recovery), first recording the evidence :class:`NotTakenOver` compares against."""
        self.check_live()
        self.seen_rollbacks = rollback_times(timeline)
        self.partitions = frozenset(partitions)
        requested = Instant(self.instant.requested_time, self.instant.action, State.REQUESTED)
        return timeline.transition_to_inflight(requested, payload)

    def run(
        self, runner: Runner, fn: TaskFunction, tasks: Sequence[Task], description: str
    ) -> list[TaskResult]:
        """``runner.run``, stopped once the heartbeat goes late: a runner with a ``cancel`` event (the
        in-process and Spark runners) is cancelled then, and :class:`InstantTakenOverError` is raised
        instead of writing on (other runners are checked before and after)."""
        self.check_live()
        cancel = getattr(runner, "cancel", None)
        if isinstance(cancel, threading.Event):
            self.heartbeat.on_late = cancel.set
        try:
            results = runner.run(fn, tasks, description)
        except JobCancelled:
            self.check_live()  # a late heartbeat stopped it: say so
            raise
        finally:
            self.heartbeat.on_late = None
        self.check_live()
        return results

    # -- takeover -------------------------------------------------------------------------------

    def _name(self) -> str:
        what = self.service or self.instant.action.value
        return f"{what} {self.instant.requested_time} on {self.ctx.table.base_path}"

    def check_live(self) -> None:
        """Raise :class:`InstantTakenOverError` when our heartbeat went late: another executor may
        have found it expired and taken the instant over."""
        if self.heartbeat.check_late():
            expiry = self.heartbeat.config
            raise InstantTakenOverError(
                f"{self._name()}: our heartbeat was {self.heartbeat.late_by_ms} ms later than "
                f"hoodie.client.heartbeat.interval_in_ms={expiry.interval_ms} x "
                f"hoodie.client.heartbeat.tolerable.misses={expiry.tolerable_misses}, so another executor "
                "may have taken the instant over; this attempt stopped and does not complete",
                self.instant.requested_time,
            )

    def taken_over_by(self, timeline: ActiveTimeline) -> str | None:
        """The rollback instant, appeared on ``timeline`` since we went inflight, that names our
        instant (another executor rolled our attempt back), or None."""
        if self.seen_rollbacks is None:
            return None
        ts = self.instant.requested_time
        for rb in timeline.actions(Action.ROLLBACK):
            if (
                rb.requested_time not in self.seen_rollbacks
                and rollback_target(self.ctx.table, timeline, rb) == ts
            ):
                return rb.requested_time
        return None

    def check_not_taken_over(self, timeline: ActiveTimeline) -> None:
        """Raise :class:`InstantTakenOverError` if the attempt was taken over (see the module doc)."""
        rollback = self.taken_over_by(timeline)
        if rollback is not None:
            raise InstantTakenOverError(
                f"{self._name()} was taken over: rollback {rollback} rolled this attempt back (another "
                "executor found our heartbeat expired) and the instant is now another executor's; this "
                "attempt does not complete and removes only the files it wrote itself",
                self.instant.requested_time,
                rollback,
            )
        self.check_live()

    def finish(self) -> list[str]:
        """Once this attempt has completed the instant: delete the data files other attempts of it
        left (listed by the instant's markers, carrying another attempt id), then the markers. No
        other attempt can complete the instant any more, so what they wrote is garbage (Apache Hudi
        reconciles against the markers likewise, ``HoodieTable.reconcileAgainstMarkers``); a
        taken-over attempt still running deletes what it writes later itself."""
        table = self.ctx.table
        fileio = table.fileio
        markers = WriteMarkers(fileio, table.paths, self.instant.requested_time)
        others = [p for p in markers.data_file_paths() if not self.owns(p.rsplit("/", 1)[-1])]
        removed = [p for p in others if fileio.delete(p)]
        if removed:
            log.warning("%s: removed %d file(s) other attempts left: %s", self._name(), len(removed), removed)
        markers.delete_all()
        return removed

    def discard_attempt(self) -> list[str]:
        """Delete the files (and their markers) this attempt wrote, found by its write tokens in the
        instant's markers and in the partitions it writes in; the other executor's stay."""
        table = self.ctx.table
        fileio = table.fileio
        markers = WriteMarkers(fileio, table.paths, self.instant.requested_time)
        removed: list[str] = []
        partitions = set(self.partitions)
        for partition, name, io_type in markers.files():
            if self.owns(name):
                partitions.add(partition)
                path = join(table.base_path, partition, name)
                if fileio.delete(path):
                    removed.append(path)
                markers.delete(partition, name, io_type)
        for partition in sorted(partitions):
            for entry in fileio.list_dir(join(table.base_path, partition)):
                if not entry.is_dir and self.owns(entry.name) and fileio.delete(entry.path):
                    removed.append(entry.path)
        log.warning(
            "%s: attempt %d stopped; removed the %d file(s) it wrote: %s",
            self._name(),
            self.attempt,
            len(removed),
            removed,
        )
        return removed

    # -- ending ---------------------------------------------------------------------------------

    def _undo_cancelled(self) -> None:
        assert self.undo is not None
        ts = self.instant.requested_time
        fresh = self.ctx.table.reload()
        current = fresh.get(ts, self.instant.action)
        if current is None or not current.is_inflight:
            return
        if self.taken_over_by(fresh) is not None or self.heartbeat.check_late():
            self._stopped = True
            self.discard_attempt()  # the inflight instant may be another executor's now: never undo it
            return
        try:
            self.undo(current)
        except Exception:  # the attempt stays inflight; the next claim rolls it back
            log.exception("%s: could not undo the cancelled attempt of %s", self.ctx.table.base_path, current)

    def release(self) -> None:
        """Stop beating for the instant (idempotent). The heartbeat file of an attempt taken over (or
        late) stays: the executor that took the instant over beats in it now."""
        if self._released:
            return
        self._released = True
        ts = self.instant.requested_time
        self.ctx.owned_instants.discard(ts)
        self.ctx.claim_checks.pop(ts, None)
        self.heartbeat.stop(delete=not (self._stopped or self.heartbeat.check_late()))


@dataclass(frozen=True)
class NotTakenOver:
    """Commit requirement: the claimed attempt was not taken over (:meth:`Claim.check_not_taken_over`)."""

    claim: Claim

    def check(self, table: HoodieTable, timeline: ActiveTimeline, instant: Instant) -> None:
        self.claim.check_not_taken_over(timeline)


def require_pending(ctx: ServiceContext, instant_time: str, action: Action, service: str) -> ActiveTimeline:
    """A fresh timeline on which ``instant_time`` is a pending ``action`` instant.

    Services call this, then read and check the plan, before claiming: a malformed plan then fails
    before anything (even a heartbeat) is written to the table.
    """
    timeline = ctx.table.reload()
    current = timeline.get(instant_time, action)
    if current is None or current.is_completed:
        raise InstantNotPendingError(
            f"{ctx.table.base_path}: no pending {service} at {instant_time} (found {current})"
        )
    return timeline


def claim_instant(
    ctx: ServiceContext, instant_time: str, action: Action, service: str, undo: UndoAttempt | None = None
) -> Claim:
    """Claim the pending ``action`` instant at ``instant_time`` for ``service`` (see the module doc).

    Raises :class:`InstantBusyError` when another process beats for it, and
    :class:`~hoodie.errors.InstantNotPendingError` when it is not pending.
    """
    table = ctx.table
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        current = table.reload().get(instant_time, action)
        if current is None or current.is_completed:
            raise InstantNotPendingError(
                f"{table.base_path}: no pending {service} at {instant_time} (found {current})"
            )
        if not is_heartbeat_expired(table.fileio, table.paths, instant_time, ctx.heartbeat):
            raise InstantBusyError(
                f"{service} {instant_time} on {table.base_path} is being executed by another process "
                "(its heartbeat is alive)"
            )
        heartbeat = Heartbeat(table.fileio, table.paths, instant_time, ctx.heartbeat, stop_when_late=True)
        heartbeat.start()
    ctx.owned_instants.add(instant_time)
    claim = Claim(ctx, current, heartbeat, undo, service)
    ctx.claim_checks[instant_time] = NotTakenOver(claim)
    return claim
