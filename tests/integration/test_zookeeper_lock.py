"""The ZooKeeper table lock and leader election against a real ZooKeeper 3.8 server.

Curator (the Java side of Hudi's ``ZookeeperBasedLockProvider``) cannot run here, so its side is
played by a raw kazoo session that creates nodes exactly as Curator's ``InterProcessMutex`` does
(protected ephemeral sequential ``_c_<uuid>-lock-``) and by :func:`curator_holder`, Curator's
ordering rule written out (``StandardLockInternalsDriver.standardFixForSorting``): everything up to
the last ``lock-`` is stripped, the remainders are sorted and the first holds the lock.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
from kazoo.recipe.lock import Lock

from service.locks.base import LockError, LockState, ServiceLock
from service.locks.leader import LeaderElection
from service.locks.zookeeper import (
    ZookeeperLockProvider,
    ZookeeperLockSettings,
    contenders,
    find_protected,
    predecessor,
    sort_key,
)
from service.locks.zookeeper_client import ZookeeperClients
from tests.servers.zookeeper import ZooKeeperServer

TABLE = "/data/warehouse/trips"
OUR_NODE = re.compile(r"^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$")


def curator_holder(children: list[str]) -> str:
    """The child Curator's InterProcessMutex considers the holder (its own sort rule)."""

    def fix(name: str) -> str:
        index = name.rfind("lock-")
        return name[index + len("lock-") :] if index >= 0 else name

    return sorted(children, key=fix)[0]


def wait_for(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture()
def raw(zookeeper: ZooKeeperServer) -> Iterator[KazooClient]:
    """A plain kazoo session of its own: plays Curator, kazoo users and the operator's zkCli."""
    client = KazooClient(hosts=zookeeper.connect, timeout=10.0)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


@pytest.fixture()
def zk_base() -> str:
    return f"/hts-test/{uuid.uuid4().hex[:12]}"


@pytest.fixture()
def make_provider(zookeeper: ZooKeeperServer, zk_base: str) -> Iterator[Callable[..., ZookeeperLockProvider]]:
    """Factory of providers on this test's lock path; each ``registry`` name is its own session."""
    made: list[ZookeeperLockProvider] = []
    registries: dict[str, ZookeeperClients] = {}

    def make(
        registry: str = "a", *, session_ms: int = 10_000, client_id: str | None = None
    ) -> ZookeeperLockProvider:
        options = {
            "hoodie.write.lock.zookeeper.url": zookeeper.connect,
            "hoodie.write.lock.zookeeper.base_path": zk_base,
            "hoodie.write.lock.zookeeper.session_timeout_ms": str(session_ms),
            "hoodie.write.lock.zookeeper.connection_timeout_ms": "5000",
            "hoodie.write.lock.wait_time_ms_between_retry": "50",
            "hoodie.write.lock.max_wait_time_ms_between_retry": "200",
        }
        provider = ZookeeperLockProvider.from_options(
            base_path=TABLE,
            table_name="trips",
            options=options,
            client_id=client_id or f"hts-test-{registry}",
            clients=registries.setdefault(registry, ZookeeperClients()),
        )
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()


def lock_children(raw: KazooClient, zk_base: str) -> list[str]:
    path = f"{zk_base}/trips"
    return sorted(raw.get_children(path)) if raw.exists(path) else []


def curator_contender(raw: KazooClient, zk_base: str, app: str = "java-writer") -> str:
    """A contender created exactly as Curator's protected create does; returns its name."""
    created = raw.create(
        f"{zk_base}/trips/_c_{uuid.uuid4()}-lock-",
        f"application_id={app}".encode(),
        ephemeral=True,
        sequence=True,
        makepath=True,
    )
    return str(created).rsplit("/", 1)[1]


def in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``target`` in a thread; the list receives its result or the exception it raised."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as e:
            out.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# -- ordering (pure) ---------------------------------------------------------------------------------


def test_ordering_follows_curator_and_counts_kazoo_nodes() -> None:
    curator = "_c_0f5f1d6e-8c4b-4f59-9a53-1c2f3e4d5a6b-lock-0000000003"
    ours = "_c_a1b2c3d4-0000-4000-8000-000000000000-lock-0000000005"
    kazoo_lock = "0123abcd0123abcd0123abcd0123abcd__lock__0000000001"
    other = "some-persistent-child"
    assert sort_key(curator) == "0000000003"
    assert sort_key(kazoo_lock) == "0000000001"
    assert sort_key(other) is None
    assert contenders([ours, other, curator, kazoo_lock]) == [kazoo_lock, curator, ours]
    assert predecessor([ours, curator, kazoo_lock], ours) == curator
    assert predecessor([ours, curator, kazoo_lock], kazoo_lock) is None
    # Curator itself puts the kazoo node last (no "lock-" in it): the pitfall our ordering avoids
    assert curator_holder([ours, curator, kazoo_lock]) == curator
    assert find_protected([curator, ours], "a1b2c3d4-0000-4000-8000-000000000000") == ours
    assert find_protected([curator], "a1b2c3d4-0000-4000-8000-000000000000") is None


# -- configuration -----------------------------------------------------------------------------------


def test_settings_read_hudis_keys() -> None:
    settings = ZookeeperLockSettings.from_options(
        {
            "hoodie.write.lock.zookeeper.url": "zk1:2181,zk2:2181",
            "hoodie.write.lock.zookeeper.port": "2999",
            "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
            "hoodie.write.lock.num_retries": "3",
        },
        table_name="trips",
        base_path=TABLE,
    )
    assert settings.connect_string == "zk1:2181,zk2:2181"  # the port key is not combined, as in Hudi
    assert settings.lock_path == "/hudi/locks/trips"  # lock_key defaults to the table name
    assert (settings.session_timeout_ms, settings.connection_timeout_ms) == (60_000, 15_000)
    assert settings.lock.num_retries == 3
    explicit = ZookeeperLockSettings.from_options(
        {
            "hoodie.write.lock.zookeeper.url": "zk1",
            "hoodie.write.lock.zookeeper.base_path": "/hudi",
            "hoodie.write.lock.zookeeper.lock_key": "k",
            "hoodie.table.name": "ignored",
        },
        table_name="trips",
        base_path=TABLE,
    )
    assert explicit.lock_path == "/hudi/k"


URL, BASE = "hoodie.write.lock.zookeeper.url", "hoodie.write.lock.zookeeper.base_path"


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({URL: None}, "hoodie.write.lock.zookeeper.url is required"),
        ({URL: "  "}, "hoodie.write.lock.zookeeper.url is required"),
        ({BASE: None}, "hoodie.write.lock.zookeeper.base_path is required"),
        (
            {"hoodie.write.lock.zookeeper.session_timeout_ms": "sixty"},
            "hoodie.write.lock.zookeeper.session_timeout_ms='sixty' is not a whole number",
        ),
        (
            {"hoodie.write.lock.zookeeper.connection_timeout_ms": "15s"},
            "hoodie.write.lock.zookeeper.connection_timeout_ms='15s' is not a whole number",
        ),
        ({"hoodie.write.lock.zookeeper.session_timeout_ms": "0"}, "session_timeout_ms=0 must be at least 1"),
        ({"hoodie.write.lock.num_retries": "many"}, "hoodie.write.lock.num_retries='many'"),
        ({BASE: "hudi/locks"}, "base_path='hudi/locks'"),
        ({BASE: "/hudi/"}, "base_path='/hudi/'"),
    ],
)
def test_bad_settings_name_the_key_and_value(changes: dict[str, str | None], expected: str) -> None:
    options = {URL: "zk:2181", BASE: "/hudi"}
    for key, value in changes.items():
        if value is None:
            options.pop(key)
        else:
            options[key] = value
    with pytest.raises(LockError, match=re.escape(expected)) as error:
        ZookeeperLockProvider.from_options(base_path=TABLE, table_name="trips", options=options)
    if "path" not in expected or "required" in expected:
        assert TABLE in str(error.value)


# -- the lock ----------------------------------------------------------------------------------------


def test_two_sessions_exclude_each_other(make_provider: Callable[..., ZookeeperLockProvider]) -> None:
    first, second = make_provider("a"), make_provider("b")
    assert isinstance(first, ServiceLock)
    first.acquire(5)
    assert first.is_held()
    assert second._shared.connected.wait(5)
    assert first._shared.client.client_id[0] != second._shared.client.client_id[0]  # two sessions
    thread, out = in_thread(lambda: (second.acquire(10), second.is_held(), second.release())[1])
    time.sleep(0.5)
    assert out == [], "the second session must wait while the first holds the lock"
    first.release()
    assert not first.is_held()
    thread.join(10)
    assert out == [True]


def test_threads_of_one_provider_exclude_each_other_and_reenter(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    provider = make_provider()
    provider.acquire(5)
    provider.acquire(5)  # re-entrant: counts, no second node
    assert len(lock_children(raw, zk_base)) == 1
    thread, out = in_thread(lambda: (provider.acquire(10), provider.is_held(), provider.release())[1])
    time.sleep(0.3)
    assert out == []
    assert len(lock_children(raw, zk_base)) == 1, "a waiting thread of the process adds no node"
    impatient, failed = in_thread(lambda: provider.acquire(0.2))
    impatient.join(5)
    assert len(failed) == 1 and isinstance(failed[0], LockError)
    assert "another thread of this process holds" in str(failed[0])
    provider.release()
    assert provider.is_held(), "one release of two keeps the lock"
    time.sleep(0.2)
    assert out == []
    provider.release()
    assert not provider.is_held()
    thread.join(10)
    assert out == [True]
    assert lock_children(raw, zk_base) == []


def test_many_threads_never_overlap(make_provider: Callable[..., ZookeeperLockProvider]) -> None:
    providers = [make_provider("a"), make_provider("a"), make_provider("b")]
    assert providers[0]._shared is providers[1]._shared  # one client per connect string
    inside, overlaps, done = [0], [0], [0]
    guard = threading.Lock()

    def work(provider: ZookeeperLockProvider) -> None:
        for _ in range(5):
            provider.acquire(20)
            try:
                with guard:
                    inside[0] += 1
                    overlaps[0] += inside[0] > 1
                time.sleep(0.005)
                with guard:
                    inside[0] -= 1
                    done[0] += 1
            finally:
                provider.release()

    threads = [threading.Thread(target=work, args=(p,)) for p in providers for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert (done[0], overlaps[0]) == (30, 0)


def test_curator_contender_ahead_makes_us_wait(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    java = curator_contender(raw, zk_base)
    provider = make_provider(client_id="hts-daemon-1")
    with pytest.raises(LockError, match=re.escape(f"{zk_base}/trips")) as error:
        provider.acquire(0.5)
    assert java in str(error.value) and "application_id=java-writer" in str(error.value)
    assert lock_children(raw, zk_base) == [java], "a timed-out acquire leaves no contender"
    thread, out = in_thread(lambda: (provider.acquire(10), provider.is_held())[1])
    wait_for(lambda: len(lock_children(raw, zk_base)) == 2, what="our contender")
    time.sleep(0.2)
    assert out == []
    raw.delete(f"{zk_base}/trips/{java}")
    thread.join(10)
    assert out == [True]
    (ours,) = lock_children(raw, zk_base)
    assert OUR_NODE.match(ours), ours
    data, stat = raw.get(f"{zk_base}/trips/{ours}")
    assert data == b"application_id=hts-daemon-1"
    assert stat.ephemeralOwner == provider._shared.client.client_id[0]
    thread, out = in_thread(provider.release)  # release by the owning thread only
    thread.join(5)
    assert lock_children(raw, zk_base) == [ours]


def test_curator_sees_our_holder_first(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    provider = make_provider()
    provider.acquire(5)
    (ours,) = lock_children(raw, zk_base)
    java = curator_contender(raw, zk_base)
    assert curator_holder(lock_children(raw, zk_base)) == ours
    provider.release()
    assert lock_children(raw, zk_base) == [java]
    assert curator_holder(lock_children(raw, zk_base)) == java


def test_kazoo_locks_and_ours(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    """kazoo 2.11's Lock sees our ``-lock-`` node only with ``extra_lock_patterns=["-lock-"]``;
    we always see kazoo's ``__lock__`` nodes."""
    path = f"{zk_base}/trips"
    provider = make_provider()
    provider.acquire(5)

    def kazoo_gets(lock: Lock) -> bool:
        try:
            got = bool(lock.acquire(timeout=0.5))
        except LockTimeout:
            return False
        if got:
            lock.release()
        return got

    assert not kazoo_gets(Lock(raw, path, "py", extra_lock_patterns=["-lock-"]))
    assert kazoo_gets(Lock(raw, path, "py")), "without the extra pattern kazoo ignores our node"
    provider.release()
    assert kazoo_gets(Lock(raw, path, "py", extra_lock_patterns=["-lock-"]))

    plain = Lock(raw, path, "kazoo-user")
    assert plain.acquire(timeout=5)
    with pytest.raises(LockError, match="__lock__"):
        provider.acquire(0.5)
    thread, out = in_thread(lambda: (provider.acquire(10), provider.is_held(), provider.release())[1])
    time.sleep(0.2)
    assert out == []
    plain.release()
    thread.join(10)
    assert out == [True]


def test_timeout_is_bounded_and_leaves_no_node(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    holder, waiter = make_provider("a"), make_provider("b")
    holder.acquire(5)
    before = lock_children(raw, zk_base)
    start = time.monotonic()
    with pytest.raises(LockError, match="timed out after 0.5s"):
        waiter.acquire(timeout_s=0.5)
    assert 0.4 < time.monotonic() - start < 2.5
    assert lock_children(raw, zk_base) == before
    assert not waiter.is_held()
    holder.release()
    waiter.acquire(5)
    assert waiter.is_held()
    waiter.release()


def test_lost_reply_is_recovered_by_protected_prefix(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    """The node a create made before its reply was lost is found again, not created twice."""
    provider = make_provider()
    provider.acquire(5)
    provider.release()
    shared = provider._shared
    protected_id = str(uuid.uuid4())
    made = shared.client.create(
        f"{zk_base}/trips/_c_{protected_id}-lock-", b"x", ephemeral=True, sequence=True
    ).rsplit("/", 1)[1]
    found = provider._create(protected_id, True, shared.epoch, time.monotonic() + 5, 5)
    assert found == made
    assert lock_children(raw, zk_base) == [made]


def test_session_expiry_loses_the_lock(
    zookeeper: ZooKeeperServer,
    make_provider: Callable[..., ZookeeperLockProvider],
    raw: KazooClient,
    zk_base: str,
) -> None:
    provider, other = make_provider("a", session_ms=1000), make_provider("b")
    seen: list[LockState] = []
    provider.add_state_listener(seen.append)
    provider.acquire(5)
    assert provider.is_held() and provider.state is LockState.CONNECTED
    session_id, password = provider._shared.client.client_id
    zookeeper.expire_session(session_id, password)
    wait_for(lambda: LockState.LOST in seen, what="the LOST state")
    assert not provider.is_held()
    other.acquire(5)  # our node went with the session
    assert other.is_held()
    provider.release()  # a no-op now
    assert other.is_held()
    other.release()
    wait_for(lambda: provider.state is LockState.CONNECTED, what="a new session")
    assert provider._shared.client.client_id[0] != session_id
    provider.acquire(5)
    assert provider.is_held()
    provider.release()
    wait_for(lambda: seen[-1:] == [LockState.CONNECTED], what="the CONNECTED listener call")
    assert lock_children(raw, zk_base) == []


def test_suspended_connection_keeps_the_lock_of_a_live_session(
    zookeeper: ZooKeeperServer,
    make_provider: Callable[..., ZookeeperLockProvider],
    raw: KazooClient,
    zk_base: str,
) -> None:
    provider = make_provider("a", session_ms=6000)
    seen: list[LockState] = []
    provider.add_state_listener(seen.append)
    provider.acquire(5)
    session_id = provider._shared.client.client_id[0]
    with zookeeper.paused():
        wait_for(lambda: provider.state is LockState.SUSPENDED, what="the SUSPENDED state")
        assert not provider.is_held(), "a suspended lock cannot be confirmed"
    wait_for(lambda: provider.state is LockState.CONNECTED, what="the reconnection")
    assert provider._shared.client.client_id[0] == session_id
    assert provider.is_held(), "the session lived on, and our node with it"
    wait_for(lambda: seen[-2:] == [LockState.SUSPENDED, LockState.CONNECTED], what="both listener calls")
    assert LockState.LOST not in seen
    provider.release()
    assert lock_children(raw, zk_base) == []


def test_close_releases_and_closes_the_shared_client(
    make_provider: Callable[..., ZookeeperLockProvider], raw: KazooClient, zk_base: str
) -> None:
    first, second = make_provider("a"), make_provider("a")
    shared = first._shared
    first.acquire(5)
    first.close()
    assert lock_children(raw, zk_base) == []
    assert shared.client.connected, "still used by the second provider"
    with pytest.raises(LockError, match="closed"):
        first.acquire(1)
    second.close()
    assert not shared.client.connected
    assert second.state is LockState.LOST


# -- leader election ---------------------------------------------------------------------------------


def test_one_leader_and_failover(zookeeper: ZooKeeperServer, zk_base: str) -> None:
    path = f"{zk_base}/leader"
    one = LeaderElection(
        zookeeper.connect, path, "replica-1", session_timeout_ms=1000, clients=ZookeeperClients()
    )
    two = LeaderElection(
        zookeeper.connect, path, "replica-2", session_timeout_ms=1000, clients=ZookeeperClients()
    )
    changes: dict[str, list[bool]] = {"one": [], "two": []}
    one.add_listener(changes["one"].append)
    two.add_listener(changes["two"].append)
    one.start()
    wait_for(lambda: one.is_leader, what="the first elector to lead")
    two.start()
    try:
        time.sleep(0.5)
        assert (one.is_leader, two.is_leader) == (True, False)
        one.stop()
        wait_for(lambda: two.is_leader, what="failover to the second elector")
        assert not one.is_leader
        wait_for(lambda: (changes["one"], changes["two"]) == ([True, False], [True]), what="the listeners")
        one.start()
        time.sleep(0.3)
        assert (one.is_leader, two.is_leader) == (False, True)
        # the leader's session expires: it steps down, the other one takes over
        shared = two._shared
        assert shared is not None
        session_id, password = shared.client.client_id
        zookeeper.expire_session(session_id, password)
        wait_for(lambda: one.is_leader, what="failover after session expiry")
        wait_for(lambda: changes["two"][-1:] == [False], what="the expired leader to step down")
        time.sleep(0.5)
        assert sum(e.is_leader for e in (one, two)) == 1
    finally:
        one.stop()
        two.stop()
