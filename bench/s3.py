"""S3 benchmark: the compaction of the bench file group on an S3 API, against local disk.

S3 is moto's standalone server, an emulator of the S3 API (not AWS), on a free loopback port,
behind the tests' proxy (:mod:`tests.servers.proxy`), which adds ``LATENCY_S`` to every request
and counts requests by operation. The table is uploaded straight to moto (not counted); then the
compaction is scheduled and executed in process through the proxy with the table's
``storage_options`` (pyarrow ``S3FileSystem`` keys), counting the requests of each phase. The
local figure is the same compaction in process on a copy on local disk. moto keeps objects in
this machine's memory, so the figure is the cost of requests and latency, not of S3's bandwidth.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

from bench.compaction import _copy
from bench.data import BenchData

LATENCY_S = 0.020
BUCKET = "lake"


@dataclass(frozen=True)
class S3Compaction:
    latency_s: float
    schedule_requests: Counter[str]
    execute_requests: Counter[str]
    s3_seconds: list[float]
    s3_seconds_no_latency: float
    local_seconds: list[float]


def _options(endpoint_url: str) -> dict[str, str]:
    return {
        "endpoint_override": endpoint_url,
        "access_key": "testing",
        "secret_key": "testing",
        "region": "us-east-1",
        "scheme": "http",
    }


def _compact(uri: str, options: dict[str, str], compression: str, phase: Callable[[], None]) -> float:
    """Open, schedule, call ``phase``, execute in process; the seconds executing."""
    import jobs  # noqa: F401  (S3's conditional PUT for instant files)
    from hoodie.services.base import LocalRunner, ServiceContext
    from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
    from hoodie.table import HoodieTable

    table = HoodieTable.open(uri, **options)
    ctx = ServiceContext(
        table, options={"hoodie.parquet.compression.codec": compression}, storage_options=options
    )
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    phase()
    start = time.perf_counter()
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return time.perf_counter() - start


def time_s3_compaction(data: BenchData, repeat: int, scratch: Path) -> S3Compaction:
    """Best-of-``repeat`` compaction times on S3 (through the proxy) and on local disk."""
    from tests.servers.dynamodb import moto_dynamodb
    from tests.servers.proxy import S3Proxy

    s3_seconds: list[float] = []
    local_seconds: list[float] = []
    scheduling: Counter[str] = Counter()
    executing: Counter[str] = Counter()
    with moto_dynamodb() as server:  # one moto server answers every AWS API it emulates
        direct = pafs.S3FileSystem(**_options(server.endpoint_url), allow_bucket_creation=True)
        direct.create_dir(BUCKET)
        proxy = S3Proxy(server.endpoint_url, latency_s=LATENCY_S)
        try:
            for n in range(repeat):
                prefix = f"{BUCKET}/bench/run{n}"
                local_fs = pafs.LocalFileSystem()
                pafs.copy_files(
                    str(data.table_path), prefix, source_filesystem=local_fs, destination_filesystem=direct
                )
                proxy.reset()

                def scheduled() -> None:
                    scheduling.clear()
                    scheduling.update(proxy.counts())
                    proxy.reset()

                s3_seconds.append(
                    _compact(f"s3://{prefix}", _options(proxy.url), data.compression, scheduled)
                )
                executing = proxy.counts()
                direct.delete_dir(prefix)
                local = _copy(data, scratch / "s3-local")
                local_seconds.append(_compact(str(local), {}, data.compression, lambda: None))
                shutil.rmtree(local, ignore_errors=True)
            # Once more without the added latency: what the emulator and the proxy cost by themselves.
            proxy.latency_s = 0.0
            prefix = f"{BUCKET}/bench/no-latency"
            local_fs = pafs.LocalFileSystem()
            pafs.copy_files(
                str(data.table_path), prefix, source_filesystem=local_fs, destination_filesystem=direct
            )
            no_latency = _compact(f"s3://{prefix}", _options(proxy.url), data.compression, lambda: None)
            direct.delete_dir(prefix)
        finally:
            proxy.close()
    return S3Compaction(LATENCY_S, scheduling, executing, s3_seconds, no_latency, local_seconds)
