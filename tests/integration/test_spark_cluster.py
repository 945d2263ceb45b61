"""A Spark standalone cluster (a master and two workers started from the pyspark distribution,
on loopback) produces the same result as ``local[*]``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest

from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import new_table

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64()), ("p", pa.string())])
SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(tmp / "local"),
        SPARK_WORKER_DIR=str(tmp / "work"),
        SPARK_LOG_DIR=str(tmp / "logs"),
        PYSPARK_PYTHON=sys.executable,
    )
    return env


@pytest.fixture(scope="module")
def standalone_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = _spark_env(tmp)
    port, ui = _free_port(), _free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                str(ui),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    url = f"spark://127.0.0.1:{port}"
    try:
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [
                        spark_class,
                        "org.apache.spark.deploy.worker.Worker",
                        url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        str(_free_port()),
                    ],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= 2:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the standalone master did not see two workers within 90 s")
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(30)


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
        env=_spark_env(tmp),
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
