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
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Protocol

from hoodie.timeline.instant_time import instant_from_epoch_millis
from hoodie.transaction.lock import InProcessLockProvider, LockError, LockProvider, locked

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


class HttpTimeSource:
    """Instant times from the daemon's TrueTime endpoint (``POST /v1/tables/{id}/truetime``).

    For writers that share the daemon's table lock service but would rather not wait for the
    clock skew themselves: the daemon takes the table lock, waits the skew, and keeps the
    table's high-water mark. ``lock_held`` is passed on, so a writer that asks for a completion
    time while holding the table lock does not deadlock against the daemon.
    """

    def __init__(self, url: str, table_id: str, *, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.endpoint = f"{url.rstrip('/')}/v1/tables/{urllib.parse.quote(table_id, safe='')}/truetime"
        self.token = token
        self.timeout_s = timeout_s

    def new_instant_time(self, *, lock_held: bool = False) -> str:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = json.dumps({"lock_held": lock_held}).encode()
        request = urllib.request.Request(self.endpoint, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise LockError(f"TrueTime at {self.endpoint} answered {e.code}: {detail}") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise LockError(f"TrueTime at {self.endpoint} is unreachable: {e}") from e
        instant = str(answer.get("instant_time", ""))
        if len(instant) != 17 or not instant.isdigit():
            raise LockError(f"TrueTime at {self.endpoint} returned {answer!r}, not an instant time")
        return instant
