"""The configuration of the DynamoDB table lock: Hudi's ``DynamoDbBasedLockConfig`` keys
(``hoodie.write.lock.dynamodb.*``), their defaults, and the boto3 client they describe. What the
keys mean is described in :mod:`service.locks.dynamodb`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import boto3
from botocore.config import Config

from hoodie.errors import TableServiceError
from hoodie.services.options import enum_option, int_option, lookup
from service.locks.base import LockConfig

PREFIX = "hoodie.write.lock.dynamodb."
TABLE_KEY = PREFIX + "table"
PARTITION_KEY_KEY = PREFIX + "partition_key"
REGION_KEY = PREFIX + "region"
BILLING_MODE_KEY = PREFIX + "billing_mode"
READ_CAPACITY_KEY = PREFIX + "read_capacity"
WRITE_CAPACITY_KEY = PREFIX + "write_capacity"
TABLE_CREATION_TIMEOUT_KEY = PREFIX + "table_creation_timeout"
ENDPOINT_URL_KEY = PREFIX + "endpoint_url"
PROVIDER_KEY = "hoodie.write.lock.provider"
IMPLICIT_PROVIDER = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedImplicitPartitionKeyLockProvider"


class BillingMode(StrEnum):
    PAY_PER_REQUEST = "PAY_PER_REQUEST"
    PROVISIONED = "PROVISIONED"


@dataclass(frozen=True)
class DynamoDBLockConfig:
    """The ``hoodie.write.lock.dynamodb.*`` settings and the lease Hudi derives from them."""

    lock_table: str
    partition_key: str
    region: str = "us-east-1"
    endpoint_url: str | None = None
    billing_mode: BillingMode = BillingMode.PAY_PER_REQUEST
    read_capacity: int = 20
    write_capacity: int = 10
    table_creation_timeout_ms: int = 120_000
    lease_duration_ms: int = 60_000
    credentials: tuple[str, str, str | None] | None = field(default=None, repr=False)

    @property
    def heartbeat_period_ms(self) -> int:
        """``leaseDuration / 3``, as Hudi configures the lock client (integer division)."""
        return self.lease_duration_ms // 3

    @classmethod
    def from_options(
        cls, *, base_path: str, table_name: str, options: Mapping[str, str]
    ) -> DynamoDBLockConfig:
        found = lookup(options, TABLE_KEY)
        if found is None:
            raise TableServiceError(f"{TABLE_KEY} is not set: name the DynamoDB table that holds the locks")
        lock_table = found[1]
        provider = (options.get(PROVIDER_KEY) or "").strip()
        if provider.rsplit(".", 1)[-1] == IMPLICIT_PROVIDER.rsplit(".", 1)[-1]:
            raise TableServiceError(
                f"{PROVIDER_KEY}={provider} (a partition key hashed from the base path) is not supported; "
                f"set {PARTITION_KEY_KEY} to the key your Hudi writers log for {base_path}"
            )
        key = lookup(options, (PARTITION_KEY_KEY, "hoodie.table.name"))
        partition_key = key[1] if key else table_name.strip()
        if not partition_key:
            raise TableServiceError(
                f"{PARTITION_KEY_KEY} is not set and no hoodie.table.name to infer it from ({base_path})"
            )
        region_found = lookup(options, REGION_KEY)
        region = (
            region_found[1] if region_found else (os.environ.get("AWS_REGION") or "").strip() or "us-east-1"
        )
        endpoint = lookup(options, ENDPOINT_URL_KEY)
        endpoint_url = None
        if endpoint is not None:
            endpoint_url = endpoint[1] if "://" in endpoint[1] else "https://" + endpoint[1]
        lease_ms = LockConfig.from_options(options).wait_time_ms
        if lease_ms < 3:
            raise TableServiceError(
                f"hoodie.write.lock.wait_time_ms={lease_ms} is too short for a DynamoDB lease "
                "(the heartbeat period is a third of it)"
            )
        return cls(
            lock_table=lock_table,
            partition_key=partition_key,
            region=region,
            endpoint_url=endpoint_url,
            billing_mode=enum_option(options, BILLING_MODE_KEY, BillingMode, BillingMode.PAY_PER_REQUEST),
            read_capacity=int_option(options, READ_CAPACITY_KEY, 20, 1),
            write_capacity=int_option(options, WRITE_CAPACITY_KEY, 10, 1),
            table_creation_timeout_ms=int_option(options, TABLE_CREATION_TIMEOUT_KEY, 120_000, 0),
            lease_duration_ms=lease_ms,
            credentials=aws_credentials(options),
        )

    def client(self) -> Any:
        """A boto3 DynamoDB client without SDK retries (the lock retries on its own schedule)."""
        key_id, secret, token = self.credentials or (None, None, None)
        session = boto3.session.Session(
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            aws_session_token=token,
            region_name=self.region,
        )
        timeout = max(1.0, min(10.0, self.heartbeat_period_ms / 1000))
        config = Config(
            connect_timeout=timeout, read_timeout=timeout, retries={"max_attempts": 1, "mode": "standard"}
        )
        return session.client("dynamodb", endpoint_url=self.endpoint_url, config=config)


def aws_credentials(options: Mapping[str, str]) -> tuple[str, str, str | None] | None:
    """Hudi's ``hoodie.aws.access.key`` / ``.secret.key`` / ``.session.token`` (None: boto3's chain)."""
    key_id = lookup(options, "hoodie.aws.access.key")
    secret = lookup(options, "hoodie.aws.secret.key")
    if (key_id is None) != (secret is None):
        raise TableServiceError("hoodie.aws.access.key and hoodie.aws.secret.key must be set together")
    if key_id is None or secret is None:
        return None
    token = lookup(options, "hoodie.aws.session.token")
    return key_id[1], secret[1], token[1] if token else None
