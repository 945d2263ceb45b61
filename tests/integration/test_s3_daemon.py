"""``hts serve`` with its tables on S3: watch and request-and-walk-away, the REST trigger, two
replicas sharing Apache Hudi's storage-based lock on S3, ``kill -9`` and restart; hudi-rs reads
every result from S3.

S3 is moto's standalone server, an emulator of the S3 API (:mod:`tests.servers.s3`), reached
through the project's own proxy adding 20 ms per request. The daemons find the tables by listing a
prefix (``tables.discover: [s3://lake/<root>]``) with ``defaults.storage_options`` in pyarrow
``S3FileSystem`` keys; the writer requesting work uses the AWS environment alone.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.services.base import ServiceContext
from hoodie.services.compaction import CompactionPolicy, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from service.locks import PROVIDER_KEY, STORAGE
from tests.daemon.helpers import ServeProcess, wait_for
from tests.servers.proxy import S3Proxy
from tests.servers.s3 import LATENCY_S, S3Endpoint, hudi_rs_options
from tests.tables import new_table, rows

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "daemon/template"
LOCK = {PROVIDER_KEY: STORAGE}
COMPACT_NOW = {"hoodie.compact.inline.max.delta.commits": "1"}
# Heartbeats go to S3 through the slow proxy on a loaded machine: a tolerance of 5 s, not the
# 2 s the local daemon tests use, or a live attempt would be taken for an abandoned one.
HEARTBEAT = {
    "hoodie.client.heartbeat.interval_in_ms": "1000",
    "hoodie.client.heartbeat.tolerable.misses": "5",
}
_roots = itertools.count()


@dataclass
class Lake:
    slow: S3Endpoint
    direct: S3Endpoint
    proxy: S3Proxy
    expected: list[str]

    def tables(self, *names: str) -> str:
        """A fresh root holding a copy of the template per name; the root's URI."""
        root = f"daemon/r{next(_roots)}"
        for name in names:
            self.direct.copy_prefix(TEMPLATE, f"{root}/{name}")
        return f"s3://lake/{root}"

    @property
    def options(self) -> dict[str, str]:
        return self.slow.storage_options()

    def serve(self, tmp_path: Path, name: str, root: str, **overrides: Any) -> ServeProcess:
        defaults = {"options": {**HEARTBEAT, **LOCK}, "storage_options": self.options}
        return ServeProcess(
            tmp_path,
            name,
            tables={"discover": [root], "rescan_interval_s": 1},
            defaults=defaults,
            **overrides,
        )


def _read(uri: str, endpoint: S3Endpoint) -> list[str]:
    builder = HudiTableBuilder.from_base_uri(uri).with_storage_options(
        hudi_rs_options(endpoint.storage_options())
    )
    data = pa.Table.from_batches(builder.build().read())
    return sorted(str(r) for r in data.select(["id", "ts", "v", "p"]).to_pylist())


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint) -> Iterator[Lake]:
    uri = f"s3://lake/{TEMPLATE}"
    writer = HoodieWriter(new_table(uri, **s3.storage_options()))
    writer.insert(rows(range(18), 1))
    writer.upsert(rows(range(0, 18, 2), 2))
    expected = _read(uri, s3)
    proxy = S3Proxy(s3.endpoint_url, latency_s=LATENCY_S)
    try:
        yield Lake(s3.behind(proxy), s3, proxy, expected)
    finally:
        proxy.close()


def _state(uri: str, lake: Lake, instant: str) -> str | None:
    found = HoodieTable.open(uri, **lake.direct.storage_options()).reload().get(instant, Action.COMPACTION)
    return None if found is None else found.state.name


def _request_from_the_cli(uri: str, lake: Lake) -> str:
    """A writer without a JVM: leaves a REQUESTED compaction and exits (AWS environment only)."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **lake.slow.environ()}
    args = [arg for k, v in {**COMPACT_NOW, **LOCK}.items() for arg in ("--option", f"{k}={v}")]
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "request", "compaction", uri, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.startswith("requested compaction "), done.stderr
    return done.stdout.split()[2]


def _finished_runs(daemon: ServeProcess, count: int) -> list[dict[str, Any]]:
    def finished() -> list[dict[str, Any]] | None:
        runs = [r for r in daemon.get("/v1/runs") if r["state"] not in ("queued", "running")]
        return runs if len(runs) >= count else None

    return wait_for(finished, 120, f"{count} finished runs")


def test_walk_away_request_and_rest_trigger_on_s3(tmp_path: Path, lake: Lake) -> None:
    root = lake.tables("orders", "trips")
    daemon = lake.serve(tmp_path, "d", root).start()
    try:
        wait_for(lambda: len(daemon.get("/v1/tables")) == 2, 60, "the daemon to discover both tables on S3")
        ts = _request_from_the_cli(f"{root}/orders", lake)
        wait_for(lambda: _state(f"{root}/orders", lake, ts) == "COMPLETED", 120, "the walked-away compaction")
        posted = daemon.request("POST", "/v1/tables/trips/compaction", {"options": COMPACT_NOW})
        runs = _finished_runs(daemon, 2)
        by_trigger = {r["trigger"]: r for r in runs}
        assert by_trigger["watch"]["instant"] == ts and by_trigger["watch"]["state"] == "succeeded", runs
        assert by_trigger["api"]["id"] == posted["id"] and by_trigger["api"]["state"] == "succeeded", runs
        lock = daemon.get("/v1/tables/orders")["lock"]
        assert lock["provider"] != "InProcessServiceLock", lock
    finally:
        daemon.stop()
    for name in ("orders", "trips"):
        assert HoodieTable.open(f"{root}/{name}", **lake.options).reload().completed().actions(Action.COMMIT)
        assert _read(f"{root}/{name}", lake.slow) == lake.expected, f"hudi-rs reads {name} from S3"


def _requested(uri: str, lake: Lake) -> str:
    table = HoodieTable.open(uri, **lake.direct.storage_options())
    scheduled = schedule_compaction(ServiceContext(table, options=COMPACT_NOW), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return scheduled.instant_time


def test_two_replicas_share_the_storage_lock_on_s3_and_execute_each_instant_once(
    tmp_path: Path, lake: Lake
) -> None:
    names = [f"t{n}" for n in range(4)]
    root = lake.tables(*names)
    requested = {name: _requested(f"{root}/{name}", lake) for name in names}
    daemons = [lake.serve(tmp_path, replica, root, limits={"max_concurrent": 2}) for replica in ("a", "b")]
    try:
        for d in daemons:
            d.launch()
        for d in daemons:
            d.wait_ready()
        wait_for(
            lambda: all(_state(f"{root}/{n}", lake, ts) == "COMPLETED" for n, ts in requested.items()),
            180,
            "every requested compaction to complete",
        )
    finally:
        for d in daemons:
            d.stop()
    for name in names:
        table = HoodieTable.open(f"{root}/{name}", **lake.options)
        assert len(table.reload().completed().actions(Action.COMMIT)) == 1, f"{name}: completed once"
    succeeded = []
    for replica in ("a", "b"):
        with sqlite3.connect(tmp_path / f"state-{replica}" / "hts.db") as db:
            succeeded += db.execute("SELECT table_id, instant FROM runs WHERE state = 'succeeded'").fetchall()
    assert sorted(succeeded) == sorted(requested.items()), "each instant succeeded exactly once"
    for name in names:
        assert _read(f"{root}/{name}", lake.slow) == lake.expected


def test_kill_9_mid_compaction_on_s3_then_restart(tmp_path: Path, lake: Lake) -> None:
    root = lake.tables("t")
    uri = f"{root}/t"
    ts = _requested(uri, lake)
    stall = {"HTS_CRASH_AT": "compaction.task_after_write", "HTS_CRASH_ACTION": "stall"}
    first = lake.serve(tmp_path, "first", root, env=stall, replica="node").start()
    try:
        wait_for(lambda: "crash point compaction.task_after_write reached" in first.log(), 90, "the stall")
        assert _state(uri, lake, ts) == "INFLIGHT"
    finally:
        first.kill()  # SIGKILL: no clean-up at all
    second = lake.serve(tmp_path, "second", root, replica="node").start()
    try:
        wait_for(lambda: _state(uri, lake, ts) == "COMPLETED", 180, "the restarted daemon to complete it")
        runs = _finished_runs(second, 2)
        assert {r["state"] for r in runs} == {"interrupted", "succeeded"}, runs
    finally:
        second.stop()
    assert _read(uri, lake.slow) == lake.expected
