"""The DynamoDB table lock against an emulated DynamoDB API (moto's server, not AWS).

Interop with Java writers is tested against :class:`JavaLockClient`, the AWS DynamoDB Lock
Client's side of the protocol as Hudi's ``DynamoDBBasedLockProvider`` drives it, written here
from that client's source (awslabs/amazon-dynamodb-lock-client: AmazonDynamoDBLockClient.java):
the same item attributes and condition expressions, a lookup time taken after each read, a
takeover only after the same record version number was seen for longer than its lease, and a
heartbeat every lease/3 that writes a new record version number. No JVM runs here, so this is
the protocol as read from the source, not the Java client itself.

Leases are 1.5 s (heartbeat 0.5 s) to keep the suite fast.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hoodie.errors import TableServiceError
from hoodie.transaction.lock import LockError, locked
from service.locks.base import LockState, ServiceLock
from service.locks.dynamodb import DynamoDBLockProvider
from service.locks.dynamodb_config import BillingMode, DynamoDBLockConfig
from tests.servers.dynamodb import DynamoDBEndpoint, moto_dynamodb

LEASE_MS = 1500
LEASE_S = LEASE_MS / 1000
P = "hoodie.write.lock.dynamodb."
JAVA_ATTRIBUTES = {"key", "ownerName", "leaseDuration", "recordVersionNumber"}


def wait_for(predicate: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@dataclass
class LockTable:
    """A fresh lock table name on the shared endpoint, and a factory of providers using it."""

    endpoint: DynamoDBEndpoint
    name: str
    client: Any
    providers: list[DynamoDBLockProvider] = field(default_factory=list)

    def options(self, **extra: str) -> dict[str, str]:
        return {
            P + "table": self.name,
            P + "partition_key": "trips",
            P + "endpoint_url": self.endpoint.endpoint_url,
            P + "region": self.endpoint.region,
            "hoodie.write.lock.wait_time_ms": str(LEASE_MS),
            **extra,
        }

    def provider(self, owner: str | None = None, **extra: str) -> DynamoDBLockProvider:
        p = DynamoDBLockProvider.from_options(
            base_path="s3://lake/trips", table_name="trips", options=self.options(**extra), owner=owner
        )
        self.providers.append(p)
        return p

    def item(self, key: str = "trips") -> dict[str, Any] | None:
        answer = self.client.get_item(TableName=self.name, Key={"key": {"S": key}}, ConsistentRead=True)
        item: dict[str, Any] | None = answer.get("Item")
        return item


@pytest.fixture()
def table(dynamodb: DynamoDBEndpoint) -> Iterator[LockTable]:
    t = LockTable(dynamodb, f"hts-locks-{uuid.uuid4().hex[:12]}", dynamodb.client())
    yield t
    for p in t.providers:
        p.close()
    t.client.close()


class JavaLockClient:
    """The Java lock client's protocol (see the module docstring), one lock at a time."""

    def __init__(self, client: Any, table: str, lease_ms: int = LEASE_MS) -> None:
        self.client, self.table, self.lease_ms = client, table, lease_ms
        self.owner = socket.gethostname() + str(uuid.uuid4())
        self.rvn: str | None = None
        self.last_sent = 0.0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _put(self, key: str, condition: str, names: dict[str, str], values: dict[str, Any]) -> bool:
        rvn = str(uuid.uuid4())
        item = {
            "key": {"S": key},
            "ownerName": {"S": self.owner},
            "leaseDuration": {"S": str(self.lease_ms)},
            "recordVersionNumber": {"S": rvn},
        }
        extra = {"ExpressionAttributeValues": values} if values else {}
        try:
            self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#pk": "key", **names},
                **extra,
            )
        except ClientError as e:
            if e.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        self.rvn = rvn
        return True

    def acquire(self, key: str, additional_wait_s: float, refresh_s: float = 0.25) -> bool:
        """``acquireLock``: False (LockNotGranted) after the additional wait plus one seen lease."""
        start, wait = time.monotonic(), additional_wait_s
        trying: tuple[str, float, float] | None = None  # rvn, lease (s), lookup time
        while True:
            item = self.client.get_item(TableName=self.table, Key={"key": {"S": key}}, ConsistentRead=True)
            existing = item.get("Item")
            lookup = time.monotonic()
            if not existing:
                if self._put(key, "attribute_not_exists(#pk)", {}, {}):
                    return True
            else:
                rvn = existing["recordVersionNumber"]["S"]
                lease_s = int(existing["leaseDuration"]["S"]) / 1000
                if trying is None:
                    trying = (rvn, lease_s, lookup)
                    wait += lease_s
                elif trying[0] != rvn:
                    trying = (rvn, lease_s, lookup)
                elif time.monotonic() - trying[2] > trying[1]:
                    condition = "attribute_exists(#pk) AND #rvn = :rvn"
                    names = {"#rvn": "recordVersionNumber"}
                    if self._put(key, condition, names, {":rvn": {"S": rvn}}):
                        return True
            if time.monotonic() - start > wait:
                return False
            time.sleep(refresh_s)

    def start_heartbeats(self, key: str) -> None:
        self._thread = threading.Thread(target=self._heartbeats, args=(key,), daemon=True)
        self._thread.start()

    def stop_heartbeats(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        assert not self.errors, self.errors

    def _heartbeats(self, key: str) -> None:
        try:
            while not self._stop.wait(self.lease_ms / 3000):
                new = str(uuid.uuid4())
                self.last_sent = time.monotonic()
                self.client.update_item(
                    TableName=self.table,
                    Key={"key": {"S": key}},
                    UpdateExpression="SET #ld = :ld, #rvn = :newRvn",
                    ConditionExpression="attribute_exists(#pk) AND #rvn = :rvn AND #on = :on",
                    ExpressionAttributeNames={
                        "#pk": "key",
                        "#ld": "leaseDuration",
                        "#rvn": "recordVersionNumber",
                        "#on": "ownerName",
                    },
                    ExpressionAttributeValues={
                        ":ld": {"S": str(self.lease_ms)},
                        ":newRvn": {"S": new},
                        ":rvn": {"S": self.rvn},
                        ":on": {"S": self.owner},
                    },
                )
                self.rvn = new
        except BaseException as e:
            self.errors.append(e)


# -- 1. mutual exclusion, threads, re-entrancy ----------------------------------------------------


def test_two_owners_exclude_each_other_with_the_java_clients_item(table: LockTable) -> None:
    a, b = table.provider(owner="writer-a"), table.provider(owner="writer-b")
    assert isinstance(a, ServiceLock)
    a.acquire(timeout_s=5)
    item = table.item()
    assert item is not None and set(item) == JAVA_ATTRIBUTES
    assert item["key"] == {"S": "trips"}
    assert item["ownerName"] == {"S": "writer-a"}
    assert item["leaseDuration"] == {"S": "1500"}
    first_rvn = item["recordVersionNumber"]["S"]
    assert str(uuid.UUID(first_rvn)) == first_rvn

    start = time.monotonic()
    with pytest.raises(LockError, match=rf"{table.name}.*'trips'"):
        b.acquire(timeout_s=2 * LEASE_S)  # longer than a lease: a's heartbeats keep changing the RVN
    assert time.monotonic() - start >= 2 * LEASE_S
    assert a.is_held() and not b.is_held()
    item = table.item()
    assert item is not None and item["ownerName"] == {"S": "writer-a"}
    assert item["recordVersionNumber"]["S"] != first_rvn

    a.release()
    assert table.item() is None and not a.is_held()
    start = time.monotonic()
    b.acquire(timeout_s=5)
    assert time.monotonic() - start < LEASE_S  # no item: taken at once
    item = table.item()
    assert item is not None and item["ownerName"] == {"S": "writer-b"}
    b.release()
    assert table.item() is None


def test_default_owner_is_host_name_and_uuid(table: LockTable) -> None:
    p = table.provider()
    assert p.owner.startswith(socket.gethostname())
    uuid.UUID(p.owner[len(socket.gethostname()) :])
    with locked(p, 5):
        item = table.item()
        assert item is not None and item["ownerName"] == {"S": p.owner}


def test_threads_sharing_one_provider_take_turns(table: LockTable) -> None:
    p = table.provider()
    inside, most, done = [0], [0], [0]
    errors: list[BaseException] = []
    guard = threading.Lock()

    def work() -> None:
        try:
            for _ in range(3):
                with locked(p, 10):
                    assert p.is_held()
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    time.sleep(0.02)
                    with guard:
                        inside[0] -= 1
                        done[0] += 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and done[0] == 12 and most[0] == 1
    assert table.item() is None


def test_other_threads_wait_for_the_holding_thread(table: LockTable) -> None:
    p = table.provider()
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with locked(p, 5):
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(5)
    assert not p.is_held()  # held by the other thread, not this one
    start = time.monotonic()
    with pytest.raises(LockError, match="another thread of this process"):
        p.acquire(timeout_s=0.3)
    assert 0.3 <= time.monotonic() - start < 1.0
    release.set()
    p.acquire(timeout_s=5)
    t.join()
    assert p.is_held()
    p.release()


def test_reentrant_for_the_holding_thread(table: LockTable) -> None:
    p = table.provider()
    p.acquire(timeout_s=5)
    rvn = table.item()
    p.acquire(timeout_s=0)  # counts, no request
    p.release()
    assert p.is_held()
    item = table.item()
    assert item is not None and rvn is not None and item["ownerName"] == rvn["ownerName"]
    p.release()
    assert not p.is_held() and table.item() is None
    p.release()  # not held: a no-op
    p.acquire(timeout_s=5)
    p.acquire(timeout_s=5)
    p.close()  # releases whatever the count
    assert table.item() is None and not p.is_held()
    with pytest.raises(LockError, match="closed"):
        p.acquire(timeout_s=1)


def test_is_held_follows_our_lease_bookkeeping(table: LockTable) -> None:
    now = [1000.0]  # our monotonic clock, advanced by hand; heartbeats come every 1 s of real time
    options = table.options(**{"hoodie.write.lock.wait_time_ms": "3000"})
    p = DynamoDBLockProvider.from_options(
        base_path="s3://lake/trips", table_name="trips", options=options, clock=lambda: now[0]
    )
    table.providers.append(p)
    p.acquire(timeout_s=5)
    now[0] += 2.99
    assert p.is_held()
    now[0] += 0.02  # a lease since the write of our RVN: no longer held, without a request
    assert not p.is_held()
    assert wait_for(lambda: p.state is LockState.LOST, 3)  # the next heartbeat does not even try
    item = table.item()
    assert item is not None and item["ownerName"] == {"S": p.owner}
    p.release()  # the item is still ours: deleted, as the Java client's release would
    assert table.item() is None


# -- 2. a Java holder blocks us, until it stops heartbeating -------------------------------------


def test_java_holder_blocks_us_and_is_taken_over_only_after_a_silent_lease(table: LockTable) -> None:
    p = table.provider()
    java = JavaLockClient(table.client, table.name)
    assert java.acquire("trips", additional_wait_s=0)
    java.start_heartbeats("trips")
    try:
        with pytest.raises(LockError) as raised:
            p.acquire(timeout_s=2 * LEASE_S)
        assert table.name in str(raised.value) and "'trips'" in str(raised.value)
        assert java.owner in str(raised.value)
        item = table.item()
        assert item is not None and item["ownerName"] == {"S": java.owner}
    finally:
        java.stop_heartbeats()
    last_java_rvn = java.rvn
    p.acquire(timeout_s=4 * LEASE_S)
    took_over = time.monotonic()
    assert took_over - java.last_sent >= LEASE_S  # a full lease of unchanged RVN, on our clock
    item = table.item()
    assert item is not None and set(item) == JAVA_ATTRIBUTES
    assert item["ownerName"] == {"S": p.owner}
    assert item["recordVersionNumber"]["S"] != last_java_rvn
    p.release()
    assert table.item() is None


# -- 3. a Java acquirer cannot take our lock while we heartbeat ----------------------------------


def test_java_acquirer_waits_while_we_hold_and_gets_it_after_release(table: LockTable) -> None:
    p = table.provider()
    p.acquire(timeout_s=5)
    java = JavaLockClient(table.client, table.name)
    start = time.monotonic()
    assert not java.acquire("trips", additional_wait_s=0.5)
    assert time.monotonic() - start >= LEASE_S + 0.5
    assert p.is_held()
    item = table.item()
    assert item is not None and item["ownerName"] == {"S": p.owner}
    p.release()
    start = time.monotonic()
    assert java.acquire("trips", additional_wait_s=0.5)
    assert time.monotonic() - start < LEASE_S
    item = table.item()
    assert item is not None and item["ownerName"] == {"S": java.owner}


# -- 4. losing the lock -----------------------------------------------------------------------------


def test_a_takeover_makes_the_next_heartbeat_fail_and_the_lock_lost(table: LockTable) -> None:
    p = table.provider()
    states: list[LockState] = []
    p.add_state_listener(states.append)
    p.acquire(timeout_s=5)
    intruder = {
        "key": {"S": "trips"},
        "ownerName": {"S": "intruder"},
        "leaseDuration": {"S": "1500"},
        "recordVersionNumber": {"S": str(uuid.uuid4())},
    }
    table.client.put_item(TableName=table.name, Item=intruder)  # what a takeover writes
    assert wait_for(lambda: p.state is LockState.LOST, 3 * LEASE_S)
    assert states == [LockState.LOST]
    assert not p.is_held()
    with pytest.raises(LockError, match="lost"):
        p.acquire(timeout_s=0.1)  # re-entrant acquire of a lost lock
    p.release()
    assert table.item() == intruder  # the new owner's item is left alone
    assert p.state is LockState.CONNECTED and states[-1] is LockState.CONNECTED
    with pytest.raises(LockError, match="intruder"):
        p.acquire(timeout_s=0.3)


def test_an_unreachable_endpoint_suspends_then_loses_the_lock(dynamodb: DynamoDBEndpoint) -> None:
    states: list[LockState] = []
    with moto_dynamodb() as private:
        options = {
            P + "table": "locks",
            P + "endpoint_url": private.endpoint_url,
            "hoodie.write.lock.wait_time_ms": str(LEASE_MS),
        }
        p = DynamoDBLockProvider.from_options(base_path="/t", table_name="t", options=options)
        p.add_state_listener(states.append)
        p.acquire(timeout_s=5)
        assert p.is_held()
    stopped = time.monotonic()
    try:
        assert wait_for(lambda: p.state is LockState.LOST, 3 * LEASE_S)
        assert time.monotonic() - stopped <= LEASE_S + 1.0
        assert states == [LockState.SUSPENDED, LockState.LOST]
        assert not p.is_held()
    finally:
        p.close()


# -- 5. the lock table and the configuration ----------------------------------------------------------


def test_creates_the_missing_lock_table_like_hudi(table: LockTable) -> None:
    assert table.name not in table.client.list_tables()["TableNames"]
    p = table.provider()
    described = table.client.describe_table(TableName=table.name)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    assert described["KeySchema"] == [{"AttributeName": "key", "KeyType": "HASH"}]
    assert described["AttributeDefinitions"] == [{"AttributeName": "key", "AttributeType": "S"}]
    assert described["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    with locked(p, 5):
        assert table.item() is not None
    table.provider(owner="second")  # the table exists now: used as is

    provisioned = LockTable(table.endpoint, table.name + "-prov", table.client)
    try:
        provisioned.provider(**{P + "billing_mode": "provisioned", P + "read_capacity": "7"})
        described = table.client.describe_table(TableName=provisioned.name)["Table"]
        assert described["ProvisionedThroughput"]["ReadCapacityUnits"] == 7
        assert described["ProvisionedThroughput"]["WriteCapacityUnits"] == 10
    finally:
        for q in provisioned.providers:
            q.close()


def test_refuses_a_table_with_another_key_schema(table: LockTable) -> None:
    table.client.create_table(
        TableName=table.name,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    with pytest.raises(LockError, match=rf"{table.name}.*key schema"):
        table.provider()


def test_hudi_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION", raising=False)
    cfg = DynamoDBLockConfig.from_options(base_path="/t", table_name="t", options={P + "table": "locks"})
    expected = DynamoDBLockConfig(
        lock_table="locks",
        partition_key="t",  # the table's name
        region="us-east-1",
        endpoint_url=None,
        billing_mode=BillingMode.PAY_PER_REQUEST,
        read_capacity=20,
        write_capacity=10,
        table_creation_timeout_ms=120_000,
        lease_duration_ms=60_000,  # hoodie.write.lock.wait_time_ms
    )
    assert cfg == expected and cfg.heartbeat_period_ms == 20_000

    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    options = {P + "table": "locks", "hoodie.table.name": "trips", P + "endpoint_url": "localhost:8000"}
    cfg = DynamoDBLockConfig.from_options(base_path="/t", table_name="t", options=options)
    assert cfg == replace(
        expected, partition_key="trips", region="eu-west-1", endpoint_url="https://localhost:8000"
    )
    options |= {P + "partition_key": "p", P + "region": "ap-south-1", "hoodie.write.lock.wait_time_ms": "10"}
    cfg = DynamoDBLockConfig.from_options(base_path="/t", table_name="t", options=options)
    assert (cfg.partition_key, cfg.region, cfg.lease_duration_ms, cfg.heartbeat_period_ms) == (
        "p",
        "ap-south-1",
        10,
        3,
    )


@pytest.mark.parametrize(
    ("options", "table_name", "message"),
    [
        ({}, "t", r"hoodie\.write\.lock\.dynamodb\.table is not set"),
        ({P + "table": " "}, "t", r"hoodie\.write\.lock\.dynamodb\.table is not set"),
        ({P + "table": "l", P + "billing_mode": "FREE"}, "t", r"billing_mode='FREE'.*PAY_PER_REQUEST"),
        ({P + "table": "l", "hoodie.write.lock.wait_time_ms": "soon"}, "t", r"wait_time_ms='soon'"),
        ({P + "table": "l", "hoodie.write.lock.wait_time_ms": "2"}, "t", r"wait_time_ms=2 is too short"),
        ({P + "table": "l", P + "read_capacity": "many"}, "t", r"read_capacity='many'"),
        ({P + "table": "l", P + "write_capacity": "0"}, "t", r"write_capacity=0 must be at least 1"),
        ({P + "table": "l", P + "table_creation_timeout": "10m"}, "t", r"table_creation_timeout='10m'"),
        ({P + "table": "l"}, "", r"partition_key is not set"),
        ({P + "table": "l", "hoodie.aws.access.key": "AK"}, "t", r"must be set together"),
        (
            {
                P + "table": "l",
                "hoodie.write.lock.provider": "org.apache.hudi.aws.transaction.lock."
                "DynamoDBBasedImplicitPartitionKeyLockProvider",
            },
            "t",
            r"DynamoDBBasedImplicitPartitionKeyLockProvider .*not supported",
        ),
    ],
)
def test_bad_configuration_names_the_key_and_value(
    options: dict[str, str], table_name: str, message: str
) -> None:
    with pytest.raises(TableServiceError, match=message):
        DynamoDBLockProvider.from_options(base_path="s3://lake/t", table_name=table_name, options=options)


# -- 6. timeouts ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("timeout_s", [0.0, 0.4, 1.0])
def test_acquire_honours_its_timeout(table: LockTable, timeout_s: float) -> None:
    holder, p = table.provider(owner="holder"), table.provider()
    holder.acquire(timeout_s=5)
    start = time.monotonic()
    with pytest.raises(LockError, match=rf"timed out after {timeout_s}s.*{table.name}"):
        p.acquire(timeout_s=timeout_s)
    assert timeout_s <= time.monotonic() - start < timeout_s + 0.5
    assert not p.is_held() and holder.is_held()
    holder.release()
    p.acquire(timeout_s=0)  # a single attempt suffices when the lock is free
    assert p.is_held()
    p.release()
