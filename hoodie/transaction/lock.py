"""The table lock protocol, and the in-process provider used when nothing else is configured.

Providers for ZooKeeper and DynamoDB live in the daemon (``service``); the format core only
needs this protocol: acquire with a timeout, release, and a check that the lock is still held
right before a completing write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

from hoodie.errors import HoodieError


class LockError(HoodieError):
    """The table lock could not be acquired, or was lost."""


@runtime_checkable
class LockProvider(Protocol):
    """A table-scoped mutual-exclusion lock shared by every writer of the table."""

    def acquire(self, timeout_s: float | None = None) -> None:
        """Block until the lock is held; raise :class:`LockError` after ``timeout_s`` seconds."""

    def release(self) -> None:
        """Release the lock; a no-op if it is not held."""

    def is_held(self) -> bool:
        """Whether this provider currently holds the lock."""


@contextmanager
def locked(provider: LockProvider, timeout_s: float | None = None) -> Iterator[None]:
    provider.acquire(timeout_s)
    try:
        yield
    finally:
        provider.release()


class _Entry:
    __slots__ = ("cond", "count", "owner")

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.owner: int | None = None
        self.count = 0


_REGISTRY: dict[str, _Entry] = {}
_REGISTRY_GUARD = threading.Lock()


class InProcessLockProvider:
    """A lock per table base path, shared by every provider of that path in this process.

    Re-entrant for the owning thread, like Hudi's ``InProcessLockProvider``. It coordinates only
    writers inside one process: use ZooKeeper or DynamoDB locks when other processes write.
    """

    def __init__(self, base_path: str) -> None:
        self.base_path = base_path
        with _REGISTRY_GUARD:
            self._entry = _REGISTRY.setdefault(base_path, _Entry())

    def acquire(self, timeout_s: float | None = None) -> None:
        me = threading.get_ident()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        entry = self._entry
        with entry.cond:
            while entry.owner not in (None, me):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LockError(
                        f"timed out after {timeout_s}s waiting for the in-process lock of {self.base_path}"
                    )
                entry.cond.wait(remaining)
            entry.owner = me
            entry.count += 1

    def release(self) -> None:
        entry = self._entry
        with entry.cond:
            if entry.owner != threading.get_ident():
                return
            entry.count -= 1
            if entry.count == 0:
                entry.owner = None
                entry.cond.notify()

    def is_held(self) -> bool:
        return self._entry.owner == threading.get_ident()
