"""moto's S3 and SQS emulators in this process, every request counted by operation, optional latency.

A small stand-in for the project's S3 proxy (another branch builds that one, with latency): a
WSGI wrapper around moto's server app that counts what reaches it, so a test can compare what hts
counts with what the store answered. moto is an emulator of the AWS APIs, not AWS; S3 event
notifications to SQS are delivered by moto in the same process. Listens on 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import pytest

from tests.servers.dynamodb import _DUMMY_ENV, REGION, dummy_aws_env

LIST_PARAMS = {
    "list-type",
    "prefix",
    "delimiter",
    "max-keys",
    "continuation-token",
    "start-after",
    "encoding-type",
}
Environ = dict[str, Any]
App = Callable[[Environ, Callable[..., Any]], Iterable[bytes]]


def operation(environ: Environ) -> str:
    """The API operation of one request: S3's by method and query, SQS's by its target."""
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target.startswith("AmazonSQS."):
        return "sqs:" + target.split(".", 1)[1]
    method = str(environ["REQUEST_METHOD"])
    query = parse_qs(str(environ.get("QUERY_STRING", "")), keep_blank_values=True)
    key = str(environ.get("PATH_INFO", "")).strip("/").partition("/")[2]
    if not key:  # the bucket itself: a listing, or its configuration
        return (
            "s3:ListObjects" if method == "GET" and not query.keys() - LIST_PARAMS else f"s3:{method}Bucket"
        )
    return {
        "GET": "s3:GetObject",
        "HEAD": "s3:HeadObject",
        "PUT": "s3:PutObject",
        "DELETE": "s3:DeleteObject",
    }.get(method, f"s3:{method}")


@dataclass
class CountedAws:
    """Where the emulator listens, with bucket ``lake`` created, and what it was asked."""

    endpoint_url: str
    bucket: str = "lake"
    region: str = REGION
    counts: Counter[str] = field(default_factory=Counter)
    latency_s: float = 0.0
    """Added before each request is answered (each request waits its own, concurrently)."""
    guard: threading.Lock = field(default_factory=threading.Lock)

    def snapshot(self) -> Counter[str]:
        with self.guard:
            return Counter(self.counts)

    def storage_options(self) -> dict[str, str]:
        return {
            "endpoint_override": self.endpoint_url,
            "access_key": _DUMMY_ENV["AWS_ACCESS_KEY_ID"],
            "secret_key": _DUMMY_ENV["AWS_SECRET_ACCESS_KEY"],
            "region": self.region,
            "scheme": "http",
        }

    def client(self, service: str) -> Any:
        import boto3

        return boto3.session.Session().client(
            service, endpoint_url=self.endpoint_url, region_name=self.region
        )


@contextmanager
def counted_aws() -> Iterator[CountedAws]:
    from moto.server import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    moto_app: App = DomainDispatcherApplication(create_backend_app)
    endpoint = CountedAws("")

    def app(environ: Environ, start_response: Callable[..., Any]) -> Iterable[bytes]:
        op = operation(environ)
        with endpoint.guard:
            endpoint.counts[op] += 1
        if endpoint.latency_s:
            time.sleep(endpoint.latency_s)
        return moto_app(environ, start_response)

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    endpoint.endpoint_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="counted-moto", daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        server.shutdown()
        thread.join(10)


@pytest.fixture(scope="module")
def aws() -> Iterator[CountedAws]:
    """moto's S3 + SQS (emulators) in this process, requests counted; bucket ``lake``; dummy credentials."""
    with dummy_aws_env(), counted_aws() as endpoint:
        s3 = endpoint.client("s3")
        try:
            s3.create_bucket(Bucket=endpoint.bucket)
        finally:
            s3.close()
        yield endpoint
