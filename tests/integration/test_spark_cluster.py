"""A Spark standalone cluster (a master and two workers started from the pyspark distribution,
on loopback) produces the same result as ``local[*]``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from bench.spark_cluster import spark_env, standalone_cluster
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import new_table

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64()), ("p", pa.string())])


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster"), workers=2) as url:
        yield url


def _table(path: Path) -> None:
    table = new_table(path, schema=SCHEMA)
    writer = HoodieWriter(table)
    n = 2000
    writer.insert(
        pa.table(
            {
                "id": [f"k{i}" for i in range(n)],
                "ts": [1] * n,
                "v": [float(i) for i in range(n)],
                "p": [f"p{i % 6}" for i in range(n)],
            },
            schema=SCHEMA,
        )
    )
    upd = list(range(0, n, 7))
    writer.upsert(
        pa.table(
            {
                "id": [f"k{i}" for i in upd],
                "ts": [2] * len(upd),
                "v": [-float(i) for i in upd],
                "p": [f"p{i % 6}" for i in upd],
            },
            schema=SCHEMA,
        )
    )


def _run(path: Path, master: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "service.cli", "run", "compaction", str(path), "--spark-master", master],
        capture_output=True,
        text=True,
        env=spark_env(tmp),
        timeout=300,
        check=False,
    )


def test_standalone_cluster_compacts_like_local(tmp_path: Path, standalone_master: str) -> None:
    local, cluster = tmp_path / "local", tmp_path / "cluster"
    _table(local)
    shutil.copytree(local, cluster)
    expected = hudi_rs_rows(local)
    ran_local = _run(local, "local[2]", tmp_path)
    assert ran_local.returncode == 0, ran_local.stderr[-2000:]
    ran_cluster = _run(cluster, standalone_master, tmp_path)
    assert ran_cluster.returncode == 0, ran_cluster.stderr[-2000:]
    assert "completed compaction" in ran_cluster.stdout
    assert hudi_rs_rows(local) == expected
    assert hudi_rs_rows(cluster) == expected

    def snapshot(p: Path) -> list[str]:
        data = TableReader(HoodieTable.open(str(p))).read_optimized()
        return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())

    assert snapshot(cluster) == snapshot(local)
