"""Apache Hudi's storage-based lock, between hts and a second process speaking Hudi's protocol.

S3 here is moto's standalone server, an emulator of the S3 API (``tests.servers.s3``), on a free
loopback port; the same tests run on the local filesystem. The other writer is
``tests/integration/hudi_storage_lock_peer.py``, a minimal implementation of Hudi's side written
from apache/hudi's source and independent of hts's code, run as a subprocess: no JVM runs here, so
it is the protocol as read from the source, not Hudi's Java itself.

Leases are 1.5 s with a renewal every 0.25 s (Hudi refuses less than 10 s; the provider is built
directly from a config here to keep every test within a few seconds).
"""

from __future__ import annotations

import ast
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hoodie.transaction.lock import LockError, locked
from service.locks.base import LockState
from service.locks.storage import StorageBasedLockProvider, StorageLockConfig, lock_file_uri
from service.locks.storage_files import LockData, PreconditionFailed
from tests.servers.proxy import S3Proxy
from tests.servers.s3 import S3Endpoint

VALIDITY_MS = 1500
RENEW_MS = 250
V = VALIDITY_MS / 1000
ROOT = Path(__file__).resolve().parents[2]
PEER = Path(__file__).with_name("hudi_storage_lock_peer.py")

HTS_HOLDER = """
import json, sys, time
from service.locks.storage import StorageBasedLockProvider, StorageLockConfig, lock_file_uri
from service.locks.storage_files import LockData, PreconditionFailed
base, validity, renew, storage_options = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
config = StorageLockConfig(lock_file_uri(base), validity_s=validity, renew_interval_s=renew)
p = StorageBasedLockProvider(config, config.store(json.loads(storage_options)))
p.acquire(10)
print(json.dumps({"event": "acquired", "owner": p.owner}), flush=True)
time.sleep(3600)
"""


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


class Process:
    """A subprocess printing JSON events, one per line."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))

    def wait(self, event: str, timeout_s: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                got = self.events.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {event!r} event in {timeout_s}s; saw {self.seen}") from None
            self.seen.append(got)
            if got["event"] == event:
                return got

    def first(self, event: str) -> dict[str, Any]:
        """An event already consumed by :meth:`wait`."""
        return next(e for e in self.seen if e["event"] == event)

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@dataclass
class Site:
    """One table's base path on one backend, hts providers on it, and peers speaking Hudi's protocol."""

    base: str
    endpoint: S3Endpoint | None
    providers: list[StorageBasedLockProvider] = field(default_factory=list)
    processes: list[Process] = field(default_factory=list)

    @property
    def lock_uri(self) -> str:
        return lock_file_uri(self.base)

    def storage_options(self, endpoint_url: str | None = None) -> dict[str, str]:
        if self.endpoint is None:
            return {}
        options = self.endpoint.storage_options()
        if endpoint_url is not None:
            options["endpoint_override"] = endpoint_url
        return options

    def hts(self, endpoint_url: str | None = None) -> StorageBasedLockProvider:
        config = StorageLockConfig(self.lock_uri, validity_s=V, renew_interval_s=RENEW_MS / 1000)
        provider = StorageBasedLockProvider(config, config.store(self.storage_options(endpoint_url)))
        self.providers.append(provider)
        return provider

    def peer(self, *, hold_s: float, acquire_timeout_s: float = 10, no_renew: bool = False) -> Process:
        argv = [sys.executable, str(PEER), "--base", self.base]
        argv += ["--validity-ms", str(VALIDITY_MS), "--renew-ms", str(RENEW_MS)]
        argv += ["--acquire-timeout-s", str(acquire_timeout_s), "--hold-s", str(hold_s)]
        if self.endpoint is not None:
            argv += ["--endpoint", self.endpoint.endpoint_url]
        if no_renew:
            argv.append("--no-renew")
        process = Process(argv)
        self.processes.append(process)
        return process

    def hts_holder(self) -> Process:
        """hts holding the lock in another process (to be killed)."""
        argv = [sys.executable, "-c", HTS_HOLDER, self.base, str(V), str(RENEW_MS / 1000)]
        process = Process([*argv, json.dumps(self.storage_options())])
        self.processes.append(process)
        return process

    def _key(self) -> tuple[str, str]:
        bucket, _, key = self.lock_uri.removeprefix("s3://").partition("/")
        return bucket, key

    def read(self) -> dict[str, Any]:
        """The lock file's JSON, read without hts's code."""
        if self.endpoint is None:
            return dict(json.loads(Path(self.lock_uri.removeprefix("file://")).read_bytes()))
        client = self.endpoint.client()
        try:
            bucket, key = self._key()
            return dict(json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read()))
        finally:
            client.close()

    def overwrite(self, data: dict[str, Any]) -> None:
        """An unconditional write of the lock file (a writer that ignored the protocol, or took over)."""
        raw = json.dumps(data).encode()
        if self.endpoint is None:
            Path(self.lock_uri.removeprefix("file://")).write_bytes(raw)
            return
        client = self.endpoint.client()
        try:
            bucket, key = self._key()
            client.put_object(Bucket=bucket, Key=key, Body=raw)
        finally:
            client.close()


@pytest.fixture(params=["s3", "file"])
def site(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Site]:
    if request.param == "s3":
        endpoint: S3Endpoint = request.getfixturevalue("s3")
        s = Site(f"s3://{endpoint.bucket}/{uuid.uuid4().hex}/trips", endpoint)
    else:
        s = Site(str(tmp_path / "trips"), None)
    try:
        yield s
    finally:
        for p in s.providers:
            p.close()
        for process in s.processes:
            process.stop()


def test_the_peer_is_independent_of_hts() -> None:
    tree = ast.parse(PEER.read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in imported if m.split(".")[0] in ("hoodie", "service", "jobs", "tests")}


def test_a_hudi_writer_holding_the_lock_keeps_hts_out(site: Site) -> None:
    peer = site.peer(hold_s=4.0)
    acquired = peer.wait("acquired")
    hts = site.hts()
    started = time.monotonic()
    with pytest.raises(LockError, match=f"held by '{acquired['owner']}'"):
        hts.acquire(timeout_s=V + 0.8)  # longer than a validity: the peer's renewals keep it
    assert time.monotonic() - started >= V + 0.8
    assert peer.wait("renewed")["validUntil"] > acquired["validUntil"]
    assert site.read()["owner"] == acquired["owner"] and not hts.is_held()

    released = peer.wait("released", 10)
    hts.acquire(timeout_s=3)
    assert now_ms() - released["at_ms"] < 1000 * V  # released, not expired: no wait for validity
    data = site.read()
    assert data["owner"] == hts.owner and data["expired"] is False
    assert data["validUntil"] >= released["at_ms"] + 1000 * V  # a whole validity from the acquire
    # Held; on a starved machine the heartbeat can run later than the validity (1.5 s here), and then
    # hts must not claim a lease the file no longer gives it.
    assert hts.is_held() or now_ms() > data["validUntil"]
    hts.release()
    assert site.read()["expired"] is True and site.read()["owner"] == hts.owner


def test_hts_holding_the_lock_keeps_a_hudi_writer_out(site: Site) -> None:
    hts = site.hts()
    hts.acquire(timeout_s=3)
    first = site.read()
    assert first == {"expired": False, "validUntil": first["validUntil"], "owner": hts.owner}
    refused = site.peer(hold_s=0, acquire_timeout_s=V + 0.8).wait("timeout")
    assert refused["holder"]["owner"] == hts.owner
    assert hts.is_held() and hts.state is LockState.CONNECTED
    assert site.read()["validUntil"] > first["validUntil"]  # renewed past the first validity

    hts.release()
    released_at = now_ms()
    assert site.read()["expired"] is True
    peer = site.peer(hold_s=0.1, acquire_timeout_s=5)
    acquired = peer.wait("acquired")
    assert acquired["owner"] != hts.owner and acquired["at_ms"] > released_at
    assert acquired["at_ms"] - peer.first("started")["at_ms"] < 1000 * V  # no wait for the validity
    peer.wait("released")


def test_a_killed_hudi_writer_is_taken_over_after_its_validity(site: Site) -> None:
    peer = site.peer(hold_s=-1)
    acquired = peer.wait("acquired")
    peer.wait("renewed")
    peer.kill9()
    last = site.read()
    assert last["owner"] == acquired["owner"] and last["expired"] is False
    hts = site.hts()
    hts.acquire(timeout_s=V + 3)
    took = now_ms()
    assert took > last["validUntil"] + 500  # Hudi's clock drift buffer
    assert took < last["validUntil"] + 500 + 2000
    assert site.read()["owner"] == hts.owner and hts.is_held()


def test_a_killed_hts_is_taken_over_by_a_hudi_writer_after_its_validity(site: Site) -> None:
    holder = site.hts_holder()
    owner = holder.wait("acquired")["owner"]
    time.sleep(2 * RENEW_MS / 1000)
    holder.kill9()
    last = site.read()
    assert last["owner"] == owner and last["expired"] is False
    peer = site.peer(hold_s=0.1, acquire_timeout_s=V + 3)
    acquired = peer.wait("acquired")
    assert last["validUntil"] + 500 < acquired["at_ms"] < last["validUntil"] + 500 + 2000
    peer.wait("released")


def test_a_takeover_while_held_loses_the_lock_and_release_leaves_it_alone(site: Site) -> None:
    hts = site.hts()
    states: list[LockState] = []
    hts.add_state_listener(states.append)
    with locked(hts, 3):
        assert hts.is_held()
        intruder = {"expired": False, "validUntil": now_ms() + VALIDITY_MS, "owner": "intruder"}
        site.overwrite(intruder)
        assert wait_for(lambda: hts.state is LockState.LOST, 3 * RENEW_MS / 1000)
        assert not hts.is_held()  # a completing write checks this and refuses
        with pytest.raises(LockError, match="lost"):
            hts.acquire(timeout_s=0.1)
        assert states == [LockState.LOST]
    assert site.read() == intruder  # the release's If-Match failed: the other owner's file stays
    assert states == [LockState.LOST, LockState.CONNECTED]  # released: new acquires may start


def test_renewals_failing_until_the_validity_runs_out_lose_the_lock(s3: S3Endpoint) -> None:
    site = Site(f"s3://{s3.bucket}/{uuid.uuid4().hex}/trips", s3)
    proxy = S3Proxy(s3.endpoint_url)
    hts = site.hts(proxy.url)
    states: list[tuple[LockState, int]] = []
    hts.add_state_listener(lambda s: states.append((s, now_ms())))
    try:
        hts.acquire(timeout_s=3)
        time.sleep(RENEW_MS / 1000)
        proxy.cut()
        samples: list[tuple[int, bool]] = []  # (wall time before asking, is_held())
        deadline = time.monotonic() + V + 1
        while time.monotonic() < deadline and (not samples or samples[-1][1]):
            samples.append((now_ms(), hts.is_held()))
            time.sleep(0.005)
        assert not samples[-1][1], "still held a second after the validity"
        valid_until = site.read()["validUntil"]  # the last renewal that reached S3
        held_at = [t for t, held in samples if held]
        assert held_at and max(held_at) < valid_until  # never held past the file's validity
        # Held on while renewals failed (SUSPENDED), up to the last renewal hts saw answered: a
        # renewal that reached S3 as the proxy was cut moved validUntil on without hts knowing, and
        # on a loaded machine an answered renewal may lag, so the margin is a validity plus a renewal.
        assert max(held_at) > valid_until - VALIDITY_MS - RENEW_MS
        assert wait_for(lambda: hts.state is LockState.LOST, 2 * RENEW_MS / 1000)
        assert [s for s, _ in states] == [LockState.SUSPENDED, LockState.LOST]
        # A Hudi writer takes the lock only after the validity plus its drift buffer: no overlap.
        acquired = site.peer(hold_s=0.1, acquire_timeout_s=5).wait("acquired")
        assert acquired["at_ms"] > valid_until + 500 > max(held_at)
        hts.release()  # best effort through the cut proxy: fails, logged
    finally:
        hts.close()
        proxy.cut()
        for process in site.processes:
            process.stop()


def test_the_store_writes_only_on_its_condition(site: Site) -> None:
    config = StorageLockConfig(site.lock_uri, validity_s=V, renew_interval_s=RENEW_MS / 1000)
    store = config.store(site.storage_options())
    try:
        assert store.read() is None
        first = store.write(LockData(False, now_ms() + VALIDITY_MS, "a"), None)  # If-None-Match: *
        with pytest.raises(PreconditionFailed):
            store.write(LockData(False, now_ms() + VALIDITY_MS, "b"), None)
        second = store.write(LockData(False, now_ms() + VALIDITY_MS + 1, "a"), first)  # If-Match
        assert second.version != first.version and store.read() == second
        with pytest.raises(PreconditionFailed):
            store.write(LockData(True, 0, "b"), first)  # a stale version
        assert site.read()["owner"] == "a" and store.read() == second
    finally:
        store.close()


class CountingStore:
    """A real store, with its requests counted (what the README's cost figures rest on)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reads = 0
        self.writes = 0

    @property
    def location(self) -> str:
        return str(self.inner.location)

    def read(self) -> Any:
        self.reads += 1
        return self.inner.read()

    def write(self, data: LockData, expected: Any) -> Any:
        self.writes += 1
        return self.inner.write(data, expected)

    def close(self) -> None:
        self.inner.close()


def test_requests_per_hour_held_are_one_put_per_renewal_interval(site: Site) -> None:
    config = StorageLockConfig(site.lock_uri, validity_s=V, renew_interval_s=RENEW_MS / 1000)
    store = CountingStore(config.store(site.storage_options()))
    hts = StorageBasedLockProvider(config, store)
    try:
        time.sleep(3 * RENEW_MS / 1000)
        assert (store.reads, store.writes) == (0, 0)  # idle: no requests at all
        hts.acquire(timeout_s=3)
        assert (store.reads, store.writes) == (1, 1)  # a GET and a conditional PUT
        held_s = 8 * RENEW_MS / 1000
        time.sleep(held_s)
        renewals = store.writes - 1
        assert held_s / config.renew_interval_s - 2 <= renewals <= held_s / config.renew_interval_s
        hts.release()
        assert store.reads == 1 and store.writes == renewals + 2  # one PUT releases
    finally:
        hts.close()


def test_a_missing_bucket_fails_at_once_naming_it(s3: S3Endpoint) -> None:
    site = Site("s3://no-such-bucket/trips", s3)
    hts = site.hts()
    started = time.monotonic()
    try:
        with pytest.raises(LockError, match="no-such-bucket.*NoSuchBucket"):
            hts.acquire(timeout_s=10)
        assert time.monotonic() - started < 2  # not retried until the timeout
    finally:
        hts.close()
