"""The ZooKeeper client the table locks and leader elections share: one :class:`KazooClient` (one
session at a time) per connect string and session timeout, kept in a registry
(:data:`CLIENTS`). Its connection state is the locks' :class:`~service.locks.base.LockState`; a LOST
session ends every lock and election held through it.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from service.locks.base import LockState

log = logging.getLogger(__name__)

TRANSIENT_ERRORS = (KazooException, KazooTimeoutError)


class SharedClient:
    """One :class:`KazooClient` shared by the providers and elections of a connect string.

    Its kazoo connection listener only records ``state`` (a LOST session bumps ``epoch``: every
    node made in an earlier epoch is gone) and calls the subscribers, which must not block; all
    that is slow (user listeners, deleting nodes again) runs in order on the client's worker thread.
    """

    def __init__(
        self, connect_string: str, session_timeout_ms: int, retry_delay_ms: int, retry_max_ms: int
    ) -> None:
        self.connect_string = connect_string
        self.session_timeout_ms = session_timeout_ms
        delay_s = max(retry_delay_ms, 10) / 1000
        retry = KazooRetry(max_tries=-1, delay=delay_s, max_delay=max(retry_max_ms / 1000, delay_s))
        self.client = KazooClient(
            hosts=connect_string, timeout=session_timeout_ms / 1000, connection_retry=retry
        )
        self.connected = threading.Event()
        self.state = LockState.SUSPENDED  # until the first connection
        self.epoch = 0
        self.refs = 0
        self._guard = threading.Lock()
        self._subscribers: list[Callable[[LockState], None]] = []
        self._doomed: set[tuple[str, str, int]] = set()
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._worker = threading.Thread(target=self._work, name=f"zk-{connect_string}", daemon=True)
        self.client.add_listener(self._on_kazoo_state)

    def start(self) -> None:
        """Start connecting in the background (callers wait on :attr:`connected` when they must)."""
        self._worker.start()
        self.client.start_async()

    def session(self) -> tuple[int, int]:
        """``(epoch, session id)`` of the live session; raises :class:`SessionExpiredError` if none."""
        epoch, client_id = self.epoch, self.client.client_id
        if client_id is None or self.state is not LockState.CONNECTED:
            raise SessionExpiredError(f"no live ZooKeeper session to {self.connect_string}")
        return epoch, int(client_id[0])

    def subscribe(self, callback: Callable[[LockState], None]) -> None:
        with self._guard:
            self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[LockState], None]) -> None:
        with self._guard, contextlib.suppress(ValueError):
            self._subscribers.remove(callback)

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` on the worker thread, in submission order."""
        self._tasks.put(task)

    def _on_kazoo_state(self, kazoo_state: str) -> None:
        mapped = {KazooState.CONNECTED: LockState.CONNECTED, KazooState.SUSPENDED: LockState.SUSPENDED}
        state = mapped.get(kazoo_state, LockState.LOST)
        with self._guard:
            if state is LockState.LOST:
                self.epoch += 1
            self.state = state
            subscribers = list(self._subscribers)
        if state is LockState.CONNECTED:
            self.connected.set()
            self.submit(self._sweep)
        else:
            self.connected.clear()
        log.info("ZooKeeper %s: %s", self.connect_string, state.value)
        for callback in subscribers:
            try:
                callback(state)
            except Exception:
                log.exception("ZooKeeper state subscriber failed")

    def remove(self, parent: str, prefix: str, epoch: int, timeout_s: float | None) -> None:
        """Delete the children of ``parent`` starting with ``prefix`` that session ``epoch`` made.

        Tries now (unless ``timeout_s`` is None: kazoo's threads must not block), else once
        connected again in that session (Curator's guaranteed delete); a later session cannot
        own them, they were ephemeral.
        """
        entry = (parent, prefix, epoch)
        if epoch != self.epoch:
            return
        if timeout_s is not None and self.state is LockState.CONNECTED:
            try:
                self._remove(entry, timeout_s)
                return
            except TRANSIENT_ERRORS as e:
                log.warning("will delete %s/%s* when ZooKeeper is back: %r", parent, prefix, e)
        with self._guard:
            self._doomed.add(entry)
        if self.state is LockState.CONNECTED:
            self.submit(self._sweep)

    def _remove(self, entry: tuple[str, str, int], timeout_s: float) -> None:
        parent, prefix, _ = entry
        try:
            children = self.client.get_children_async(parent).get(timeout=timeout_s)
        except NoNodeError:
            return
        for child in children:
            if child.startswith(prefix):
                with contextlib.suppress(NoNodeError):
                    self.client.delete_async(f"{parent}/{child}").get(timeout=timeout_s)

    def _sweep(self) -> None:
        with self._guard:
            entries = list(self._doomed)
        for entry in entries:
            if entry[2] == self.epoch:  # else its session is over and the node with it
                if self.state is not LockState.CONNECTED:
                    return
                try:
                    self._remove(entry, self.session_timeout_ms / 1000)
                except TRANSIENT_ERRORS as e:
                    log.warning("deleting %s/%s* failed again: %r", entry[0], entry[1], e)
                    continue
            with self._guard:
                self._doomed.discard(entry)

    def _work(self) -> None:
        while (task := self._tasks.get()) is not None:
            try:
                task()
            except Exception:
                log.exception("ZooKeeper background task failed")

    def close(self) -> None:
        """End the session (its ephemeral nodes go with it) and the worker thread."""
        self.client.remove_listener(self._on_kazoo_state)
        try:
            self.client.stop()
            self.client.close()
        finally:
            self.connected.clear()
            self.state = LockState.LOST
            self._tasks.put(None)
            if self._worker.is_alive() and self._worker is not threading.current_thread():
                self._worker.join(timeout=10)


class ZookeeperClients:
    """A registry of :class:`SharedClient` by (connect string, session timeout).

    A client is created and starts connecting when first leased and closed when its last lease is
    returned. :data:`CLIENTS` is the process-wide registry; a separate registry means separate
    sessions (tests use that to play two processes).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._clients: dict[tuple[str, int], SharedClient] = {}

    def lease(
        self,
        connect_string: str,
        session_timeout_ms: int,
        *,
        retry_delay_ms: int = 1_000,
        retry_max_ms: int = 16_000,
    ) -> SharedClient:
        key = (connect_string, session_timeout_ms)
        with self._guard:
            shared = self._clients.get(key)
            if shared is None:
                shared = SharedClient(connect_string, session_timeout_ms, retry_delay_ms, retry_max_ms)
                shared.start()
                self._clients[key] = shared
            shared.refs += 1
            return shared

    def release(self, shared: SharedClient) -> None:
        with self._guard:
            shared.refs -= 1
            if shared.refs > 0:
                return
            self._clients.pop((shared.connect_string, shared.session_timeout_ms), None)
        shared.close()


CLIENTS = ZookeeperClients()
