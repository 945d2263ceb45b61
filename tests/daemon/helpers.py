"""Building daemons for tests: in this process (FastAPI's TestClient) or as ``hts serve``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from fastapi.testclient import TestClient

from hoodie.services.base import ServiceContext
from hoodie.services.compaction import CompactionPolicy, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from service.api import create_app
from service.daemon import Daemon
from service.settings import load_settings
from tests.servers.process import free_port
from tests.tables import new_table, rows

T = TypeVar("T")
# A 2 s expiry: a dead attempt is found abandoned quickly, while a live one on a loaded machine is
# not late (a late attempt stops, as it could have been taken over: hoodie.services.claim).
FAST_HEARTBEAT = {
    "hoodie.client.heartbeat.interval_in_ms": "200",
    "hoodie.client.heartbeat.tolerable.misses": "10",
}


def wait_for(check: Callable[[], T], timeout_s: float = 30.0, what: str = "condition") -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


def settings_data(root: Path, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tables": {"discover": [str(root / "tables")], "rescan_interval_s": 1},
        "spark": {"master": "in-process"},
        "watch": {"poll_interval_s": 0.2},
        "state_dir": str(root / "state"),
        "retry": {"backoff_initial_s": 0.1, "backoff_max_s": 0.5},
        "shutdown_grace_s": 5,
        "defaults": {"options": dict(FAST_HEARTBEAT)},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


@contextlib.contextmanager
def running_daemon(root: Path, **overrides: Any) -> Iterator[tuple[Daemon, TestClient]]:
    """A started daemon and a client for its API (stopped on exit)."""
    settings = load_settings(overrides=settings_data(root, **overrides), environ={})
    daemon = Daemon(settings, replica_id="test")
    with TestClient(create_app(daemon)) as client:
        yield daemon, client


def mor_table(path: Path, *, upserts: int = 1) -> HoodieTable:
    """A MERGE_ON_READ table with a base file and log files in each of its file groups."""
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(20), 1))
    for n in range(upserts):
        writer.upsert(rows(range(0, 20, 2), 2 + n))
    return HoodieTable.open(str(path))


def request_compaction(path: Path) -> str:
    scheduled = schedule_compaction(ServiceContext(HoodieTable.open(str(path))), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return scheduled.instant_time


class ServeProcess:
    """``hts serve`` in a subprocess, with its settings in a YAML file, driven over HTTP."""

    def __init__(
        self,
        root: Path,
        name: str,
        env: dict[str, str] | None = None,
        replica: str | None = None,
        cwd: Path | None = None,
        **overrides: Any,
    ) -> None:
        """``name`` names the log and config files; ``replica`` (default: ``name``) names the
        replica and its state folder, so a restart passes the same ``replica``; ``cwd`` is the
        working folder of the process (default: this one's)."""
        self.cwd = cwd
        self.port = free_port()
        self.root = root
        replica = replica or name
        data = settings_data(root, **{"state_dir": str(root / f"state-{replica}"), **overrides})
        data["api"] = {**data.get("api", {}), "port": self.port}
        data["ha"] = {**data.get("ha", {}), "replica_id": replica}
        self.config = root / f"{name}.yaml"
        self.config.write_text(yaml.safe_dump(data))
        self.log_path = root / f"{name}.log"
        self.env = {**{k: v for k, v in os.environ.items() if k != "HTS_CRASH_AT"}, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServeProcess:
        self.launch()
        return self.wait_ready()

    def launch(self) -> ServeProcess:
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "service.cli", "serve", "--config", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
            )
        return self

    def wait_ready(self) -> ServeProcess:
        wait_for(lambda: self._alive_and(self._answers), 60, f"hts serve on port {self.port}")
        return self

    def _alive_and(self, check: Callable[[], bool]) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"hts serve exited with {self.proc.returncode}:\n{self.log()}")
        return check()

    def _answers(self) -> bool:
        try:
            self.get("/livez")
            return True
        except (urllib.error.URLError, ConnectionError):
            return False

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            text = resp.read().decode()
            return json.loads(text) if resp.headers.get_content_type() == "application/json" else text

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def terminate(self, timeout_s: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout_s)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
