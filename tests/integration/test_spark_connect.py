"""Spark Connect: a Connect server from the pyspark distribution, on loopback, runs our
compaction (``mapInArrow`` with the project shipped as an artifact) like ``local[*]``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from tests.conftest import hudi_rs_rows
from tests.servers.process import free_port

SPARK_HOME = Path(pyspark.__file__).parent


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(tmp / "local"),
        PYSPARK_PYTHON=sys.executable,
    )
    return env


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("spark-connect")
    port = free_port()
    server = subprocess.Popen(
        [
            str(SPARK_HOME / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            "local[2]",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.ui.enabled=false",
            "spark-internal",
        ],
        env=_env(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the Spark Connect server did not start") from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(30)


def test_compaction_over_spark_connect_equals_local(
    table_copy: object, connect_url: str, tmp_path: Path
) -> None:
    source = table_copy("sample_table/mor/parquet/v6_nonpartitioned")  # type: ignore[operator]
    local = tmp_path / "local"
    shutil.copytree(source, local)
    expected = hudi_rs_rows(source)
    runs = {}
    for path, master in ((source, connect_url), (local, "in-process")):
        runs[master] = subprocess.run(
            [sys.executable, "-m", "service.cli", "run", "compaction", str(path), "--spark-master", master],
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            timeout=300,
            check=False,
        )
        assert runs[master].returncode == 0, runs[master].stderr[-2000:]
        assert "completed compaction" in runs[master].stdout
    assert hudi_rs_rows(source) == expected == hudi_rs_rows(local)
    parquet = sorted(p.name.rsplit("_", 1)[0] for p in source.glob("*.parquet"))
    assert len(parquet) == len(list(local.glob("*.parquet")))
