"""The work queue: single flight, limits, priorities, fair share, backoff and cancel."""

from __future__ import annotations

import threading

from service.queue import WorkItem, WorkQueue
from service.settings import Limits


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _queue(clock: Clock, limits: Limits | None = None, per_table: int = 1) -> WorkQueue:
    return WorkQueue(limits or Limits(max_concurrent=4), lambda _table: per_table, clock=clock)


def _item(table: str, instant: str | None, service: str = "compaction", priority: int = 0) -> WorkItem:
    return WorkItem(table, service, "execute" if instant else "schedule", instant, "watch", priority)


def _all(_: WorkItem) -> bool:
    return True


def test_the_same_instant_is_queued_once() -> None:
    q = _queue(Clock())
    first, fresh = q.submit(_item("t1", "001"))
    again, fresh_again = q.submit(_item("t1", "001"))
    assert fresh and not fresh_again and again is first
    taken = q.take(_all, timeout_s=0)
    assert taken is first and taken.running
    # While it runs, the same key still answers with the running item.
    assert q.submit(_item("t1", "001"))[0] is first
    q.finish(first, 1.0)
    assert first.done.is_set() and q.find(first.key) is None
    assert q.submit(_item("t1", "001"))[1], "after it finished, the key can be queued again"


def test_limits_per_table_per_service_and_global() -> None:
    clock = Clock()
    q = _queue(clock, Limits(max_concurrent=3, per_service={"clustering": 1}), per_table=1)
    for item in [
        _item("a", "1"),
        _item("a", "2"),
        _item("b", "1", "clustering"),
        _item("c", "1", "clustering"),
    ]:
        q.submit(item)
    q.submit(_item("d", "1"))
    taken = [q.take(_all, timeout_s=0) for _ in range(5)]
    started = [(i.table_id, i.instant) for i in taken if i is not None]
    assert len(started) == 3, "three workers at most"
    assert sum(1 for t, _ in started if t == "a") == 1, "one at a time per table"
    assert sum(1 for i in taken if i is not None and i.service == "clustering") == 1
    assert q.take(_all, timeout_s=0) is None


def test_priority_then_fair_share_then_age() -> None:
    clock = Clock()
    q = _queue(clock, Limits(max_concurrent=1))
    # Table "busy" has used a lot of time recently; "idle" has not.
    busy = _item("busy", "0")
    q.submit(busy)
    assert q.take(_all, timeout_s=0) is busy
    q.finish(busy, 500.0)
    q.submit(_item("busy", "1"))
    q.submit(_item("idle", "1"))
    q.submit(_item("low", "1", priority=-5))
    first = q.take(_all, timeout_s=0)
    assert first is not None and first.table_id == "idle", "the table that used less time goes first"
    q.finish(first, 1.0)
    urgent = _item("busy", "9", priority=10)
    q.submit(urgent)
    assert q.take(_all, timeout_s=0) is urgent, "priority beats fair share"
    q.finish(urgent, 1.0)
    nxt = q.take(_all, timeout_s=0)
    assert nxt is not None and nxt.table_id == "busy"
    q.finish(nxt, 1.0)
    last = q.take(_all, timeout_s=0)
    assert last is not None and last.table_id == "low"


def test_usage_decays() -> None:
    clock = Clock()
    q = WorkQueue(Limits(max_concurrent=1), lambda _t: 1, half_life_s=10.0, clock=clock)
    a = _item("a", "0")
    q.submit(a)
    q.take(_all, timeout_s=0)
    q.finish(a, 100.0)
    b = _item("b", "0")
    q.submit(b)
    q.take(_all, timeout_s=0)
    q.finish(b, 10.0)
    clock.now += 100  # ten half-lives: a's 100 s shrink to ~0.1 s, b's 10 s to ~0.01 s
    q.submit(_item("a", "1"))
    q.submit(_item("b", "1"))
    picked = q.take(_all, timeout_s=0)
    assert picked is not None and picked.table_id == "b"


def test_retry_backoff_and_eligibility() -> None:
    clock = Clock()
    q = _queue(clock)
    item = _item("t", "1")
    q.submit(item)
    assert q.take(_all, timeout_s=0) is item
    q.finish(item, 1.0, retry_in=30.0)
    assert not item.done.is_set() and q.find(item.key) is item
    assert q.take(_all, timeout_s=0) is None, "not before its backoff passed"
    clock.now += 31
    assert q.take(lambda i: i.table_id != "t", timeout_s=0) is None, "a paused table's item waits"
    again = q.take(_all, timeout_s=0)
    assert again is item and item.attempts == 2
    q.paused = True
    q.finish(item, 1.0, retry_in=0.0)
    assert q.take(_all, timeout_s=0) is None, "nothing starts while paused"


def test_cancel_queued_and_running() -> None:
    q = _queue(Clock())
    queued = _item("t1", "1")
    queued.run_id = 1
    running = _item("t2", "1")
    running.run_id = 2
    q.submit(queued)
    q.submit(running)
    q.take(lambda i: i.table_id == "t2", timeout_s=0)
    assert q.cancel(1) is queued and queued.done.is_set() and q.find(queued.key) is None
    assert q.cancel(2) is running and running.cancel.is_set() and not running.done.is_set()
    q.finish(running, 1.0, retry_in=5.0)
    assert running.done.is_set(), "a cancelled item is never retried"
    assert q.cancel(3) is None


def test_take_wakes_when_work_arrives() -> None:
    q = _queue(Clock())
    got: list[WorkItem | None] = []
    waiter = threading.Thread(target=lambda: got.append(q.take(_all, timeout_s=10)))
    waiter.start()
    item = _item("t", "1")
    q.submit(item)
    waiter.join(timeout=10)
    assert got == [item]


def test_a_trigger_owns_the_instant_it_plans_until_it_ends() -> None:
    q = _queue(Clock())
    trigger, _ = q.submit(WorkItem("t1", "compaction", "trigger", None, "api"))
    assert not q.planning("t1", "compaction"), "queued, not planning yet"
    assert q.take(_all, timeout_s=0) is trigger
    assert (
        q.planning("t1", "compaction")
        and not q.planning("t1", "clean")
        and not q.planning("t2", "compaction")
    )
    assert q.claim(trigger, "002") is None and trigger.target == "002"
    assert not q.planning("t1", "compaction"), "its plan is claimed: the watcher sees it through find"
    assert q.find(("t1", "002")) is trigger
    watched, fresh = q.submit(_item("t1", "002"))
    assert watched is trigger and not fresh, "the watcher's item for that instant is the trigger"
    # Another pending plan queued by the watcher cannot be claimed by the trigger.
    other, _ = q.submit(_item("t1", "001"))
    assert q.claim(trigger, "001") is other and trigger.claimed == "002"
    q.finish(trigger, 1.0, retry_in=5.0)
    assert q.find(("t1", "002")) is trigger, "a retry keeps the claim"
    trigger.run_id = 7
    assert q.cancel(7) is trigger, "cancelled while it waits for its retry"
    assert q.find(("t1", "002")) is None and trigger.done.is_set()
