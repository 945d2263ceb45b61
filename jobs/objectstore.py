"""What hoodie's FileIO needs from an object store and ``pyarrow.fs`` cannot give: S3's conditional PUT.

S3 has no rename and no create-if-absent in ``pyarrow.fs``. A timeline transition must never
overwrite an instant file another writer completed, so on ``s3://``/``s3a://`` tables
:meth:`hoodie.io.fileio.FileIO.create_new` becomes one ``PutObject`` with ``If-None-Match: *``
(:class:`S3ConditionalPut`): the store answers 412 if the key exists and writes nothing. Apache
Hudi's storage-based lock writes its lock file with the same header (``S3StorageLockClient``).

``hoodie`` may not import boto3 (its import contract), so this module registers the capability with
:func:`hoodie.io.fileio.register_conditional_put` when ``jobs`` is imported: the CLI, the daemon and
the Spark executors (which import ``jobs.spark`` to run tasks) all get it. A store that answers 501
(no conditional writes: older S3-compatible stores) falls back, once and logged, to check-then-write
under the table lock. Storage options are pyarrow ``S3FileSystem`` keys; what they leave unset comes
from the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID`` ..., ``AWS_REGION``) like pyarrow.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from hoodie.io.fileio import register_conditional_put
from hoodie.io.requests import count

log = logging.getLogger(__name__)

S3_SCHEMES = ("s3", "s3a")
_PRECONDITION_FAILED = 412
_CONFLICT = 409  # ConditionalRequestConflict: a concurrent conditional write to the key is in flight
_NOT_IMPLEMENTED = 501
_ATTEMPTS = 5

_clients: dict[tuple[tuple[str, str], ...], Any] = {}
_clients_lock = threading.Lock()


def s3_client(
    *,
    storage_options: Mapping[str, Any],
    credentials: tuple[str, str, str | None] | None = None,
    timeout_s: float = 60.0,
) -> Any:
    """A boto3 S3 client: pyarrow ``S3FileSystem`` keys in ``storage_options`` (``endpoint_override``,
    ``access_key``, ``secret_key``, ``session_token``, ``region``, ``scheme``), then Hudi's
    ``hoodie.aws.*`` credentials, then boto3's chain (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
    ``AWS_REGION`` ...). Calls time out after ``timeout_s``, without SDK retries: callers retry on
    their own schedule (a retried conditional PUT must know whether its first attempt landed)."""
    import boto3
    from botocore.config import Config

    key_id, secret, token = credentials or (None, None, None)
    key_id = storage_options.get("access_key") or key_id
    secret = storage_options.get("secret_key") or secret
    token = storage_options.get("session_token") or token
    # Hudi: the default region chain, else us-east-1.
    region = (
        storage_options.get("region")
        or os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1"
    )
    endpoint = storage_options.get("endpoint_override")
    if endpoint and "://" not in str(endpoint):
        endpoint = f"{storage_options.get('scheme') or 'https'}://{endpoint}"
    session = boto3.session.Session(
        aws_access_key_id=key_id,
        aws_secret_access_key=secret,
        aws_session_token=token,
        region_name=region,
    )
    path_style = bool(endpoint or os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3"))
    config = Config(
        connect_timeout=timeout_s,
        read_timeout=timeout_s,
        retries={"max_attempts": 1, "mode": "standard"},
        s3={"addressing_style": "path"} if path_style else None,
    )
    return session.client("s3", endpoint_url=endpoint or None, config=config)


def _shared_client(options: Mapping[str, Any]) -> Any:
    """One client per distinct storage options in this process (boto3 clients are thread-safe)."""
    key = tuple(sorted((str(k), str(v)) for k, v in options.items()))
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = s3_client(storage_options=options)
        return client


class S3ConditionalPut:
    """Create-if-absent on S3: ``PutObject`` with ``If-None-Match: *``."""

    def __init__(self, storage_options: Mapping[str, Any]) -> None:
        self._options = dict(storage_options)
        self._supported = True

    def put_if_absent(self, path: str, data: bytes) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        if not self._supported:
            return False
        bucket, _, key = path.partition("/")
        client = _shared_client(self._options)
        unsure = False  # an earlier attempt may have written before its answer was lost
        last: Exception | None = None
        for attempt in range(_ATTEMPTS):
            try:
                count("write")  # hoodie.io.requests: this PUT is the FileIO's create, made here
                client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
                return True
            except ClientError as e:
                status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
                code = str(e.response.get("Error", {}).get("Code", ""))
                if status == _PRECONDITION_FAILED or code == "PreconditionFailed":
                    if unsure and _holds(client, bucket, key, data):
                        return True
                    raise FileExistsError(f"s3://{path} already exists (conditional PUT refused: 412)") from e
                if status == _NOT_IMPLEMENTED or code == "NotImplemented":
                    log.warning(
                        "s3://%s: the store does not support conditional writes (%s); instant files "
                        "are created by check-then-write under the table lock",
                        bucket,
                        code or status,
                    )
                    self._supported = False
                    return False
                if status != _CONFLICT and status < 500:
                    raise OSError(f"conditional PUT of s3://{path} failed: {e}") from e
                last = e
            except BotoCoreError as e:
                unsure, last = True, e
            time.sleep(0.05 * 2**attempt)
        raise OSError(f"conditional PUT of s3://{path} failed after {_ATTEMPTS} attempts: {last}")


def _holds(client: Any, bucket: str, key: str, data: bytes) -> bool:
    count("read")
    body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return bool(body == data)


def _s3_conditional_put(scheme: str, options: Mapping[str, Any]) -> S3ConditionalPut:
    return S3ConditionalPut(options)


def install() -> None:
    """Register S3's conditional PUT with hoodie's FileIO (idempotent)."""
    register_conditional_put(S3_SCHEMES, _s3_conditional_put)
