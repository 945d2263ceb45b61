"""``hts serve`` end to end, as operators run it: a writer requests a compaction and walks away,
the daemon completes it under the lock Apache Hudi's writers use; it survives ``kill -9``
mid-compaction; SIGTERM stops it cleanly.

ZooKeeper is Debian's server started by the tests; DynamoDB is moto's emulator of the DynamoDB
API (not AWS), started by the tests on loopback.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from service.locks import DYNAMODB, ZOOKEEPER
from tests.conftest import hudi_rs_rows
from tests.daemon.helpers import FAST_HEARTBEAT, ServeProcess, mor_table, request_compaction, wait_for
from tests.servers.dynamodb import DynamoDBEndpoint
from tests.servers.zookeeper import ZooKeeperServer
from tests.tables import data_files, hts, snapshot


def _compaction_state(path: Path, instant: str) -> str | None:
    found = HoodieTable.open(str(path)).reload().get(instant, Action.COMPACTION)
    return None if found is None else found.state.name


def _request(path: Path, options: dict[str, str]) -> str:
    """What a writer without a JVM does: leave a REQUESTED compaction and exit."""
    args = [arg for k, v in options.items() for arg in ("--option", f"{k}={v}")]
    result = hts("request", "compaction", str(path), *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("requested compaction "), result.stdout
    return result.stdout.split()[2]


def _walk_away_and_complete(tmp_path: Path, lock_options: dict[str, str], master: str) -> None:
    path = tmp_path / "tables" / "orders"
    mor_table(path, upserts=2)
    before = hudi_rs_rows(path)
    options = {**FAST_HEARTBEAT, **lock_options}
    daemon = ServeProcess(tmp_path, "d1", defaults={"options": options}, spark={"master": master}).start()
    try:
        ts = _request(path, lock_options)
        wait_for(
            lambda: _compaction_state(path, ts) == "COMPLETED", 180, "the daemon to complete the compaction"
        )
        runs = wait_for(lambda: (r := daemon.get("/v1/runs")) and r[0]["state"] != "running" and r)
        assert [(r["instant"], r["state"], r["trigger"]) for r in runs] == [(ts, "succeeded", "watch")]
        lock = daemon.get("/v1/tables/orders")["lock"]
        assert lock["state"] == "connected" and lock["provider"] != "InProcessServiceLock"
    finally:
        daemon.stop()
    assert hudi_rs_rows(path) == before, "hudi-rs reads the same snapshot"
    table = HoodieTable.open(str(path))
    assert snapshot(path) == sorted(snapshot(path))  # our reader still reads the table
    assert table.reload().get(ts, Action.COMPACTION).is_completed  # type: ignore[union-attr]


def test_zookeeper_writer_requests_daemon_completes_on_spark(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    lock = {
        "hoodie.write.lock.provider": ZOOKEEPER,
        "hoodie.write.lock.zookeeper.url": zookeeper.connect,
        "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
        "hoodie.write.lock.zookeeper.session_timeout_ms": "5000",
    }
    _walk_away_and_complete(tmp_path, lock, "local[2]")


def test_dynamodb_writer_requests_daemon_completes(tmp_path: Path, dynamodb: DynamoDBEndpoint) -> None:
    lock = {
        "hoodie.write.lock.provider": DYNAMODB,
        "hoodie.write.lock.dynamodb.table": "hudi_locks",
        "hoodie.write.lock.dynamodb.endpoint_url": dynamodb.endpoint_url,
        "hoodie.write.lock.dynamodb.region": dynamodb.region,
        "hoodie.write.lock.wait_time_ms": "3000",
    }
    _walk_away_and_complete(tmp_path, lock, "in-process")
    # The lock table exists with Hudi's schema, and no lock item stays behind once released.
    items = dynamodb.client().scan(TableName="hudi_locks")["Items"]
    assert items == []


def test_kill_9_mid_compaction_then_restart(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    before, files_before = hudi_rs_rows(path), data_files(path)
    ts = request_compaction(path)
    stall = {"HTS_CRASH_AT": "compaction.task_after_write", "HTS_CRASH_ACTION": "stall"}
    first = ServeProcess(tmp_path, "first", env=stall, replica="node").start()
    try:
        wait_for(lambda: "crash point compaction.task_after_write reached" in first.log(), 60, "the stall")
        assert _compaction_state(path, ts) == "INFLIGHT"
        assert data_files(path) - files_before, "the attempt wrote a file before it was killed"
    finally:
        first.kill()  # SIGKILL: no clean-up at all
    second = ServeProcess(tmp_path, "second", replica="node").start()  # same replica, no crash point
    try:
        wait_for(
            lambda: _compaction_state(path, ts) == "COMPLETED", 120, "the restarted daemon to complete it"
        )
        runs = wait_for(lambda: (r := second.get("/v1/runs")) and r[0]["state"] != "running" and r)
        by_state = {r["state"] for r in runs}
        assert "succeeded" in by_state and "interrupted" in by_state, runs
    finally:
        second.stop()
    assert hudi_rs_rows(path) == before
    table = HoodieTable.open(str(path))
    done = table.reload().get(ts, Action.COMPACTION)
    assert done is not None
    written = {
        f"{s.partition_path}/{s.path.rsplit('/', 1)[-1]}".lstrip("/")
        for s in table.commit_metadata(done).write_stats()
    }
    assert data_files(path) == files_before | written, (
        "no orphan files: only the completed attempt's files remain"
    )


def test_sigterm_cancels_rolls_back_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    before, files_before = snapshot(path), data_files(path)
    ts = request_compaction(path)
    slow = {"HTS_CRASH_AT": "compaction.task_after_write", "HTS_CRASH_ACTION": "pause:2"}
    daemon = ServeProcess(tmp_path, "d", env=slow, shutdown_grace_s=0.5).start()
    wait_for(lambda: "crash point compaction.task_after_write reached" in daemon.log(), 60, "the first task")
    assert daemon.terminate(timeout_s=60) == 0, daemon.log()
    assert "cancelling compaction on t" in daemon.log()
    assert _compaction_state(path, ts) == "REQUESTED", "the attempt was rolled back; the plan stays"
    assert data_files(path) == files_before and snapshot(path) == before
    with sqlite3.connect(tmp_path / "state-d" / "hts.db") as db:
        states = db.execute("SELECT state FROM runs").fetchall()
    assert states == [("cancelled",)]
