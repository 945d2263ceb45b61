"""Writes and table services under the storage-based lock, chosen by ``hoodie.write.lock.provider``.

S3 is moto's standalone server, an emulator of the S3 API (``tests.servers.s3``), on a loopback
port. The lock file is checked with boto3 / the filesystem directly, not through hts's code.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import execute_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.transaction.lock import LockError
from hoodie.write.writer import HoodieWriter
from service.locks import PROVIDER_KEY, STORAGE, make_lock
from service.locks.storage import StorageBasedLockProvider, StorageLockConfig, lock_file_uri
from tests.conftest import hudi_rs_rows
from tests.daemon.helpers import FAST_HEARTBEAT, ServeProcess, mor_table, request_compaction, wait_for
from tests.integration.test_storage_lock import PEER, Process
from tests.servers.s3 import S3Endpoint
from tests.tables import hts, new_table, rows

LOCK_FILE = ".hoodie/.locks/table_lock.json"
P = "hoodie.write.lock.storage."


def test_writes_and_a_compaction_on_s3_take_the_lock_named_by_the_table_options(s3: S3Endpoint) -> None:
    uri = f"s3://{s3.bucket}/{uuid.uuid4().hex}/trips"
    storage = s3.storage_options()
    table = new_table(uri, **storage)
    options = {PROVIDER_KEY: STORAGE}
    lock = make_lock(
        table_id="trips",
        base_path=table.base_path,
        table_name=table.name,
        options=options,
        client_id="test",
        base_uri=table.uri(),
        storage_options=storage,
    )
    assert lock.kind == "StorageBasedLockProvider"
    inner = lock.inner
    assert isinstance(inner, StorageBasedLockProvider)
    try:
        writer = HoodieWriter(table, lock=lock)
        writer.insert(rows(range(6), 1))
        writer.upsert(rows(range(0, 6, 2), 2))
        ts = request_compaction_on(table)
        ctx = ServiceContext(HoodieTable.open(uri, **storage), lock=lock, storage_options=storage)
        execute_compaction(ctx, ts, LocalRunner())
        client = s3.client()
        try:
            key = uri.removeprefix(f"s3://{s3.bucket}/") + "/" + LOCK_FILE
            data = json.loads(client.get_object(Bucket=s3.bucket, Key=key)["Body"].read())
        finally:
            client.close()
        assert data["owner"] == inner.owner and data["expired"] is True  # taken and released
        done = HoodieTable.open(uri, **storage).reload().get(ts, Action.COMMIT)
        assert done is not None and done.is_completed
    finally:
        lock.close()


def request_compaction_on(table: HoodieTable) -> str:
    from hoodie.services.compaction import CompactionPolicy, schedule_compaction

    scheduled = schedule_compaction(ServiceContext(table), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return scheduled.instant_time


def test_an_s3_table_without_its_uri_is_refused_before_anything_is_written(s3: S3Endpoint) -> None:
    with pytest.raises(LockError, match="set hoodie.base.path"):
        make_lock(
            table_id="t",
            base_path=f"{s3.bucket}/trips",  # what FileIO keeps for s3://lake/trips
            table_name="t",
            options={PROVIDER_KEY: STORAGE},
            client_id="test",
        )


class _TakenOverWhileCompleting(StorageBasedLockProvider):
    """Another writer overwrites the lock file right after our completing write took the lock
    (the 2nd acquire: 1 is the claim), as after a pause longer than the validity."""

    lock_path: Path
    take_over_on = 2

    def acquire(self, timeout_s: float | None = None) -> None:
        super().acquire(timeout_s)
        self.take_over_on -= 1
        if self.take_over_on == 0:
            intruder = {"expired": False, "validUntil": int(time.time() * 1000) + 10_000, "owner": "other"}
            self.lock_path.write_text(json.dumps(intruder))
            deadline = time.monotonic() + 5
            while self.is_held():
                assert time.monotonic() < deadline, "the takeover was not noticed"
                time.sleep(0.01)


def test_no_completion_after_the_storage_lock_was_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "t"
    mor_table(path)
    ts = request_compaction(path)
    before = hudi_rs_rows(path)
    table = HoodieTable.open(str(path))
    config = StorageLockConfig(lock_file_uri(table.base_path), validity_s=2.0, renew_interval_s=0.1)
    lock = _TakenOverWhileCompleting(config, config.store())
    lock.lock_path = path / LOCK_FILE
    try:
        with pytest.raises(LockError, match="lost the table lock"):
            execute_compaction(ServiceContext(table, lock=lock), ts, LocalRunner())
        instant = HoodieTable.open(str(path)).reload().get(ts, Action.COMPACTION)
        assert instant is not None and instant.is_inflight, "nothing completed without the lock"
        assert hudi_rs_rows(path) == before
    finally:
        lock.close()
    other: dict[str, Any] = json.loads((path / LOCK_FILE).read_text())
    assert other["owner"] == "other"  # our release left the new owner's lock alone


def test_a_writer_requests_and_the_daemon_completes_under_the_storage_lock(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "orders"
    mor_table(path, upserts=2)
    before = hudi_rs_rows(path)
    result = hts("request", "compaction", str(path), "--option", f"{PROVIDER_KEY}={STORAGE}")
    assert result.returncode == 0 and result.stdout.startswith("requested compaction "), result.stderr
    ts = result.stdout.split()[2]
    first = json.loads((path / LOCK_FILE).read_text())
    assert first["expired"] is True  # the CLI took the lock to request, and released it

    options = {**FAST_HEARTBEAT, PROVIDER_KEY: STORAGE}
    daemon = ServeProcess(tmp_path, "d1", defaults={"options": options}, spark={"master": "in-process"})
    daemon.start()
    try:

        def completed() -> bool:
            found = HoodieTable.open(str(path)).reload().get(ts, Action.COMMIT)
            return found is not None and found.is_completed

        wait_for(completed, 180, "the daemon to complete the compaction")
        lock = daemon.get("/v1/tables/orders")["lock"]
        assert lock["state"] == "connected" and lock["provider"] == "StorageBasedLockProvider"
        assert json.loads((path / LOCK_FILE).read_text())["owner"] != first["owner"]  # the daemon's
    finally:
        daemon.stop()
    assert hudi_rs_rows(path) == before
    assert json.loads((path / LOCK_FILE).read_text())["expired"] is True


def test_the_daemon_waits_while_a_hudi_writer_holds_the_storage_lock(tmp_path: Path) -> None:
    """A compaction requested by a writer is not completed while a process speaking Hudi's protocol
    (``hudi_storage_lock_peer``) holds the table's lock file; it is once that writer releases it."""
    path = tmp_path / "tables" / "orders"
    mor_table(path, upserts=2)
    before = hudi_rs_rows(path)
    ts = request_compaction(path)
    timings = {P + "validity.timeout.secs": "10", P + "renew.interval.secs": "1"}
    argv = [sys.executable, str(PEER), "--base", str(path), "--validity-ms", "10000", "--renew-ms", "1000"]
    release = tmp_path / "release"  # the peer holds until this exists: however slow the daemon starts
    peer = Process([*argv, "--acquire-timeout-s", "10", "--hold-s", "0", "--release-when", str(release)])
    options = {**FAST_HEARTBEAT, PROVIDER_KEY: STORAGE, **timings}
    daemon = ServeProcess(tmp_path, "d1", defaults={"options": options}, spark={"master": "in-process"})
    try:
        peer.wait("acquired")
        daemon.start()

        def running() -> bool:
            return any(r["instant"] == ts and r["state"] == "running" for r in daemon.get("/v1/runs"))

        wait_for(running, 8, "the daemon to start the compaction")  # and wait for the lock
        seen: list[tuple[int, str | None]] = []  # (wall ms after reading, the compaction's state)
        while len(seen) < 15:  # three renewals of the peer's lock, at least
            seen.append((int(time.time() * 1000), _state(path, ts)))
            time.sleep(0.2)
        release.touch()
        peer.wait("releasing")
        releasing = peer.first("releasing")["at_ms"]
        while_held = [state for at, state in seen if at < releasing]
        assert len(while_held) > 5 and "COMPLETED" not in while_held
        peer.wait("released")
        wait_for(lambda: _state(path, ts) == "COMPLETED", 120, "the daemon to complete the compaction")
        assert json.loads((path / LOCK_FILE).read_text())["owner"] != peer.first("acquired")["owner"]
    finally:
        daemon.stop()
        peer.stop()
    assert hudi_rs_rows(path) == before


def _state(path: Path, ts: str) -> str | None:
    timeline = HoodieTable.open(str(path)).reload()
    found = timeline.get(ts, Action.COMMIT) or timeline.get(ts, Action.COMPACTION)
    return None if found is None else found.state.name
