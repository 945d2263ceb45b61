"""Instant heartbeats: ``.hoodie/.heartbeat/<instant>``, whose modification time is the beat.

A process executing an instant touches the file every ``interval``; another process treats the
instant as abandoned once the file is older than ``interval * tolerable misses`` (Hudi's
``hoodie.client.heartbeat.interval_in_ms``, default 60 s, and
``hoodie.client.heartbeat.tolerable.misses``, default 2) or missing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
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
    info = fileio.info(heartbeat_path(paths, instant_time))
    return None if info is None else info.mtime_ms


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
    """Keeps the heartbeat of one instant alive from a background thread until stopped."""

    def __init__(self, fileio: FileIO, paths: TablePaths, instant_time: str, config: HeartbeatConfig) -> None:
        self.fileio = fileio
        self.path = heartbeat_path(paths, instant_time)
        self.config = config
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        self.fileio.write_bytes(self.path, b"")

    def start(self) -> Heartbeat:
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.path}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.config.interval_ms / 1000):
            try:
                self.beat()
            except OSError:  # storage hiccup: the next beat retries
                continue

    def stop(self, *, delete: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if delete:
            self.fileio.delete(self.path)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
