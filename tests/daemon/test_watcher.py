"""Watching a timeline: cheap when nothing changed; requested, running-elsewhere, abandoned and
failed instants told apart; failed writes only under Hudi's LAZY policy."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig
from service.watcher import TableWatch, lazy_failed_writes, look
from tests.daemon.helpers import mor_table, request_compaction
from tests.tables import Killed, KilledWriter, rows

BEAT = HeartbeatConfig(interval_ms=100, tolerable_misses=2)


def _age(path: Path, seconds: float) -> None:
    """Make every timeline file and heartbeat look ``seconds`` older."""
    then = time.time() - seconds
    for f in (path / ".hoodie").rglob("*"):
        if f.is_file() or f.is_dir():
            os.utime(f, (then, then))


def test_only_a_changed_listing_reloads_the_timeline(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = mor_table(path)
    _age(path, 5)  # a settled folder: its modification time can be trusted
    watch = TableWatch()
    assert look(table, watch, BEAT, lazy=False) is True and watch.reloads == 1
    for _ in range(5):
        assert look(table, watch, BEAT, lazy=False) is False
    assert watch.reloads == 1 and watch.looks == 6 and watch.pending == []
    ts = request_compaction(path)
    assert look(table, watch, BEAT, lazy=False) is True and watch.reloads == 2
    (found,) = watch.pending
    assert (found.service, found.instant.requested_time, found.runnable) == ("compaction", ts, True)
    assert found.age_s >= 0


def test_running_elsewhere_and_abandoned_attempts(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = mor_table(path)
    ts = request_compaction(path)
    tl = table.reload()
    tl.transition_to_inflight(Instant(ts, Action.COMPACTION, State.REQUESTED))
    beat = Heartbeat(table.fileio, table.paths, ts, BEAT).start()
    try:
        watch = TableWatch()
        look(table, watch, BEAT, lazy=False)
        (p,) = watch.pending
        assert p.beating and not p.abandoned and not p.runnable, "another executor is on it"
    finally:
        beat.stop(delete=False)
    _age(path, 5)  # the heartbeat and the inflight file are now older than interval x misses
    watch = TableWatch()  # (a real inflight file keeps the time it was written: start afresh)
    look(table, watch, BEAT, lazy=False)
    (p,) = watch.pending
    assert p.abandoned and p.runnable and p.as_json()["abandoned"] is True


@pytest.mark.parametrize("lazy", [False, True])
def test_failed_writes_are_rolled_back_only_under_the_lazy_policy(tmp_path: Path, lazy: bool) -> None:
    path = tmp_path / "t"
    mor_table(path)
    with pytest.raises(Killed):
        KilledWriter(HoodieTable.open(str(path))).upsert(rows([1, 2], 9))
    _age(path, 5)
    options = {"hoodie.clean.failed.writes.policy": "LAZY"} if lazy else {}
    assert lazy_failed_writes(options) is lazy
    watch = TableWatch()
    look(HoodieTable.open(str(path)), watch, BEAT, lazy=lazy_failed_writes(options))
    if not lazy:
        assert watch.pending == [], "EAGER writers keep no heartbeat: a missing one proves nothing"
        return
    (p,) = watch.pending
    assert p.service == "rollback" and p.abandoned and p.runnable
    assert p.instant.action is Action.DELTA_COMMIT


def test_a_requested_indexing_is_runnable(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = mor_table(path)
    tl = table.reload()
    tl.create_requested(Instant("20990101000000000", Action.INDEXING, State.REQUESTED), b"")
    watch = TableWatch()
    look(table, watch, BEAT, lazy=False)
    (p,) = watch.pending
    assert p.service == "indexing" and p.runnable and p.blocked is None
