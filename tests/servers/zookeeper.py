"""A real ZooKeeper server for tests: Debian's ``zookeeper`` package (3.8) on loopback.

The session fixture ``zookeeper`` starts ``org.apache.zookeeper.server.ZooKeeperServerMain`` from
``/usr/share/java/zookeeper.jar`` (its manifest class path names the netty, jute and slf4j jars
of the same package) with a standalone ``zoo.cfg``: a free port on 127.0.0.1 only, a temporary
data directory, no admin HTTP server, the four-letter words enabled (``srvr`` says when it serves)
and a short tick so that test sessions may be as short as 400 ms and expire quickly.

A missing Java or jar is an error that says to run ``make install``: the ZooKeeper lock tests
must never pass by being skipped.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers.process import free_port, stop

ZOOKEEPER_JAR = Path(os.environ.get("HTS_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))
TICK_MS = 200
"""ZooKeeper's tick; the smallest session it grants is two ticks unless ``minSessionTimeout`` says
otherwise (set below)."""
MIN_SESSION_MS = 400
MAX_SESSION_MS = 60_000
START_TIMEOUT_S = 30.0


def four_letter_word(port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send one of ZooKeeper's four-letter commands (``ruok``, ``srvr``, ``cons``) and return the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass(frozen=True)
class ZooKeeperServer:
    """A running test server: ``connect`` is the connect string ``127.0.0.1:PORT``."""

    host: str
    port: int
    data_dir: Path
    log_path: Path
    pid: int

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def expire_session(self, session_id: int, password: bytes, timeout_s: float = 10.0) -> None:
        """Expire a live session from the server's side.

        The standard trick: a second client attaches to the same session (id and password) and
        closes it, which ends the session on the server; its ephemeral nodes go and the first
        client is told the session expired when it next talks to the server.
        """
        from kazoo.client import KazooClient

        other = KazooClient(hosts=self.connect, client_id=(session_id, password), timeout=timeout_s)
        other.start(timeout=timeout_s)
        try:
            if other.client_id is None or other.client_id[0] != session_id:
                raise RuntimeError(f"could not attach to ZooKeeper session {session_id:#x}")
        finally:
            other.stop()
            other.close()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Freeze the server process (SIGSTOP) so clients lose the connection without the session
        ending on the server's side; it resumes (SIGCONT) when the block ends."""
        os.kill(self.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.pid, signal.SIGCONT)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _require_installed() -> str:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError(
            "java not found on PATH: the ZooKeeper tests need a Java runtime and Debian's zookeeper "
            "package; run `make install` (see the Makefile) to set them up"
        )
    if not ZOOKEEPER_JAR.is_file():
        raise RuntimeError(
            f"{ZOOKEEPER_JAR} not found: the ZooKeeper tests need Debian's zookeeper package "
            "(apt-get install zookeeper); run `make install` to set up the test servers"
        )
    return java


def _write_config(root: Path, port: int) -> Path:
    data_dir = root / "data"
    data_dir.mkdir()
    cfg = root / "zoo.cfg"
    cfg.write_text(
        "\n".join(
            [
                f"tickTime={TICK_MS}",
                f"minSessionTimeout={MIN_SESSION_MS}",
                f"maxSessionTimeout={MAX_SESSION_MS}",
                f"dataDir={data_dir}",
                f"clientPort={port}",
                "clientPortAddress=127.0.0.1",
                "maxClientCnxns=200",
                "admin.enableServer=false",
                "4lw.commands.whitelist=*",
                "autopurge.purgeInterval=0",
                "",
            ]
        )
    )
    return cfg


def _wait_ready(proc: subprocess.Popen[bytes], server: ZooKeeperServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"ZooKeeper exited with code {proc.returncode} while starting on {server.connect}:\n"
                f"{server.log_tail()}"
            )
        try:  # not ruok: it answers imok before the server takes sessions
            if "Mode: standalone" in four_letter_word(server.port, "srvr", timeout_s=1.0):
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(
        f"ZooKeeper did not serve on {server.connect} within {START_TIMEOUT_S}s:\n{server.log_tail()}"
    )


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """A standalone ZooKeeper 3.8 server on 127.0.0.1 for the whole test session."""
    java = _require_installed()
    root = tmp_path_factory.mktemp("zookeeper")
    port = free_port()
    cfg = _write_config(root, port)
    log_path = root / "zookeeper.log"
    cmd = [
        java,
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-Dzookeeper.jmx.log4j.disable=true",
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        str(ZOOKEEPER_JAR),
        "org.apache.zookeeper.server.ZooKeeperServerMain",
        str(cfg),
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root)
    server = ZooKeeperServer("127.0.0.1", port, root / "data", log_path, proc.pid)
    try:
        _wait_ready(proc, server)
        yield server
    finally:
        stop(proc)
