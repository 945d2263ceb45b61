"""The daemon benchmark's machinery at a tiny size: a real ``hts serve`` process per measurement.

No wall-clock assertions (shared, noisy machines): only that every request went inflight, the
figures are consistent, idle watching was measured over every table, and TrueTime issued
strictly increasing times.
"""

from __future__ import annotations

from pathlib import Path

from bench import daemon


def test_request_latency_sees_every_request_go_inflight(tmp_path: Path) -> None:
    lat = daemon.request_latency(tmp_path, tables=4, requests=4, poll_s=0.5, spread_s=1.0)
    assert lat.requests == 4 and lat.tables == 4
    assert 0 <= lat.p50 <= lat.p99 <= lat.worst


def test_idle_cpu_is_measured_over_every_watched_table(tmp_path: Path) -> None:
    idle = daemon.idle_cpu(tmp_path, tables=5, poll_s=0.5, warmup_s=1.0, window_s=1.0)
    assert idle.tables == 5
    assert idle.cpu_s >= 0 and idle.share == idle.cpu_s / idle.window_s


def test_truetime_rate_counts_strictly_increasing_times(tmp_path: Path) -> None:
    rate = daemon.truetime_rate(tmp_path, tables=2, seconds=1.0, skew_ms=0)
    # truetime_rate itself raises if any client saw a time twice or backwards
    assert rate.calls > 2 and rate.per_second > 0 and rate.skew_ms == 0
