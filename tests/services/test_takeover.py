"""An attempt taken over by another executor never completes and removes only its own files.

Executor A claims a table service and writes; its heartbeat stops (as on a loaded machine), so
executor B finds it expired, rolls A's attempt back and runs the plan itself. A, still alive, then
tries to complete. Both executors run here for real, in one process, on one table.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from hoodie.errors import InstantTakenOverError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.log_file import LogFile
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    ServiceContext,
    Task,
    TaskFunction,
    TaskResult,
)
from hoodie.services.claim import NotTakenOver
from hoodie.services.clustering import ClusteringPolicy, schedule_clustering
from hoodie.services.clustering_executor import execute_clustering
from hoodie.services.compaction import execute_compaction
from hoodie.services.logcompaction import LogCompactionPolicy, execute_log_compaction, schedule_log_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.heartbeat import HeartbeatConfig, heartbeat_path, is_heartbeat_expired
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import data_files, new_table, rows, table_with_requested_compaction

META = ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key", "_hoodie_partition_path")
Execute = Callable[[ServiceContext, str, Runner], ExecutionResult]


def _model() -> list[str]:
    """The rows the table holds: k0..k19 written at ts 1, the even ones updated at ts 2."""
    latest = {i: 2 if i % 2 == 0 else 1 for i in range(20)}
    return sorted(
        str({"id": f"k{i}", "ts": ts, "v": f"v{i}@{ts}", "p": f"p{i % 3}"}) for i, ts in latest.items()
    )


def _rows_read_by_hudi_rs(path: Path) -> list[str]:
    return hudi_rs_rows(path, drop=(*META, "_hoodie_file_name"))


def _clustering_table(path: Path) -> str:
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(0, 10), 1))
    writer.insert(rows(range(10, 20), 1))
    writer.upsert(rows(range(0, 20, 2), 2))
    scheduled = schedule_clustering(ServiceContext(HoodieTable.open(str(path))), ClusteringPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return scheduled.instant_time


SERVICES: dict[str, tuple[Callable[[Path], str], Execute]] = {
    "compaction": (table_with_requested_compaction, execute_compaction),
    "clustering": (_clustering_table, execute_clustering),
}


def _tokens(path: Path) -> dict[str, str]:
    """Data file -> the stage id of its write token (an attempt id for table-service files)."""
    out = {}
    for name in data_files(path):
        parsed = BaseFile.parse(name.rsplit("/", 1)[-1]) or LogFile.parse(name.rsplit("/", 1)[-1])
        if parsed is not None and parsed.write_token is not None:
            out[name] = parsed.write_token.split("-")[1]
    return out


class Pausing:
    """A in-process runner that runs ``fn`` on the first task, then calls ``meanwhile`` (what the other
    executor does while this one is stalled), then runs the remaining tasks."""

    def __init__(self, meanwhile: Callable[[], None]) -> None:
        self.meanwhile = meanwhile
        self.cancel = threading.Event()

    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
        out = [fn(tasks[0])]
        self.meanwhile()
        out += LocalRunner(cancel=self.cancel).run(fn, tasks[1:], description)
        return out


def _age_heartbeat(table: HoodieTable, ts: str) -> None:
    """Make the heartbeat file of ``ts`` ten minutes old, as a heartbeat nobody touched for that long."""
    old = time.time() - 600
    os.utime(heartbeat_path(table.paths, ts), (old, old))
    assert is_heartbeat_expired(table.fileio, table.paths, ts, HeartbeatConfig())


def _stall(ctx: ServiceContext, ts: str) -> None:
    """A's heartbeat stops beating and its file ages, as a starved heartbeat thread's does."""
    check = ctx.claim_checks[ts]
    assert isinstance(check, NotTakenOver)
    check.claim.heartbeat.stop(delete=False)
    _age_heartbeat(ctx.table, ts)


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_taken_over_attempt_is_refused_after_the_other_executor_completed(
    tmp_path: Path, service: str
) -> None:
    path = tmp_path / "t"
    make, execute = SERVICES[service]
    ts = make(path)
    assert _rows_read_by_hudi_rs(path) == _model()
    a = ServiceContext(
        HoodieTable.open(str(path))
    )  # A keeps the default heartbeat: it never sees itself late
    b_done: list[ExecutionResult] = []
    a_tokens: set[str] = set()

    def b_takes_over() -> None:
        a_tokens.update(t for f, t in _tokens(path).items() if ts in f)
        _stall(a, ts)
        b = ServiceContext(HoodieTable.open(str(path)))
        b_done.append(execute(b, ts, LocalRunner()))

    with pytest.raises(
        InstantTakenOverError, match=rf"{service} {ts} on .* was taken over: rollback (\d+)"
    ) as e:
        execute(a, ts, Pausing(b_takes_over))
    table = HoodieTable.open(str(path))
    (done,) = b_done
    assert done.instant.is_completed and table.reload().get(ts) == done.instant, "B's completion is intact"
    (rollback,) = table.reload().actions(Action.ROLLBACK)
    assert e.value.rollback == rollback.requested_time and e.value.instant_time == ts
    assert len(a_tokens) == 1, "A's first task wrote under one attempt id"
    tokens = _tokens(path)
    assert not [f for f, t in tokens.items() if t in a_tokens], "every file A wrote is gone"
    written = {s.path for s in table.commit_metadata(done.instant).write_stats()}
    assert written and all(Path(path, f).exists() for f in written), "B's files are intact"
    assert {f for f in data_files(path) if ts in f} == written, "nothing else carries the instant"
    assert not any((path / ".hoodie" / ".temp").rglob("*.marker.*")), "no marker left behind"
    assert _rows_read_by_hudi_rs(path) == _model()


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_taken_over_attempt_is_refused_while_the_other_executor_still_runs(
    tmp_path: Path, service: str
) -> None:
    path = tmp_path / "t"
    make, execute = SERVICES[service]
    ts = make(path)
    a = ServiceContext(HoodieTable.open(str(path)))
    b_inflight, a_refused = threading.Event(), threading.Event()
    b_done: list[ExecutionResult] = []
    b_files: set[str] = set()

    class _BWaitsForA:
        cancel = threading.Event()

        def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
            out = LocalRunner().run(fn, tasks, description)
            b_files.update(data_files(path))
            b_inflight.set()
            assert a_refused.wait(60)
            return out

    def b() -> None:
        b_done.append(execute(ServiceContext(HoodieTable.open(str(path))), ts, _BWaitsForA()))

    other = threading.Thread(target=b)

    def b_takes_over() -> None:
        _stall(a, ts)
        other.start()
        assert b_inflight.wait(60)

    try:
        with pytest.raises(InstantTakenOverError, match=rf"{service} {ts} .* was taken over") as e:
            execute(a, ts, Pausing(b_takes_over))
        table = HoodieTable.open(str(path))
        current = table.reload().get(ts)
        assert current is not None and current.is_inflight, "B's attempt is still running"
        (rollback,) = table.reload().actions(Action.ROLLBACK)
        assert e.value.rollback == rollback.requested_time
        assert data_files(path) == b_files, "A's files are gone, B's are intact"
        assert not is_heartbeat_expired(table.fileio, table.paths, ts, HeartbeatConfig()), "B still beats"
    finally:
        a_refused.set()
        other.join(60)
    (done,) = b_done
    table = HoodieTable.open(str(path))
    assert done.instant.is_completed and table.reload().get(ts) == done.instant
    written = {s.path for s in table.commit_metadata(done.instant).write_stats()}
    assert {f for f in data_files(path) if ts in f} == written
    assert _rows_read_by_hudi_rs(path) == _model()


def test_a_log_compaction_rolled_back_by_another_executor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(20), 1))
    for ts in (2, 3):
        writer.upsert(rows(range(0, 20, 2), ts))
    ctx = ServiceContext(HoodieTable.open(str(path)), options={"hoodie.log.compaction.blocks.threshold": "2"})
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time
    before = _rows_read_by_hudi_rs(path)
    files = data_files(path)
    a = ServiceContext(HoodieTable.open(str(path)))
    rolled_back: list[ExecutionResult] = []

    def b_takes_over() -> None:
        _stall(a, ts)  # B finds the abandoned attempt and, as Hudi does, rolls it back with its plan
        rolled_back.append(
            execute_log_compaction(ServiceContext(HoodieTable.open(str(path))), ts, LocalRunner())
        )

    with pytest.raises(InstantTakenOverError, match=rf"log compaction {ts} .* taken over: rollback") as e:
        execute_log_compaction(a, ts, Pausing(b_takes_over))
    (done,) = rolled_back
    assert done.instant.action is Action.ROLLBACK and e.value.rollback == done.instant.requested_time
    assert HoodieTable.open(str(path)).reload().get(ts) is None, "plan and attempt are gone"
    assert data_files(path) == files, "A's log files are gone, nothing else was touched"
    assert _rows_read_by_hudi_rs(path) == before


def test_a_late_heartbeat_stops_the_attempt_between_tasks(tmp_path: Path) -> None:
    """The heartbeat thread is starved (the worker thread keeps the interpreter for a whole second,
    as a loaded machine would): the beat comes later than the expiry, so the attempt stops before
    its next task, removes what it wrote and leaves the instant to whoever claims it next."""
    path = tmp_path / "t"
    ts = table_with_requested_compaction(path)
    files = data_files(path)
    beat = HeartbeatConfig(interval_ms=40, tolerable_misses=2)
    a = ServiceContext(HoodieTable.open(str(path)), heartbeat=beat)
    ran: list[int] = []

    class _Starving:
        cancel = threading.Event()

        def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
            def starve(task: Task) -> TaskResult:
                out = fn(task)
                ran.append(1)
                if len(ran) == 1:
                    previous = sys.getswitchinterval()
                    sys.setswitchinterval(1.0)
                    try:
                        deadline = time.monotonic() + 0.5
                        while time.monotonic() < deadline:
                            pass
                    finally:
                        sys.setswitchinterval(previous)
                    time.sleep(0.2)  # the heartbeat thread runs now, finds itself late and cancels
                return out

            return LocalRunner(cancel=self.cancel).run(starve, tasks, description)

    with pytest.raises(
        InstantTakenOverError, match=rf"compaction {ts} .* heartbeat was \d+ ms later than"
    ) as e:
        execute_compaction(a, ts, _Starving())
    assert e.value.rollback is None
    assert len(ran) == 1, "the attempt stopped before its second task"
    assert data_files(path) == files, "the file it wrote is gone"
    table = HoodieTable.open(str(path))
    current = table.reload().get(ts)
    assert current is not None and current.is_inflight, "left for the next executor to roll back"
    assert table.fileio.exists(heartbeat_path(table.paths, ts)), "the heartbeat file is left to expire"
    _age_heartbeat(table, ts)
    done = execute_compaction(ServiceContext(table), ts, LocalRunner())
    assert done.instant.is_completed
    assert _rows_read_by_hudi_rs(path) == _model()


def test_the_completing_executor_removes_what_a_frozen_attempt_wrote_after_the_takeover(
    tmp_path: Path,
) -> None:
    """A writes a file after B rolled it back, then freezes (alive, but it may never run again):
    B's completion removes that file (it is marked, but another attempt's), keeps its own."""
    path = tmp_path / "t"
    ts = table_with_requested_compaction(path)
    a = ServiceContext(HoodieTable.open(str(path)))
    a_stalled, b_inflight, a_wrote, a_may_go_on = (threading.Event() for _ in range(4))
    a_error: list[BaseException] = []
    a_files: set[str] = set()

    class _AFreezes:
        cancel = threading.Event()

        def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
            out = [fn(tasks[0])]
            _stall(a, ts)
            a_stalled.set()
            assert b_inflight.wait(60)
            out.append(fn(tasks[1]))  # after B's rollback: only its marker tells of it
            a_files.update(f for f in data_files(path) if ts in f and Path(path, f).exists())
            a_wrote.set()
            assert a_may_go_on.wait(60)
            out += [fn(t) for t in tasks[2:]]
            return out

    class _BWaits:
        cancel = threading.Event()

        def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
            out = LocalRunner().run(fn, tasks, description)
            b_inflight.set()
            assert a_wrote.wait(60)
            return out

    def run_a() -> None:
        try:
            execute_compaction(a, ts, _AFreezes())
        except BaseException as e:  # handed to the test thread
            a_error.append(e)

    frozen = threading.Thread(target=run_a)
    frozen.start()
    try:
        assert a_stalled.wait(60)
        done = execute_compaction(ServiceContext(HoodieTable.open(str(path))), ts, _BWaits())
        table = HoodieTable.open(str(path))
        written = {s.path for s in table.commit_metadata(done.instant).write_stats()}
        strays = a_files - written
        assert len(strays) == 1, "A's second file was there when B completed"
        assert {f for f in data_files(path) if ts in f} == written, "B removed it, kept its own"
        assert not (path / ".hoodie" / ".temp" / ts).exists()
        assert _rows_read_by_hudi_rs(path) == _model()
    finally:
        a_may_go_on.set()
        frozen.join(60)
    (error,) = a_error
    assert isinstance(error, InstantTakenOverError) and error.instant_time == ts
    assert {f for f in data_files(path) if ts in f} == written, "A, thawed, removed what it wrote last"
    assert _rows_read_by_hudi_rs(path) == _model()
