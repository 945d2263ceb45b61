"""Every table service on S3, end to end, with hudi-rs reading the result from S3.

S3 is moto's standalone server, an emulator of the S3 API (:mod:`tests.servers.s3`), reached
through the project's own proxy adding ``LATENCY_S`` (20 ms) per request and counting requests.
One table is written once per module (straight to moto); each test copies it server-side to its
own prefix and runs one service on the copy through the slow proxy: from the Python API with the
table's ``storage_options`` (pyarrow ``S3FileSystem`` keys), from the CLI with only the AWS
environment (``AWS_ENDPOINT_URL``, credentials, region), and on Spark ``local[2]``. hudi-rs reads
with the same settings mapped to its ``aws_*`` keys.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.io import usage
from hoodie.io.requests import counting
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from jobs import run as jobs_run
from tests.daemon.helpers import FAST_HEARTBEAT
from tests.servers.proxy import S3Proxy
from tests.servers.s3 import LATENCY_S, S3Endpoint
from tests.tables import Killed, KilledWriter, new_table, rows

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = "e2e/template"
COLUMNS = ["id", "ts", "v", "p"]
_names = itertools.count()


@dataclass
class Lake:
    """The template table, the slow endpoint in front of moto, and a direct one for setup."""

    slow: S3Endpoint
    direct: S3Endpoint
    proxy: S3Proxy
    expected: list[dict[str, Any]]

    def copy(self, name: str) -> str:
        """A server-side copy of the template at ``e2e/<name>`` (straight to moto); its URI."""
        self.direct.copy_prefix(TEMPLATE, f"e2e/{name}")
        return f"s3://lake/e2e/{name}"

    @property
    def options(self) -> dict[str, str]:
        return self.slow.storage_options()


@pytest.fixture(scope="module")
def lake(s3: S3Endpoint) -> Iterator[Lake]:
    uri = f"s3://lake/{TEMPLATE}"
    writer = HoodieWriter(new_table(uri, **s3.storage_options()))
    writer.insert(rows(range(24), 1))
    writer.upsert(rows(range(0, 24, 2), 2))
    writer.upsert(rows(range(0, 24, 3), 3))
    expected = _rows(hudi_rs_read(uri, s3.storage_options()))
    proxy = S3Proxy(s3.endpoint_url, latency_s=LATENCY_S)
    try:
        yield Lake(s3.behind(proxy), s3, proxy, expected)
    finally:
        proxy.close()


def hudi_rs_read(uri: str, storage_options: dict[str, str]) -> pa.Table:
    """What hudi-rs reads at ``uri`` on S3 (the pyarrow keys mapped to its ``aws_*`` keys)."""
    from tests.servers.s3 import hudi_rs_options

    builder = HudiTableBuilder.from_base_uri(uri).with_storage_options(hudi_rs_options(storage_options))
    batches = builder.build().read()
    return pa.Table.from_batches(batches)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.select(COLUMNS).to_pylist(), key=lambda r: str(r["id"]))


def _ours(uri: str, options: dict[str, str]) -> list[dict[str, Any]]:
    from hoodie.read.reader import TableReader

    return _rows(TableReader(HoodieTable.open(uri, **options)).snapshot())


def _assert_both_read(lake: Lake, uri: str, expected: list[dict[str, Any]] | None = None) -> None:
    want = lake.expected if expected is None else expected
    assert _ours(uri, lake.options) == want, "hts reads it from S3"
    assert _rows(hudi_rs_read(uri, lake.options)) == want, "hudi-rs reads it from S3"


def _completed(uri: str, options: dict[str, str], action: Action) -> list[str]:
    timeline = HoodieTable.open(uri, **options).reload()
    return [i.requested_time for i in timeline.completed().instants if i.action is action]


def _run(lake: Lake, service: str, uri: str, options: dict[str, str]) -> jobs_run.RunSummary:
    lake.proxy.reset()
    summary = jobs_run.run(
        service, uri, options, spark_master=jobs_run.IN_PROCESS, storage_options=lake.options
    )
    assert lake.proxy.total() > 0, "the service went through the slow proxy"
    return summary


def _hts_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )


# -- the services, one per test --------------------------------------------------------------


@pytest.mark.parametrize(
    ("service", "options", "action"),
    [
        ("compaction", {"hoodie.compact.inline.max.delta.commits": "1"}, Action.COMMIT),
        ("logcompaction", {"hoodie.log.compaction.blocks.threshold": "2"}, Action.DELTA_COMMIT),
        ("clustering", {"hoodie.clustering.plan.strategy.sort.columns": "id"}, Action.REPLACE_COMMIT),
    ],
)
def test_a_service_rewriting_file_groups_runs_on_s3(
    lake: Lake, service: str, options: dict[str, str], action: Action
) -> None:
    uri = lake.copy(f"{service}-{next(_names)}")
    before = set(_completed(uri, lake.options, action))
    summary = _run(lake, service, uri, options)
    assert summary.scheduled is not None and [r.instant.requested_time for r in summary.executed] == [
        summary.scheduled
    ]
    assert set(_completed(uri, lake.options, action)) - before == {summary.scheduled}
    _assert_both_read(lake, uri)


def test_clean_then_archival_on_s3(lake: Lake) -> None:
    uri = lake.copy(f"clean-{next(_names)}")
    _run(lake, "compaction", uri, {"hoodie.compact.inline.max.delta.commits": "1"})
    table = HoodieTable.open(uri, **lake.options)
    old_files = {
        f.path for f in table.fileio.list_files_recursive(table.base_path) if ".hoodie" not in f.path
    }
    writer = HoodieWriter(table)
    for ts in (4, 5):
        writer.upsert(rows(range(0, 24, 4), ts))
    expected = _ours(uri, lake.options)
    retain = {"hoodie.cleaner.commits.retained": "1"}
    cleaned = _run(lake, "clean", uri, retain)
    assert cleaned.executed and _completed(uri, lake.options, Action.CLEAN) == [cleaned.scheduled]
    now = {f.path for f in table.fileio.list_files_recursive(table.base_path) if ".hoodie" not in f.path}
    assert old_files - now, "the clean deleted the replaced slices' files from S3"
    _assert_both_read(lake, uri, expected)

    # Hudi archives no data-table instant the metadata table has not compacted yet.
    _run(lake, "metadata", uri, {"hoodie.metadata.compact.max.delta.commits": "1"})
    active = len(HoodieTable.open(uri, **lake.options).reload().completed().instants)
    archival = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", **retain}
    archived = _run(lake, "archival", uri, archival)
    assert archived.executed and archived.executed[0].details["archived_instants"]
    assert len(HoodieTable.open(uri, **lake.options).reload().completed().instants) < active
    _assert_both_read(lake, uri, expected)


def test_rollback_of_a_failed_write_on_s3(lake: Lake) -> None:
    uri = lake.copy(f"rollback-{next(_names)}")
    table = HoodieTable.open(uri, **lake.options)
    with pytest.raises(Killed):
        KilledWriter(table).upsert(rows(range(0, 24, 5), 9))
    assert HoodieTable.open(uri, **lake.options).reload().pending().instants
    time.sleep(2.5)  # the failed write's heartbeat (200 ms, 10 misses) expires
    rolled = _run(lake, "rollback", uri, FAST_HEARTBEAT)
    assert rolled.executed, rolled.as_json()
    assert not HoodieTable.open(uri, **lake.options).reload().pending().instants
    _assert_both_read(lake, uri)


def test_savepoint_then_restore_on_s3(lake: Lake) -> None:
    uri = lake.copy(f"restore-{next(_names)}")
    saved = _run(lake, "savepoint", uri, {})
    savepoint = _completed(uri, lake.options, Action.SAVEPOINT)
    assert savepoint, saved.as_json()
    HoodieWriter(HoodieTable.open(uri, **lake.options)).upsert(rows(range(24), 7))
    assert _ours(uri, lake.options) != lake.expected
    restored = _run(lake, "restore", uri, {"hts.restore.savepoint": savepoint[0]})
    assert restored.executed and _completed(uri, lake.options, Action.RESTORE)
    _assert_both_read(lake, uri)


def test_indexing_and_the_metadata_table_services_on_s3(lake: Lake) -> None:
    uri = lake.copy(f"indexing-{next(_names)}")
    build = {
        "hoodie.metadata.record.index.enable": "true",
        "hoodie.metadata.index.column.stats.enable": "true",
    }
    indexed = _run(lake, "indexing", uri, build)
    assert indexed.executed, indexed.as_json()
    table = HoodieTable.open(uri, **lake.options)
    partitions = {e.name for e in table.fileio.list_dir(f"{table.base_path}/.hoodie/metadata") if e.is_dir}
    assert {"record_index", "column_stats"} <= partitions
    _run(lake, "metadata", uri, {"hoodie.metadata.compact.max.delta.commits": "1"})
    _assert_both_read(lake, uri)


# -- the CLI with only the environment, and Spark executors ----------------------------------


def test_the_cli_runs_a_compaction_on_s3_from_the_aws_environment_alone(lake: Lake) -> None:
    uri = lake.copy(f"cli-{next(_names)}")
    env = lake.slow.environ()
    lake.proxy.reset()
    args = ["--option", "hoodie.compact.inline.max.delta.commits=1", "--spark-master", "in-process", "--json"]
    done = _hts_cli("run", "compaction", uri, *args, env=env)
    assert done.returncode == 0, done.stderr
    assert lake.proxy.counts()["PUT"] > 0, "the CLI wrote through the endpoint in AWS_ENDPOINT_URL"
    assert _completed(uri, lake.options, Action.COMMIT)
    timeline = _hts_cli("timeline", uri, env=env)
    assert timeline.returncode == 0 and "commit" in timeline.stdout, timeline.stderr
    _assert_both_read(lake, uri)


def test_spark_executors_reach_s3_with_the_tables_storage_options(lake: Lake, spark: Any) -> None:
    from jobs.spark import SparkRunner

    uri = lake.copy(f"spark-{next(_names)}")
    lake.proxy.reset()
    options = {"hoodie.compact.inline.max.delta.commits": "1"}
    planned = jobs_run.schedule("compaction", uri, options, storage_options=lake.options)
    assert planned.scheduled is not None
    runner = SparkRunner(spark)
    lake.proxy.reset()
    with counting() as counter, usage.measure() as used:
        done = jobs_run.execute(
            "compaction", uri, options, storage_options=lake.options, runner=lambda: runner
        )
    assert [r.instant.requested_time for r in done.executed] == [planned.scheduled]
    # Every GET the store served, the driver's and the executors' (which report theirs back in
    # their task results), is a read request counted for the run and for the table.
    gets = lake.proxy.counts()["GET"]
    assert gets == counter.snapshot()["read"] == used.requests_by_op["read"] > 0, (gets, used.requests_by_op)
    assert any(p.endswith(".parquet") for p in used.read_from), "the executors' base file reads"
    # The executors read the slices and wrote the new base files through the proxy.
    parquet_puts = [
        s for s in lake.proxy.seen() if s.op in ("PUT", "CREATE_MULTIPART") and s.path.endswith(".parquet")
    ]
    assert parquet_puts, "the executors wrote base files to S3"
    # The executors create their marker files with the conditional PUT too (importing jobs there
    # registered it with hoodie's FileIO).
    markers = [s for s in lake.proxy.seen() if ".marker." in s.path]
    assert markers and {s.if_none_match for s in markers} == {"*"}, markers
    _assert_both_read(lake, uri)
