"""The daemon's injectable clock: TrueTime reads it, waits on it, and still never issues a time twice
or backwards when the clock steps back."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from service.clock import SimulatedClock
from service.daemon import Daemon
from service.settings import load_settings
from tests.daemon.helpers import mor_table


def _daemon(root: Path, clock: SimulatedClock) -> Daemon:
    data = {
        "tables": {"discover": [str(root / "tables")]},
        "spark": {"master": "in-process"},
        "state_dir": str(root / "state"),
        "truetime": {"max_expected_clock_skew_ms": 200},
    }
    daemon = Daemon(load_settings(overrides=data, environ={}), replica_id="clock", clock=clock)
    daemon.discover()
    daemon.watch_tick()
    return daemon


def _millis(instant: str) -> int:
    parsed = dt.datetime.strptime(instant, "%Y%m%d%H%M%S%f").replace(tzinfo=dt.UTC)
    return int(parsed.timestamp() * 1000)


def test_truetime_reads_and_waits_on_the_daemons_clock_and_never_goes_back(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t", upserts=0)
    start = float(int(time.time()) + 86_400)  # a day ahead of the machine: only the simulated clock says so
    clock = SimulatedClock(start)
    daemon = _daemon(tmp_path, clock)
    try:
        waited = time.monotonic()
        first = daemon.truetime("t")
        assert time.monotonic() - waited < 0.2, "the 200 ms skew wait is simulated"
        assert _millis(first) == int(start * 1000), "the time read before the wait, from the daemon's clock"
        assert clock.time() == start + 0.2
        second = daemon.truetime("t")
        assert _millis(second) == int((start + 0.2) * 1000) > _millis(first)
    finally:
        daemon.stop(grace_s=0)
    behind = SimulatedClock(start - 3600)  # a restart with the clock an hour back
    again = _daemon(tmp_path, behind)
    try:
        third = again.truetime("t")
        assert _millis(third) == _millis(second) + 1, "past the high-water mark, not the clock"
    finally:
        again.stop(grace_s=0)
