"""One commit: the only way an instant completes, on a data table or on its metadata table.

Hudi completes every instant inside a transaction of its ``TransactionManager`` (see
``BaseHoodieWriteClient.commit`` and ``BaseHoodieTableServiceClient``): the lock is taken, the
timeline is read under it, conflicts are resolved, the metadata table is updated, and only then is
the completed file written. Here that protocol is written once, as :func:`commit`, with typed
requirements checked under the lock (the shape of pyiceberg's ``_do_commit``). In order:

1. the timeline is read under the lock (or the caller's timeline, read under the same lock);
2. the requirements, in the order given: :class:`StillInflight` always first, then e.g.
   :class:`NoConflictingCommit` and :class:`InputsPresent`;
3. ``sync``: the metadata table's update for the instant (whose own deltacommits complete through
   this function as well, inside the same transaction);
4. the completion time is minted;
5. :class:`LockHeld`: the lock is still held (a ZooKeeper session may have expired meanwhile), right
   before
6. ``publish`` (what becomes visible with the instant, e.g. the metadata partitions an indexing
   built, in the table's properties) and the completed file are written.

``upkeep`` (the metadata table's services that are due) runs once the lock is released.

Dependencies point one way: this module knows locks and timelines; the metadata sync and upkeep
come in as callables from the layers above, so it imports neither the metadata table nor the
services.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from hoodie.errors import TableServiceError
from hoodie.timeline.instant import Instant
from hoodie.transaction.lock import LockError, LockProvider, locked

if TYPE_CHECKING:  # the table is what commits write to; this module imports no layer above the timeline
    from hoodie.table import HoodieTable
    from hoodie.timeline.timeline import ActiveTimeline


Sync = Callable[["ActiveTimeline", Instant], object]
"""Writes what must be durable before the instant completes (the metadata table's update); what it
returns is ignored."""
Upkeep = Callable[[], None]
"""Runs after the lock is released (the metadata table's services that are due)."""
CompletionTime = Callable[["ActiveTimeline"], "str | None"]
"""The completion time of the instant (None in timeline layout 1), minted under the lock."""


@dataclass
class Transaction:
    """A table lock held by this thread (Hudi's ``TransactionManager`` between begin and end)."""

    lock: LockProvider
    base_path: str
    """The table the lock is of (the data table's, for its metadata table too)."""
    after_release: list[Upkeep] = field(default_factory=list)


def lock_owner(table: HoodieTable) -> str:
    """The table whose lock guards ``table``'s commits: a metadata table shares its data table's."""
    return table.base_path.rstrip("/").rsplit("/", 2)[0] if table.is_metadata_table else table.base_path


_CURRENT: ContextVar[Transaction | None] = ContextVar("hoodie_transaction", default=None)


def current_transaction() -> Transaction | None:
    """The transaction this thread is inside, if any."""
    return _CURRENT.get()


@contextmanager
def transaction(lock: LockProvider, base_path: str, timeout_s: float | None) -> Iterator[Transaction]:
    """Hold ``lock`` for the block; commits inside it complete under it without taking it again.

    Entered again with the same lock (the metadata table's services, which share the data table's
    lock), it is the same transaction. On leaving the outermost block the lock is released, then
    the upkeep that commits inside it deferred runs, in order.
    """
    outer = _CURRENT.get()
    if outer is not None and outer.lock is lock:
        yield outer
        return
    txn = Transaction(lock, base_path)
    with locked(lock, timeout_s):
        token = _CURRENT.set(txn)
        try:
            yield txn
        finally:
            _CURRENT.reset(token)
    for upkeep in txn.after_release:
        upkeep()


# -- requirements ---------------------------------------------------------------------------------


class Requirement(Protocol):
    """A condition the fresh timeline must meet for ``instant`` to complete; raises when it does not."""

    def check(self, table: HoodieTable, timeline: ActiveTimeline, instant: Instant) -> None: ...


@dataclass(frozen=True)
class StillInflight:
    """The instant is still INFLIGHT: nobody rolled it back or completed it while we worked.

    ``message`` may name ``{time}``, ``{action}``, ``{base}`` and ``{now}`` (what the timeline
    holds instead).
    """

    message: str = (
        "{time} ({action}) is no longer inflight on {base} (now {now}); "
        "another process rolled it back or completed it"
    )

    def check(self, table: HoodieTable, timeline: ActiveTimeline, instant: Instant) -> None:
        current = timeline.get(instant.requested_time, instant.action)
        if current is None or not current.is_inflight:
            raise TableServiceError(
                self.message.format(
                    time=instant.requested_time,
                    action=instant.action.value,
                    base=table.base_path,
                    now=current,
                )
            )


@dataclass(frozen=True)
class NoConflictingCommit:
    """No commit completed since we started conflicts with ours (``check`` raises the conflict)."""

    check_timeline: Callable[[ActiveTimeline], None]

    def check(self, table: HoodieTable, timeline: ActiveTimeline, instant: Instant) -> None:
        self.check_timeline(timeline)


@dataclass(frozen=True)
class InputsPresent:
    """What the instant read is still there (``check`` raises naming what went missing)."""

    check_timeline: Callable[[ActiveTimeline], None]

    def check(self, table: HoodieTable, timeline: ActiveTimeline, instant: Instant) -> None:
        self.check_timeline(timeline)


@dataclass(frozen=True)
class LockHeld:
    """The transaction's lock is still held (checked last, right before the completing write)."""

    txn: Transaction

    def check(self, table: HoodieTable, timeline: ActiveTimeline, instant: Instant) -> None:
        where = "" if table.base_path == self.txn.base_path else f" on {table.base_path}"
        require_lock(self.txn, f"completing {instant}{where}", "not completing it")


def require_lock(txn: Transaction, before: str, refusal: str) -> None:
    """Raise :class:`LockError` naming the lost lock when ``txn`` no longer holds it."""
    if not txn.lock.is_held():  # e.g. a ZooKeeper session expired while we worked
        raise LockError(f"lost the table lock of {txn.base_path} before {before}; {refusal}")


# -- the commit -----------------------------------------------------------------------------------


def commit(
    table: HoodieTable,
    instant: Instant,
    payload: bytes,
    *,
    completion_time: CompletionTime,
    lock: LockProvider | None = None,
    timeout_s: float | None = None,
    timeline: ActiveTimeline | None = None,
    requirements: Sequence[Requirement] = (),
    sync: Sync | None = None,
    publish: Sync | None = None,
    upkeep: Upkeep | None = None,
) -> Instant:
    """Complete the inflight ``instant`` of ``table`` with ``payload`` (see the module doc).

    ``lock`` is the table lock to take; without it the commit runs in the transaction this thread
    is already inside (a metadata-table instant inside the data table's commit), or, outside any
    (a table being created, which no other writer can know of yet), with no lock to check.
    ``timeline`` is one the caller read under that same lock; without it the timeline is reloaded.
    """
    steps = (sync, publish)
    if lock is not None:
        with transaction(lock, lock_owner(table), timeout_s) as txn:
            done = _complete(table, instant, payload, completion_time, txn, timeline, requirements, steps)
            if upkeep is not None:
                txn.after_release.append(upkeep)
        return done
    outer = _CURRENT.get()
    done = _complete(table, instant, payload, completion_time, outer, timeline, requirements, steps)
    if upkeep is not None:
        if outer is None:
            upkeep()
        else:
            outer.after_release.append(upkeep)
    return done


def _complete(
    table: HoodieTable,
    instant: Instant,
    payload: bytes,
    completion_time: CompletionTime,
    txn: Transaction | None,
    timeline: ActiveTimeline | None,
    requirements: Sequence[Requirement],
    steps: tuple[Sync | None, Sync | None],
) -> Instant:
    sync, publish = steps
    fresh = timeline if timeline is not None else table.reload()
    checks = list(requirements)
    if not any(isinstance(r, StillInflight) for r in checks):
        checks.insert(0, StillInflight())
    for requirement in checks:
        requirement.check(table, fresh, instant)
    current = fresh.get(instant.requested_time, instant.action) or instant
    if sync is not None:
        sync(fresh, current)
    completion = completion_time(fresh)
    if txn is not None:
        LockHeld(txn).check(table, fresh, current)
    if publish is not None:
        publish(fresh, current)
    return fresh.complete(current, payload, completion)
