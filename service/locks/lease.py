"""What the lease-based table locks (DynamoDB, Hudi's storage-based lock) share: one holder per
process, re-entrant for its thread, with a lock state and its listeners.

A provider is shared by every thread of this process. The thread that holds it may acquire it again
(a count); other threads wait on a local condition, so at most one thread at a time talks to the
remote store to take the lease. Subclasses say how a lease is taken (``_acquire_remote``), given up
(``_release_remote``) and known to be still ours (``_lease_valid``, answered without a request from
the subclass's heartbeat bookkeeping), and what to close.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable

from hoodie.transaction.lock import LockError
from service.locks.base import LockState, StateListener

log = logging.getLogger(__name__)


class LeaseLock(ABC):
    """A remote lease held by at most one thread of this process at a time (see the module doc)."""

    def __init__(self, where: str, clock: Callable[[], float]) -> None:
        self._where = where
        self._clock = clock
        self._cond = threading.Condition()
        self._holder: int | None = None
        self._count = 0
        self._remote = threading.Lock()
        self._generation = 0
        self._heartbeats: list[tuple[threading.Thread, threading.Event]] = []
        self._state = LockState.CONNECTED
        self._listeners: list[StateListener] = []
        self._state_guard = threading.Lock()
        self._closed = threading.Event()

    @abstractmethod
    def _acquire_remote(self, deadline: float | None, timeout_s: float | None) -> None:
        """Take the lease (or raise :class:`LockError`); called by one thread at a time."""

    @abstractmethod
    def _release_remote(self) -> None:
        """Give the lease up if it is still ours, and stop renewing it."""

    @abstractmethod
    def _lease_valid(self) -> bool:
        """Whether our lease is certainly still ours (no request made)."""

    @abstractmethod
    def _close_backend(self) -> None:
        """Close the client of the remote store."""

    # -- state ----------------------------------------------------------------------------------

    @property
    def state(self) -> LockState:
        return self._state

    def add_state_listener(self, listener: StateListener) -> None:
        with self._state_guard:
            self._listeners.append(listener)

    def _set_state(self, state: LockState) -> None:
        with self._state_guard:
            if self._state is state:
                return
            self._state = state
            listeners = list(self._listeners)
        log.info("%s: lock state %s", self._where, state.value)
        for listener in listeners:
            try:
                listener(state)
            except Exception:
                log.exception("%s: a lock state listener failed", self._where)

    # -- the lock -------------------------------------------------------------------------------

    def acquire(self, timeout_s: float | None = None) -> None:
        me = threading.get_ident()
        deadline = None if timeout_s is None else self._clock() + timeout_s
        with self._cond:
            if self._holder == me and self._count > 0:
                if not self._lease_valid():
                    raise LockError(f"{self._where}: the lock held by this thread was lost")
                self._count += 1
                return
            while self._holder is not None and not self._closed.is_set():
                remaining = None if deadline is None else deadline - self._clock()
                if remaining is not None and remaining <= 0:
                    raise LockError(
                        f"timed out after {timeout_s}s waiting for another thread of this process "
                        f"holding the lock of {self._where}"
                    )
                self._cond.wait(remaining)
            if self._closed.is_set():
                raise LockError(f"{self._where}: the lock provider is closed")
            self._holder = me
        try:
            self._acquire_remote(deadline, timeout_s)
        except BaseException:
            with self._cond:
                self._holder = None
                self._cond.notify()
            raise
        with self._cond:
            self._count = 1
        if self._closed.is_set():  # closed while we were acquiring
            self.release()
            raise LockError(f"{self._where}: the lock provider is closed")

    def release(self) -> None:
        with self._cond:
            if self._holder != threading.get_ident() or self._count == 0:
                return
            self._count -= 1
            if self._count:
                return
        try:
            self._release_remote()
        finally:
            with self._cond:
                self._holder = None
                self._cond.notify()

    def is_held(self) -> bool:
        return self._holder == threading.get_ident() and self._count > 0 and self._lease_valid()

    def close(self) -> None:
        """Release the lock if held (whatever the re-entrant count), stop the heartbeats, close the
        client."""
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
        try:
            self._release_remote()
        finally:
            with self._cond:
                self._holder = None
                self._count = 0
                self._cond.notify_all()
            for thread, stop in self._heartbeats:
                stop.set()
                if thread is not threading.current_thread():
                    thread.join()
            self._heartbeats.clear()
            self._close_backend()
