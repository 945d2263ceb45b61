"""What a look, queueing and a run's way to INFLIGHT cost on S3, counted (not timed).

S3 is moto's emulator in this process (:mod:`tests.servers.counted_aws`), which counts what it
answers; hts counts its own storage operations (``hoodie.io.requests``). The daemon runs on a
simulated clock (:class:`~service.clock.SimulatedClock`), ticked by the test as its scheduler would.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie.io.requests import counting
from hoodie.services.base import CRASH_ACTION_ENV, CRASH_ENV, ServiceContext
from hoodie.services.compaction import CompactionPolicy, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from hoodie.transaction.heartbeat import HeartbeatConfig
from hoodie.write.writer import HoodieWriter
from service.clock import SYSTEM, Clock, SimulatedClock
from service.daemon import Daemon
from service.registry import TableEntry
from service.settings import load_settings
from service.store import RunState
from service.watcher import TableWatch, look
from tests.servers.counted_aws import CountedAws
from tests.tables import new_table, rows

POLL = 5.0


def _s3_table(aws: CountedAws, name: str) -> str:
    uri = f"s3://{aws.bucket}/watch-requests/{name}"
    writer = HoodieWriter(new_table(uri, **aws.storage_options()))
    writer.insert(rows(range(20), 1))
    writer.upsert(rows(range(0, 20, 2), 2))
    return uri


def _request(uri: str, aws: CountedAws) -> str:
    table = HoodieTable.open(uri, **aws.storage_options())
    scheduled = schedule_compaction(ServiceContext(table), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return scheduled.instant_time


def _daemon(
    tmp_path: Path, aws: CountedAws, uri: str, poll_s: float = POLL, clock: Clock | None = None
) -> Daemon:
    data: dict[str, Any] = {
        "tables": {"discover": [], "static": [{"path": uri, "id": "t"}]},
        "defaults": {"storage_options": aws.storage_options()},
        "spark": {"master": "in-process"},
        "state_dir": str(tmp_path / "state"),
        "watch": {"poll_interval_s": poll_s, "idle_after_s": 3600},
    }
    settings = load_settings(overrides=data, environ={})
    daemon = Daemon(settings, replica_id="counts", clock=clock or SimulatedClock())
    daemon.discover()
    return daemon


def test_a_look_is_one_listing_and_pending_instants_add_one_for_all_their_heartbeats(
    aws: CountedAws,
) -> None:
    uri = _s3_table(aws, "look")
    table = HoodieTable.open(uri, **aws.storage_options())
    watch, beat = TableWatch(), HeartbeatConfig()
    look(table, watch, beat, lazy=False)
    with counting() as idle:
        answered = aws.snapshot()
        assert look(table, watch, beat, lazy=False) is False
    assert idle.snapshot() == {"list": 1}, "nothing new: one listing of the timeline"
    assert dict(aws.snapshot() - answered) == {"s3:ListObjects": 1}
    ts = _request(uri, aws)
    for changed in (True, False):
        with counting() as seen:
            answered = aws.snapshot()
            assert look(table, watch, beat, lazy=False) is changed
        # The timeline, then the heartbeat folder: one listing for every pending instant's heartbeat
        # (looking the file up would cost a HEAD and, the file missing, a LIST on S3, per instant).
        assert seen.snapshot() == {"list": 2}
        assert dict(aws.snapshot() - answered) == {"s3:ListObjects": 2}
        (p,) = watch.pending
        assert (p.instant.requested_time, p.runnable, p.beating) == (ts, True, False)


def test_queueing_what_the_look_found_reads_nothing_again_unless_a_run_of_the_table_ended(
    tmp_path: Path, aws: CountedAws
) -> None:
    uri = _s3_table(aws, "queue")
    daemon = _daemon(tmp_path, aws, uri)
    try:
        daemon.watch_tick()  # opens the table
        entry = daemon.entry("t")
        ts = _request(uri, aws)
        ended = daemon.queue.ended("t")
        daemon.clock.sleep(POLL)
        assert daemon._look(entry)
        refused = daemon.refused(entry)
        with counting() as queueing:
            daemon._queue_pending(entry, refused, ended)
        assert queueing.snapshot() == {}, "the look's timeline is current: no second listing"
        item = daemon.queue.find(("t", ts))
        assert item is not None and item.run_id is not None

        # The look saw it pending; then a run of ours carried it out and left the queue before the
        # look's findings were queued: queueing reads the timeline again and queues nothing.
        ended = daemon.queue.ended("t")
        taken = daemon.queue.take(daemon._eligible, timeout_s=1.0)
        assert taken is item
        daemon._run(taken)
        assert daemon.store.get(item.run_id).state is RunState.SUCCEEDED  # type: ignore[union-attr]
        assert daemon.queue.ended("t") == ended + 1
        with counting() as queueing:
            daemon._queue_pending(entry, refused, ended)
        assert queueing.snapshot() == {"list": 1}
        assert daemon.queue.find(("t", ts)) is None, "a completed instant is not queued again"
    finally:
        daemon.stop(grace_s=0)


def test_from_queued_to_inflight_a_run_makes_only_the_requests_its_safety_needs(
    tmp_path: Path, aws: CountedAws, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = _s3_table(aws, "inflight")
    daemon = _daemon(tmp_path, aws, uri)
    try:
        daemon.watch_tick()
        entry = daemon.entry("t")
        ts = _request(uri, aws)
        daemon.clock.sleep(POLL)
        daemon.watch_tick()
        item = daemon.queue.take(daemon._eligible, timeout_s=1.0)
        assert item is not None and item.instant == ts
        # The run stops for a while right after its inflight file is written: what it made until
        # then is what going from queued to INFLIGHT costs.
        monkeypatch.setenv(CRASH_ENV, "compaction.after_inflight")
        monkeypatch.setenv(CRASH_ACTION_ENV, "pause:3")
        before = entry.requests.snapshot()
        worker = threading.Thread(target=daemon._run, args=(item,))
        worker.start()
        table = HoodieTable.open(uri, **aws.storage_options())
        deadline = time.monotonic() + 60
        while table.reload().get(ts, Action.COMPACTION).state is not State.INFLIGHT:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the run never went INFLIGHT"
            time.sleep(0.02)
        spent = entry.requests.since(before)
        worker.join(60)
        assert daemon.store.get(item.run_id).state is RunState.SUCCEEDED  # type: ignore[arg-type, union-attr]
    finally:
        daemon.stop(grace_s=0)
    assert spent == {
        # hoodie.properties (the run's own open: properties may have changed since the table was
        # opened), the plan, and the schema from the last commit
        "read": 3,
        # the timeline: for the shape check, fresh before the plan is read, under the lock for the
        # claim, and fresh before the inflight file is written; and the heartbeat folder, under the
        # lock: nobody else executes it (one LIST on S3, where looking the missing file up cost two)
        "list": 5,
        "write": 2,  # our heartbeat, and the inflight file (a conditional put)
    }


def test_every_active_table_is_looked_at_on_every_tick_however_late_in_the_sweep(
    tmp_path: Path, aws: CountedAws
) -> None:
    uri = _s3_table(aws, "grid")
    daemon = _daemon(tmp_path, aws, uri)
    clock = daemon.clock
    assert isinstance(clock, SimulatedClock)
    try:
        daemon.watch_tick()
        entry: TableEntry = daemon.entry("t")
        looks = entry.watch.looks
        # A long sweep: this table's turn comes 2.4 s after its tick started ...
        tick = clock.monotonic() + POLL
        clock.advance(POLL + 2.4)
        daemon._watch_one(entry, True, tick)
        assert entry.watch.looks == looks + 1
        # ... and at the very start of the next tick, one poll interval after the last one started.
        clock.advance(POLL - 2.4)
        daemon.watch_tick()
        assert entry.watch.looks == looks + 2, "looked at again one poll interval later, not two"
    finally:
        daemon.stop(grace_s=0)


def _metric(daemon: Daemon, name: str) -> float:
    for line in daemon.metrics.exposition().decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {name} in the metrics")


def test_a_watch_tick_that_overruns_the_interval_is_followed_by_the_next_at_once(
    tmp_path: Path, aws: CountedAws
) -> None:
    """Real time: ticks every 0.2 s, each one listing the table behind 0.3 s of latency. A scheduler
    that skips a tick while the last still runs would leave the table unwatched a whole interval
    after each overrun (busy at most 0.3 s of every 0.4 s)."""
    uri = _s3_table(aws, "overrun")
    daemon = _daemon(tmp_path, aws, uri, poll_s=0.2, clock=SYSTEM)
    daemon.watch_tick()  # opens the table, without latency
    aws.latency_s = 0.3
    ticker = threading.Thread(target=daemon._watch_loop)
    try:
        started, ticks = time.monotonic(), _metric(daemon, "hts_scheduler_tick_duration_seconds_count")
        busy = _metric(daemon, "hts_scheduler_tick_duration_seconds_sum")
        ticker.start()
        time.sleep(3.0)
    finally:
        daemon._ticks_stop.set()
        ticker.join(30)
        aws.latency_s = 0.0
        elapsed = time.monotonic() - started
        daemon.stop(grace_s=0)
    ticks = _metric(daemon, "hts_scheduler_tick_duration_seconds_count") - ticks
    busy = _metric(daemon, "hts_scheduler_tick_duration_seconds_sum") - busy
    assert ticks >= 3 and _metric(daemon, "hts_scheduler_overruns_total") >= ticks - 1
    assert busy / elapsed > 0.85, f"ticks back to back: {busy:.2f} s of ticking in {elapsed:.2f} s"
