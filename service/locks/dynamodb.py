"""A DynamoDB table lock that Java writers using Hudi's ``DynamoDBBasedLockProvider`` respect.

Hudi's provider (apache/hudi: hudi-aws/.../transaction/lock/DynamoDBBasedLockProvider{,Base}.java)
wraps the AWS DynamoDB Lock Client (awslabs/amazon-dynamodb-lock-client: AmazonDynamoDBLockClient,
AmazonDynamoDBLockClientOptions, AcquireLockOptions, LockItem). This module speaks that client's
protocol with boto3. The facts it relies on:

* **Lock table:** one hash key attribute ``key`` (S), no sort key; Hudi creates it when missing
  (PAY_PER_REQUEST, or PROVISIONED with read/write capacities) and waits until it is ACTIVE.
* **Lock item** (one per lock): ``key`` (the partition key value), ``ownerName`` (Java default:
  host name immediately followed by a random UUID), ``leaseDuration`` (milliseconds as a
  *string*), ``recordVersionNumber`` (a fresh UUID string per acquire and per heartbeat);
  ``data`` only if the acquirer passes data (Hudi does not); ``isReleased`` = ``"1"`` only when a
  lock is released without deleting it (Hudi keeps the default delete-on-release).
* **Acquire:** consistent GetItem. No item: PutItem ``attribute_not_exists(#pk)``. Item marked
  released: PutItem ``attribute_exists(#pk) AND #ir = :ir``. Otherwise remember its RVN and
  ``leaseDuration`` with the monotonic time *after* the read returned, poll (Java: every second),
  start over when the RVN changes, and once the same RVN has been seen for longer than its lease
  take over with PutItem ``attribute_exists(#pk) AND #rvn = :rvn``. Expiry is observed, never
  computed from wall clocks. (Java waits the item's lease *plus* the time Hudi passes to
  ``tryLock``; ``acquire(timeout_s)`` waits ``timeout_s`` in total.)
* **Heartbeat** every ``heartbeatPeriod`` from a background thread: UpdateItem
  ``SET #ld = :ld, #rvn = :newRvn`` conditioned on ``attribute_exists(#pk) AND #rvn = :rvn AND
  #on = :on``. The lease counts from the monotonic time taken *before* the write that set the
  current RVN. A failed condition means a takeover: LOST. Other failures: SUSPENDED while the
  lease lasts, LOST after it (a Java client may then take over). Like the Java client, a
  heartbeat whose answer was lost after it was applied makes the next one fail: LOST, never two
  holders.
* **Release:** DeleteItem with the heartbeat's condition (our RVN and ``ownerName``), also after
  the lease ran out, as the Java client does. If it fails the lock was taken over, and the other
  owner's item is left alone.
* **Configuration** (apache/hudi: hudi-aws/.../config/DynamoDbBasedLockConfig.java), prefix
  ``hoodie.write.lock.dynamodb.``: ``table`` (required here; the newest Hudi defaults it to
  ``hudi_locks``), ``partition_key`` (inferred from ``hoodie.table.name``), ``region``
  (``AWS_REGION``, else us-east-1), ``billing_mode`` (PAY_PER_REQUEST), ``read_capacity`` (20),
  ``write_capacity`` (10), ``table_creation_timeout`` (ms; 120 000 in the newest Hudi, 600 000
  before), ``endpoint_url`` (``https://`` prepended without a scheme). Lease =
  ``hoodie.write.lock.wait_time_ms`` (60 000), heartbeat = lease / 3. Credentials:
  ``hoodie.aws.access.key`` / ``.secret.key`` / ``.session.token``, else boto3's default chain.
* **Implicit partition key** (``DynamoDBBasedImplicitPartitionKeyLockProvider``): not implemented,
  ``from_options`` refuses it. It needs Hudi's ``HashID``: XXH64 of the UTF-8 normalised base path
  (trimmed, ``s3a://`` -> ``s3://``, trailing slashes removed) seeded with ``0xdabadaba``
  sign-extended to 64 bits, as 16 upper-case hex digits (golden value in Hudi's
  TestDynamoDBBasedImplicitPartitionKeyLockProvider: ``s3://my-bucket/my_lake/my_table`` ->
  ``C0E15D0CE1AD11CC``). The normalisation changed between Hudi releases, so it must be pinned to
  the writers' version; the hash belongs in ``hoodie``. Meanwhile set ``partition_key`` to the
  key Hudi logs ("The DynamoDB partition key of the lock provider for the base path ... is ...").
"""

from __future__ import annotations

import logging
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from hoodie.transaction.lock import LockError
from service.locks.base import LockState
from service.locks.dynamodb_config import TABLE_CREATION_TIMEOUT_KEY, BillingMode, DynamoDBLockConfig
from service.locks.lease import LeaseLock

__all__ = ["DynamoDBLockProvider"]

log = logging.getLogger(__name__)

# Attribute names and values written by the Java lock client.
KEY = "key"
OWNER_NAME = "ownerName"
LEASE_DURATION = "leaseDuration"
RECORD_VERSION_NUMBER = "recordVersionNumber"
IS_RELEASED = "isReleased"
IS_RELEASED_VALUE = "1"

_ACQUIRE_NEW = "attribute_not_exists(#pk)"
_ACQUIRE_RELEASED = "attribute_exists(#pk) AND #ir = :ir"
_ACQUIRE_EXPIRED = "attribute_exists(#pk) AND #rvn = :rvn"
_OURS = "attribute_exists(#pk) AND #rvn = :rvn AND #on = :on"
_HEARTBEAT_UPDATE = "SET #ld = :ld, #rvn = :newRvn"

_CONDITION_FAILED = "ConditionalCheckFailedException"
_TRANSIENT = frozenset(
    ("ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded")
)


@dataclass(frozen=True)
class _Lease:
    """Our lock item: its current RVN and the monotonic time taken before the write that set it."""

    rvn: str
    renewed_at: float
    generation: int


@dataclass(frozen=True)
class _Seen:
    """Someone else's lock item, as first seen with this RVN."""

    rvn: str
    owner: str
    lease_s: float
    since: float


class DynamoDBLockProvider(LeaseLock):
    """One lock item in a DynamoDB table, shared by every thread of this process.

    Re-entrant for the thread holding it; other threads wait on a local condition, and one thread
    at a time talks to DynamoDB to acquire. ``is_held()`` answers from our heartbeat bookkeeping,
    without a request: held by the calling thread, and the last confirmed write of our RVN is
    less than a lease old. No correct Java client can take the lock over within a lease of our
    last confirmed write, because it must first observe that RVN unchanged for a full lease.
    """

    def __init__(
        self,
        config: DynamoDBLockConfig,
        *,
        client: Any,
        owner: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.owner = owner or socket.gethostname() + str(uuid.uuid4())
        self.lease_s = config.lease_duration_ms / 1000
        self.heartbeat_s = config.heartbeat_period_ms / 1000
        self.poll_s = min(1.0, self.lease_s / 4)
        self._client = client
        where = f"DynamoDB table {config.lock_table!r}, partition key {config.partition_key!r}"
        super().__init__(where, clock or time.monotonic)
        self._lease: _Lease | None = None
        self._stale: _Lease | None = None  # a lease we lost, still deleted on release if ours

    @classmethod
    def from_options(
        cls,
        *,
        base_path: str,
        table_name: str,
        options: Mapping[str, str],
        owner: str | None = None,
        clock: Callable[[], float] | None = None,
    ) -> DynamoDBLockProvider:
        """A provider configured by Hudi's keys, with its lock table created if missing."""
        config = DynamoDBLockConfig.from_options(base_path=base_path, table_name=table_name, options=options)
        provider = cls(config, client=config.client(), owner=owner, clock=clock)
        try:
            provider.ensure_lock_table()
        except BaseException:
            provider.close()
            raise
        return provider

    # -- the lock table -------------------------------------------------------------------------

    def ensure_lock_table(self) -> None:
        """Create the lock table if it does not exist, and wait until it is ACTIVE."""
        cfg = self.config
        try:
            table = self._describe_table()
            if table is None:
                log.info("creating DynamoDB lock table %s (%s)", cfg.lock_table, cfg.billing_mode.value)
                request: dict[str, Any] = {
                    "TableName": cfg.lock_table,
                    "KeySchema": [{"AttributeName": KEY, "KeyType": "HASH"}],
                    "AttributeDefinitions": [{"AttributeName": KEY, "AttributeType": "S"}],
                    "BillingMode": cfg.billing_mode.value,
                }
                if cfg.billing_mode is BillingMode.PROVISIONED:
                    request["ProvisionedThroughput"] = {
                        "ReadCapacityUnits": cfg.read_capacity,
                        "WriteCapacityUnits": cfg.write_capacity,
                    }
                try:
                    self._client.create_table(**request)
                except ClientError as e:
                    if _code(e) != "ResourceInUseException":  # created by someone else meanwhile
                        raise
                table = self._wait_until_active()
        except (ClientError, BotoCoreError) as e:
            raise LockError(f"cannot use the lock table of {self._where}: {e}") from e
        keys = [(k["AttributeName"], k["KeyType"]) for k in table.get("KeySchema", [])]
        if keys != [(KEY, "HASH")]:
            raise LockError(
                f"{self._where}: the lock table's key schema is {keys}, not a single hash key {KEY!r}"
            )

    def _describe_table(self) -> dict[str, Any] | None:
        try:
            table: dict[str, Any] = self._client.describe_table(TableName=self.config.lock_table)["Table"]
        except ClientError as e:
            if _code(e) == "ResourceNotFoundException":
                return None
            raise
        return table

    def _wait_until_active(self) -> dict[str, Any]:
        timeout_ms = self.config.table_creation_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            table = self._describe_table()
            if table is not None and table.get("TableStatus") in ("ACTIVE", "UPDATING"):
                return table
            if time.monotonic() >= deadline:
                status = table.get("TableStatus") if table else "missing"
                raise LockError(
                    f"{self._where}: the lock table is still {status} after {timeout_ms} ms "
                    f"({TABLE_CREATION_TIMEOUT_KEY})"
                )
            time.sleep(min(1.0, max(0.05, deadline - time.monotonic())))

    # -- the protocol ---------------------------------------------------------------------------

    def _close_backend(self) -> None:
        self._client.close()

    def _lease_valid(self) -> bool:
        lease = self._lease
        return lease is not None and self._clock() - lease.renewed_at < self.lease_s

    # -- acquire --------------------------------------------------------------------------------

    def _acquire_remote(self, deadline: float | None, timeout_s: float | None) -> None:
        seen: _Seen | None = None
        problem = "no answer yet"
        while True:
            if self._closed.is_set():
                raise LockError(f"{self._where}: the lock provider is closed")
            try:
                item = self._read_item()
                now = self._clock()
                if item is None:
                    if self._put(_ACQUIRE_NEW, {}, {}):
                        return
                    problem, seen = "another writer created the lock item first", None
                elif IS_RELEASED in item:
                    if self._put(_ACQUIRE_RELEASED, {"#ir": IS_RELEASED}, {":ir": {"S": IS_RELEASED_VALUE}}):
                        return
                    problem, seen = "another writer took the released lock first", None
                else:
                    current = self._seen(item, now)
                    if seen is None or seen.rvn != current.rvn:
                        seen = current
                    elif now - seen.since > seen.lease_s:
                        if self._put(
                            _ACQUIRE_EXPIRED, {"#rvn": RECORD_VERSION_NUMBER}, {":rvn": {"S": seen.rvn}}
                        ):
                            idle = now - seen.since
                            log.warning("%s: took over from %r, idle %.3fs", self._where, seen.owner, idle)
                            return
                        seen = None
                    if seen is not None:
                        problem = (
                            f"held by {seen.owner!r} (record version number {seen.rvn}, "
                            f"lease {seen.lease_s * 1000:.0f} ms)"
                        )
            except ClientError as e:
                if not _transient(e):
                    raise LockError(f"cannot acquire the lock in {self._where}: {e}") from e
                problem = str(e)
            except BotoCoreError as e:
                problem = str(e)
            now = self._clock()
            if deadline is not None and now >= deadline:
                raise LockError(
                    f"timed out after {timeout_s}s acquiring the lock in {self._where}: {problem}"
                )
            delay = self.poll_s
            if seen is not None:
                delay = min(delay, seen.since + seen.lease_s - now + 0.002)
            if deadline is not None:
                delay = min(delay, deadline - now)
            self._closed.wait(max(delay, 0.002))

    def _read_item(self) -> dict[str, Any] | None:
        key = {KEY: {"S": self.config.partition_key}}
        item: dict[str, Any] | None = self._client.get_item(
            TableName=self.config.lock_table, Key=key, ConsistentRead=True
        ).get("Item")
        return item or None

    def _seen(self, item: dict[str, Any], now: float) -> _Seen:
        lease_ms = self.config.lease_duration_ms
        raw = _text(item, LEASE_DURATION)
        try:
            lease_ms = int(raw) if raw is not None else lease_ms
        except ValueError:
            log.warning("%s: unreadable %s=%r; assuming %d ms", self._where, LEASE_DURATION, raw, lease_ms)
        return _Seen(
            rvn=_text(item, RECORD_VERSION_NUMBER) or "",
            owner=_text(item, OWNER_NAME) or "",
            lease_s=lease_ms / 1000,
            since=now,
        )

    def _put(self, condition: str, names: dict[str, str], values: dict[str, Any]) -> bool:
        """PutItem of our lock item under ``condition``; False if the condition failed."""
        rvn = str(uuid.uuid4())
        request: dict[str, Any] = {
            "TableName": self.config.lock_table,
            "Item": {
                KEY: {"S": self.config.partition_key},
                OWNER_NAME: {"S": self.owner},
                LEASE_DURATION: {"S": str(self.config.lease_duration_ms)},
                RECORD_VERSION_NUMBER: {"S": rvn},
            },
            "ConditionExpression": condition,
            "ExpressionAttributeNames": {"#pk": KEY, **names},
        }
        if values:
            request["ExpressionAttributeValues"] = values
        with self._remote:
            sent = self._clock()
            try:
                self._client.put_item(**request)
            except ClientError as e:
                if _code(e) == _CONDITION_FAILED:
                    return False
                raise
            self._hold(rvn, sent)
            listeners = self._record_state(LockState.CONNECTED)
        self._notify(LockState.CONNECTED, listeners)
        return True

    def _hold(self, rvn: str, renewed_at: float) -> None:
        """Record our new lease and start its heartbeat thread (caller holds ``_remote``)."""
        name = f"dynamodb-lock-heartbeat-{self.config.partition_key}"
        generation = self._start_heartbeat(name, self.heartbeat_s)
        self._lease, self._stale = _Lease(rvn, renewed_at, generation), None

    # -- heartbeat and release ------------------------------------------------------------------

    def _beat(self, generation: int) -> tuple[LockState, float] | None:
        lease = self._lease
        if lease is None or lease.generation != generation:
            return None
        return self._heartbeat(lease)

    def _ours(self, lease: _Lease) -> tuple[str, dict[str, str], dict[str, Any]]:
        """The Java client's condition that the item is still ours: our RVN and our name."""
        names = {"#pk": KEY, "#rvn": RECORD_VERSION_NUMBER, "#on": OWNER_NAME}
        return _OURS, names, {":rvn": {"S": lease.rvn}, ":on": {"S": self.owner}}

    def _heartbeat(self, lease: _Lease) -> tuple[LockState, float]:
        """One heartbeat (caller holds ``_remote``): the new state and the delay to the next one."""
        expires = lease.renewed_at + self.lease_s
        if self._clock() >= expires:
            return self._lose(lease, "no heartbeat succeeded for a full lease; another writer may take it")
        condition, names, values = self._ours(lease)
        new_rvn = str(uuid.uuid4())
        values[":newRvn"] = {"S": new_rvn}
        values[":ld"] = {"S": str(self.config.lease_duration_ms)}
        sent = self._clock()
        try:
            self._client.update_item(
                TableName=self.config.lock_table,
                Key={KEY: {"S": self.config.partition_key}},
                UpdateExpression=_HEARTBEAT_UPDATE,
                ConditionExpression=condition,
                ExpressionAttributeNames={**names, "#ld": LEASE_DURATION},
                ExpressionAttributeValues=values,
            )
        except ClientError as e:
            if _code(e) == _CONDITION_FAILED:
                return self._lose(
                    lease, "the heartbeat's condition failed: another writer took the lock over"
                )
            failure: Exception = e
        except Exception as e:  # unreachable, timed out, or anything else: never kill the thread
            failure = e
        else:
            self._lease = _Lease(new_rvn, sent, lease.generation)
            return LockState.CONNECTED, max(0.0, sent + self.heartbeat_s - self._clock())
        remaining = expires - self._clock()
        if remaining <= 0:
            return self._lose(lease, f"heartbeats failed for a full lease ({failure})")
        log.warning("%s: heartbeat failed, %.3fs of the lease left: %s", self._where, remaining, failure)
        return LockState.SUSPENDED, max(0.01, min(self.heartbeat_s / 2, remaining))

    def _lose(self, lease: _Lease, reason: str) -> tuple[LockState, float]:
        log.error("%s: lock lost: %s", self._where, reason)
        self._lease, self._stale = None, lease
        return LockState.LOST, 0.0

    def _give_up(self) -> None:
        lease = self._lease or self._stale  # a lost lease: deleted only if still ours
        self._lease = self._stale = None
        if lease is not None:
            condition, names, values = self._ours(lease)
            try:
                self._client.delete_item(
                    TableName=self.config.lock_table,
                    Key={KEY: {"S": self.config.partition_key}},
                    ConditionExpression=condition,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
            except (ClientError, BotoCoreError) as e:
                taken = isinstance(e, ClientError) and _code(e) == _CONDITION_FAILED
                why = (
                    "it was taken over; the new owner's item stays"
                    if taken
                    else f"{e}; it expires in a lease"
                )
                log.warning("%s: did not delete the lock item: %s", self._where, why)


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _transient(error: ClientError) -> bool:
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return _code(error) in _TRANSIENT or int(status or 0) >= 500


def _text(item: Mapping[str, Any], name: str) -> str | None:
    value = item.get(name)
    if not isinstance(value, Mapping):
        return None
    text = value.get("S", value.get("N"))
    return None if text is None else str(text)
