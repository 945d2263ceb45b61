"""Claiming an instant for execution: one executor per plan, cancellation undone, the lock checked
before completing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from hoodie.errors import InstantBusyError
from hoodie.services.base import JobCancelled, LocalRunner, ServiceContext, Task, TaskResult
from hoodie.services.claim import claim_instant
from hoodie.services.clustering import ClusteringPolicy, schedule_clustering
from hoodie.services.clustering_executor import execute_clustering
from hoodie.services.compaction import execute_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.heartbeat import HeartbeatConfig, is_heartbeat_expired
from hoodie.transaction.lock import InProcessLockProvider, LockError
from hoodie.write.writer import HoodieWriter
from tests.tables import data_files, new_table, rows, snapshot, table_with_requested_compaction


def test_a_claimed_instant_is_refused_to_every_other_executor(tmp_path: Path) -> None:
    path = tmp_path / "t"
    ts = table_with_requested_compaction(path)
    first = ServiceContext(HoodieTable.open(str(path)))
    with claim_instant(first, ts, Action.COMPACTION, "compaction") as claim:
        assert claim.instant.is_requested
        table = HoodieTable.open(str(path))
        assert not is_heartbeat_expired(table.fileio, table.paths, ts, HeartbeatConfig())
        other = ServiceContext(HoodieTable.open(str(path)))
        with pytest.raises(InstantBusyError, match=f"compaction {ts} .* another process"):
            execute_compaction(other, ts, LocalRunner())
        # Nothing happened to the plan: still REQUESTED, nothing written.
        assert HoodieTable.open(str(path)).reload().get(ts, Action.COMPACTION).is_requested  # type: ignore[union-attr]
    # Released: the heartbeat is gone and the next executor completes the plan.
    before = snapshot(path)
    done = execute_compaction(ServiceContext(HoodieTable.open(str(path))), ts, LocalRunner())
    assert done.instant.is_completed and snapshot(path) == before


class _CancelAfterFirstTask:
    """A runner that runs one task, then is cancelled (as an operator's cancel would land mid-job)."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.inner = LocalRunner(cancel=self.cancel)

    def run(self, fn: Any, tasks: list[Task], description: str) -> list[TaskResult]:
        def first_then_cancel(task: Task) -> TaskResult:
            result: TaskResult = fn(task)
            self.cancel.set()
            return result

        return self.inner.run(first_then_cancel, tasks, description)


def test_a_cancelled_compaction_is_rolled_back_to_its_requested_plan(tmp_path: Path) -> None:
    path = tmp_path / "t"
    ts = table_with_requested_compaction(path)
    before, files = snapshot(path), data_files(path)
    ctx = ServiceContext(HoodieTable.open(str(path)))
    with pytest.raises(JobCancelled, match="cancelled after 1 of"):
        execute_compaction(ctx, ts, _CancelAfterFirstTask())
    table = HoodieTable.open(str(path))
    instant = table.reload().get(ts, Action.COMPACTION)
    assert instant is not None and instant.is_requested, "the plan is kept, the attempt undone"
    assert data_files(path) == files, "the file the cancelled attempt wrote was deleted"
    assert snapshot(path) == before
    assert is_heartbeat_expired(table.fileio, table.paths, ts, HeartbeatConfig()), "claim released"
    execute_compaction(ServiceContext(table), ts, LocalRunner())
    assert snapshot(path) == before


def test_a_cancelled_clustering_is_rolled_back_too(tmp_path: Path) -> None:
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path))
    for b in range(3):
        writer.insert(rows(range(b * 10, b * 10 + 10), 1))
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_clustering(ctx, ClusteringPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    before, files = snapshot(path), data_files(path)
    with pytest.raises(JobCancelled):
        execute_clustering(ctx, scheduled.instant_time, _CancelAfterFirstTask())
    assert data_files(path) == files and snapshot(path) == before
    pending = HoodieTable.open(str(path)).reload().get(scheduled.instant_time, Action.REPLACE_COMMIT)
    assert pending is not None and pending.is_requested


class _LosesLockBeforeCompleting(InProcessLockProvider):
    """A lock whose backing session expires while the completing write waits (see ZooKeeper)."""

    def __init__(self, base_path: str) -> None:
        super().__init__(base_path)
        self.lost = False

    def is_held(self) -> bool:
        return not self.lost and super().is_held()


def test_no_completion_without_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "t"
    ts = table_with_requested_compaction(path)
    table = HoodieTable.open(str(path))
    lock = _LosesLockBeforeCompleting(table.base_path)
    ctx = ServiceContext(table, lock=lock)

    class LoseLockRunner(LocalRunner):
        def run(self, fn: Any, tasks: Any, description: str) -> list[TaskResult]:
            out = super().run(fn, tasks, description)
            lock.lost = True
            return out

    with pytest.raises(LockError, match="lost the table lock"):
        execute_compaction(ctx, ts, LoseLockRunner())
    instant = HoodieTable.open(str(path)).reload().get(ts, Action.COMPACTION)
    assert instant is not None and instant.is_inflight, "not completed without the lock"
