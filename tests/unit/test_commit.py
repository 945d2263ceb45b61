"""hoodie.transaction.commit: the one way an instant completes, on a real (small) table."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hoodie.errors import TableServiceError, WriteConflictError
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import (
    InputsPresent,
    NoConflictingCommit,
    StillInflight,
    commit,
    current_transaction,
    transaction,
)
from hoodie.transaction.lock import InProcessLockProvider, LockError
from hoodie.write.writer import HoodieWriter
from tests.tables import new_table, rows

REPO = Path(__file__).resolve().parents[2]
NEXT = "20300101000000000"


class _LosesLock(InProcessLockProvider):
    """The in-process lock, but one whose backing session is gone once ``lost`` is set."""

    lost = False

    def is_held(self) -> bool:
        return not self.lost and super().is_held()


def _inflight(path: Path) -> tuple[HoodieTable, Instant]:
    table = new_table(path, metadata_table=False)
    HoodieWriter(table).insert(rows(range(5), 1))
    tl = table.reload()
    requested = tl.create_requested(Instant("20290101000000000", Action.DELTA_COMMIT, State.REQUESTED))
    return table, tl.transition_to_inflight(requested, b"")


def _completed(table: HoodieTable, instant: Instant) -> bool:
    current = table.reload().get(instant.requested_time, instant.action)
    return current is not None and current.is_completed


def test_the_steps_run_in_order_and_upkeep_after_the_release(tmp_path: Path) -> None:
    table, inflight = _inflight(tmp_path / "t")
    lock = InProcessLockProvider(table.base_path)
    seen: list[str] = []

    def step(name: str) -> None:
        assert lock.is_held() == (name != "upkeep"), name
        seen.append(name)

    def conflict(_: ActiveTimeline) -> None:
        step("conflict")

    def inputs(_: ActiveTimeline) -> None:
        step("inputs")

    def completion(_: ActiveTimeline) -> str:
        step("completion")
        return NEXT

    done = commit(
        table,
        inflight,
        b"{}",
        completion_time=completion,
        lock=lock,
        requirements=[NoConflictingCommit(conflict), InputsPresent(inputs)],
        sync=lambda _t, _i: step("sync"),
        publish=lambda _t, _i: step("publish"),
        upkeep=lambda: step("upkeep"),
    )
    assert seen == ["conflict", "inputs", "sync", "completion", "publish", "upkeep"]
    assert done.is_completed and _completed(table, inflight)
    assert current_transaction() is None


def test_a_failed_requirement_writes_nothing_and_runs_no_upkeep(tmp_path: Path) -> None:
    table, inflight = _inflight(tmp_path / "t")
    seen: list[str] = []

    def clash(_: ActiveTimeline) -> None:
        raise WriteConflictError("concurrent commit wrote the same file group")

    with pytest.raises(WriteConflictError, match="concurrent commit"):
        commit(
            table,
            inflight,
            b"{}",
            completion_time=lambda _: NEXT,
            lock=InProcessLockProvider(table.base_path),
            requirements=[NoConflictingCommit(clash)],
            sync=lambda _t, _i: seen.append("sync"),
            upkeep=lambda: seen.append("upkeep"),
        )
    assert seen == [] and not _completed(table, inflight)


def test_still_inflight_is_always_checked_first(tmp_path: Path) -> None:
    table, inflight = _inflight(tmp_path / "t")
    table.reload().delete_instant(inflight.requested_time)  # another process rolled it back
    with pytest.raises(
        TableServiceError, match=f"{inflight.requested_time} .deltacommit. is no longer inflight"
    ):
        commit(
            table,
            inflight,
            b"{}",
            completion_time=lambda _: NEXT,
            lock=InProcessLockProvider(table.base_path),
            requirements=[InputsPresent(lambda _: pytest.fail("checked before StillInflight"))],
        )
    with pytest.raises(TableServiceError, match=f"^rollback {inflight.requested_time} is gone$"):
        commit(
            table,
            inflight,
            b"{}",
            completion_time=lambda _: NEXT,
            lock=InProcessLockProvider(table.base_path),
            requirements=[StillInflight("rollback {time} is gone")],
        )


def test_a_lost_lock_is_named_and_nothing_completes(tmp_path: Path) -> None:
    table, inflight = _inflight(tmp_path / "t")
    lock = _LosesLock(table.base_path)

    def lose(_t: ActiveTimeline, _i: Instant) -> None:
        lock.lost = True

    with pytest.raises(LockError, match=f"lost the table lock of {table.base_path} before completing"):
        commit(table, inflight, b"{}", completion_time=lambda _: NEXT, lock=lock, sync=lose)
    assert not _completed(table, inflight)


def test_commits_inside_a_transaction_share_it_and_defer_their_upkeep(tmp_path: Path) -> None:
    table, inflight = _inflight(tmp_path / "t")
    lock = _LosesLock(table.base_path)
    seen: list[str] = []
    with transaction(lock, table.base_path, 5) as txn:
        with transaction(lock, table.base_path, 5) as inner:
            assert inner is txn and current_transaction() is txn
        done = commit(
            table, inflight, b"{}", completion_time=lambda _: NEXT, upkeep=lambda: seen.append("up")
        )
        assert done.is_completed and seen == [], "upkeep waits for the release"
    assert seen == ["up"] and current_transaction() is None
    # a commit without a lock of its own checks the enclosing transaction's
    _, second = _inflight(tmp_path / "u")
    other = HoodieTable.open(str(tmp_path / "u"))
    with pytest.raises(LockError, match="lost the table lock"), transaction(lock, table.base_path, 5):
        lock.lost = True
        commit(other, second, b"{}", completion_time=lambda _: NEXT)
    assert not _completed(other, second)


def _complete_calls(path: Path) -> list[str]:
    """``<receiver>.complete(`` calls in a source file, by receiver."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "complete"
        ):
            out.append(ast.unparse(node.func.value))
    return out


def test_instants_complete_only_through_the_commit() -> None:
    """The timeline's ``complete`` is called by the commit alone; services call
    ``ServiceContext.complete``, which commits."""
    strays = []
    for package in ("hoodie", "jobs", "service"):
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == "hoodie/transaction/commit.py":
                continue
            strays += [f"{rel}: {r}.complete(" for r in _complete_calls(path) if r not in ("ctx", "mctx")]
    assert strays == []
