"""Two daemons on the same tables (a real ZooKeeper for the lock): every instant runs exactly once;
a lost ZooKeeper session never lets an instant complete without the lock; a suspended
connection pauses new work."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import execute_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.lock import LockError
from hoodie.write.writer import HoodieWriter
from service.locks import ZOOKEEPER
from service.locks.zookeeper import ZookeeperLockProvider
from service.locks.zookeeper_client import ZookeeperClients
from tests.conftest import hudi_rs_rows
from tests.daemon.helpers import (
    FAST_HEARTBEAT,
    ServeProcess,
    mor_table,
    request_compaction,
    running_daemon,
    wait_for,
)
from tests.servers.zookeeper import ZooKeeperServer
from tests.tables import new_table, rows


def _zk_options(zookeeper: ZooKeeperServer) -> dict[str, str]:
    return {
        "hoodie.write.lock.provider": ZOOKEEPER,
        "hoodie.write.lock.zookeeper.url": zookeeper.connect,
        "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
        "hoodie.write.lock.zookeeper.session_timeout_ms": "4000",
    }


def _table_with_compactions(path: Path, partitions: int) -> list[str]:
    """One compaction per partition, each planned while the others are pending."""
    table = new_table(path)
    writer = HoodieWriter(table)
    instants = []
    for p in range(partitions):
        ids = [i for i in range(30) if i % 3 == p]
        writer.insert(rows(ids, 1))
        writer.upsert(rows(ids[::2], 2))
        instants.append(request_compaction(path))
    return instants


def test_two_daemons_execute_every_instant_exactly_once(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    tables = tmp_path / "tables"
    requested: dict[str, list[str]] = {}
    for n in range(20):
        requested[f"t{n:02d}"] = _table_with_compactions(tables / f"t{n:02d}", 3 if n < 10 else 2)
    assert sum(len(v) for v in requested.values()) == 50
    snapshots = {name: hudi_rs_rows(tables / name) for name in requested}
    options = {**FAST_HEARTBEAT, **_zk_options(zookeeper)}
    common: dict[str, Any] = {"defaults": {"options": options}, "limits": {"max_concurrent": 3}}
    daemons = [ServeProcess(tmp_path, name, **common) for name in ("a", "b")]
    try:
        for d in daemons:
            d.launch()
        for d in daemons:
            d.wait_ready()

        def all_done() -> bool:
            for name, instants in requested.items():
                tl = HoodieTable.open(str(tables / name)).reload()
                if not all(tl.get(ts, Action.COMPACTION).is_completed for ts in instants):  # type: ignore[union-attr]
                    return False
            return True

        wait_for(all_done, 300, "all 50 compactions to complete")
    finally:
        for d in daemons:
            d.stop()
    succeeded: list[tuple[str, str, str]] = []
    for replica in ("a", "b"):
        with sqlite3.connect(tmp_path / f"state-{replica}" / "hts.db") as db:
            for table_id, instant in db.execute(
                "SELECT table_id, instant FROM runs WHERE state = 'succeeded'"
            ):
                succeeded.append((replica, table_id, instant))
    executed = sorted((t, i) for _, t, i in succeeded)
    assert executed == sorted((t, i) for t, instants in requested.items() for i in instants), (
        "each of the 50 instants succeeded exactly once across both daemons"
    )
    for name, instants in requested.items():
        assert hudi_rs_rows(tables / name) == snapshots[name]
        completed = HoodieTable.open(str(tables / name)).reload().completed().actions(Action.COMMIT)
        assert len(completed) == len(instants), f"{name}: no compaction completed twice"


class _ExpireWhileCompleting(ZookeeperLockProvider):
    """Expires its own session right after the completing write took the lock (the 3rd acquire:
    after the claim and the rollback-free transition, the completion)."""

    server: ZooKeeperServer
    expire_on: int

    def acquire(self, timeout_s: float | None = None) -> None:
        super().acquire(timeout_s)
        self.expire_on -= 1
        if self.expire_on == 0:
            session_id, password = self._shared.client.client_id
            self.server.expire_session(session_id, password)
            wait_for(lambda: not self.is_held(), 20, "the session expiry to be noticed")


def test_no_completion_after_the_zookeeper_session_expired(
    tmp_path: Path, zookeeper: ZooKeeperServer
) -> None:
    path = tmp_path / "t"
    mor_table(path)
    ts = request_compaction(path)
    before = hudi_rs_rows(path)
    table = HoodieTable.open(str(path))
    lock = _ExpireWhileCompleting.from_options(
        base_path=table.base_path,
        table_name=table.name,
        options=_zk_options(zookeeper),
        clients=ZookeeperClients(),
    )
    lock.server = zookeeper
    lock.expire_on = 2  # 1: the claim; 2: the completion
    try:
        with pytest.raises(LockError, match="lost the table lock"):
            execute_compaction(ServiceContext(table, lock=lock), ts, LocalRunner())
        instant = HoodieTable.open(str(path)).reload().get(ts, Action.COMPACTION)
        assert instant is not None and instant.is_inflight, "nothing completed without the lock"
        assert hudi_rs_rows(path) == before
    finally:
        lock.close()


def test_suspended_zookeeper_pauses_new_work(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    options = {
        **FAST_HEARTBEAT,
        **_zk_options(zookeeper),
        "hoodie.write.lock.zookeeper.session_timeout_ms": "30000",
    }
    with running_daemon(tmp_path, defaults={"options": options}) as (daemon, client):
        wait_for(lambda: client.get("/readyz").status_code == 200, 30, "readiness with ZooKeeper")
        with zookeeper.paused():
            wait_for(lambda: client.get("/readyz").status_code == 503, 30, "the suspension to show")
            reasons = client.get("/readyz").json()["reasons"]
            assert reasons == ["lock of table t is suspended"]
            ts = request_compaction(path)  # with the in-process lock of this test's own writer
            wait_for(lambda: daemon.queue.find(("t", ts)) is not None, 30, "the request to be queued")
            assert not daemon.queue.find(("t", ts)).running, "no new work while suspended"  # type: ignore[union-attr]
        wait_for(
            lambda: HoodieTable.open(str(path)).reload().get(ts, Action.COMPACTION).is_completed,  # type: ignore[union-attr]
            60,
            "the compaction once reconnected",
        )
        assert client.get("/readyz").json() == {"ready": True}
