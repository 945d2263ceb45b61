"""Instants, both timeline layouts, loading fixture timelines, transitions and instant times."""

from __future__ import annotations

import datetime as dt
import os
import threading
from pathlib import Path

import pytest

from hoodie.errors import InstantExistsError, TimelineError
from hoodie.io import LocalFileIO
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State, instant_file_name, parse_instant_file_name
from hoodie.timeline.instant_time import (
    format_instant_time,
    instant_to_epoch_millis,
    normalize,
    parse_instant_time,
)
from hoodie.timeline.layout import TablePaths
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.lock import InProcessLockProvider, LockError
from hoodie.transaction.time_generator import WaitBasedTimeGenerator
from tests.conftest import fixture_names, fixture_path


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_instant_file_name_round_trips(fixture_root: Path, name: str) -> None:
    table = HoodieTable.open(str(fixture_path(fixture_root, name)))
    folder = Path(table.paths.timeline)
    names = [p.name for p in folder.iterdir() if p.is_file() and p.name != "hoodie.properties"]
    for file_name in names:
        instant = parse_instant_file_name(file_name, table.paths.layout)
        assert instant is not None, file_name
        assert instant_file_name(instant, table.paths.layout) == file_name


@pytest.mark.parametrize(
    ("instant", "layout1", "layout2"),
    [
        (Instant("100", Action.COMMIT, State.INFLIGHT), "100.inflight", "100.inflight"),
        (Instant("100", Action.COMMIT, State.REQUESTED), "100.commit.requested", "100.commit.requested"),
        (Instant("100", Action.COMPACTION, State.COMPLETED, "200"), "100.commit", "100_200.commit"),
        (
            Instant("100", Action.LOG_COMPACTION, State.COMPLETED, "200"),
            "100.deltacommit",
            "100_200.deltacommit",
        ),
        (
            Instant("100", Action.CLUSTERING, State.INFLIGHT),
            "100.clustering.inflight",
            "100.clustering.inflight",
        ),
        (
            Instant("100", Action.CLUSTERING, State.COMPLETED, "200"),
            "100.replacecommit",
            "100_200.replacecommit",
        ),
        (
            Instant("100", Action.SAVEPOINT, State.INFLIGHT),
            "100.savepoint.inflight",
            "100.savepoint.inflight",
        ),
        (Instant("100", Action.INDEXING, State.COMPLETED, "200"), "100.indexing", "100_200.indexing"),
    ],
)
def test_file_names_per_layout(instant: Instant, layout1: str, layout2: str) -> None:
    assert instant_file_name(instant, 1) == layout1
    assert instant_file_name(instant, 2) == layout2


def test_non_instant_names_are_ignored() -> None:
    for name in ("hoodie.properties", "archived", "100.commit.tmp", "abc.commit", "100.unknownaction"):
        assert parse_instant_file_name(name, 2) is None


def test_second_granularity_instants_sort_at_the_end_of_their_second() -> None:
    assert normalize("20240101120000") == "20240101120000999"
    older = Instant("20240101120000", Action.COMMIT, State.COMPLETED)
    newer = Instant("20240101120000500", Action.COMMIT, State.COMPLETED)
    assert sorted([older, newer])[0] is newer


def test_fixture_timeline_collapses_states_and_reads_completion_times(fixture_root: Path) -> None:
    table = HoodieTable.open(
        str(fixture_path(fixture_root, "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"))
    )
    tl = table.timeline
    assert len(tl) == 8
    assert all(i.is_completed for i in tl)
    compaction = tl.get("20251220210129235")
    assert compaction is not None and compaction.action is Action.COMMIT
    assert compaction.completion_time == "20251220210129883"
    assert tl.actions(Action.DELTA_COMMIT).requested_times()[0] == "20251220210108078"
    assert tl.states_of("20251220210129235") == (State.REQUESTED, State.INFLIGHT, State.COMPLETED)


@pytest.mark.parametrize("layout", [1, 2])
def test_transitions_create_files_and_never_overwrite(tmp_path: Path, layout: int) -> None:
    io = LocalFileIO()
    paths = TablePaths(str(tmp_path), layout)
    os.makedirs(paths.timeline)
    tl = ActiveTimeline.load(io, paths, dt.UTC)
    req = tl.create_requested(Instant("20250101000000000", Action.COMPACTION, State.REQUESTED), b"plan")
    with pytest.raises(InstantExistsError):
        tl.reload().create_requested(req, b"again")
    inflight = tl.transition_to_inflight(req)
    with pytest.raises(TimelineError, match="not REQUESTED"):
        tl.transition_to_inflight(req)
    done = tl.complete(inflight, b"meta", "20250101000001000")
    assert done.action is Action.COMMIT
    with pytest.raises(TimelineError, match="not INFLIGHT"):
        tl.complete(inflight, b"meta", "20250101000002000")
    files = sorted(p.name for p in Path(paths.timeline).iterdir())
    expected_done = (
        "20250101000000000_20250101000001000.commit" if layout == 2 else "20250101000000000.commit"
    )
    assert files == sorted(
        ["20250101000000000.compaction.requested", "20250101000000000.compaction.inflight", expected_done]
    )
    assert tl.reload().read_state("20250101000000000", State.REQUESTED) == b"plan"
    with pytest.raises(TimelineError, match="refusing to delete completed"):
        tl.delete_instant("20250101000000000")


def test_completing_twice_with_another_completion_time_is_refused(tmp_path: Path) -> None:
    io = LocalFileIO()
    paths = TablePaths(str(tmp_path), 2)
    os.makedirs(paths.timeline)
    tl = ActiveTimeline.load(io, paths, dt.UTC)
    req = tl.create_requested(Instant("20250101000000000", Action.DELTA_COMMIT, State.REQUESTED))
    inflight = tl.transition_to_inflight(req)
    tl.complete(inflight, b"", "20250101000001000")
    # Another process that still holds the stale inflight instant must not complete it again.
    with pytest.raises(TimelineError):
        tl.complete(inflight, b"", "20250101000009000")


def test_instant_time_round_trip_in_a_timezone() -> None:
    tz = dt.timezone(dt.timedelta(hours=-6))
    moment = dt.datetime(2026, 3, 7, 19, 58, 26, 704000, tzinfo=dt.UTC)
    ts = format_instant_time(moment, tz)
    assert ts == "20260307135826704"
    assert parse_instant_time(ts, tz) == moment
    assert instant_to_epoch_millis("20260307162649840", dt.timezone(dt.timedelta(hours=-6))) == 1772922409840


def test_time_generator_waits_under_the_lock_and_is_monotonic() -> None:
    lock = InProcessLockProvider("/tables/t1")
    gen = WaitBasedTimeGenerator(
        lock, dt.UTC, max_expected_clock_skew_ms=20, clock_ms=lambda: 1_700_000_000_000
    )
    first = gen.new_instant_time()
    second = gen.new_instant_time()
    assert second > first  # a stuck clock still yields strictly increasing times
    assert not lock.is_held()


def test_lock_timeout_names_the_table() -> None:
    lock = InProcessLockProvider("/tables/t2")
    holder_ready = threading.Event()
    release = threading.Event()

    def hold() -> None:
        lock.acquire()
        holder_ready.set()
        release.wait(5)
        lock.release()

    t = threading.Thread(target=hold)
    t.start()
    holder_ready.wait(5)
    other = InProcessLockProvider("/tables/t2")
    with pytest.raises(LockError, match="/tables/t2"):
        other.acquire(timeout_s=0.05)
    release.set()
    t.join()
    other.acquire(timeout_s=1)
    other.release()


def test_a_savepoint_shares_the_requested_time_of_its_commit(tmp_path: Path) -> None:
    io = LocalFileIO()
    paths = TablePaths(str(tmp_path), 2)
    os.makedirs(paths.timeline)
    tl = ActiveTimeline.load(io, paths, dt.UTC)
    ts = "20250101000000000"
    commit = tl.transition_to_inflight(tl.create_requested(Instant(ts, Action.COMMIT, State.REQUESTED)))
    tl.complete(commit, b"commit", "20250101000001000")
    savepoint = tl.create_inflight(Instant(ts, Action.SAVEPOINT, State.INFLIGHT))
    tl.complete(savepoint, b"savepoint", "20250101000002000")
    with pytest.raises(InstantExistsError):
        tl.create_inflight(Instant(ts, Action.SAVEPOINT, State.INFLIGHT))
    fresh = tl.reload()
    assert len(fresh) == 2
    got_commit = fresh.get(ts)
    got_savepoint = fresh.get(ts, Action.SAVEPOINT)
    assert got_commit is not None and got_commit.action is Action.COMMIT
    assert got_savepoint is not None and got_savepoint.completion_time == "20250101000002000"
    assert fresh.read_state(ts, State.COMPLETED) == b"commit"
    assert fresh.read_state(ts, State.COMPLETED, Action.SAVEPOINT) == b"savepoint"
    assert fresh.states_of(ts, Action.SAVEPOINT) == (State.INFLIGHT, State.COMPLETED)
