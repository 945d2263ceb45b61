"""The work queue: priorities, fair share across tables, limits, single flight, retries, cancel.

A work item is one thing to do on one table: execute a pending instant, schedule by policy, or
run a REST trigger. Its key is ``(table, instant)`` or ``(table, "<kind>:<service>")``: while an
item with a key is queued or running, submitting the same key returns the existing item, so an
instant is never run twice at once by this daemon (other processes are kept off by the claim on
the instant; see ``hoodie.services.claim``). An item that plans while it runs (a REST trigger)
claims the instant it planned (:meth:`WorkQueue.claim`): from then on that instant's key finds the
item too, and while it is still planning (:meth:`WorkQueue.planning`) the watcher leaves that
service's new plans on the table alone, so one instant never gets two runs.

Workers take the best eligible item: one whose ``not_before`` has passed (retries back off
exponentially), whose table is not paused and whose lock is not suspended, and that fits the
limits (global workers, ``max_concurrent`` per table, ``limits.per_service``). Among those:
the highest priority first; then the table that used the least execution time recently (each
table's usage decays by half every ``half_life_s``), so one busy table cannot starve the
others; then the oldest.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service.settings import Limits
from service.store import RunKind, RunTrigger


@dataclass(eq=False)
class WorkItem:
    table_id: str
    service: str
    kind: RunKind
    instant: str | None
    trigger: RunTrigger
    priority: int = 0
    options: dict[str, str] = field(default_factory=dict)
    run_id: int | None = None
    attempts: int = 0
    not_before: float = 0.0
    enqueued_at: float = field(default_factory=time.monotonic)
    seq: int = 0
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    running: bool = False
    result: dict[str, Any] = field(default_factory=dict)
    progress: tuple[int, int] = (0, 0)
    claimed: str | None = None
    """The instant this item planned and carries out (a REST trigger without ``instant``)."""

    def __post_init__(self) -> None:
        self.kind = RunKind(self.kind)
        self.trigger = RunTrigger(self.trigger)

    @property
    def key(self) -> tuple[str, str]:
        return (self.table_id, self.instant or f"{self.kind.value}:{self.service}")

    @property
    def target(self) -> str | None:
        """The instant this item works on, named or claimed."""
        return self.instant or self.claimed


Eligible = Callable[[WorkItem], bool]


class WorkQueue:
    """Thread-safe; workers block in :meth:`take`."""

    def __init__(
        self,
        limits: Limits,
        table_limit: Callable[[str], int],
        *,
        half_life_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.table_limit = table_limit
        self.half_life_s = half_life_s
        self.clock = clock
        self._items: dict[tuple[str, str], WorkItem] = {}
        self._claims: dict[tuple[str, str], WorkItem] = {}  # (table, instant) -> the item that planned it
        self._usage: dict[str, tuple[float, float]] = {}  # table -> (seconds, as of)
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._ended: dict[str, int] = {}  # table -> work items that left the queue
        self._closed = False
        self.paused = False

    # -- submitting ---------------------------------------------------------------------------

    def submit(self, item: WorkItem) -> tuple[WorkItem, bool]:
        """Queue ``item``; if its key is already queued or running, the existing item and False."""
        with self._cond:
            existing = self._items.get(item.key) or self._claims.get(item.key)
            if existing is not None:
                return existing, False
            item.seq = next(self._seq)
            self._items[item.key] = item
            self._cond.notify_all()
            return item, True

    def find(self, key: tuple[str, str]) -> WorkItem | None:
        """The item queued or running under ``key``, or the one that claimed that instant."""
        with self._cond:
            return self._items.get(key) or self._claims.get(key)

    def claim(self, item: WorkItem, instant: str) -> WorkItem | None:
        """``item`` (running) carries out ``instant``; None when it may, else the item that does."""
        with self._cond:
            key = (item.table_id, instant)
            owner = self._items.get(key) or self._claims.get(key)
            if owner is not None and owner is not item:
                return owner
            if item.claimed is not None and item.claimed != instant:
                self._claims.pop((item.table_id, item.claimed), None)
            item.claimed = instant
            self._claims[key] = item
            return None

    def planning(self, table_id: str, service: str) -> bool:
        """Whether a running item is planning ``service`` on the table and has not claimed it yet."""
        with self._cond:
            return any(
                i.running
                and i.table_id == table_id
                and i.service == service
                and i.kind in (RunKind.TRIGGER, RunKind.SCHEDULE)
                and i.target is None
                for i in self._items.values()
            )

    def by_run(self, run_id: int) -> WorkItem | None:
        with self._cond:
            return next((i for i in self._items.values() if i.run_id == run_id), None)

    def items(self) -> list[WorkItem]:
        with self._cond:
            return sorted(self._items.values(), key=lambda i: i.seq)

    def cancel(self, run_id: int) -> WorkItem | None:
        """Cancel a queued item (removed now) or a running one (its ``cancel`` event is set)."""
        with self._cond:
            item = next((i for i in self._items.values() if i.run_id == run_id), None)
            if item is None:
                return None
            item.cancel.set()
            if not item.running:
                self._drop(item)
            self._cond.notify_all()
            return item

    def wake(self) -> None:
        """Re-evaluate eligibility (a table resumed, a lock reconnected, time passed)."""
        with self._cond:
            self._cond.notify_all()

    # -- taking -------------------------------------------------------------------------------

    def _usage_now(self, table_id: str, now: float) -> float:
        seconds, as_of = self._usage.get(table_id, (0.0, now))
        return seconds * math.pow(0.5, max(0.0, now - as_of) / self.half_life_s)

    def _fits(self, item: WorkItem) -> bool:
        running = [i for i in self._items.values() if i.running]
        if len(running) >= self.limits.max_concurrent:
            return False
        if sum(1 for i in running if i.table_id == item.table_id) >= self.table_limit(item.table_id):
            return False
        cap = self.limits.per_service.get(item.service)
        return cap is None or sum(1 for i in running if i.service == item.service) < cap

    def _pick(self, eligible: Eligible, now: float) -> WorkItem | None:
        best: WorkItem | None = None
        best_key: tuple[float, float, int] | None = None
        for item in self._items.values():
            if item.running or item.not_before > now or not self._fits(item) or not eligible(item):
                continue
            rank = (-float(item.priority), self._usage_now(item.table_id, now), item.seq)
            if best_key is None or rank < best_key:
                best, best_key = item, rank
        return best

    def take(self, eligible: Eligible, timeout_s: float = 1.0) -> WorkItem | None:
        """The next item to run (marked running), or None after ``timeout_s`` or on close."""
        deadline = self.clock() + timeout_s
        with self._cond:
            while not self._closed:
                now = self.clock()
                item = None if self.paused else self._pick(eligible, now)
                if item is not None:
                    item.running = True
                    item.attempts += 1
                    return item
                remaining = deadline - now
                if remaining <= 0:
                    return None
                waits = [i.not_before - now for i in self._items.values() if i.not_before > now]
                self._cond.wait(min([remaining, *waits, 1.0]))
            return None

    def finish(self, item: WorkItem, seconds: float, *, retry_in: float | None = None) -> None:
        """``item`` stopped running after ``seconds``; requeue it after ``retry_in`` or drop it."""
        with self._cond:
            now = self.clock()
            self._usage[item.table_id] = (self._usage_now(item.table_id, now) + seconds, now)
            item.running = False
            if retry_in is not None and not item.cancel.is_set():
                item.not_before = now + retry_in
            else:
                self._drop(item)
            self._cond.notify_all()

    def ended(self, table_id: str) -> int:
        """How many of the table's work items have left the queue (finished, given up, cancelled):
        unchanged between two calls, no run of the table ended in between."""
        # One read of a dict the queue's lock guards the writes of (atomic in CPython): the watch
        # tick asks this of every table, and waiting on the queue's condition would cost more.
        return self._ended.get(table_id, 0)

    def _drop(self, item: WorkItem) -> None:
        self._ended[item.table_id] = self._ended.get(item.table_id, 0) + 1
        self._items.pop(item.key, None)
        if item.claimed is not None and self._claims.get((item.table_id, item.claimed)) is item:
            del self._claims[(item.table_id, item.claimed)]
        item.done.set()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per service: (waiting, running)."""
        out: dict[str, tuple[int, int]] = {}
        with self._cond:
            for item in self._items.values():
                waiting, running = out.get(item.service, (0, 0))
                out[item.service] = (
                    waiting + (0 if item.running else 1),
                    running + (1 if item.running else 0),
                )
        return out
