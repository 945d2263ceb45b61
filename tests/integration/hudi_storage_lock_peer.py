"""A second writer speaking Apache Hudi's storage-based lock protocol, run as a subprocess by the tests.

Apache Hudi's Java is not available here, so this is a minimal implementation of its side of the
protocol, written from apache/hudi's source independently of hts (it imports nothing from
``hoodie`` or ``service``; ``test_storage_lock`` checks that):

* the lock file ``<base>/.hoodie/.locks/table_lock.json`` (``StorageBasedLockProvider``,
  ``StorageLockClient.getLockFolderPath``) holding ``{"expired", "validUntil" (epoch ms), "owner"}``
  (``StorageLockData``);
* ``tryLock``: read; the lock is taken while ``expired`` is false and ``now <= validUntil + 500``
  (``CLOCK_DRIFT_BUFFER_MS``); otherwise PUT our data with ``If-Match: <ETag read>`` or, with no
  file, ``If-None-Match: *`` (``S3StorageLockClient``); retried until the acquire timeout;
* a heartbeat thread renewing at a fixed rate (``LockProviderHeartbeatManager``) with
  ``If-Match`` on the last ETag; a 412 stops it (``ACQUIRED_BY_OTHERS``);
* ``unlock``: stop the heartbeat, PUT ``expired: true`` with the unchanged ``validUntil``.

On the local filesystem (Hudi has no storage lock client for ``file://``) it speaks hts's local
variant as documented in hts's README: create by ``link(2)`` of a complete temporary file, replace
under an exclusive ``flock`` of ``table_lock.json.guard`` after comparing the content's SHA-256.

Events are printed as JSON lines on stdout: ``acquired`` (with owner and validUntil), ``timeout``,
``renewed``, ``lost``, ``releasing`` (before the release's PUT), ``released``.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import sys
import threading
import time
import uuid
from typing import Any


class Conflict(Exception):
    """HTTP 412: the file is not the version we expected."""


def now_ms() -> int:
    return int(time.time() * 1000)


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "at_ms": now_ms(), **fields}), flush=True)


class S3File:
    def __init__(self, uri: str, endpoint: str) -> None:
        import boto3

        bucket, _, key = uri.removeprefix("s3://").partition("/")
        self.bucket, self.key = bucket, key
        self.s3 = boto3.client("s3", endpoint_url=endpoint)

    def get(self) -> tuple[dict[str, Any], str] | None:
        from botocore.exceptions import ClientError

        try:
            answer = self.s3.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
                return None
            raise
        return json.loads(answer["Body"].read()), answer["ETag"]

    def put(self, body: dict[str, Any], etag: str | None) -> str:
        from botocore.exceptions import ClientError

        condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
        try:
            answer = self.s3.put_object(Bucket=self.bucket, Key=self.key, Body=json.dumps(body), **condition)
        except ClientError as e:
            if e.response["ResponseMetadata"]["HTTPStatusCode"] == 412:
                raise Conflict() from e
            raise
        return str(answer["ETag"])


class LocalFile:
    def __init__(self, path: str) -> None:
        self.path = path

    def get(self) -> tuple[dict[str, Any], str] | None:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        return json.loads(raw), hashlib.sha256(raw).hexdigest()

    def put(self, body: dict[str, Any], etag: str | None) -> str:
        raw = json.dumps(body).encode()
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.peer-{uuid.uuid4().hex}"
        with open(tmp, "wb") as f:
            f.write(raw)
        try:
            if etag is None:
                try:
                    os.link(tmp, self.path)
                except FileExistsError as e:
                    raise Conflict() from e
            else:
                guard = os.open(self.path + ".guard", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(guard, fcntl.LOCK_EX)
                    with open(self.path, "rb") as f:
                        if hashlib.sha256(f.read()).hexdigest() != etag:
                            raise Conflict()
                    os.replace(tmp, self.path)
                finally:
                    os.close(guard)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return hashlib.sha256(raw).hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the table's base path (s3://bucket/path or /local/path)")
    ap.add_argument("--endpoint", default=None)
    ap.add_argument("--validity-ms", type=int, required=True)
    ap.add_argument("--renew-ms", type=int, required=True)
    ap.add_argument("--acquire-timeout-s", type=float, required=True)
    ap.add_argument("--hold-s", type=float, required=True, help="negative: hold until killed")
    ap.add_argument("--release-when", default=None, help="hold until this local file exists (not --hold-s)")
    ap.add_argument("--no-renew", action="store_true")
    args = ap.parse_args()

    lock_path = args.base.rstrip("/") + "/.hoodie/.locks/table_lock.json"
    store: S3File | LocalFile = (
        S3File(lock_path, args.endpoint) if lock_path.startswith("s3://") else LocalFile(lock_path)
    )
    owner = str(uuid.uuid4())

    emit("started", owner=owner)
    # tryLock, retried (the retry wait is 1 s in Hudi; shorter here with short test leases)
    deadline = time.monotonic() + args.acquire_timeout_s
    etag: str | None = None
    data: dict[str, Any] = {}
    while True:
        current = store.get()
        free = current is None or current[0]["expired"] or now_ms() > current[0]["validUntil"] + 500
        if free:
            data = {"expired": False, "validUntil": now_ms() + args.validity_ms, "owner": owner}
            try:
                etag = store.put(data, current[1] if current else None)
                break
            except Conflict:
                pass
        if time.monotonic() >= deadline:
            emit("timeout", holder=current[0] if current else None)
            return 3
        time.sleep(min(1.0, args.renew_ms / 1000))
    emit("acquired", owner=owner, validUntil=data["validUntil"])

    state = {"etag": etag, "data": data}
    stop = threading.Event()
    guard = threading.Lock()

    def heartbeat() -> None:
        next_at = time.monotonic() + args.renew_ms / 1000
        while not stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += args.renew_ms / 1000
            with guard:
                renewed = {"expired": False, "validUntil": now_ms() + args.validity_ms, "owner": owner}
                try:
                    state["etag"] = store.put(renewed, state["etag"])
                    state["data"] = renewed
                except Conflict:
                    emit("lost")
                    return
                except Exception as e:  # transient: the next beat retries
                    emit("renew-failed", error=str(e))
                    continue
            emit("renewed", validUntil=renewed["validUntil"])

    beat = threading.Thread(target=heartbeat, daemon=True)
    if not args.no_renew:
        beat.start()
    if args.hold_s < 0:
        while True:
            time.sleep(3600)
    if args.release_when:
        while not os.path.exists(args.release_when):
            time.sleep(0.05)
    else:
        time.sleep(args.hold_s)
    stop.set()
    if beat.is_alive():
        beat.join()
    emit("releasing")
    with guard:
        released = {"expired": True, "validUntil": state["data"]["validUntil"], "owner": owner}
        try:
            store.put(released, state["etag"])
            emit("released")
        except Conflict:
            emit("not-released")
    return 0


if __name__ == "__main__":
    sys.exit(main())
