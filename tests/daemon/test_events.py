"""Event-driven watching: S3 event notifications on an SQS queue make the daemon look at a table at once.

S3 and SQS here are moto's emulators (in this process, :mod:`tests.servers.counted_aws`); moto
delivers the bucket's notifications to the queue itself, as S3 does.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie.services.base import ServiceContext
from hoodie.services.compaction import CompactionPolicy, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from service.events import changed_keys, tables_named
from service.registry import Registry
from service.settings import load_settings
from tests.daemon.helpers import running_daemon, wait_for
from tests.servers.counted_aws import CountedAws
from tests.tables import new_table, rows

POLL = 30.0
"""Longer than the test waits: what is noticed in time was noticed through an event."""


def _queue(aws: CountedAws, name: str) -> str:
    sqs, s3 = aws.client("sqs"), aws.client("s3")
    try:
        url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
        s3.put_bucket_notification_configuration(
            Bucket=aws.bucket,
            NotificationConfiguration={"QueueConfigurations": [{"QueueArn": arn, "Events": events}]},
        )
    finally:
        sqs.close()
        s3.close()
    return url


def test_a_requested_compaction_is_seen_through_its_event_without_polling(
    tmp_path: Path, aws: CountedAws
) -> None:
    url = _queue(aws, "hts-events")
    uri = f"s3://{aws.bucket}/events/t"
    opts = aws.storage_options()
    writer = HoodieWriter(new_table(uri, **opts))
    writer.insert(rows(range(20), 1))
    writer.upsert(rows(range(0, 20, 2), 2))
    static = {"path": uri, "id": "t", "storage_options": opts, "paused": True}  # looked at, not run
    events = {"sqs_queue_url": url, "endpoint_url": aws.endpoint_url, "wait_s": 1, "safety_poll_s": 300}
    with running_daemon(
        tmp_path,
        tables={"discover": [], "static": [static]},
        watch={"poll_interval_s": POLL, "events": events},
    ) as (daemon, client):
        entry = wait_for(lambda: (e := daemon.registry.get("t")) and e.watch and e.watch.interval_s and e, 30)
        looks = entry.watch.looks
        assert entry.watch.interval_s > POLL / 3, "with events on, only a slow safety poll"
        scheduled = schedule_compaction(ServiceContext(HoodieTable.open(uri, **opts)), CompactionPolicy())
        assert scheduled is not None and scheduled.instant_time is not None
        ts = scheduled.instant_time
        written = time.monotonic()
        wait_for(lambda: any(p.instant.requested_time == ts for p in entry.watch.pending), 10, "the event")
        took = time.monotonic() - written
        assert took <= 2.0, f"noticed {took:.2f} s after the request was written"
        assert entry.watch.looks > looks and daemon.events.received >= 1
        exported = client.get("/metrics").text
        assert 'hts_storage_requests_total{op="sqs_receive",table="_events"}' in exported
        assert client.get("/v1/tables/t").json()["pending"][0]["instant"] == ts


def test_a_queue_that_cannot_be_read_makes_the_daemon_unready_and_says_why(
    tmp_path: Path, aws: CountedAws
) -> None:
    url = f"{aws.endpoint_url}/123456789012/no-such-queue"
    events = {"sqs_queue_url": url, "endpoint_url": aws.endpoint_url, "wait_s": 1}
    with running_daemon(tmp_path, watch={"poll_interval_s": 1, "events": events}) as (daemon, client):
        wait_for(lambda: daemon.events.error, 30, "the failed read")
        reasons = client.get("/readyz").json()
        assert "no-such-queue" in json.dumps(reasons)


def _s3_record(bucket: str, key: str) -> dict[str, Any]:
    return {"eventName": "ObjectCreated:Put", "s3": {"bucket": {"name": bucket}, "object": {"key": key}}}


def test_notification_bodies_plain_through_sns_and_the_test_event() -> None:
    plain = json.dumps({"Records": [_s3_record("lake", "a/.hoodie/timeline/1.commit%3Dx")]})
    assert changed_keys(plain) == [("lake", "a/.hoodie/timeline/1.commit=x")], "keys arrive URL-encoded"
    sns = json.dumps({"Type": "Notification", "Message": plain})
    assert changed_keys(sns) == changed_keys(plain)
    assert changed_keys(json.dumps({"Service": "Amazon S3", "Event": "s3:TestEvent"})) == []
    for bad, named in [("nope", "not JSON: 'nope'"), ('{"a": 1}', "no Records"), ("[1]", "not an S3 event")]:
        with pytest.raises(ValueError, match=named):
            changed_keys(bad)


def test_only_timeline_keys_of_a_served_table_name_it(tmp_path: Path, aws: CountedAws) -> None:
    uri = f"s3://{aws.bucket}/events/named"
    new_table(uri, **aws.storage_options())
    static = {"path": uri, "id": "named", "storage_options": aws.storage_options()}
    settings = load_settings(
        overrides={"tables": {"discover": [], "static": [static]}, "state_dir": str(tmp_path)}, environ={}
    )
    registry = Registry(settings)
    registry.refresh()
    entry = registry.get("named")
    assert entry is not None and registry.open(entry)
    meta = "events/named/.hoodie/"
    assert tables_named(registry, [("lake", meta + "timeline/1.deltacommit.requested")]) == {"named"}
    assert tables_named(registry, [("lake", meta + "hoodie.properties")]) == {"named"}
    ignored = ["metadata/files/x.log", ".heartbeat/1", ".temp/1/m", ".aux/hts/truetime"]
    assert tables_named(registry, [("lake", meta + k) for k in ignored]) == set()
    assert tables_named(registry, [("lake", "events/named/p1/file.parquet")]) == set(), "data files"
    assert tables_named(registry, [("other", meta + "timeline/1.commit")]) == set(), "another bucket"
    assert tables_named(registry, [("lake", "events/named2/.hoodie/timeline/1.commit")]) == set()
