"""What the lease-based table locks (DynamoDB, Hudi's storage-based lock) share: one holder per
process, re-entrant for its thread, with a lock state and its listeners.

A provider is shared by every thread of this process. The thread that holds it may acquire it again
(a count); other threads wait on a local condition, so at most one thread at a time talks to the
remote store to take the lease. Subclasses say how a lease is taken (``_acquire_remote``), renewed
(``_beat``, on the heartbeat thread started by ``_start_heartbeat``), given up (``_give_up``) and known
to be still ours (``_lease_valid``, answered without a request from the subclass's heartbeat
bookkeeping), and what to close.

The lock state changes only while ``_remote`` is held, so a heartbeat's verdict cannot overwrite a
release that came after it; listeners are told of every change afterwards, outside the lock (the
daemon's only log and wake the queue: :attr:`state` is what counts).
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
    def _give_up(self) -> None:
        """Give the lease up if it is still ours (caller holds ``_remote``; heartbeats are stopped)."""

    @abstractmethod
    def _beat(self, generation: int) -> tuple[LockState, float] | None:
        """One heartbeat of lease ``generation`` (caller holds ``_remote``): the new state and the delay
        to the next beat, or None when that lease is no longer held."""

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

    def _record_state(self, state: LockState) -> list[StateListener] | None:
        """Set the state; the listeners to tell, or None if it did not change."""
        with self._state_guard:
            if self._state is state:
                return None
            self._state = state
            return list(self._listeners)

    def _notify(self, state: LockState, listeners: list[StateListener] | None) -> None:
        if listeners is None:  # unchanged
            return
        log.info("%s: lock state %s", self._where, state.value)
        for listener in listeners:
            try:
                listener(state)
            except Exception:
                log.exception("%s: a lock state listener failed", self._where)

    def _set_state(self, state: LockState) -> None:
        self._notify(state, self._record_state(state))

    # -- heartbeat ------------------------------------------------------------------------------

    def _start_heartbeat(self, name: str, first_delay_s: float) -> int:
        """A new lease generation and its heartbeat thread (caller holds ``_remote``)."""
        self._generation += 1
        stop = threading.Event()
        thread = threading.Thread(
            target=self._heartbeat_loop, args=(self._generation, stop, first_delay_s), name=name, daemon=True
        )
        self._heartbeats = [(t, s) for t, s in self._heartbeats if t.is_alive()]
        self._heartbeats.append((thread, stop))
        thread.start()
        return self._generation

    def _heartbeat_loop(self, generation: int, stop: threading.Event, delay: float) -> None:
        while not stop.wait(max(0.0, delay)):
            with self._remote:
                beat = self._beat(generation)
                if beat is None:
                    return
                state, delay = beat
                listeners = self._record_state(state)
            self._notify(state, listeners)
            if state is LockState.LOST:
                return

    def _release_remote(self) -> None:
        """Stop renewing and give the lease up if it is still ours."""
        with self._remote:
            for _, stop in self._heartbeats:
                stop.set()
            try:
                self._give_up()
            finally:
                listeners = self._record_state(LockState.CONNECTED)
        self._notify(LockState.CONNECTED, listeners)

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
