"""Leader election through ZooKeeper, so that one daemon replica self-schedules plans.

Every elector owns an ephemeral sequential child of the election path, named the way Curator's
``LeaderLatch`` names its own (apache/curator: curator-recipes .../leader/LeaderLatch.java: protected
mode and the name ``latch-``, so ``_c_<uuid>-latch-0000000007``, data = the participant id) and
ordered the way Curator orders lock contenders (the text after the last ``latch-``,
:func:`service.locks.zookeeper.contenders`). The first child is the leader; every other elector
watches the child just before its own, so a leader's exit wakes one successor only.

Leadership needs a live session: it is dropped at once when the connection is SUSPENDED or the
session LOST (another replica may take over once the session expires) and is regained, if the node
is still first, when the connection is back. The election shares the process's ZooKeeper client
(:data:`service.locks.zookeeper_client.CLIENTS`) with the table locks.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Callable

from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from service.locks.base import LockState
from service.locks.zookeeper import find_protected, predecessor, protected_prefix
from service.locks.zookeeper_client import CLIENTS, SharedClient, ZookeeperClients

log = logging.getLogger(__name__)

LATCH_NAME = "latch-"
"""``LeaderLatch.LOCK_NAME``."""

LeadershipListener = Callable[[bool], None]
_TRANSIENT = (KazooException, KazooTimeoutError)


class LeaderElection:
    """One participant of the election at ``path``; :attr:`is_leader` says whether it leads now."""

    def __init__(
        self,
        connect_string: str,
        path: str,
        identifier: str,
        *,
        session_timeout_ms: int = 60_000,
        clients: ZookeeperClients | None = None,
    ) -> None:
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise ValueError(f"leader election path {path!r} is not a valid znode path")
        self.connect_string = connect_string
        self.path = path
        self.identifier = identifier
        self.session_timeout_ms = session_timeout_ms
        self._clients = clients or CLIENTS
        self._shared: SharedClient | None = None
        self._guard = threading.Lock()
        self._leader = False
        self._listeners: list[LeadershipListener] = []
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._node: tuple[str, int] | None = None  # (node name, session epoch)
        self._attempt: tuple[str, int] | None = None  # (protected id, session epoch) of our create

    @property
    def is_leader(self) -> bool:
        return self._leader

    def add_listener(self, listener: LeadershipListener) -> None:
        """Call ``listener(is_leader)`` (on a background thread) whenever leadership changes."""
        with self._guard:
            self._listeners.append(listener)

    def start(self) -> None:
        """Join the election (returns at once; leadership follows asynchronously)."""
        if self._thread is not None:
            raise RuntimeError(f"leader election at {self.path} already started")
        self._shared = self._clients.lease(self.connect_string, self.session_timeout_ms)
        self._shared.subscribe(self._on_state)
        self._thread = threading.Thread(target=self._run, name=f"leader-{self.path}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Leave the election: leadership ends and our node is deleted."""
        shared, thread = self._shared, self._thread
        if shared is None or thread is None:
            return
        self._stopping.set()
        self._wake.set()
        thread.join(timeout=self.session_timeout_ms / 1000 + 5)
        self._set_leader(False)
        shared.unsubscribe(self._on_state)
        if self._attempt is not None:
            protected_id, epoch = self._attempt
            shared.remove(
                self.path, protected_prefix(protected_id), epoch, min(self.session_timeout_ms / 1000, 10.0)
            )
        self._node = self._attempt = None
        self._clients.release(shared)
        self._shared = self._thread = None
        self._stopping.clear()

    # -- internals -------------------------------------------------------------------------------

    def _on_state(self, state: LockState) -> None:  # kazoo's thread: never block here
        if state is not LockState.CONNECTED:
            self._set_leader(False)
        self._wake.set()

    def _on_watch(self, _event: object) -> None:  # kazoo's thread
        self._wake.set()

    def _set_leader(self, leader: bool, epoch: int | None = None) -> None:
        shared = self._shared
        with self._guard:
            if leader and (
                shared is None or shared.state is not LockState.CONNECTED or shared.epoch != epoch
            ):
                return  # the session this was decided in is no longer live
            if leader == self._leader:
                return
            self._leader = leader
            listeners = list(self._listeners)
        log.info("%s %s leadership of %s", self.identifier, "takes" if leader else "drops", self.path)
        if shared is not None:
            shared.submit(lambda: self._notify(listeners, leader))

    @staticmethod
    def _notify(listeners: list[LeadershipListener], leader: bool) -> None:
        for listener in listeners:
            try:
                listener(leader)
            except Exception:
                log.exception("leadership listener failed")

    def _run(self) -> None:
        shared = self._shared
        assert shared is not None
        while not self._stopping.is_set():
            self._wake.clear()
            if shared.state is not LockState.CONNECTED:
                self._set_leader(False)
                self._wake.wait(1.0)
                continue
            try:
                self._step(shared)
            except _TRANSIENT as e:
                log.info("leader election at %s: %r; trying again", self.path, e)
                self._set_leader(False)
                self._wake.wait(1.0)

    def _step(self, shared: SharedClient) -> None:
        """One look at the contenders: lead, or watch our predecessor; then wait for a change.

        A create whose reply was lost is found again by its protected prefix while the session
        lasts (a second node of ours would queue behind the first until the session ends).
        """
        client, epoch = shared.client, shared.epoch
        timeout_s = self.session_timeout_ms / 1000  # a call queued while disconnected must not hang
        if self._node is None or self._node[1] != epoch:
            found = None
            if self._attempt is None or self._attempt[1] != epoch:
                self._attempt = (str(uuid.uuid4()), epoch)
            else:
                with contextlib.suppress(NoNodeError):
                    found = find_protected(
                        client.get_children_async(self.path).get(timeout=timeout_s), self._attempt[0]
                    )
            if found is None:
                created = client.create_async(
                    f"{self.path}/{protected_prefix(self._attempt[0])}{LATCH_NAME}",
                    self.identifier.encode(),
                    ephemeral=True,
                    sequence=True,
                    makepath=True,
                ).get(timeout=timeout_s)
                found = created.rsplit("/", 1)[1]
                if shared.epoch != epoch:  # the session changed under the create: drop it, start again
                    shared.remove(self.path, protected_prefix(self._attempt[0]), shared.epoch, None)
                    return
            self._node = (found, epoch)
        try:
            children = client.get_children_async(self.path).get(timeout=timeout_s)
            ahead = predecessor(children, self._node[0], LATCH_NAME)
        except NoNodeError:
            self._node = None  # our node is gone (deleted by hand): find or create it again
            return
        if ahead is None:
            self._set_leader(True, epoch)
        else:
            self._set_leader(False)
            try:  # getData, not exists: no watch is left behind on a node already gone
                client.get_async(f"{self.path}/{ahead}", watch=self._on_watch).get(timeout=timeout_s)
            except NoNodeError:
                return
        self._wake.wait()
