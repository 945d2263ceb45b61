"""The S3 benchmark's machinery at a tiny size (moto's S3 emulator behind the counting proxy).

No wall-clock assertions: only that both compactions ran and the requests were counted by phase.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import data as bench_data
from bench.s3 import time_s3_compaction


def test_the_s3_section_counts_the_requests_of_one_compaction(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cache = tmp_path_factory.mktemp("bench-cache")
    small = bench_data.ensure(5_000, 500, cache_dir=cache, log=lambda _msg: None)
    t = time_s3_compaction(small, 1, Path(cache) / "scratch")
    assert len(t.s3_seconds) == len(t.local_seconds) == 1 and t.s3_seconds_no_latency > 0
    assert t.schedule_requests["PUT"] == 1, t.schedule_requests  # the REQUESTED plan, nothing else
    assert t.execute_requests["GET"] > 0 and t.execute_requests["PUT"] > 0, t.execute_requests
    assert "LIST" in t.execute_requests
