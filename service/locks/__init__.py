"""Table locks for the daemon, chosen by Apache Hudi's ``hoodie.write.lock.provider`` key.

* ``org.apache.hudi.client.transaction.lock.InProcessLockProvider`` (our default): only this
  process's threads coordinate; right when the daemon is the only writer of its tables;
* ``org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider``: Curator-compatible
  ZooKeeper lock (``service.locks.zookeeper``);
* ``org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider``: the AWS DynamoDB lock
  client's protocol (``service.locks.dynamodb``);
* ``org.apache.hudi.client.transaction.lock.StorageBasedLockProvider``: Hudi 1.1's lock file
  ``.hoodie/.locks/table_lock.json`` written with conditional PUTs (``service.locks.storage``).

Every provider is wrapped so that the daemon sees how long acquiring took and when it failed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from hoodie.errors import HoodieError
from hoodie.transaction.lock import InProcessLockProvider, LockError
from service.locks.base import LockState, ServiceLock, StateListener

PROVIDER_KEY = "hoodie.write.lock.provider"
IN_PROCESS = "org.apache.hudi.client.transaction.lock.InProcessLockProvider"
ZOOKEEPER = "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider"
DYNAMODB = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
STORAGE = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
KNOWN_PROVIDERS = (IN_PROCESS, ZOOKEEPER, DYNAMODB, STORAGE)


class InProcessServiceLock(InProcessLockProvider):
    """The in-process lock with a health state that is always CONNECTED."""

    @property
    def state(self) -> LockState:
        return LockState.CONNECTED

    def add_state_listener(self, listener: StateListener) -> None:
        return None

    def close(self) -> None:
        self.release()


class LockObserver(Protocol):
    """Told about every acquire (the daemon's metrics)."""

    def lock_acquired(self, table_id: str, seconds: float) -> None: ...

    def lock_failed(self, table_id: str, seconds: float) -> None: ...


class ObservedLock:
    """A provider whose acquires are timed and reported to an observer."""

    def __init__(self, inner: ServiceLock, table_id: str, observer: LockObserver | None) -> None:
        self.inner = inner
        self.table_id = table_id
        self.observer = observer

    @property
    def kind(self) -> str:
        return type(self.inner).__name__

    def acquire(self, timeout_s: float | None = None) -> None:
        started = time.monotonic()
        try:
            self.inner.acquire(timeout_s)
        except BaseException:
            if self.observer is not None:
                self.observer.lock_failed(self.table_id, time.monotonic() - started)
            raise
        if self.observer is not None:
            self.observer.lock_acquired(self.table_id, time.monotonic() - started)

    def release(self) -> None:
        self.inner.release()

    def is_held(self) -> bool:
        return self.inner.is_held()

    @property
    def state(self) -> LockState:
        return self.inner.state

    def add_state_listener(self, listener: StateListener) -> None:
        self.inner.add_state_listener(listener)

    def close(self) -> None:
        self.inner.close()


def check_lock_options(options: Mapping[str, str], where: str) -> None:
    """Raise a :class:`LockError` naming the value if ``options`` cannot configure a lock; connects
    to nothing (``hts serve --validate-config``). The lock key defaults to each table's name."""
    provider = options.get(PROVIDER_KEY, IN_PROCESS).strip()
    try:
        if provider in (ZOOKEEPER, "ZookeeperBasedLockProvider"):
            from service.locks.zookeeper import ZookeeperLockSettings

            ZookeeperLockSettings.from_options(options, table_name="table", base_path=where)
        elif provider in (DYNAMODB, "DynamoDBBasedLockProvider"):
            from service.locks.dynamodb_config import DynamoDBLockConfig

            DynamoDBLockConfig.from_options(base_path=where, table_name="table", options=options)
        elif provider in (STORAGE, "StorageBasedLockProvider"):
            from service.locks.storage import StorageLockConfig

            StorageLockConfig.timings(options)  # the lock file follows each table's base path
        elif provider not in (IN_PROCESS, "InProcessLockProvider"):
            raise LockError(
                f"{where}: unsupported {PROVIDER_KEY}={provider!r} (supported: {', '.join(KNOWN_PROVIDERS)})"
            )
    except LockError:
        raise
    except HoodieError as e:
        raise LockError(str(e)) from e


def make_lock(
    *,
    table_id: str,
    base_path: str,
    table_name: str,
    options: Mapping[str, str],
    client_id: str,
    observer: LockObserver | None = None,
    base_uri: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ObservedLock:
    """The lock ``options`` configure for the table at ``base_path`` (Hudi's keys).

    ``base_uri`` (the table's URI, e.g. ``s3://bucket/path``) and ``storage_options`` (pyarrow
    ``S3FileSystem`` keys) are used by the storage-based lock, whose file lives in the table;
    ``hoodie.base.path`` in ``options`` takes precedence, as in Hudi."""
    provider = options.get(PROVIDER_KEY, IN_PROCESS).strip()
    inner: ServiceLock
    if provider in (IN_PROCESS, "InProcessLockProvider"):
        inner = InProcessServiceLock(base_path)
    elif provider in (ZOOKEEPER, "ZookeeperBasedLockProvider"):
        from service.locks.zookeeper import ZookeeperLockProvider

        inner = ZookeeperLockProvider.from_options(
            base_path=base_path, table_name=table_name, options=options, client_id=client_id
        )
    elif provider in (DYNAMODB, "DynamoDBBasedLockProvider"):
        from service.locks.dynamodb import DynamoDBLockProvider

        # The lock client's ownerName is unique per holder (Java: host name + UUID).
        inner = DynamoDBLockProvider.from_options(
            base_path=base_path, table_name=table_name, options=options, owner=f"{client_id}-{uuid.uuid4()}"
        )
    elif provider in (STORAGE, "StorageBasedLockProvider"):
        from service.locks.storage import StorageBasedLockProvider

        try:
            inner = StorageBasedLockProvider.from_options(
                base_path=base_path,
                options=options,
                base_uri=base_uri,
                storage_options=storage_options,
                client_id=client_id,
            )
        except LockError:
            raise
        except HoodieError as e:  # a configuration error, named by the key
            raise LockError(str(e)) from e
    else:
        raise LockError(
            f"unsupported {PROVIDER_KEY}={provider!r} for {base_path} "
            f"(supported: {', '.join(KNOWN_PROVIDERS)})"
        )
    return ObservedLock(inner, table_id, observer)


__all__ = [
    "DYNAMODB",
    "IN_PROCESS",
    "PROVIDER_KEY",
    "STORAGE",
    "ZOOKEEPER",
    "InProcessServiceLock",
    "LockObserver",
    "LockState",
    "ObservedLock",
    "check_lock_options",
    "make_lock",
]
