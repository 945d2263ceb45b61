"""The daemon's clock: wall time, monotonic time and waiting, in one injectable object.

The daemon, its watcher and TrueTime read time only through a :class:`Clock`. In production it is
:class:`SystemClock`. Tests and the bench pass a :class:`SimulatedClock`, whose time moves only
when told to (``advance``) or when something sleeps on it, so an hour of watching runs in seconds.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock time, seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never steps back (for intervals and deadlines)."""
        ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        """Wait until ``event`` is set or ``timeout_s`` passed; True when it is set."""
        ...


class SystemClock:
    """The machine's clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        return event.wait(max(0.0, timeout_s))


class SimulatedClock:
    """A clock that moves only when advanced (or slept on): starts at the real wall time."""

    def __init__(self, start: float | None = None) -> None:
        self._guard = threading.Lock()
        self._wall = time.time() if start is None else start
        self._mono = 0.0

    def time(self) -> float:
        with self._guard:
            return self._wall

    def monotonic(self) -> float:
        with self._guard:
            return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a simulated clock cannot go back (advance by {seconds} s)")
        with self._guard:
            self._wall += seconds
            self._mono += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(max(0.0, seconds))

    def wait(self, event: threading.Event, timeout_s: float) -> bool:
        if event.is_set():
            return True
        self.advance(max(0.0, timeout_s))
        return event.is_set()


SYSTEM = SystemClock()
