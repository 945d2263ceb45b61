"""A table lock that Apache Hudi writers using ``StorageBasedLockProvider`` respect, and that hts honours.

Apache Hudi 1.1 (apache/hudi: hudi-client-common ``StorageBasedLockProvider``,
``LockProviderHeartbeatManager``, ``StorageBasedLockConfig``; hudi-aws ``S3StorageLockClient``) keeps
a table's lock in one file next to its timeline, ``<base>/.hoodie/.locks/table_lock.json``, written
only by conditional PUTs; :mod:`service.locks.storage_files` has the file and the stores. The
protocol as this module follows it:

* **Acquire** (``StorageBasedLockProvider.tryLock``): read the file. It is *held* when
  ``expired`` is false and the reader's wall clock is not past ``validUntil`` plus 500 ms
  (``CLOCK_DRIFT_BUFFER_MS``: clocks are assumed within half a second). Otherwise write
  ``{"expired": false, "validUntil": now + validity, "owner": <our UUID>}`` conditioned on the
  version just read (``If-Match``), or on absence (``If-None-Match: *``) when there was no file. A
  lost condition (412) means another writer won. Blocking acquires retry every second
  (``LockConfiguration.DEFAULT_LOCK_ACQUIRE_RETRY_WAIT_TIME_IN_MILLIS``; here at most the renewal
  interval, so short test leases poll faster). One departure: a valid file naming our own owner
  (a write of ours whose answer was lost) is taken back at once with ``If-Match`` instead of
  waiting for it to expire; nobody else wrote since, so this is as safe.
* **Renew** (``renewLock``, run by ``LockProviderHeartbeatManager`` every
  ``renew.interval.secs`` at a fixed rate): the same write with a new ``validUntil``, conditioned
  on the version we wrote last. 412 means the lock was taken over: LOST at once. Other failures are
  retried at the next renewal (Hudi: "could be transient"); SUSPENDED while our lease lasts, LOST
  after it (Hudi interrupts the writer thread; here ``is_held()`` turns false and the daemon
  aborts). A renewal whose answer was lost after S3 applied it makes the next one fail with 412:
  LOST, never two holders.
* **Release** (``unlock`` / ``tryExpireCurrentLock``): stop the heartbeat, then write
  ``{"expired": true, "validUntil": <unchanged>, "owner": ...}`` with ``If-Match`` on our version.
  412 means someone took it over; the file is never deleted.
* **Held** (``actuallyHoldsLock``): we hold the lock while our last confirmed write's
  ``validUntil`` is ahead of our wall clock *and* less than a validity has passed on the monotonic
  clock since we sent it. A Hudi contender takes over only 500 ms after ``validUntil`` on its clock.
* **Configuration** (``StorageBasedLockConfig``): ``hoodie.write.lock.storage.validity.timeout.secs``
  (300) and ``hoodie.write.lock.storage.renew.interval.secs`` (30; the older name
  ``hoodie.write.lock.storage.heartbeat.poll.secs`` is an alias), validity at least 10 s and at least
  ten renewal intervals, renewal at least 1 s; ``hoodie.base.path`` names the table (the lock file
  follows it). Owners are random UUIDs (Hudi: ``UUID.randomUUID()`` per provider). S3 (``s3://``,
  ``s3a://``) through boto3; ``file://`` and absolute local paths through hts's own local store
  (Hudi has none); GCS (``GCSStorageLockClient``, object generations) and Azure are refused.

Cost on S3: acquiring is a GET and a PUT; holding is one PUT per renewal interval (120 an hour
at the default 30 s); releasing is one PUT; a writer waiting for the lock does one GET a second.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodie.errors import TableServiceError
from hoodie.services.options import int_option, lookup
from hoodie.transaction.lock import LockError
from service.locks.base import LockState
from service.locks.lease import LeaseLock
from service.locks.storage_files import (
    LOCK_FILE_NAME,
    LOCKS_FOLDER,
    LocalLockFileStore,
    LockData,
    LockFile,
    LockFileStore,
    PreconditionFailed,
    S3LockFileStore,
    StoreUnavailable,
    s3_client,
)

__all__ = ["StorageBasedLockProvider", "StorageLockConfig"]

log = logging.getLogger(__name__)

PREFIX = "hoodie.write.lock.storage."
VALIDITY_KEY = PREFIX + "validity.timeout.secs"
RENEW_KEY = PREFIX + "renew.interval.secs"
RENEW_ALIAS = PREFIX + "heartbeat.poll.secs"
BASE_PATH_KEY = "hoodie.base.path"
CLOCK_DRIFT_BUFFER_MS = 500  # StorageBasedLockProvider.CLOCK_DRIFT_BUFFER_MS
ACQUIRE_RETRY_S = 1.0  # LockConfiguration.DEFAULT_LOCK_ACQUIRE_RETRY_WAIT_TIME_IN_MILLIS


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class StorageLockConfig:
    """Where the lock file is, how long a lock is valid, how often it is renewed."""

    lock_file_uri: str
    validity_s: float = 300.0
    renew_interval_s: float = 30.0
    credentials: tuple[str, str, str | None] | None = field(default=None, repr=False)

    @staticmethod
    def timings(options: Mapping[str, str]) -> tuple[int, int]:
        """Validity and renewal interval in seconds, checked as ``StorageBasedLockConfig`` does."""
        validity = int_option(options, VALIDITY_KEY, 300)
        renew = int_option(options, (RENEW_KEY, RENEW_ALIAS), 30)
        renew_key = (lookup(options, (RENEW_KEY, RENEW_ALIAS)) or (RENEW_KEY, ""))[0]
        if renew < 1:
            raise TableServiceError(f"{renew_key}={renew} must be at least 1 second")
        if validity < 10:
            raise TableServiceError(f"{VALIDITY_KEY}={validity} must be at least 10 seconds")
        if validity < 10 * renew:
            raise TableServiceError(
                f"{VALIDITY_KEY}={validity} must be at least ten times {renew_key}={renew}"
            )
        return validity, renew

    @classmethod
    def from_options(
        cls, *, base_path: str, options: Mapping[str, str], base_uri: str | None = None
    ) -> StorageLockConfig:
        from service.locks.dynamodb_config import aws_credentials

        validity, renew = cls.timings(options)
        return cls(
            lock_file_uri=lock_file_uri(table_uri(base_path, options, base_uri)),
            validity_s=float(validity),
            renew_interval_s=float(renew),
            credentials=aws_credentials(options),
        )

    def store(self, storage_options: Mapping[str, Any] | None = None) -> LockFileStore:
        """The store the lock file's scheme calls for."""
        scheme, rest = self.lock_file_uri.split("://", 1)
        if scheme == "file":
            return LocalLockFileStore(rest)
        bucket, _, key = rest.partition("/")
        client = s3_client(
            storage_options=storage_options or {},
            credentials=self.credentials,
            timeout_s=max(1.0, self.validity_s / 5),  # S3StorageLockClient: validity / 5 per call
        )
        return S3LockFileStore(client, bucket, key)


def table_uri(base_path: str, options: Mapping[str, str], base_uri: str | None = None) -> str:
    """The table's URI: ``base_uri`` (from the caller, who opened the table) or Hudi's
    ``hoodie.base.path``, checked against ``base_path`` (the path inside the filesystem, which for
    S3 has no scheme); a mismatch (e.g. ``hoodie.base.path`` in options shared by several tables)
    is refused, since the lock file would not be the one Hudi's writers of this table use."""
    found = lookup(options, BASE_PATH_KEY)
    given = (("base URI", base_uri), (BASE_PATH_KEY, found[1] if found else None))
    named = [(k, _local_uri(v)) for k, v in given if v]
    for key, uri in named:
        if _path_of(uri) != _path_of(base_path) or _path_of(uri) != _path_of(named[0][1]):
            raise TableServiceError(
                f"{key}={uri!r} is not the table at {base_path!r}"
                + (f" ({named[0][0]}={named[0][1]!r})" if key != named[0][0] else "")
                + ": the storage-based lock would not be the file Hudi's writers of this table use"
            )
    return named[0][1] if named else base_path


def _local_uri(uri: str) -> str:
    """``file:/x`` (how hts's FileIO writes a local table's URI) as ``file:///x``."""
    uri = uri.strip()
    if uri.startswith("file:") and not uri.startswith("file://"):
        return "file://" + uri[len("file:") :]
    return uri


def _path_of(uri: str) -> str:
    uri = uri.strip().rstrip("/")
    return uri.split("://", 1)[1] if "://" in uri else uri


def lock_file_uri(base: str) -> str:
    """``<base>/.hoodie/.locks/table_lock.json`` as a URI; refuses what no store here can write."""
    base = base.strip().rstrip("/")
    if "://" not in base:
        if not base.startswith("/"):
            raise TableServiceError(
                f"the storage-based lock needs the table's URI, but the base path is {base!r}: "
                f"set {BASE_PATH_KEY} to it (e.g. s3://bucket/path)"
            )
        base = "file://" + base
    scheme, rest = base.split("://", 1)
    scheme = scheme.lower()
    if scheme in ("s3", "s3a"):
        bucket, _, path = rest.partition("/")
        if not bucket or not path:
            raise TableServiceError(f"{BASE_PATH_KEY}={base!r}: an S3 base path needs a bucket and a path")
        return f"s3://{bucket}/{path}/{LOCKS_FOLDER}/{LOCK_FILE_NAME}"
    if scheme == "file":
        return f"file://{rest}/{LOCKS_FOLDER}/{LOCK_FILE_NAME}"
    raise TableServiceError(
        f"the storage-based lock of {base} is not supported on {scheme}:// here "
        "(hts writes it on s3://, s3a:// and the local filesystem; Apache Hudi also on gs://)"
    )


@dataclass(frozen=True)
class _Held:
    """Our lock file as last written, with the monotonic time taken before that write was sent."""

    file: LockFile
    sent_at: float
    generation: int


class StorageBasedLockProvider(LeaseLock):
    """The storage-based lock of one table, shared by every thread of this process.

    Re-entrant for the thread holding it; other threads wait on a local condition. One lock
    file, one owner UUID per provider (a new one after every release would also do; Hudi keeps one).
    """

    def __init__(
        self,
        config: StorageLockConfig,
        store: LockFileStore,
        *,
        owner: str | None = None,
        client_id: str = "",
        clock: Callable[[], float] | None = None,
        wall_ms: Callable[[], int] | None = None,
    ) -> None:
        if config.validity_s <= 0 or not 0 < config.renew_interval_s < config.validity_s:
            raise LockError(f"{config}: the renewal interval must be positive and shorter than the validity")
        self.config = config
        self.owner = owner or str(uuid.uuid4())
        self.validity_s = config.validity_s
        self.renew_s = config.renew_interval_s
        self.poll_s = min(ACQUIRE_RETRY_S, self.renew_s)
        self._store = store
        self._wall_ms = wall_ms or _wall_ms
        where = f"{store.location} (owner {self.owner}{', ' + client_id if client_id else ''})"
        super().__init__(where, clock or time.monotonic)
        self._held: _Held | None = None
        self._stale: _Held | None = None  # a lease we lost: still expired on release if ours
        self._next_beat = 0.0  # when the heartbeat renews next (monotonic)

    @classmethod
    def from_options(
        cls,
        *,
        base_path: str,
        options: Mapping[str, str],
        base_uri: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        client_id: str = "",
    ) -> StorageBasedLockProvider:
        config = StorageLockConfig.from_options(base_path=base_path, options=options, base_uri=base_uri)
        return cls(config, config.store(storage_options), client_id=client_id)

    # -- the lock protocol ----------------------------------------------------------------------

    def _lease_valid(self) -> bool:
        return self._valid(self._held)

    def _close_backend(self) -> None:
        self._store.close()

    def _valid(self, held: _Held | None) -> bool:
        """Whether ``held`` is still ours: its validUntil ahead of our wall clock, and less than a
        validity since we sent it on the monotonic clock (a wall clock set back does not extend it)."""
        return (
            held is not None
            and self._wall_ms() < held.file.data.valid_until_ms
            and self._clock() - held.sent_at < self.validity_s
        )

    def _held_by_other(self, current: LockFile, now_ms: int) -> bool:
        """``isLockStillValid``: not released and not certainly past ``validUntil``, and not ours.

        A valid file with our owner while no thread of ours holds the lock is a write of ours whose
        answer was lost (an acquire, or the last renewal of a lease we gave up): nobody else wrote
        since, so taking it back with ``If-Match`` is safe. Hudi would wait for it to expire."""
        data = current.data
        if data.owner == self.owner:
            return False
        return not data.expired and now_ms <= data.valid_until_ms + CLOCK_DRIFT_BUFFER_MS

    # -- acquire --------------------------------------------------------------------------------

    def _acquire_remote(self, deadline: float | None, timeout_s: float | None) -> None:
        problem = "no answer yet"
        while True:
            if self._closed.is_set():
                raise LockError(f"{self._where}: the lock provider is closed")
            try:
                current = self._store.read()
                now_ms = self._wall_ms()
                if current is not None and self._held_by_other(current, now_ms):
                    data = current.data
                    problem = f"held by {data.owner!r} until {data.valid_until_ms} (epoch ms)"
                else:
                    with self._remote:
                        sent = self._clock()
                        now_ms = self._wall_ms()
                        mine = LockData(False, now_ms + int(self.validity_s * 1000), self.owner)
                        written = self._store.write(mine, current)
                        self._hold(written, sent)
                        listeners = self._record_state(LockState.CONNECTED)
                    if current is not None and not current.data.expired and current.data.owner != self.owner:
                        log.warning(
                            "%s: took over a lock of %r that expired at %d (epoch ms)",
                            self._where,
                            current.data.owner,
                            current.data.valid_until_ms,
                        )
                    self._notify(LockState.CONNECTED, listeners)
                    return
            except PreconditionFailed:
                problem = "another writer changed the lock file first"
            except StoreUnavailable as e:
                problem = str(e)
            now = self._clock()
            if deadline is not None and now >= deadline:
                raise LockError(f"timed out after {timeout_s}s acquiring the lock {self._where}: {problem}")
            delay = self.poll_s if deadline is None else min(self.poll_s, deadline - now)
            self._closed.wait(max(delay, 0.002))

    def _hold(self, written: LockFile, sent_at: float) -> None:
        """Record our new lock file and start its heartbeat (caller holds ``_remote``)."""
        self._next_beat = sent_at + self.renew_s
        name = f"storage-lock-heartbeat-{self.owner[:8]}"
        generation = self._start_heartbeat(name, self._next_beat - self._clock())
        self._held, self._stale = _Held(written, sent_at, generation), None

    # -- heartbeat and release ------------------------------------------------------------------

    def _beat(self, generation: int) -> tuple[LockState, float] | None:
        """``LockProviderHeartbeatManager``: renew at a fixed rate until released or lost."""
        held = self._held
        if held is None or held.generation != generation:
            return None
        state = self._renew(held)
        # a fixed rate, but no burst after a long stall
        self._next_beat = max(self._next_beat + self.renew_s, self._clock())
        return state, self._next_beat - self._clock()

    def _renew(self, held: _Held) -> LockState:
        """One renewal (caller holds ``_remote``)."""
        if not self._valid(held):
            return self._lose(held, "no renewal succeeded within the lock's validity")
        sent = self._clock()
        mine = LockData(False, self._wall_ms() + int(self.validity_s * 1000), self.owner)
        try:
            written = self._store.write(mine, held.file)
        except PreconditionFailed as e:
            try:
                current = self._store.read()
            except StoreUnavailable as unread:
                # Cannot tell our own retried write from another writer's: nobody may take the lock
                # before our validity runs out, so hold on (suspended) until then, as when unreachable.
                if not self._valid(held):
                    return self._lose(held, f"renewals failed until the lock's validity ran out ({unread})")
                log.warning("%s: renewal's condition failed and the file is unreadable: %s", self._where, e)
                return LockState.SUSPENDED
            if current is not None and current.data == mine:
                # The SDK retried a renewal whose first answer was lost; the retry's If-Match saw the
                # ETag of that first write, ours (the owner is this provider's UUID).
                self._held = _Held(current, sent, held.generation)
                return LockState.CONNECTED
            return self._lose(held, f"the renewal's condition failed, another writer took the lock ({e})")
        except Exception as e:  # unreachable, throttled, anything: never kill the thread
            if not self._valid(held):
                return self._lose(held, f"renewals failed until the lock's validity ran out ({e})")
            left = held.file.data.valid_until_ms - self._wall_ms()
            log.warning("%s: renewal failed, %d ms of validity left: %s", self._where, left, e)
            return LockState.SUSPENDED
        self._held = _Held(written, sent, held.generation)
        return LockState.CONNECTED

    def _lose(self, held: _Held, reason: str) -> LockState:
        log.error("%s: lock lost: %s", self._where, reason)
        self._held, self._stale = None, held
        return LockState.LOST

    def _give_up(self) -> None:
        held = self._held or self._stale
        self._held = self._stale = None
        if held is not None:
            released = LockData(True, held.file.data.valid_until_ms, self.owner)
            try:
                self._store.write(released, held.file)
            except PreconditionFailed:
                log.warning("%s: not released: taken over; the new owner's file stays", self._where)
            except Exception as e:
                until = held.file.data.valid_until_ms
                log.warning("%s: not released (%s); it expires at %d (epoch ms)", self._where, e, until)
