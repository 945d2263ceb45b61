"""A Spark standalone cluster on loopback, started from the pyspark distribution: a master and
``workers`` workers of ``cores`` cores each. The tests run services on it; the scale-out benchmark
compares one worker with two."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_env(scratch: Path) -> dict[str, str]:
    """The environment of the cluster's processes (and of a driver talking to it)."""
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_DIRS=str(scratch / "local"),
        SPARK_WORKER_DIR=str(scratch / "work"),
        SPARK_LOG_DIR=str(scratch / "logs"),
        PYSPARK_PYTHON=sys.executable,
    )
    return env


@contextmanager
def standalone_cluster(
    scratch: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g", timeout_s: float = 90
) -> Iterator[str]:
    """A running master (``spark://127.0.0.1:PORT``, yielded) with ``workers`` registered workers;
    every process is stopped on exit."""
    env = spark_env(scratch)
    port, ui = free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")

    def start(*args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [spark_class, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    procs = [
        start(
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(ui),
        )
    ]  # fmt: skip
    url = f"spark://127.0.0.1:{port}"
    try:
        for _ in range(workers):
            procs.append(
                start(
                    "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                    "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                )
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json", timeout=2) as r:
                    if json.load(r).get("aliveworkers", 0) >= workers:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the standalone master did not see {workers} workers within {timeout_s} s"
                )
            time.sleep(0.5)
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(30)
