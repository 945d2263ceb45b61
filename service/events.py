"""Event-driven watching: S3 event notifications, delivered to an SQS queue, name the tables to look at.

The bucket sends object-created and object-removed notifications to the queue (directly, or
through SNS: both message shapes are read). One thread long-polls the queue; each message names a
bucket and key, and the served table whose base path holds that key under ``.hoodie/`` is looked
at at once (:meth:`service.daemon.Daemon.events_arrived`). Keys of the metadata table, markers,
heartbeats and ``.aux`` say nothing about the timeline and are ignored. Messages are deleted once
read, whether or not they named a served table; a message that is not an S3 notification is logged
and deleted. The queue's own requests are counted (``table="_events"`` in
``hts_storage_requests_total``): one ReceiveMessage per ``wait_s`` while quiet, plus one per batch of
up to ten messages and one DeleteMessageBatch per batch.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_plus

from hoodie.config.table_config import METAFOLDER
from hoodie.io.requests import RequestCounter
from service.clock import SYSTEM, Clock
from service.registry import Registry
from service.settings import EventSettings

log = logging.getLogger("hts.events")

EVENTS = "_events"
"""The ``table`` label of the queue's own requests."""
IGNORED = ("metadata/", ".temp/", ".heartbeat/", ".aux/")
"""Folders under ``.hoodie/`` whose changes say nothing new about the table's timeline."""
RETRY_S = 5.0


def changed_keys(body: str) -> list[tuple[str, str]]:
    """``(bucket, key)`` of each S3 record in one SQS message body (plain, or wrapped by SNS).

    Raises ValueError naming what is wrong when the body is not an S3 event notification.
    """
    try:
        message = json.loads(body)
    except ValueError as e:
        raise ValueError(f"not JSON: {body[:80]!r}") from e
    if isinstance(message, dict) and message.get("Type") == "Notification" and "Message" in message:
        return changed_keys(str(message["Message"]))  # delivered through SNS
    if not isinstance(message, dict):
        raise ValueError(f"not an S3 event notification: {body[:80]!r}")
    if message.get("Event") == "s3:TestEvent":
        return []  # sent once when the notification is configured
    records = message.get("Records")
    if not isinstance(records, list):
        raise ValueError(f"no Records in the message: {body[:80]!r}")
    out: list[tuple[str, str]] = []
    for record in records:
        s3: Any = record.get("s3") if isinstance(record, dict) else None
        try:
            out.append((str(s3["bucket"]["name"]), unquote_plus(str(s3["object"]["key"]))))
        except (TypeError, KeyError) as e:
            raise ValueError(f"an S3 record without s3.bucket.name and s3.object.key: {record!r}") from e
    return out


def tables_named(registry: Registry, keys: Iterable[tuple[str, str]]) -> set[str]:
    """The served tables whose timeline the changed ``(bucket, key)`` pairs concern."""
    bases: list[tuple[str, str]] = []
    for entry in registry:
        table = entry.table
        if table is not None and table.fileio.scheme in ("s3", "s3a"):
            bases.append((table.base_path.rstrip("/") + "/" + METAFOLDER + "/", entry.id))
    found: set[str] = set()
    for bucket, key in keys:
        path = f"{bucket}/{key}"
        for meta, table_id in bases:
            if path.startswith(meta) and not path[len(meta) :].startswith(IGNORED):
                found.add(table_id)
    return found


class EventWatcher:
    """Long-polls the queue in one thread and hands the tables its messages name to ``arrived``."""

    def __init__(
        self,
        settings: EventSettings,
        registry: Registry,
        arrived: Callable[[set[str]], None],
        *,
        client: Any = None,
        clock: Clock = SYSTEM,
    ) -> None:
        if not settings.sqs_queue_url:
            raise ValueError("watch.events.sqs_queue_url is not set")
        self.settings = settings
        self.queue_url: str = settings.sqs_queue_url
        self.registry = registry
        self.arrived = arrived
        self.clock = clock
        self.requests = RequestCounter()
        self.error: str | None = None
        """The last failure to read the queue (None once a read works)."""
        self.received = 0
        self._client = client
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3

            self._client = boto3.session.Session().client(
                "sqs", region_name=self.settings.region, endpoint_url=self.settings.endpoint_url
            )
        return self._client

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="hts-events", daemon=True)
        self._thread.start()
        log.info("watching event notifications from %s", self.queue_url)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:  # a long poll in progress ends on its own (a daemon thread)
            self._thread.join(timeout=2.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception as e:  # the queue is unreachable: the safety poll still runs
                message = f"{type(e).__name__}: {e}"
                if message != self.error:
                    log.warning("cannot read event notifications from %s: %s", self.queue_url, message)
                self.error = message
                self.clock.wait(self._stop, RETRY_S)

    def poll_once(self, wait_s: int | None = None) -> set[str]:
        """One ReceiveMessage (long-polled); the tables it names are handed over and returned."""
        self.requests.add("sqs_receive")
        answer = self.client.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=10,
            WaitTimeSeconds=self.settings.wait_s if wait_s is None else wait_s,
        )
        self.error = None
        messages = answer.get("Messages") or []
        if not messages:
            return set()
        self.received += len(messages)
        keys: list[tuple[str, str]] = []
        for message in messages:
            try:
                keys.extend(changed_keys(message.get("Body", "")))
            except ValueError as e:
                log.warning("ignoring a message on %s: %s", self.queue_url, e)
        self.requests.add("sqs_delete")
        self.client.delete_message_batch(
            QueueUrl=self.queue_url,
            Entries=[{"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(messages)],
        )
        tables = tables_named(self.registry, keys)
        if tables:
            log.debug("event notifications for %s", ", ".join(sorted(tables)))
            self.arrived(tables)
        return tables
