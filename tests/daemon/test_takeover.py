"""A daemon run whose instant another executor takes over: recorded as cancelled (taken over), not
retried, not counted towards auto-suspend, the instant not given up on; the other executor's
completion stands and hudi-rs reads the table as before."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hoodie.services import compaction
from hoodie.services.base import LocalRunner, ServiceContext, Task, TaskResult
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.heartbeat import heartbeat_path
from tests.conftest import hudi_rs_rows
from tests.daemon.helpers import mor_table, request_compaction, running_daemon, wait_for

# The daemon beats once a minute: within the test only the file's age (set below) makes it expired.
HEARTBEAT = {
    "hoodie.client.heartbeat.interval_in_ms": "60000",
    "hoodie.client.heartbeat.tolerable.misses": "2",
}


def test_a_run_taken_over_by_another_executor_is_cancelled_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    before = hudi_rs_rows(path, drop=("_hoodie_file_name", "_hoodie_commit_time", "_hoodie_commit_seqno"))
    ts = request_compaction(path)
    real = compaction.compact_file_group
    other: list[str] = []

    def first_task_then_another_executor(task: Task) -> TaskResult:
        out = real(task)
        if not other:  # the daemon's attempt stalls here; another executor finds its heartbeat old
            other.append("running")
            table = HoodieTable.open(str(path))
            old = time.time() - 600
            os.utime(heartbeat_path(table.paths, ts), (old, old))
            done = compaction.execute_compaction(ServiceContext(table), ts, LocalRunner())
            other[0] = done.instant.requested_time
        return out

    monkeypatch.setattr(compaction, "compact_file_group", first_task_then_another_executor)
    with running_daemon(tmp_path, defaults={"options": HEARTBEAT}) as (daemon, client):
        run = wait_for(
            lambda: next(
                (r for r in client.get("/v1/runs").json() if r["state"] not in ("queued", "running")), None
            ),
            60,
            "the daemon's run",
        )
        assert other == [ts], "the other executor completed the instant"
        table = HoodieTable.open(str(path))
        (rollback,) = table.reload().actions(Action.ROLLBACK)
        assert run["instant"] == ts and run["state"] == "cancelled", run
        assert (
            run["details"]["reason"] == "taken over" and run["details"]["rollback"] == rollback.requested_time
        )
        assert f"InstantTakenOverError: compaction {ts} on " in run["error"]
        assert f"rollback {rollback.requested_time}" in run["error"]
        assert daemon.gave_up == {}, "the instant is not given up on"
        streak = daemon.streaks.get(("t", "compaction"))
        assert streak is None or streak.consecutive_failures == 0, "no failure towards auto-suspend"
        looks = daemon.registry.get("t").watch.looks  # type: ignore[union-attr]
        wait_for(lambda: daemon.registry.get("t").watch.looks >= looks + 3, what="three more watch ticks")  # type: ignore[union-attr]
        assert [r["id"] for r in client.get("/v1/runs").json()] == [run["id"]], "nothing ran again"
        metrics = client.get("/metrics").text
        assert 'hts_runs_total{outcome="cancelled",service="compaction",table="t"} 1.0' in metrics
    done = HoodieTable.open(str(path)).reload().get(ts)
    assert done is not None and done.is_completed and done.action is Action.COMMIT
    written = {s.path for s in HoodieTable.open(str(path)).commit_metadata(done).write_stats()}
    on_disk = {str(p.relative_to(path)) for p in path.rglob(f"*_{ts}.parquet")}
    assert on_disk == written, "only the other executor's files carry the instant"
    assert (
        hudi_rs_rows(path, drop=("_hoodie_file_name", "_hoodie_commit_time", "_hoodie_commit_seqno"))
        == before
    )
