"""Daemon benchmarks: how fast a REQUESTED instant goes INFLIGHT with many watched tables, what
watching costs when there is nothing to do, and TrueTime throughput.

Each measurement starts ``hts serve`` as its own process (tasks in process, so Spark start-up
does not count) and drives it from this one:

* latency: tables get compaction requests at random moments; the latency of one request is the
  inflight file's modification time minus the requested file's (both written on this machine).
* idle CPU: the daemon's user+system CPU time over a window in which nothing happens on any
  table, as a share of one core.
* TrueTime: concurrent ``POST /v1/tables/{id}/truetime`` calls, one client per table.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

TARGET_P99_VS_POLL = 1.5
TARGET_IDLE_CPU = 0.05


@dataclass(frozen=True)
class Latency:
    tables: int
    requests: int
    poll_s: float
    p50: float
    p99: float
    worst: float


@dataclass(frozen=True)
class IdleCpu:
    tables: int
    poll_s: float
    window_s: float
    cpu_s: float

    @property
    def share(self) -> float:
        return self.cpu_s / self.window_s


@dataclass(frozen=True)
class TrueTimeRate:
    tables: int
    skew_ms: int
    calls: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.calls / self.seconds


def _make_tables(root: Path, count: int, *, with_logs: bool) -> list[Path]:
    """``count`` tables under ``root``: copies of one HoodieWriter wrote (:mod:`bench.fleet`)."""
    from bench.fleet import local_tables

    return local_tables(root, count, with_logs=with_logs)


class _Daemon:
    def __init__(self, root: Path, tables: Path | str, poll_s: float, **extra: Any) -> None:
        """``tables``: the folder (or object-store URI) to discover tables in."""
        with socketless_port() as port:
            self.port = port
        config = {
            "api": {"port": self.port},
            "tables": {"discover": [str(tables)], "rescan_interval_s": 3600},
            "spark": {"master": "in-process"},
            "watch": {"poll_interval_s": poll_s},
            "state_dir": str(root / "state"),
            "logging": {"level": "WARNING"},
            **extra,
        }
        self.config = root / "hts.yaml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = (root / "daemon.log").open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HTS_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "serve", "--config", str(self.config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as resp:
            return json.loads(resp.read())

    def post(self, path: str) -> Any:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=b"{}", method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())

    def wait_ready(self, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"hts serve exited with {self.proc.returncode}")
            try:
                if self.get("/readyz").get("ready"):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("hts serve did not become ready")

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class socketless_port:  # noqa: N801 - a tiny context manager
    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def request_latency(
    root: Path, tables: int = 200, requests: int = 200, poll_s: float = 1.0, spread_s: float = 60.0
) -> Latency:
    from hoodie.services.base import ServiceContext
    from hoodie.services.compaction import CompactionPolicy, schedule_compaction
    from hoodie.table import HoodieTable

    shutil.rmtree(root, ignore_errors=True)
    paths = _make_tables(root / "tables", tables, with_logs=True)
    daemon = _Daemon(root, root / "tables", poll_s, limits={"max_concurrent": 4, "per_service": {}})
    try:
        daemon.wait_ready()
        rng = random.Random(7)
        chosen = rng.sample(paths, min(requests, len(paths)))
        gaps = [rng.uniform(0, 2 * spread_s / len(chosen)) for _ in chosen]
        requested: list[tuple[Path, str]] = []
        for path, gap in zip(chosen, gaps, strict=True):
            time.sleep(gap)
            scheduled = schedule_compaction(ServiceContext(HoodieTable.open(str(path))), CompactionPolicy())
            assert scheduled is not None and scheduled.instant_time is not None
            requested.append((path, scheduled.instant_time))
        latencies = []
        deadline = time.monotonic() + 120
        for path, ts in requested:
            timeline = path / ".hoodie" / "timeline"
            inflight = timeline / f"{ts}.compaction.inflight"
            while not inflight.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not inflight.exists():
                raise RuntimeError(f"{path}: compaction {ts} never went inflight")
            latencies.append(
                inflight.stat().st_mtime - (timeline / f"{ts}.compaction.requested").stat().st_mtime
            )
    finally:
        daemon.stop()
    return Latency(
        tables,
        len(latencies),
        poll_s,
        statistics.median(latencies),
        _percentile(latencies, 0.99),
        max(latencies),
    )


def idle_cpu(
    root: Path, tables: int = 1000, poll_s: float = 5.0, warmup_s: float = 15.0, window_s: float = 30.0
) -> IdleCpu:
    shutil.rmtree(root, ignore_errors=True)
    _make_tables(root / "tables", tables, with_logs=False)
    daemon = _Daemon(root, root / "tables", poll_s)
    try:
        daemon.wait_ready()
        time.sleep(warmup_s)  # every table opened and looked at once
        before = daemon.cpu_seconds()
        time.sleep(window_s)
        used = daemon.cpu_seconds() - before
        if len(daemon.get("/v1/tables")) != tables:
            raise RuntimeError("the daemon does not watch every table")
    finally:
        daemon.stop()
    return IdleCpu(tables, poll_s, window_s, used)


def truetime_rate(
    root: Path, tables: int = 8, seconds: float = 5.0, skew_ms: int | None = None
) -> TrueTimeRate:
    shutil.rmtree(root, ignore_errors=True)
    _make_tables(root / "tables", tables, with_logs=False)
    extra: dict[str, Any] = {}
    if skew_ms is not None:
        extra["truetime"] = {"max_expected_clock_skew_ms": skew_ms}
    daemon = _Daemon(root, root / "tables", 5.0, **extra)
    counts = [0] * tables
    issued: list[list[str]] = [[] for _ in range(tables)]
    try:
        daemon.wait_ready()
        ids = [t["id"] for t in daemon.get("/v1/tables")]
        stop = time.monotonic() + seconds

        def client(k: int) -> None:
            while time.monotonic() < stop:
                issued[k].append(daemon.post(f"/v1/tables/{ids[k]}/truetime")["instant_time"])
                counts[k] += 1

        started = time.monotonic()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(tables)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
    finally:
        daemon.stop()
    for times in issued:
        if times != sorted(set(times)):
            raise RuntimeError("TrueTime issued a time twice or backwards")
    return TrueTimeRate(tables, skew_ms if skew_ms is not None else 1, sum(counts), took)
