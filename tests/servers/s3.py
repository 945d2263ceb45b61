"""An S3 API endpoint for tests: moto's standalone server, an emulator of the S3 API (not AWS).

moto 5.2 implements conditional PUTs (``If-None-Match: *`` and ``If-Match: <ETag>``, answering
412 PreconditionFailed), which is what the storage-based lock needs; its check and its write are
two steps, so unlike S3 it is not atomic under concurrent writes to the same key. It says nothing
about S3's latency or throttling. The server listens on 127.0.0.1 on a free port; no request leaves
loopback. Dummy credentials are set for the session, as for :mod:`tests.servers.dynamodb`.

``slow_s3`` puts the project's own proxy (:mod:`tests.servers.proxy`) in front of it: 20 ms of
latency per request (``HTS_TEST_S3_LATENCY_MS`` changes it) and requests counted by operation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.servers.dynamodb import _DUMMY_ENV, REGION, dummy_aws_env, moto_dynamodb
from tests.servers.proxy import S3Proxy

LATENCY_S = float(os.environ.get("HTS_TEST_S3_LATENCY_MS", "20")) / 1000


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

    def hudi_rs_options(self) -> dict[str, str]:
        """The same endpoint in hudi-rs's (object_store's) ``aws_*`` keys."""
        return hudi_rs_options(self.storage_options())

    def environ(self) -> dict[str, str]:
        """The same endpoint as the AWS environment variables every part honours."""
        return {**_DUMMY_ENV, "AWS_ENDPOINT_URL": self.endpoint_url, "AWS_REGION": self.region}

    def copy_prefix(self, source: str, target: str) -> None:
        """Copy every object under ``source/`` to ``target/`` in the bucket, server-side."""
        client = self.client()
        try:
            for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=f"{source}/"
            ):
                for obj in page.get("Contents", []):
                    key = f"{target}/{obj['Key'][len(source) + 1 :]}"
                    client.copy_object(
                        Bucket=self.bucket, Key=key, CopySource={"Bucket": self.bucket, "Key": obj["Key"]}
                    )
        finally:
            client.close()

    def behind(self, proxy: S3Proxy) -> S3Endpoint:
        """This endpoint reached through ``proxy``."""
        return S3Endpoint(proxy.url, self.bucket, self.region)


_HUDI_RS_KEYS = {
    "endpoint_override": "aws_endpoint_url",
    "access_key": "aws_access_key_id",
    "secret_key": "aws_secret_access_key",
    "session_token": "aws_session_token",
    "region": "aws_region",
}


def hudi_rs_options(storage_options: dict[str, str]) -> dict[str, str]:
    """pyarrow ``S3FileSystem`` keys (hts's ``storage_options``) as hudi-rs's ``aws_*`` keys."""
    out = {_HUDI_RS_KEYS[k]: v for k, v in storage_options.items() if k in _HUDI_RS_KEYS}
    if storage_options.get("scheme") == "http" or out.get("aws_endpoint_url", "").startswith("http://"):
        out["aws_allow_http"] = "true"
    return out


@dataclass(frozen=True)
class SlowS3:
    """The emulated S3 endpoint behind the counting proxy with latency."""

    endpoint: S3Endpoint
    proxy: S3Proxy
    direct: S3Endpoint


@pytest.fixture(scope="session")
def s3() -> Iterator[S3Endpoint]:
    """One emulated S3 endpoint (moto) for the session, bucket ``lake`` created, dummy credentials set."""
    with dummy_aws_env(), moto_dynamodb() as server:  # one moto server answers every AWS API it emulates
        endpoint = S3Endpoint(server.endpoint_url)
        client = endpoint.client()
        try:
            client.create_bucket(Bucket=endpoint.bucket)
        finally:
            client.close()
        yield endpoint


@pytest.fixture()
def slow_s3(s3: S3Endpoint) -> Iterator[SlowS3]:
    """The session's S3 endpoint behind a fresh counting proxy adding ``LATENCY_S`` per request."""
    proxy = S3Proxy(s3.endpoint_url, latency_s=LATENCY_S)
    try:
        yield SlowS3(s3.behind(proxy), proxy, s3)
    finally:
        proxy.close()
