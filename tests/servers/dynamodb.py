"""A DynamoDB API endpoint for tests: moto's standalone server, an emulator of the DynamoDB API.

This is moto (``moto_server`` from the venv), not AWS: it implements DynamoDB's wire API,
including condition expressions, well enough to exercise the lock protocol, but says nothing
about AWS's latency, throttling or consistency. The server listens on 127.0.0.1 on a free port;
no request leaves loopback.

The session fixture sets dummy credentials (``AWS_ACCESS_KEY_ID`` ...) and points
``AWS_CONFIG_FILE`` / ``AWS_SHARED_CREDENTIALS_FILE`` at ``os.devnull``, so boto3 never reads the
user's AWS configuration; everything is restored when the session ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.servers.process import free_port, stop, wait_for_http

REGION = "us-east-1"
_DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
_CLEARED = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_REGION",
)


@dataclass(frozen=True)
class DynamoDBEndpoint:
    """Where the emulated DynamoDB API listens."""

    endpoint_url: str
    region: str = REGION

    def client(self) -> Any:
        """A boto3 DynamoDB client for this endpoint (close it when done)."""
        import boto3

        return boto3.session.Session().client(
            "dynamodb", endpoint_url=self.endpoint_url, region_name=self.region
        )


@contextmanager
def moto_dynamodb() -> Iterator[DynamoDBEndpoint]:
    """Start a private moto server on a free loopback port; stop it on exit."""
    port = free_port()
    server = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **_DUMMY_ENV},
    )
    endpoint = DynamoDBEndpoint(f"http://127.0.0.1:{port}")
    try:
        wait_for_http(proc, endpoint.endpoint_url, "moto_server")
        yield endpoint
    finally:
        stop(proc)


@contextmanager
def dummy_aws_env() -> Iterator[None]:
    """Dummy AWS credentials and region in the environment (the real ones cleared) while open."""
    patch = pytest.MonkeyPatch()
    try:
        for name in _CLEARED:
            patch.delenv(name, raising=False)
        for name, value in _DUMMY_ENV.items():
            patch.setenv(name, value)
        yield
    finally:
        patch.undo()


@pytest.fixture(scope="session")
def dynamodb() -> Iterator[DynamoDBEndpoint]:
    """One emulated DynamoDB endpoint (moto) for the session, with dummy AWS credentials set."""
    with dummy_aws_env(), moto_dynamodb() as endpoint:
        yield endpoint
