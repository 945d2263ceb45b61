"""An S3 API endpoint for tests: moto's standalone server, an emulator of the S3 API (not AWS).

moto 5.2 implements conditional PUTs (``If-None-Match: *`` and ``If-Match: <ETag>``, answering
412 PreconditionFailed), which is what the storage-based lock needs; its check and its write are
two steps, so unlike S3 it is not atomic under concurrent writes to the same key. It says nothing
about S3's latency or throttling. The server listens on 127.0.0.1 on a free port; no request leaves
loopback. Dummy credentials are set for the session, as for :mod:`tests.servers.dynamodb`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.servers.dynamodb import _CLEARED, _DUMMY_ENV, REGION, moto_dynamodb


@dataclass(frozen=True)
class S3Endpoint:
    """Where the emulated S3 API listens, with one bucket created."""

    endpoint_url: str
    bucket: str = "lake"
    region: str = REGION

    def client(self) -> Any:
        """A boto3 S3 client for this endpoint (close it when done)."""
        import boto3

        return boto3.session.Session().client("s3", endpoint_url=self.endpoint_url, region_name=self.region)

    def storage_options(self) -> dict[str, str]:
        """The same endpoint in pyarrow ``S3FileSystem`` keys."""
        return {
            "endpoint_override": self.endpoint_url,
            "access_key": _DUMMY_ENV["AWS_ACCESS_KEY_ID"],
            "secret_key": _DUMMY_ENV["AWS_SECRET_ACCESS_KEY"],
            "region": self.region,
            "scheme": "http",
        }


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Endpoint]:
    """One emulated S3 endpoint (moto) for the session, bucket ``lake`` created, dummy credentials set."""
    patch = pytest.MonkeyPatch()
    try:
        for name in _CLEARED:
            patch.delenv(name, raising=False)
        for name, value in _DUMMY_ENV.items():
            patch.setenv(name, value)
        with moto_dynamodb() as server:  # one moto server answers every AWS API it emulates
            endpoint = S3Endpoint(server.endpoint_url)
            client = endpoint.client()
            try:
                client.create_bucket(Bucket=endpoint.bucket)
            finally:
                client.close()
            yield endpoint
    finally:
        patch.undo()
