"""Starting and stopping the emulators and servers the tests run as child processes (loopback only)."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_http(proc: subprocess.Popen[bytes], url: str, what: str, timeout_s: float = 30.0) -> None:
    """Wait until ``url`` answers; any HTTP status counts as an answer (an emulator may answer its
    root with 400). Raises naming ``what`` and the URL if ``proc`` exits or ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"{what} did not answer on {url}") from None
            time.sleep(0.1)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``; kill it if it has not exited within 10 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
