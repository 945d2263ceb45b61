"""The console's bench: with 1,000 tables, serving the fleet page's data (``GET /v1/fleet``: all the
page reads, on load and on every refresh) against ``GET /v1/tables``, both from one ``hts serve``,
interleaved in one run, and the size of what the fleet page loads. ``GET /v1/whoami``, which the
console calls once when it opens (not on refreshes), is timed beside them.

The fleet is one MERGE_ON_READ table (a base file and a log file) copied 1,000 times, with a
compaction requested on every tenth table while the daemon is paused (so those tables show
pending and queued work) and every hundredth table unreadable (so they show an error).
"""

from __future__ import annotations

import http.client
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

TARGET_VS_TABLES = 2.0
TARGET_BYTES = 200 * 1024
PENDING_EVERY = 10
BROKEN_EVERY = 100


@dataclass(frozen=True)
class FleetFigures:
    tables: int
    pending: int
    broken: int
    rounds: int
    tables_s: float
    """Median time of ``GET /v1/tables``."""
    fleet_s: float
    """Median time of ``GET /v1/fleet``."""
    whoami_s: float
    """Median time of ``GET /v1/whoami``."""
    tables_bytes: int
    fleet_bytes: int

    @property
    def ratio(self) -> float:
        return self.fleet_s / self.tables_s


def make_fleet(root: Path, count: int) -> tuple[list[Path], int]:
    """``count`` tables under ``root`` (one made, the rest copied); returns the readable tables and
    how many were made unreadable."""
    from bench.daemon import _make_tables

    (seed,) = _make_tables(root / "seed", 1, with_logs=True)
    tables = root / "tables"
    paths: list[Path] = []
    broken = 0
    for n in range(count):
        path = tables / f"t{n:04d}"
        shutil.copytree(seed, path)
        if n % BROKEN_EVERY == BROKEN_EVERY - 1:
            (path / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=broken\n")
            broken += 1
        else:
            paths.append(path)
    return paths, broken


def _timed_get(conn: http.client.HTTPConnection, path: str) -> tuple[float, int]:
    started = time.perf_counter()
    conn.request("GET", path)
    response = conn.getresponse()
    body = response.read()
    took = time.perf_counter() - started
    if response.status != 200:
        raise RuntimeError(f"GET {path}: HTTP {response.status}: {body[:200]!r}")
    return took, len(body)


def fleet_page(root: Path, tables: int = 1000, rounds: int = 30) -> FleetFigures:
    from bench.daemon import _Daemon
    from hoodie.services.base import ServiceContext
    from hoodie.services.compaction import CompactionPolicy, schedule_compaction
    from hoodie.table import HoodieTable

    shutil.rmtree(root, ignore_errors=True)
    paths, broken = make_fleet(root, tables)
    daemon = _Daemon(root, root / "tables", 5.0)
    try:
        daemon.wait_ready(timeout_s=600)
        daemon.post("/v1/pause")
        requested = paths[::PENDING_EVERY]
        for path in requested:
            scheduled = schedule_compaction(ServiceContext(HoodieTable.open(str(path))), CompactionPolicy())
            assert scheduled is not None
        deadline = time.monotonic() + 120
        while sum(1 for t in daemon.get("/v1/fleet")["tables"] if t.get("queued")) < len(requested):
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon did not queue every requested compaction in 120 s")
            time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
        for _ in range(3):  # warm-up
            _timed_get(conn, "/v1/tables")
            _timed_get(conn, "/v1/fleet")
        listing: list[float] = []
        page: list[float] = []
        whoami: list[float] = []
        tables_bytes = fleet_bytes = 0
        for _ in range(rounds):
            took, tables_bytes = _timed_get(conn, "/v1/tables")
            listing.append(took)
            took, fleet_bytes = _timed_get(conn, "/v1/fleet")
            page.append(took)
            whoami.append(_timed_get(conn, "/v1/whoami")[0])
        conn.close()
    finally:
        daemon.stop()
    return FleetFigures(
        tables=tables,
        pending=len(requested),
        broken=broken,
        rounds=rounds,
        tables_s=statistics.median(listing),
        fleet_s=statistics.median(page),
        whoami_s=statistics.median(whoami),
        tables_bytes=tables_bytes,
        fleet_bytes=fleet_bytes,
    )
