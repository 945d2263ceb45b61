"""The request budget: a simulated hour of watching, counted (not timed).

The daemon's clock is a :class:`~service.clock.SimulatedClock` and the watch tick is called at each
of its poll intervals, as the scheduler does, so an hour runs in about a second. Requests are
counted twice on S3: by hts (``hoodie.io.requests``, what ``hts_storage_requests_total`` exports)
and by the emulator that answered them (moto's S3, in this process, :mod:`tests.servers.counted_aws`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hoodie.services.base import ServiceContext
from hoodie.services.compaction import CompactionPolicy, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from service.clock import SimulatedClock
from service.daemon import Daemon
from service.registry import TableEntry
from service.settings import load_settings
from tests.daemon.helpers import mor_table, request_compaction
from tests.servers.counted_aws import CountedAws
from tests.tables import new_table, rows

HOUR = 3600.0
POLL = 5.0
CEILING = 60.0


def _settled(path: Path) -> None:
    """Age the table's files: a folder whose modification time is settled is trusted unchanged."""
    then = time.time() - 5
    for f in [path, *path.rglob("*")]:
        os.utime(f, (then, then))


class Sim:
    """A daemon on a simulated clock, ticking every poll interval as its scheduler would."""

    def __init__(self, root: Path, **overrides: Any) -> None:
        data: dict[str, Any] = {
            "tables": {"discover": [str(root / "tables")]},
            "spark": {"master": "in-process"},
            "state_dir": str(root / "state"),
            **overrides,
        }
        self.clock = SimulatedClock()
        self.daemon = Daemon(load_settings(overrides=data, environ={}), replica_id="sim", clock=self.clock)
        self.next_tick = self.clock.monotonic()
        self.daemon.discover()

    def entry(self, table_id: str) -> TableEntry:
        return self.daemon.entry(table_id)

    def run(self, seconds: float) -> None:
        """Let ``seconds`` pass, ticking on the poll grid."""
        end = self.clock.monotonic() + seconds
        while self.next_tick <= end:
            self.clock.advance(self.next_tick - self.clock.monotonic())
            self.daemon.watch_tick()
            self.next_tick += POLL
        self.clock.advance(end - self.clock.monotonic())

    def until(self, found: Callable[[], bool], limit_s: float) -> float:
        """Simulated seconds until a tick makes ``found`` true (fails after ``limit_s``)."""
        start = self.clock.monotonic()
        while not found():
            if self.clock.monotonic() - start > limit_s:
                raise AssertionError(f"not found within {limit_s} simulated seconds")
            self.run(self.next_tick - self.clock.monotonic())
        return self.clock.monotonic() - start

    def close(self) -> None:
        self.daemon.stop(grace_s=0)


def _pending(entry: TableEntry, instant: str) -> bool:
    return any(p.instant.requested_time == instant for p in entry.watch.pending)


def test_an_idle_local_table_costs_at_most_60_requests_an_hour(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    _settled(tmp_path / "tables" / "t")
    sim = Sim(tmp_path)
    try:
        sim.run(HOUR)  # it was written to a while ago: it backs off to the ceiling
        entry = sim.entry("t")
        assert entry.watch.interval_s == CEILING
        before, looks = entry.requests.snapshot(), entry.watch.looks
        sim.run(HOUR)
        spent = entry.requests.since(before)
        assert entry.watch.looks - looks == HOUR / CEILING
        assert spent == {"info": 60}, "one stat of the timeline folder per look, nothing else"
    finally:
        sim.close()


def test_an_idle_s3_table_costs_at_most_60_requests_an_hour_counted_by_hts_and_the_store(
    tmp_path: Path, aws: CountedAws
) -> None:
    uri = f"s3://{aws.bucket}/budget/idle"
    writer = HoodieWriter(new_table(uri, **aws.storage_options()))
    writer.insert(rows(range(20), 1))
    writer.upsert(rows(range(0, 20, 2), 2))
    sim = Sim(
        tmp_path,
        tables={
            "discover": [],
            "static": [{"path": uri, "id": "idle", "storage_options": aws.storage_options()}],
        },
    )
    try:
        sim.run(HOUR)
        entry = sim.entry("idle")
        before, answered = entry.requests.snapshot(), aws.snapshot()
        sim.run(HOUR)
        spent, store = entry.requests.since(before), aws.snapshot() - answered
        assert spent == {"list": 60}, "one listing of the timeline folder per look"
        assert dict(store) == {"s3:ListObjects": 60}, "the emulator answered exactly those"
        exported = sim.daemon.metrics.exposition().decode()
        total = entry.requests.snapshot()["list"]
        assert f'hts_storage_requests_total{{op="list",table="idle"}} {float(total)}' in exported
    finally:
        sim.close()


def test_a_long_idle_table_reacts_within_the_ceiling_and_an_active_one_within_the_poll(
    tmp_path: Path,
) -> None:
    path = tmp_path / "tables" / "t"
    table = mor_table(path)
    _settled(path)
    sim = Sim(tmp_path)
    try:
        sim.run(HOUR + 2.5)  # long idle; now between two ticks
        entry = sim.entry("t")
        assert entry.watch.interval_s == CEILING
        writer = HoodieWriter(HoodieTable.open(str(path)))
        writer.upsert(rows(range(3), 3))
        reloads = entry.watch.reloads
        took = sim.until(lambda: entry.watch.reloads > reloads, CEILING * 1.5)
        assert took <= CEILING + POLL, f"a long-idle table noticed a commit after {took} s"
        assert entry.watch.interval_s == POLL, "a change makes the table active again"
        sim.run(32.5)  # still active (within watch.idle_after_s), between two ticks again
        ts = request_compaction(path)
        took = sim.until(lambda: _pending(entry, ts), POLL * 1.5)
        assert took <= POLL * 1.5, f"an active table noticed a requested compaction after {took} s"
        (found,) = [p for p in entry.watch.pending if p.instant.requested_time == ts]
        assert found.runnable and (found.service, found.instant.state.name) == ("compaction", "REQUESTED")
        del table
    finally:
        sim.close()


def test_the_table_detail_shows_its_storage_requests_and_watching(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from service.api import create_app

    mor_table(tmp_path / "tables" / "t")
    _settled(tmp_path / "tables" / "t")
    sim = Sim(tmp_path)
    try:
        sim.run(600)
        entry = sim.entry("t")
        with TestClient(create_app(sim.daemon, manage_lifecycle=False)) as client:
            body = client.get("/v1/tables/t").json()
        assert body["storage_requests"]["by_op"] == entry.requests.snapshot()
        assert body["storage_requests"]["total"] == entry.requests.total() > 0
        assert body["watching"] == {
            "looks": entry.watch.looks,
            "reloads": entry.watch.reloads,
            "interval_s": entry.watch.interval_s,
        }
        assert sim.daemon.storage_requests("t") == entry.requests.snapshot()
    finally:
        sim.close()


def test_a_run_counts_its_own_requests_inside_the_tables(tmp_path: Path) -> None:
    from hoodie.io.requests import counting

    path = tmp_path / "t"
    mor_table(path)
    with counting() as table_wide:
        with counting() as run:
            schedule_compaction(ServiceContext(HoodieTable.open(str(path))), CompactionPolicy())
        HoodieTable.open(str(path)).reload()
    assert run.total() > 0 and run.snapshot()["write"] >= 1, "the plan was written"
    outer = table_wide.snapshot()
    assert all(outer[op] >= n for op, n in run.snapshot().items())
    assert table_wide.total() > run.total()


@pytest.mark.parametrize(
    ("watch", "named"),
    [
        ({"poll_interval_s": 10, "max_poll_interval_s": 5}, "watch.max_poll_interval_s=5.0 is below"),
        ({"events": {"sqs_queue_url": "https://q", "safety_poll_s": 1}}, "watch.events.safety_poll_s=1.0"),
        ({"threads": 0}, "watch.threads"),
    ],
)
def test_watch_settings_that_cannot_hold_are_refused_naming_them(watch: dict[str, Any], named: str) -> None:
    from service.errors import ConfigError

    with pytest.raises(ConfigError, match=named):
        load_settings(overrides={"watch": watch}, environ={})


def test_the_poll_plan_backs_off_by_doubling_to_the_ceiling_and_snaps_back_on_change() -> None:
    from service.watcher import PollPlan, TableWatch

    plan = PollPlan(poll_interval_s=5, max_poll_interval_s=60, idle_after_s=120)
    watch, now, waits = TableWatch(), 0.0, []
    for changed in [True] + [False] * 30:
        waits.append(watch.planned(plan, now, changed))
        now += waits[-1]
    assert waits[:24] == [5.0] * 24, "active for idle_after_s (120 s) after the last change"
    assert waits[24:] == [10.0, 20.0, 40.0, 60.0, 60.0, 60.0, 60.0]
    assert watch.planned(plan, now, changed=True) == 5.0
