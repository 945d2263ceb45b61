"""No instant completes without the table lock, on every commit path (a real ZooKeeper for the lock).

Every path that completes an instant goes through ``hoodie.transaction.commit``, which asks the lock
whether it is still held right before the completed file is written. Here the ZooKeeper session is
expired from the server's side at that very moment (when a commit asks for the ``expire_at``-th time),
for every registered table service, every write operation, and the metadata table's own instants:
nothing completes, the error names the lost lock, and the next run (the provider has a new session
by then) completes the work.

The expiry is real (the server ends the session; its ephemeral lock node goes), as in
``test_daemon_ha.test_no_completion_after_the_zookeeper_session_expired``, which expires it on the
compaction's completing acquire (counted: claim, completion). Counting acquires differs from path to
path, so here the trigger is the lock check itself, the one moment every path shares.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hoodie.config.table_config import TableType
from hoodie.services.base import KNOWN_SERVICES, LocalRunner, ServiceContext, service_named
from hoodie.table import HoodieTable
from hoodie.transaction.lock import InProcessLockProvider, LockError
from hoodie.transaction.time_generator import WaitBasedTimeGenerator
from hoodie.write.options import WriteOperation
from hoodie.write.writer import HoodieWriter
from service.locks import ZOOKEEPER
from service.locks.base import LockState
from service.locks.zookeeper import ZookeeperClients, ZookeeperLockProvider
from tests.servers.zookeeper import ZooKeeperServer
from tests.tables import Killed, KilledWriter, new_table, rows


def _zk_options(zookeeper: ZooKeeperServer) -> dict[str, str]:
    return {
        "hoodie.write.lock.provider": ZOOKEEPER,
        "hoodie.write.lock.zookeeper.url": zookeeper.connect,
        "hoodie.write.lock.zookeeper.base_path": "/hudi/locks",
        "hoodie.write.lock.zookeeper.session_timeout_ms": "4000",
    }


def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


class _ExpiresAtCommit(ZookeeperLockProvider):
    """Expires its own ZooKeeper session when a commit asks, for the ``expire_at``-th time, whether
    the lock is still held: right before the completed file would be written."""

    server: ZooKeeperServer
    expire_at: int = 0
    """Which lock check expires the session (0: none)."""
    checks: int = 0

    def is_held(self) -> bool:
        if self.expire_at and ZookeeperLockProvider.is_held(self):
            self.checks += 1
            if self.checks == self.expire_at:
                self.expire_at = 0
                session_id, password = self._shared.client.client_id
                self.server.expire_session(session_id, password)
                wait_for(lambda: not ZookeeperLockProvider.is_held(self), 20, "the expiry to be noticed")
        return ZookeeperLockProvider.is_held(self)


@pytest.fixture()
def zk_lock(zookeeper: ZooKeeperServer) -> Iterator[Callable[[HoodieTable], _ExpiresAtCommit]]:
    made: list[_ExpiresAtCommit] = []

    def make(table: HoodieTable) -> _ExpiresAtCommit:
        lock = _ExpiresAtCommit.from_options(
            base_path=table.base_path,
            table_name=table.name,
            options=_zk_options(zookeeper),
            clients=ZookeeperClients(),
        )
        lock.server = zookeeper
        made.append(lock)
        return lock

    yield make
    for lock in made:
        lock.close()


def _completed(path: Path) -> set[tuple[str, str, str]]:
    """Every completed instant of the table and of its metadata table."""
    out = {
        ("data", i.requested_time, i.action.value) for i in HoodieTable.open(str(path)).reload().completed()
    }
    if (path / ".hoodie" / "metadata" / ".hoodie").exists():
        mdt = HoodieTable.open(str(path / ".hoodie" / "metadata")).reload()
        out |= {("metadata", i.requested_time, i.action.value) for i in mdt.completed()}
    return out


# -- what each path needs before it can commit ---------------------------------------------------------


def _writes(path: Path, *, metadata_table: bool, upserts: int = 1, cow: bool = False) -> None:
    table_type = TableType.COPY_ON_WRITE if cow else TableType.MERGE_ON_READ
    writer = HoodieWriter(new_table(path, table_type=table_type, metadata_table=metadata_table))
    writer.insert(rows(range(20), 1))
    for n in range(upserts):
        writer.upsert(rows(range(0, 20, 2), 2 + n))


def _compaction(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table)
    return {"hoodie.compact.inline.max.delta.commits": "1"}


def _log_compaction(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table, upserts=2)
    return {"hoodie.log.compaction.blocks.threshold": "1"}


def _clustering(path: Path, metadata_table: bool) -> dict[str, str]:
    writer = HoodieWriter(new_table(path, metadata_table=metadata_table))
    for b in range(3):
        writer.insert(rows(range(b * 10, b * 10 + 10), 1))
    return {}


def _clean(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table, upserts=3, cow=True)
    return {"hoodie.clean.commits.retained": "1"}


def _failed_write(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table)
    with pytest.raises(Killed):
        KilledWriter(HoodieTable.open(str(path))).upsert(rows(range(5), 9))
    return {}


def _archival(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table, upserts=6, cow=True)
    return {
        "hoodie.keep.min.commits": "1",
        "hoodie.keep.max.commits": "2",
        "hoodie.cleaner.commits.retained": "1",
    }


def _savepoint(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table, cow=True)
    return {}


def _savepointed(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table, cow=True)
    table = HoodieTable.open(str(path))
    last = table.reload().completed().writes().last()
    assert last is not None
    service_named("savepoint").schedule(ServiceContext(table))
    HoodieWriter(table).upsert(rows(range(5), 7))
    return {"hts.restore.savepoint": last.requested_time}


def _indexing(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table)
    return {
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.partition.stats.enable": "false",
    }


def _ttl(path: Path, metadata_table: bool) -> dict[str, str]:
    """Partitions last written ten days ago (a writer clock of the table's own), kept for one day."""
    table = new_table(path, metadata_table=metadata_table)
    lock = InProcessLockProvider(table.base_path)
    ten_days_ago = lambda: int(time.time() * 1000) - 10 * 24 * 3600 * 1000  # noqa: E731
    clock = WaitBasedTimeGenerator(lock, table.tz, clock_ms=ten_days_ago, scope=str(path))
    HoodieWriter(table, lock=lock, time_source=clock).insert(rows(range(20), 1))
    return {"hoodie.partition.ttl.strategy.days.retain": "1"}


def _metadata(path: Path, metadata_table: bool) -> dict[str, str]:
    _writes(path, metadata_table=metadata_table, upserts=2)
    return {"hoodie.metadata.compact.max.delta.commits": "1"}


Setup = Callable[[Path, bool], dict[str, str]]
SETUPS: dict[str, tuple[Setup, bool]] = {
    # service: (make the table, returning the options the run needs; whether it needs a metadata table)
    "compaction": (_compaction, False),
    "logcompaction": (_log_compaction, False),
    "clustering": (_clustering, False),
    "clean": (_clean, False),
    "rollback": (_failed_write, False),
    "archival": (_archival, False),
    "savepoint": (_savepoint, False),
    "restore": (_savepointed, False),
    "indexing": (_indexing, True),
    "metadata": (_metadata, True),
    "ttl": (_ttl, False),
}


def _run_service(name: str, ctx: ServiceContext) -> str:
    """One run, as the orchestrator makes it: the oldest pending instant, else a new plan."""
    service = service_named(name)
    pending = service.pending(ctx.table, ctx.table.reload())
    if pending:
        ts = pending[0].requested_time
    else:
        scheduled = service.schedule(ctx)
        assert scheduled is not None and scheduled.instant_time is not None, f"{name}: nothing planned"
        ts = scheduled.instant_time
        if name == "savepoint":  # the savepoint completes as it is planned
            return ts
    return service.execute(ctx, ts, LocalRunner()).instant.requested_time


@dataclass(frozen=True)
class Case:
    path: str
    """The commit path: a service of the registry, or ``write:<operation>``."""
    metadata_table: bool = False
    expire_at: int = 1
    """Which lock check of the run expires the session: with a metadata table, the first is the
    metadata table's own instant, the next the data table's."""
    names: str = ""
    """What the error names besides the lost lock (the instant whose completion was refused)."""

    def __str__(self) -> str:
        mdt = "-mdt" if self.metadata_table else ""
        return f"{self.path}{mdt}-check{self.expire_at}"


OPERATIONS = (
    WriteOperation.INSERT,
    WriteOperation.UPSERT,
    WriteOperation.DELETE,
    WriteOperation.INSERT_OVERWRITE,
    WriteOperation.BULK_INSERT,
)
MDT = "/.hoodie/metadata"
CASES = [
    *(Case(name, SETUPS[name][1], names=MDT if SETUPS[name][1] else "") for name in KNOWN_SERVICES),
    Case("indexing", metadata_table=True, expire_at=2, names="indexing"),
    # the metadata table's own instants inside a service's commit (its deltacommit; its restore)
    *(Case(name, metadata_table=True, names=MDT) for name in ("compaction", "restore")),
    *(Case(f"write:{op.value}") for op in OPERATIONS),
    *(Case(f"write:{op.value}", metadata_table=True, names=MDT) for op in OPERATIONS),
    Case("write:upsert", metadata_table=True, expire_at=2, names="deltacommit"),
]


def test_every_service_of_the_registry_has_a_case() -> None:
    assert set(SETUPS) == set(KNOWN_SERVICES)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_no_completion_after_the_zookeeper_session_expired(
    tmp_path: Path, zk_lock: Callable[[HoodieTable], _ExpiresAtCommit], case: Case
) -> None:
    path = tmp_path / "t"
    if case.path.startswith("write:"):
        operation = WriteOperation(case.path.split(":", 1)[1])
        _writes(path, metadata_table=case.metadata_table)
        batch = rows(range(0, 20, 3), 5)
        data = batch.select(["id", "p"]) if operation is WriteOperation.DELETE else batch

        def run(lock: _ExpiresAtCommit) -> str:
            writer = HoodieWriter(HoodieTable.open(str(path)), lock=lock)
            return writer.write(data, operation).instant.requested_time
    else:
        setup, _ = SETUPS[case.path]
        options = setup(path, case.metadata_table)

        def run(lock: _ExpiresAtCommit) -> str:
            return _run_service(
                case.path, ServiceContext(HoodieTable.open(str(path)), options=options, lock=lock)
            )

    before = _completed(path)
    lock = zk_lock(HoodieTable.open(str(path)))
    lock.expire_at = case.expire_at
    with pytest.raises(LockError, match="lost the table lock") as lost:
        run(lock)
    assert str(HoodieTable.open(str(path)).base_path) in str(lost.value)
    assert case.names in str(lost.value)
    assert lock.expire_at == 0, "the session expired at the lock check"
    completed = _completed(path)
    if case.expire_at == 1:
        assert completed <= before, "nothing completed without the lock"
    else:  # the metadata table's instant completed under the lock; the data table's did not
        assert {c for c in completed if c[0] == "data"} <= before

    wait_for(lambda: lock.state is LockState.CONNECTED, 20, "a new ZooKeeper session")
    ts = run(lock)  # the next run
    after = _completed(path)
    if case.path == "archival":  # archived instants leave the active timeline
        assert len(after) < len(completed), "the next run archived"
    else:
        assert ts in {c[1] for c in after - completed}, f"the next run completed {ts}"
