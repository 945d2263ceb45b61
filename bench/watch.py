"""Watching object stores: what the request budget costs and what it buys, on S3's API.

S3 and SQS are moto's emulators (in this process, :mod:`tests.servers.counted_aws`), counting
every request and, where said, adding latency to each. Figures on the simulated clock
(:class:`service.clock.SimulatedClock`, the daemon in this process, ticking every poll interval as
its scheduler does) measure the polling policy itself: the requests it makes, and when it looks.
The others are wall clock, with ``hts serve`` in its own process or the daemon's event thread here.
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

TARGET_IDLE_PER_HOUR = 60.0
TARGET_VS_POLL = 1.5
TARGET_VS_CEILING = 1.5
TARGET_EVENT_S = 2.0
EVENTS = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64())])


@dataclass(frozen=True)
class IdleCost:
    tables: int
    ceiling_s: float
    hts_per_table_hour: float
    store_per_table_hour: float
    first_hour_per_table: float
    """The table's first hour, opening it and backing off included (hts's count)."""


@dataclass(frozen=True)
class Reaction:
    what: str
    samples: int
    p50: float
    p99: float
    worst: float


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _reaction(what: str, values: list[float]) -> Reaction:
    return Reaction(what, len(values), statistics.median(values), _percentile(values, 0.99), max(values))


def aws() -> AbstractContextManager[Any]:
    """The counted emulator, with dummy credentials in this process's environment."""
    import os

    from tests.servers.counted_aws import counted_aws
    from tests.servers.dynamodb import _CLEARED, _DUMMY_ENV

    for name in _CLEARED:
        os.environ.pop(name, None)
    os.environ.update(_DUMMY_ENV)
    return counted_aws()


def make_tables(endpoint: Any, root: Path, prefix: str, count: int) -> list[str]:
    """``count`` MERGE_ON_READ tables on S3, each with a base file and a log file (compactable):
    copies of one table HoodieWriter wrote on local disk (under ``root``), uploaded with PUTs
    (:mod:`bench.fleet`); set-up, before any measured request."""
    from bench.fleet import s3_tables

    return s3_tables(endpoint, root, prefix, count)


class _Sim:
    """A daemon in this process on a simulated clock, ticking every poll interval."""

    def __init__(self, root: Path, endpoint: Any, uris: list[str], **watch: Any) -> None:
        from service.clock import SimulatedClock
        from service.daemon import Daemon
        from service.settings import load_settings

        static = [{"path": u, "id": u.rsplit("/", 1)[-1]} for u in uris]
        data = {
            "tables": {"discover": [], "static": static},
            "defaults": {"storage_options": endpoint.storage_options()},
            "spark": {"master": "in-process"},
            "state_dir": str(root / "state"),
            "watch": watch,
        }
        self.clock = SimulatedClock()
        self.daemon = Daemon(load_settings(overrides=data, environ={}), replica_id="bench", clock=self.clock)
        self.poll = self.daemon.settings.watch.poll_interval_s
        self.next_tick = self.clock.monotonic()
        self.daemon.discover()

    def run(self, seconds: float) -> None:
        end = self.clock.monotonic() + seconds
        while self.next_tick <= end:
            self.clock.advance(self.next_tick - self.clock.monotonic())
            self.daemon.watch_tick()
            self.next_tick += self.poll
        self.clock.advance(end - self.clock.monotonic())

    def close(self) -> None:
        self.daemon.stop(grace_s=0)


def idle_requests(root: Path, tables: int = 10) -> IdleCost:
    """Requests per idle table-hour on the simulated clock: an hour to back off, then one counted."""
    shutil.rmtree(root, ignore_errors=True)
    with aws() as endpoint:
        uris = make_tables(endpoint, root, "idle", tables)
        sim = _Sim(root, endpoint, uris)
        try:
            sim.run(3600)
            entries = [sim.daemon.entry(u.rsplit("/", 1)[-1]) for u in uris]
            first = sum(e.requests.total() for e in entries) / tables
            before, answered = [e.requests.total() for e in entries], endpoint.snapshot()
            sim.run(3600)
            ours = sum(e.requests.total() - b for e, b in zip(entries, before, strict=True))
            store = sum((endpoint.snapshot() - answered).values())
        finally:
            sim.close()
    ceiling = sim.daemon.settings.watch.max_poll_interval_s
    return IdleCost(tables, ceiling, ours / tables, store / tables, first)


def long_idle_reaction(root: Path, trials: int = 20, seed: int = 7) -> tuple[Reaction, float]:
    """Simulated seconds from a commit on a long-idle table to the look that sees it; and the ceiling."""
    from hoodie.table import HoodieTable
    from hoodie.write.writer import HoodieWriter

    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    took: list[float] = []
    with aws() as endpoint:
        (uri,) = make_tables(endpoint, root, "long-idle", 1)
        sim = _Sim(root, endpoint, [uri])
        try:
            entry = sim.daemon.entry("t0000")
            for n in range(trials):
                # Long idle again, then a commit at a random moment of the table's back-off period.
                sim.run(3600 + rng.uniform(0, sim.daemon.settings.watch.max_poll_interval_s))
                writer = HoodieWriter(HoodieTable.open(uri, **endpoint.storage_options()))
                writer.upsert(pa.table({"id": ["a"], "ts": [3 + n]}, schema=SCHEMA))
                reloads, start = entry.watch.reloads, sim.clock.monotonic()
                while entry.watch.reloads == reloads:
                    sim.run(sim.next_tick - sim.clock.monotonic())
                took.append(sim.clock.monotonic() - start)
        finally:
            sim.close()
    return _reaction("long-idle table, commit -> seen", took), sim.daemon.settings.watch.max_poll_interval_s


def _request(uri: str, opts: dict[str, str]) -> str:
    """Request a compaction of ``uri``'s table, as a writer would; its instant time."""
    from hoodie.services.base import ServiceContext
    from hoodie.services.compaction import CompactionPolicy, schedule_compaction
    from hoodie.table import HoodieTable

    scheduled = schedule_compaction(ServiceContext(HoodieTable.open(uri, **opts)), CompactionPolicy())
    if scheduled is None or scheduled.instant_time is None:
        raise RuntimeError(f"{uri}: no compaction to request")
    return scheduled.instant_time


def active_s3_latency(
    root: Path,
    tables: int = 200,
    requests: int = 60,
    poll_s: float = 5.0,
    latency_ms: float = 20.0,
    spread_s: float = 60.0,
    seed: int = 7,
) -> tuple[Reaction, Reaction]:
    """Wall clock: ``hts serve`` watching ``tables`` active S3 tables behind ``latency_ms`` a request;
    ``requests`` compaction requests at random moments over ``spread_s``. REQUESTED -> queued (the
    look that saw it) and REQUESTED -> run started (the run writes INFLIGHT first), from the daemon's
    run history. The tables count as active throughout (``watch.idle_after_s`` covers the run).
    The requests come about 24 a minute (a pause of ``spread_s / requests`` on average, plus the
    1-2 s a writer takes to schedule one at 20 ms a request), which keeps the 4 workers ahead of the
    work (a compaction on the emulator takes 5-9 s): with more, the queue, not the watching, is
    measured."""
    from bench.daemon import _Daemon

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    rng = random.Random(seed)
    with aws() as endpoint:
        uris = make_tables(endpoint, root, "active", tables)
        endpoint.latency_s = latency_ms / 1000
        opts = endpoint.storage_options()
        daemon = _Daemon(
            root,
            f"s3://{endpoint.bucket}/active",
            poll_s,
            defaults={"storage_options": opts},
            limits={"max_concurrent": 4, "per_service": {}},
            # Active: as if writers committed to every table within the last idle_after_s (the
            # bench cannot keep 200 writers going); idle tables are measured by long_idle_reaction.
            watch={"poll_interval_s": poll_s, "idle_after_s": 3600},
        )
        requested: dict[tuple[str, str], float] = {}
        runs: dict[tuple[str, str], Any] = {}
        try:
            daemon.wait_ready()
            chosen = rng.sample(uris, min(requests, len(uris)))
            for uri in chosen:
                time.sleep(rng.uniform(0, 2 * spread_s / len(chosen)))
                ts = _request(uri, opts)
                requested[(uri.rsplit("/", 1)[-1], ts)] = time.time()
            deadline = time.monotonic() + 600
            while not all(k in runs for k in requested) and time.monotonic() < deadline:
                time.sleep(1.0)
                found = daemon.get("/v1/runs?service=compaction&limit=1000")
                runs = {(r["table"], r["instant"]): r for r in found if r["started_at"] is not None}
        finally:
            daemon.stop()
    missing = [k for k in requested if k not in runs]
    if missing:
        raise RuntimeError(f"{len(missing)} compaction request(s) never started, e.g. {missing[0]}")
    queued = [runs[k]["created_at"] - t for k, t in requested.items()]
    started = [runs[k]["started_at"] - t for k, t in requested.items()]
    return _reaction("REQUESTED -> queued", queued), _reaction("REQUESTED -> run started", started)


def event_reaction(
    root: Path, requests: int = 20, latency_ms: float = 20.0, seed: int = 7
) -> tuple[Reaction, dict[str, int]]:
    """Wall clock: S3 notifications on an SQS queue; the daemon polls every 30 s (never, in effect,
    within a measurement) and its event thread looks at the table a notification names. Request
    written -> seen by a look; and the queue's own requests."""
    from service.daemon import Daemon
    from service.settings import load_settings

    shutil.rmtree(root, ignore_errors=True)
    rng = random.Random(seed)
    took: list[float] = []
    with aws() as endpoint:
        uris = make_tables(endpoint, root, "events", requests)
        sqs, s3 = endpoint.client("sqs"), endpoint.client("s3")
        url = sqs.create_queue(QueueName="hts-bench")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        s3.put_bucket_notification_configuration(
            Bucket=endpoint.bucket,
            NotificationConfiguration={"QueueConfigurations": [{"QueueArn": arn, "Events": EVENTS}]},
        )
        sqs.close()
        s3.close()
        endpoint.latency_s = latency_ms / 1000
        opts = endpoint.storage_options()
        static = [{"path": u, "id": u.rsplit("/", 1)[-1], "paused": True} for u in uris]
        events = {"sqs_queue_url": url, "endpoint_url": endpoint.endpoint_url, "wait_s": 20}
        data = {
            "tables": {"discover": [], "static": static},
            "defaults": {"storage_options": opts},
            "spark": {"master": "in-process"},
            "state_dir": str(root / "state"),
            "watch": {"poll_interval_s": 30, "events": events},
        }
        daemon = Daemon(load_settings(overrides=data, environ={}), replica_id="bench-events")
        daemon.discover()
        daemon.watch_tick()  # opens every table
        daemon.start_events()
        try:
            for uri in rng.sample(uris, len(uris)):
                time.sleep(rng.uniform(0.2, 1.0))
                entry = daemon.entry(uri.rsplit("/", 1)[-1])
                ts = _request(uri, opts)
                written = time.monotonic()
                while not any(p.instant.requested_time == ts for p in entry.watch.pending):
                    if time.monotonic() - written > 60:
                        raise RuntimeError(f"{uri}: no event-driven look within 60 s")
                    time.sleep(0.002)
                took.append(time.monotonic() - written)
            assert daemon.events is not None
            queue_requests = daemon.events.requests.snapshot()
        finally:
            daemon.stop(grace_s=0)
    return _reaction("event-driven: request written -> seen", took), queue_requests
