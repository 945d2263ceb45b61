"""The lock file of Apache Hudi's storage-based lock provider, and the stores that write it conditionally.

Facts from apache/hudi (hudi-client-common, ``org.apache.hudi.client.transaction.lock``):

* **Where** (``StorageBasedLockProvider.DEFAULT_TABLE_LOCK_FILE_NAME``,
  ``StorageLockClient.getLockFolderPath``, ``HoodieTableMetaClient.LOCKS_FOLDER_NAME``): one file per
  table, ``<base path>/.hoodie/.locks/table_lock.json``.
* **What** (``models.StorageLockData``, serialised by Jackson in ``models.StorageLockFile``): a JSON
  object ``{"expired": <bool>, "validUntil": <epoch milliseconds, long>, "owner": <string, a random
  UUID per provider>}``; readers ignore unknown properties and refuse a missing or null one.
* **Version** (``StorageLockFile.versionId``): the object's ETag on S3 (``S3StorageLockClient``),
  the generation on GCS; every write is conditional on it.
* **Conditional writes** (``S3StorageLockClient.tryUpsertLockFile``): with no previous file a PUT
  with ``If-None-Match: *`` (create only if absent); otherwise a PUT with ``If-Match: <ETag read>``.
  HTTP 412 means another writer changed the file first (``ACQUIRED_BY_OTHERS``); 404 on read means
  no lock file (``NOT_EXISTS``); 409, 429 and 5xx are transient (``UNKNOWN_ERROR``/throttled).
  (hts fails at once on errors no retry cures: a missing bucket, 400, 401, 403.)
  Hudi never deletes the lock file: a release writes ``expired: true``.

Two stores implement that contract here:

* :class:`S3LockFileStore`: boto3 ``put_object(IfNoneMatch="*")`` / ``put_object(IfMatch=etag)``,
  exactly the requests Hudi's S3 client sends (``s3://`` and ``s3a://`` base paths).
* :class:`LocalLockFileStore`: the local filesystem, for tests and single-host setups. Apache Hudi
  has no storage lock client for ``file://`` (``StorageSchemes.FILE`` names none), so this is hts's
  own protocol, which the tests' second process also speaks: a create links a fully written
  temporary file to the lock file name (``link(2)`` fails with EEXIST like ``O_CREAT|O_EXCL``, and the
  content is complete the moment the name appears); a replace takes an exclusive ``flock`` on
  ``table_lock.json.guard`` next to it, compares the SHA-256 of the current content with the
  expected version, and renames a temporary file over the lock file (readers never see a partial
  file). The guarantee holds between processes of one host that all use this guard on a local
  filesystem (not across NFS clients); the version is the content's hash, so two writes are told
  apart as long as their content differs, which the millisecond ``validUntil`` and owner ensure.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from hoodie.transaction.lock import LockError
from jobs.objectstore import s3_client

__all__ = [
    "LOCKS_FOLDER",
    "LOCK_FILE_NAME",
    "LocalLockFileStore",
    "LockData",
    "LockFile",
    "LockFileStore",
    "PreconditionFailed",
    "S3LockFileStore",
    "StoreUnavailable",
    "s3_client",
]

LOCKS_FOLDER = ".hoodie/.locks"  # HoodieTableMetaClient.LOCKS_FOLDER_NAME
LOCK_FILE_NAME = "table_lock.json"  # StorageBasedLockProvider.DEFAULT_TABLE_LOCK_FILE_NAME


class PreconditionFailed(Exception):
    """The conditional write lost: the file is not the version we expected (HTTP 412)."""


class StoreUnavailable(Exception):
    """The store did not answer usefully (network, throttling, 5xx): the outcome is unknown."""


@dataclass(frozen=True)
class LockData:
    """``StorageLockData``: whether the lock was released, until when it is valid, and who holds it."""

    expired: bool
    valid_until_ms: int
    owner: str

    def to_json(self) -> bytes:
        # Jackson's order for StorageLockData's creator properties; readers do not depend on it.
        return json.dumps(
            {"expired": self.expired, "validUntil": self.valid_until_ms, "owner": self.owner},
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> LockData:
        """Parse like Hudi's ``StorageLockFile.createFromStream``; a :class:`LockError` names the content."""
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise LockError(f"{where}: the lock file is not JSON ({raw[:200]!r})") from e
        if not isinstance(data, dict):
            raise LockError(f"{where}: the lock file is not a JSON object ({raw[:200]!r})")
        expired, valid_until, owner = data.get("expired"), data.get("validUntil"), data.get("owner")
        if not isinstance(expired, bool) or isinstance(valid_until, bool) or not isinstance(valid_until, int):
            raise LockError(
                f"{where}: the lock file needs a boolean expired and an integer validUntil "
                f"(expired={expired!r}, validUntil={valid_until!r})"
            )
        if not isinstance(owner, str):
            raise LockError(f"{where}: the lock file's owner={owner!r} is not a string")
        return cls(expired=expired, valid_until_ms=valid_until, owner=owner)


@dataclass(frozen=True)
class LockFile:
    """``StorageLockFile``: the data and the version (ETag) it was read or written with."""

    data: LockData
    version: str


class LockFileStore(Protocol):
    """Conditional reads and writes of one lock file (Hudi's ``StorageLockClient``)."""

    @property
    def location(self) -> str:
        """The lock file's URI, for messages."""

    def read(self) -> LockFile | None:
        """The current lock file, None if there is none; :class:`StoreUnavailable` if unknown."""

    def write(self, data: LockData, expected: LockFile | None) -> LockFile:
        """Create (``expected`` None) or replace the version ``expected``; :class:`PreconditionFailed`
        if the file is not that version (or exists, for a create), :class:`StoreUnavailable` if the
        outcome is unknown."""

    def close(self) -> None: ...


# -- S3 -----------------------------------------------------------------------------------------

_PRECONDITION_FAILED = 412
_NOT_FOUND = 404


class S3LockFileStore:
    """The lock file on S3, written with ``If-None-Match: *`` / ``If-Match`` like ``S3StorageLockClient``."""

    def __init__(self, client: Any, bucket: str, key: str) -> None:
        self._client = client
        self.bucket = bucket
        self.key = key

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def read(self) -> LockFile | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=self.key)
            raw = answer["Body"].read()
        except ClientError as e:
            if _status(e) == _NOT_FOUND and _code(e) in ("NoSuchKey", "404"):
                return None
            _refuse_if_denied(e, f"reading {self.location}")
            raise StoreUnavailable(f"reading {self.location}: {e}") from e
        except BotoCoreError as e:
            raise StoreUnavailable(f"reading {self.location}: {e}") from e
        return LockFile(LockData.from_json(raw, self.location), str(answer["ETag"]))

    def write(self, data: LockData, expected: LockFile | None) -> LockFile:
        from botocore.exceptions import BotoCoreError, ClientError

        condition = {"IfNoneMatch": "*"} if expected is None else {"IfMatch": expected.version}
        try:
            answer = self._client.put_object(
                Bucket=self.bucket,
                Key=self.key,
                Body=data.to_json(),
                ContentType="application/json",
                **condition,
            )
        except ClientError as e:
            status = _status(e)
            # 404 on If-Match: the file we hold is gone; for us that is the same as a lost race.
            if status == _PRECONDITION_FAILED or (expected is not None and _code(e) == "NoSuchKey"):
                raise PreconditionFailed(f"{self.location}: {e}") from e
            _refuse_if_denied(e, f"writing {self.location}")
            raise StoreUnavailable(f"writing {self.location}: {e}") from e
        except BotoCoreError as e:
            raise StoreUnavailable(f"writing {self.location}: {e}") from e
        return LockFile(data, str(answer["ETag"]))

    def close(self) -> None:
        self._client.close()


def _status(error: Any) -> int:
    return int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)


def _code(error: Any) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def _refuse_if_denied(error: Any, doing: str) -> None:
    """Errors no retry will cure (no bucket, bad credentials, denied) fail at once, naming the store."""
    if _code(error) == "NoSuchBucket" or _status(error) in (400, 401, 403):
        raise LockError(f"{doing}: {error}") from error


# -- the local filesystem -----------------------------------------------------------------------


class LocalLockFileStore:
    """The lock file on the local filesystem (hts's own protocol; see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.guard_path = path + ".guard"

    @property
    def location(self) -> str:
        return "file://" + self.path

    def read(self) -> LockFile | None:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreUnavailable(f"reading {self.location}: {e}") from e
        return LockFile(LockData.from_json(raw, self.location), _version(raw))

    def write(self, data: LockData, expected: LockFile | None) -> LockFile:
        raw = data.to_json()
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with self._temporary(raw) as tmp:
                if expected is None:
                    try:
                        os.link(tmp, self.path)  # atomic create-if-absent, like O_CREAT|O_EXCL
                    except FileExistsError as e:
                        raise PreconditionFailed(f"{self.location} already exists") from e
                else:
                    with self._guard():
                        try:
                            with open(self.path, "rb") as f:
                                current = _version(f.read())
                        except FileNotFoundError as e:
                            raise PreconditionFailed(f"{self.location} is gone") from e
                        if current != expected.version:
                            raise PreconditionFailed(f"{self.location} changed (version {current})")
                        os.replace(tmp, self.path)
        except (PreconditionFailed, StoreUnavailable):
            raise
        except OSError as e:
            raise StoreUnavailable(f"writing {self.location}: {e}") from e
        return LockFile(data, _version(raw))

    @contextlib.contextmanager
    def _temporary(self, raw: bytes) -> Iterator[str]:
        tmp = f"{self.path}.{uuid.uuid4().hex}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, raw)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            yield tmp
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    @contextlib.contextmanager
    def _guard(self) -> Iterator[None]:
        fd = os.open(self.guard_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing drops the flock

    def close(self) -> None:
        return None


def _version(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
