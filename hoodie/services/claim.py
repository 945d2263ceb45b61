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
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from hoodie.errors import InstantBusyError, InstantNotPendingError
from hoodie.services.base import JobCancelled, ServiceContext
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.heartbeat import Heartbeat, is_heartbeat_expired
from hoodie.transaction.lock import locked

log = logging.getLogger(__name__)

__all__ = ["Claim", "InstantBusyError", "JobCancelled", "claim_instant", "require_pending"]


UndoAttempt = Callable[[Instant], object]


@dataclass
class Claim:
    """An instant this process executes; use as a context manager around the execution."""

    ctx: ServiceContext
    instant: Instant
    """The instant as found when claimed: REQUESTED, or INFLIGHT from an abandoned attempt."""
    heartbeat: Heartbeat
    undo: UndoAttempt | None = None
    """How to undo a cancelled attempt that went inflight (none: leave it for the next run)."""
    _released: bool = field(default=False, init=False)

    def __enter__(self) -> Claim:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if isinstance(exc, JobCancelled) and self.undo is not None:
                self._undo_cancelled()
        finally:
            self.release()

    def _undo_cancelled(self) -> None:
        assert self.undo is not None
        ts = self.instant.requested_time
        current = self.ctx.table.reload().get(ts, self.instant.action)
        if current is None or not current.is_inflight:
            return
        try:
            self.undo(current)
        except Exception:  # the attempt stays inflight; the next claim rolls it back
            log.exception("%s: could not undo the cancelled attempt of %s", self.ctx.table.base_path, current)

    def release(self) -> None:
        """Stop beating for the instant (idempotent)."""
        if self._released:
            return
        self._released = True
        self.ctx.owned_instants.discard(self.instant.requested_time)
        self.heartbeat.stop()


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
        heartbeat = Heartbeat(table.fileio, table.paths, instant_time, ctx.heartbeat).start()
    ctx.owned_instants.add(instant_time)
    return Claim(ctx, current, heartbeat, undo)
