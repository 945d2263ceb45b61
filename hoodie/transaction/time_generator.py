"""Instant times by Apache Hudi's TrueTime rule (``WaitBasedTimeGenerator``).

Take the table lock, read the wall clock, wait the maximum expected clock skew, release. Any
writer that later takes the same lock and reads its own clock then sees a later time, so instant
times are unique and ordered across writers whose clocks disagree by less than the skew. Times
are rendered in the table's timeline time zone. Within one process times also strictly increase,
as Hudi guarantees with its last-issued-time guard (a clock that steps back yields
the last issued time plus one millisecond instead of stalling).
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Protocol

from hoodie.timeline.instant_time import instant_from_epoch_millis
from hoodie.transaction.lock import InProcessLockProvider, LockProvider, locked

DEFAULT_MAX_EXPECTED_CLOCK_SKEW_MS = 200
IN_PROCESS_CLOCK_SKEW_MS = 1  # Hudi infers 1 ms when only in-process writers share the lock


class TimeSource(Protocol):
    """Where instant times come from; the daemon can supply one backed by a shared service."""

    def new_instant_time(self, *, lock_held: bool = False) -> str:
        """A fresh instant time; ``lock_held`` says the caller already holds the table lock."""


_LAST_ISSUED: dict[str, int] = {}
_LAST_GUARD = threading.Lock()


class WaitBasedTimeGenerator:
    """Hudi's ``WAIT_TO_ADJUST_SKEW`` time generator over a table lock."""

    def __init__(
        self,
        lock: LockProvider,
        tz: dt.tzinfo,
        *,
        max_expected_clock_skew_ms: int | None = None,
        lock_timeout_s: float | None = 60.0,
        clock_ms: Callable[[], int] | None = None,
        scope: str = "",
    ) -> None:
        if max_expected_clock_skew_ms is None:
            in_process = isinstance(lock, InProcessLockProvider)
            max_expected_clock_skew_ms = (
                IN_PROCESS_CLOCK_SKEW_MS if in_process else DEFAULT_MAX_EXPECTED_CLOCK_SKEW_MS
            )
        if max_expected_clock_skew_ms < 0:
            raise ValueError(f"max expected clock skew must be >= 0 ms, got {max_expected_clock_skew_ms}")
        self.lock = lock
        self.tz = tz
        self.skew_ms = max_expected_clock_skew_ms
        self.lock_timeout_s = lock_timeout_s
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._scope = scope

    def _generate_ms(self, lock_held: bool) -> int:
        if lock_held:
            now = self._clock_ms()
            time.sleep(self.skew_ms / 1000)
            return now
        with locked(self.lock, self.lock_timeout_s):
            now = self._clock_ms()
            time.sleep(self.skew_ms / 1000)
            return now

    def new_instant_time(self, *, lock_held: bool = False) -> str:
        millis = self._generate_ms(lock_held)
        with _LAST_GUARD:
            # Hudi re-reads the clock until it passes the last issued time; a clock that stepped
            # back would stall it. Issuing one millisecond past the last time keeps the same order.
            last = _LAST_ISSUED.get(self._scope, -1)
            millis = max(millis, last + 1)
            _LAST_ISSUED[self._scope] = millis
        return instant_from_epoch_millis(millis, self.tz)
