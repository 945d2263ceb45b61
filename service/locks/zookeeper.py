"""A ZooKeeper table lock that Apache Hudi's ``ZookeeperBasedLockProvider`` and this daemon both respect.

Hudi's provider (apache/hudi: hudi-client-common .../transaction/lock/BaseZookeeperBasedLockProvider.java,
ZookeeperBasedLockProvider.java, HoodieInterProcessMutex.java) is Curator's ``InterProcessMutex``
on the znode ``<hoodie.write.lock.zookeeper.base_path>/<lock_key>``. What a Python writer must do
the same way (apache/curator: curator-recipes .../locks/{InterProcessMutex, LockInternals,
StandardLockInternalsDriver}.java, curator-framework .../imps/{CreateBuilderImpl, ProtectedUtils}.java):

* **Contender nodes.** Each acquire creates an ephemeral sequential child named in Curator's
  protected mode: ``_c_`` + a 36-character UUID + ``-`` + the lock name ``lock-``, to which
  ZooKeeper appends a 10-digit sequence: ``_c_<uuid>-lock-0000000042``.
* **Node data.** Recent Hudi writes ``application_id=<id>`` (UTF-8, no newline; the key
  ``hoodie.write.lock.app_id``, default ``Unknown``) so operators see the holder with zkCli; we
  write ``application_id=<daemon client id>``. Older Hudi wrote Curator's default payload.
* **Order.** Curator sorts *all* children by the text after the **last** ``lock-`` (the whole
  name when there is none); the first holds the lock and every other contender watches the one
  just before it (no herd effect). We use the same key, so for Curator's nodes and ours both sides
  agree on who holds the lock.
* **kazoo's default Lock** names its nodes ``<32 hex>__lock__<seq>``. Curator finds no ``lock-`` in
  them, so it sorts them by their whole name, after every ``lock-`` node's bare sequence (a digit
  string sorts before a hex uuid): a Java writer would ignore a kazoo holder. We count such nodes as
  contenders ordered by their sequence, so at least this provider never overlaps a plain kazoo
  lock; kazoo itself sees our nodes only with ``extra_lock_patterns=["-lock-"]``. Children that are
  neither are ignored.
* **Parents.** Curator creates missing parents as container nodes, which ZooKeeper removes once
  empty; recent Hudi creates every component persistent up-front. We create missing parents as
  persistent nodes (kazoo ``makepath``), which suits both.
* **Lost replies.** If a create's reply is lost with the connection, the node is found again by
  its ``_c_<uuid>-`` prefix (Curator's protected-mode recovery) instead of creating a second one.
* **Timeouts and release** delete our node; when that cannot happen now it is retried once the
  connection is back (Curator's guaranteed delete). An ephemeral node also goes with its session.

Hudi reads ``hoodie.write.lock.zookeeper.url`` as the connect string (``host:port,...``);
``hoodie.write.lock.zookeeper.port`` is declared but never combined with it, so we ignore it too.

One :class:`KazooClient` (one session at a time) serves every provider of the same connect string
and session timeout (:mod:`service.locks.zookeeper_client`). Its connection state is the providers'
:class:`~service.locks.base.LockState`; a LOST session ends every lock held through it.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import NoNodeError, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.handlers.utils import AsyncResult

from hoodie.errors import HoodieError
from hoodie.services.options import int_option, lookup
from service.locks.base import LockConfig, LockError, LockState, StateListener
from service.locks.zookeeper_client import CLIENTS, TRANSIENT_ERRORS, ZookeeperClients

log = logging.getLogger(__name__)

LOCK_NAME = "lock-"
"""``InterProcessMutex.LOCK_NAME``: the contender name before ZooKeeper's sequence."""
PROTECTED_PREFIX = "_c_"
"""Curator's protected-mode prefix, followed by a UUID and ``-``."""
_KAZOO_CONTENDER = re.compile(r"__lock__(-?\d{10})$")

_ZK = "hoodie.write.lock.zookeeper."
URL_KEY = _ZK + "url"
BASE_PATH_KEY = _ZK + "base_path"
LOCK_KEY_KEY = _ZK + "lock_key"
SESSION_TIMEOUT_KEY = _ZK + "session_timeout_ms"
CONNECTION_TIMEOUT_KEY = _ZK + "connection_timeout_ms"
TABLE_NAME_KEY = "hoodie.table.name"

_MIN_CALL_S = 0.1


def protected_prefix(protected_id: str) -> str:
    """``_c_<uuid>-``: how Curator's protected mode starts a node name."""
    return f"{PROTECTED_PREFIX}{protected_id}-"


def sort_key(name: str, lock_name: str = LOCK_NAME) -> str | None:
    """The text Curator sorts a child by (after the last ``lock_name``), a kazoo ``__lock__`` node's
    sequence, or ``None`` for a child that is not a contender."""
    index = name.rfind(lock_name)
    if index >= 0:
        return name[index + len(lock_name) :]
    match = _KAZOO_CONTENDER.search(name)
    return match.group(1) if match else None


def contenders(children: Iterable[str], lock_name: str = LOCK_NAME) -> list[str]:
    """The contenders among ``children``, first (the holder) first."""
    keyed = [(key, child) for child in children if (key := sort_key(child, lock_name)) is not None]
    keyed.sort()
    return [child for _, child in keyed]


def predecessor(children: Iterable[str], ours: str, lock_name: str = LOCK_NAME) -> str | None:
    """The contender just before ``ours`` (the one to watch), or ``None`` when ``ours`` is first.

    Raises :class:`NoNodeError` when ``ours`` is not among the children (its session ended).
    """
    order = contenders(children, lock_name)
    try:
        index = order.index(ours)
    except ValueError:
        raise NoNodeError(f"contender {ours} is gone") from None
    return order[index - 1] if index else None


def find_protected(children: Iterable[str], protected_id: str) -> str | None:
    """Our node among ``children`` by its protected prefix (Curator's ``CreateBuilderImpl.findNode``)."""
    prefix = protected_prefix(protected_id)
    return next((child for child in children if child.startswith(prefix)), None)


@dataclass(frozen=True)
class ZookeeperLockSettings:
    """The ``hoodie.write.lock.zookeeper.*`` settings of one table, validated."""

    connect_string: str
    zk_base_path: str
    lock_key: str
    session_timeout_ms: int = 60_000
    connection_timeout_ms: int = 15_000
    lock: LockConfig = field(default_factory=LockConfig)

    def __post_init__(self) -> None:
        path = self.lock_path
        if not path.startswith("/") or path.endswith("/") or "//" in path:
            raise LockError(
                f"ZooKeeper lock path {path!r} ({BASE_PATH_KEY}={self.zk_base_path!r} + '/' + "
                f"{LOCK_KEY_KEY}={self.lock_key!r}) is not a valid znode path: the base path must start "
                "with '/' and neither part may be empty or end with '/'"
            )

    @property
    def lock_path(self) -> str:
        """``<base_path>/<lock_key>``, joined as Hudi joins them (``getLockPath``)."""
        return f"{self.zk_base_path}/{self.lock_key}"

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], *, table_name: str, base_path: str
    ) -> ZookeeperLockSettings:
        where = f"the ZooKeeper lock of table {base_path}"
        url = lookup(options, URL_KEY)
        if url is None:
            raise LockError(f"{URL_KEY} is required for {where} (a connect string like zk1:2181,zk2:2181)")
        zk_base = lookup(options, BASE_PATH_KEY)
        if zk_base is None:
            raise LockError(f"{BASE_PATH_KEY} is required for {where} (a znode path like /hudi/locks)")
        key = lookup(options, (LOCK_KEY_KEY, TABLE_NAME_KEY))
        lock_key = key[1] if key is not None else table_name.strip()
        if not lock_key:
            raise LockError(f"{LOCK_KEY_KEY} is not set and the table name is empty for {where}")
        try:
            return cls(
                connect_string=url[1],
                zk_base_path=zk_base[1],
                lock_key=lock_key,
                session_timeout_ms=int_option(options, SESSION_TIMEOUT_KEY, 60_000, 1),
                connection_timeout_ms=int_option(options, CONNECTION_TIMEOUT_KEY, 15_000, 1),
                lock=LockConfig.from_options(options),
            )
        except HoodieError as e:  # LockError too
            raise LockError(f"invalid setting for {where}: {e}") from e


@dataclass(frozen=True, slots=True)
class _Hold:
    """Our contender node (full path) and the session (epoch, id) that created it."""

    node: str
    epoch: int
    session_id: int


def _result(async_result: AsyncResult, deadline: float) -> Any:
    return async_result.get(timeout=max(deadline - time.monotonic(), _MIN_CALL_S))


class ZookeeperLockProvider:
    """A table lock wire-compatible with Hudi's ``ZookeeperBasedLockProvider`` (module docstring).

    Thread-safe and re-entrant for the owning thread; other threads of this process wait on a
    local condition, so the process has at most one contender node at a time. ``acquire(None)``
    waits ``hoodie.write.lock.wait_time_ms`` (Hudi's wait per attempt), not forever.
    """

    def __init__(
        self,
        settings: ZookeeperLockSettings,
        *,
        table_base_path: str,
        client_id: str | None = None,
        clients: ZookeeperClients | None = None,
    ) -> None:
        self.settings = settings
        self.table_base_path = table_base_path
        self.client_id = client_id or f"hts-{socket.gethostname()}-{os.getpid()}"
        self.lock_path = settings.lock_path
        self._where = f"ZooKeeper lock {self.lock_path} of table {table_base_path}"
        self._call_s = min(settings.connection_timeout_ms, settings.session_timeout_ms) / 1000
        self._data = f"application_id={self.client_id}".encode()
        self._clients = clients or CLIENTS
        cfg = settings.lock
        self._shared = self._clients.lease(
            settings.connect_string,
            settings.session_timeout_ms,
            retry_delay_ms=cfg.wait_time_ms_between_retry,
            retry_max_ms=cfg.max_wait_time_ms_between_retry,
        )
        self._cond = threading.Condition()
        self._owner: threading.Thread | None = None  # a Thread, not an ident: idents are reused
        self._count = 0
        self._hold: _Hold | None = None
        self._closed = False
        self._wake = threading.Event()
        self._listeners: list[StateListener] = []
        self._shared.subscribe(self._on_state)

    @classmethod
    def from_options(
        cls,
        *,
        base_path: str,
        table_name: str,
        options: Mapping[str, str],
        client_id: str | None = None,
        clients: ZookeeperClients | None = None,
    ) -> ZookeeperLockProvider:
        """A provider from Hudi's ``hoodie.write.lock.*`` options for the table at ``base_path``."""
        settings = ZookeeperLockSettings.from_options(options, table_name=table_name, base_path=base_path)
        return cls(settings, table_base_path=base_path, client_id=client_id, clients=clients)

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> LockState:
        return LockState.LOST if self._closed else self._shared.state

    def add_state_listener(self, listener: StateListener) -> None:
        with self._cond:
            self._listeners.append(listener)

    def _on_state(self, state: LockState) -> None:  # kazoo's thread: never block here
        self._wake.set()
        self._shared.submit(lambda: self._notify(state))

    def _notify(self, state: LockState) -> None:
        with self._cond:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(state)
            except Exception:
                log.exception("lock state listener failed for %s", self.lock_path)

    # -- the lock ------------------------------------------------------------------------------

    def _lost(self, hold: _Hold) -> bool:
        return hold.epoch != self._shared.epoch

    def acquire(self, timeout_s: float | None = None) -> None:
        wait_s = self.settings.lock.wait_time_ms / 1000 if timeout_s is None else max(timeout_s, 0.0)
        deadline = time.monotonic() + wait_s
        me = threading.current_thread()
        with self._cond:
            if self._closed:
                raise LockError(f"{self._where}: the provider is closed")
            if self._owner is me and self._hold is not None:
                if self._lost(self._hold):
                    raise LockError(f"{self._where} was lost with its ZooKeeper session; release it first")
                self._count += 1
                return
            while self._owner is not None and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise LockError(
                        f"timed out after {wait_s}s: another thread of this process holds the {self._where}"
                    )
                self._cond.wait(remaining)
            if self._closed:
                raise LockError(f"{self._where}: the provider is closed")
            self._owner = me
        try:
            hold = self._acquire_node(deadline, wait_s)
        except BaseException:
            with self._cond:
                if self._owner is me:
                    self._owner = None
                    self._cond.notify()
            raise
        with self._cond:
            if not self._closed:
                self._hold, self._count = hold, 1
                return
        self._remove(hold)
        raise LockError(f"{self._where}: the provider was closed while acquiring")

    def _acquire_node(self, deadline: float, wait_s: float) -> _Hold:
        """Create our contender and wait for our turn; on any failure leave no node behind.

        A create whose reply was lost is looked up by its protected prefix while the session
        lasts; a new session gets a new protected id (the old node went with the old session).
        """
        shared, cfg = self._shared, self.settings.lock
        attempts: list[tuple[str, int]] = []  # (protected id, epoch) of every create we sent
        hold: _Hold | None = None
        retries = 0
        try:
            while True:
                if self._closed:
                    raise LockError(f"{self._where}: the provider was closed while acquiring")
                try:
                    self._await_connected(deadline, wait_s)
                    epoch, session_id = shared.session()
                    if hold is None or hold.epoch != epoch:
                        tried = bool(attempts) and attempts[-1][1] == epoch
                        if not tried:
                            attempts.append((str(uuid.uuid4()), epoch))
                        name = self._create(attempts[-1][0], tried, epoch, deadline, wait_s)
                        hold = _Hold(f"{self.lock_path}/{name}", epoch, session_id)
                    if self._await_turn(hold.node.rsplit("/", 1)[1], deadline, wait_s):
                        return hold
                except LockError:
                    raise
                except TRANSIENT_ERRORS as e:
                    retries += 1
                    if retries > cfg.num_retries or time.monotonic() >= deadline:
                        raise LockError(
                            f"could not acquire the {self._where} after {retries} attempts: {e!r}"
                        ) from e
                    log.info("retrying the %s after %r", self._where, e)
                    if isinstance(e, NoNodeError):
                        hold = None  # our contender is gone (session ended, or deleted by hand)
                    delay_ms = min(
                        cfg.max_wait_time_ms_between_retry,
                        cfg.wait_time_ms_between_retry * 2 ** (retries - 1),
                    )
                    time.sleep(max(0.0, min(delay_ms / 1000, deadline - time.monotonic())))
        except BaseException:
            for protected_id, epoch in attempts:
                shared.remove(self.lock_path, protected_prefix(protected_id), epoch, self._call_s)
            raise

    def _remove(self, hold: _Hold) -> None:
        if not self._lost(hold):
            parent, name = hold.node.rsplit("/", 1)
            self._shared.remove(parent, name, hold.epoch, self._call_s)

    def _await_connected(self, deadline: float, wait_s: float) -> None:
        shared = self._shared
        limit = min(deadline, time.monotonic() + self.settings.connection_timeout_ms / 1000)
        if not shared.connected.wait(max(limit - time.monotonic(), 0.0)):
            waited = min(wait_s, self.settings.connection_timeout_ms / 1000)
            raise LockError(
                f"ZooKeeper at {shared.connect_string} is not connected ({shared.state.value}) after "
                f"{waited}s: cannot acquire the {self._where}"
            )

    def _create(self, protected_id: str, tried: bool, epoch: int, deadline: float, wait_s: float) -> str:
        """Our node's name: found by its protected prefix if an earlier create in this session
        may have succeeded, else created (with any missing parents)."""
        shared = self._shared
        client, prefix = shared.client, protected_prefix(protected_id)
        if tried:
            found = find_protected(_result(client.get_children_async(self.lock_path), deadline), protected_id)
            if found is not None:
                return found
        pending = client.create_async(
            f"{self.lock_path}/{prefix}{LOCK_NAME}", self._data, ephemeral=True, sequence=True, makepath=True
        )
        try:
            path = str(_result(pending, deadline))
        except KazooTimeoutError as e:
            # still queued (the connection dropped): if it is ever created, delete it then
            pending.rawlink(
                lambda done: shared.remove(self.lock_path, prefix, epoch, None) if done.successful() else None
            )
            raise LockError(f"timed out after {wait_s}s creating a contender for the {self._where}") from e
        if shared.epoch != epoch:
            # the session changed under the create: whichever session made the node, drop it
            shared.remove(self.lock_path, prefix, shared.epoch, None)
            raise SessionExpiredError(f"ZooKeeper session changed while creating {path}")
        return path.rsplit("/", 1)[1]

    def _await_turn(self, node: str, deadline: float, wait_s: float) -> bool:
        client = self._shared.client
        while True:
            self._wake.clear()
            ahead = predecessor(_result(client.get_children_async(self.lock_path), deadline), node)
            if ahead is None:
                return True
            try:
                data, _ = _result(
                    client.get_async(f"{self.lock_path}/{ahead}", watch=self._on_watch), deadline
                )
            except NoNodeError:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self._wake.wait(remaining):
                holder = bytes(data or b"").decode("utf-8", "replace")
                raise LockError(
                    f"timed out after {wait_s}s waiting for the {self._where}: "
                    f"{ahead} ({holder or 'no data'}) is ahead of {node}"
                )
            if self._shared.state is not LockState.CONNECTED:
                self._await_connected(deadline, wait_s)  # watches are reset: look again once back

    def _on_watch(self, _event: object) -> None:  # kazoo's thread
        self._wake.set()

    def release(self) -> None:
        me = threading.current_thread()
        with self._cond:
            if self._owner is not me or self._hold is None:
                return
            hold = self._hold
            if self._count > 1 and not self._lost(hold):
                self._count -= 1
                return
            self._hold, self._count = None, 0
        try:
            self._remove(hold)
        finally:
            with self._cond:
                self._owner = None
                self._cond.notify()

    def is_held(self) -> bool:
        """Whether the calling thread holds the lock, checked with the server: the session that
        made our node is live (not SUSPENDED, not LOST) and the node exists and is that session's."""
        with self._cond:
            hold = self._hold if self._owner is threading.current_thread() else None
        if hold is None or self._lost(hold) or self._shared.state is not LockState.CONNECTED:
            return False
        try:
            stat = self._shared.client.exists_async(hold.node).get(timeout=self._call_s)
        except TRANSIENT_ERRORS:
            return False
        return stat is not None and stat.ephemeralOwner == hold.session_id and not self._lost(hold)

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            hold, self._hold, self._count, self._owner = self._hold, None, 0, None
            self._cond.notify_all()
        try:
            if hold is not None:
                self._remove(hold)
        finally:
            self._shared.unsubscribe(self._on_state)
            self._clients.release(self._shared)
