"""Instant heartbeats: ``.hoodie/.heartbeat/<instant>``, whose modification time is the beat.

A process executing an instant touches the file every ``interval``; another process treats the
instant as abandoned once the file is older than ``interval * tolerable misses`` (Hudi's
``hoodie.client.heartbeat.interval_in_ms``, default 60 s, and
``hoodie.client.heartbeat.tolerable.misses``, default 2) or missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hoodie.io.fileio import FileIO, join
from hoodie.timeline.layout import TablePaths

DEFAULT_INTERVAL_MS = 60_000
DEFAULT_TOLERABLE_MISSES = 2


@dataclass(frozen=True, slots=True)
class HeartbeatConfig:
    interval_ms: int = DEFAULT_INTERVAL_MS
    tolerable_misses: int = DEFAULT_TOLERABLE_MISSES

    @property
    def expiry_ms(self) -> int:
        return self.interval_ms * self.tolerable_misses

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> HeartbeatConfig:
        """From Hudi's ``hoodie.client.heartbeat.interval_in_ms`` and ``.tolerable.misses``."""
        values = []
        for key, default in (
            ("hoodie.client.heartbeat.interval_in_ms", DEFAULT_INTERVAL_MS),
            ("hoodie.client.heartbeat.tolerable.misses", DEFAULT_TOLERABLE_MISSES),
        ):
            raw = options.get(key)
            try:
                value = default if raw is None else int(raw)
            except ValueError as e:
                raise ValueError(f"{key}={raw!r} is not a whole number") from e
            if value <= 0:
                raise ValueError(f"{key}={value} must be positive")
            values.append(value)
        return cls(values[0], values[1])


def heartbeat_path(paths: TablePaths, instant_time: str) -> str:
    return join(paths.heartbeat, instant_time)


def last_heartbeat_ms(fileio: FileIO, paths: TablePaths, instant_time: str) -> int | None:
    """The modification time of the instant's heartbeat file (HoodieHeartbeatClient.getLastHeartbeatTime),
    None when there is none.

    Read from one listing of the heartbeat folder (one file per instant in flight): on an object store,
    looking up a missing file costs a HEAD and then a LIST (pyarrow checks whether the key is a folder).
    """
    for entry in fileio.list_dir(paths.heartbeat):
        if entry.name == instant_time and not entry.is_dir:
            return entry.mtime_ms
    return None


def is_heartbeat_expired(
    fileio: FileIO, paths: TablePaths, instant_time: str, config: HeartbeatConfig, now_ms: int | None = None
) -> bool:
    """Whether nobody has beaten for ``instant_time`` recently (a missing file counts as expired)."""
    last = last_heartbeat_ms(fileio, paths, instant_time)
    if last is None:
        return True
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    return now - last > config.expiry_ms


class Heartbeat:
    """Keeps the heartbeat of one instant alive from a background thread until stopped.

    A beat that comes later than the expiry (``interval * tolerable misses``) after the previous one
    means another process may already have found the instant abandoned and rolled it back:
    :attr:`late` is set then. With ``stop_when_late`` (a claimed table service,
    ``hoodie.services.claim``) the heartbeat also stops beating for good, since beating again would
    make the rolled-back attempt look alive, and the attempt must not complete (as Apache Hudi's
    ``HoodieHeartbeatClient.updateHeartbeat`` stops refreshing and ``HeartbeatUtils.abortIfHeartbeatExpired``
    aborts the commit). The gap is measured on this process's monotonic clock from the start of the
    last successful write, which is no later than the file's modification time other processes see.
    """

    def __init__(
        self,
        fileio: FileIO,
        paths: TablePaths,
        instant_time: str,
        config: HeartbeatConfig,
        *,
        stop_when_late: bool = False,
    ) -> None:
        self.fileio = fileio
        self.stop_when_late = stop_when_late
        self.path = heartbeat_path(paths, instant_time)
        self.config = config
        self.late = threading.Event()
        """Set once a beat came (or would have come) later than the expiry after the previous one."""
        self.late_by_ms = 0
        """How far past the expiry the late beat was, when :attr:`late` is set."""
        self.on_late: Callable[[], object] | None = None
        """Called (from the heartbeat's thread) when it becomes late, e.g. to stop the running tasks."""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0

    def beat(self) -> None:
        started = time.monotonic()
        self.fileio.write_bytes(self.path, b"")
        self._last_beat = started

    def check_late(self) -> bool:
        """Whether the heartbeat is (or has just become) late (then, with ``stop_when_late``, it stops
        beating)."""
        if self.late.is_set():
            return True
        if self._thread is None:
            return False
        gap_ms = int((time.monotonic() - self._last_beat) * 1000)
        if gap_ms > self.config.expiry_ms:
            self.late_by_ms = gap_ms - self.config.expiry_ms
            self.late.set()
            if self.stop_when_late:
                self._stop.set()
            if self.on_late is not None:
                self.on_late()
            return True
        return False

    def start(self) -> Heartbeat:
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.path}", daemon=True)
        self._thread.start()
        return self

    @property
    def period_s(self) -> float:
        """Seconds between beats: the interval, or half the expiry when that is shorter (with one
        tolerable miss a beat exactly one interval late would already look expired)."""
        return min(self.config.interval_ms, self.config.expiry_ms / 2) / 1000

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            if self.check_late() and self.stop_when_late:
                return
            try:
                self.beat()
            except OSError:  # storage hiccup: the next beat retries (until the gap makes it late)
                continue

    def stop(self, *, delete: bool = True) -> None:
        """Stop beating; ``delete`` the heartbeat file unless it may be another executor's by now."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if delete:
            self.fileio.delete(self.path)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
