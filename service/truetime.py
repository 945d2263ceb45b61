"""TrueTime for the daemon: instant times by Apache Hudi's rule, never issued twice or backwards.

Hudi's ``WaitBasedTimeGenerator``: take the table's lock (the same ZooKeeper node or DynamoDB
item its writers take), read the wall clock, wait the maximum expected clock skew, release. Any
writer that takes the lock afterwards reads a clock that is past our time, even if its clock is
behind ours by less than the skew.

On top of the rule, each table keeps a high-water mark: the last time issued, in
``.hoodie/.aux/hts/truetime`` (JSON, written under the table lock before the time is handed out).
A time is always past the mark, so a clock that steps back, a restart, or another replica taking
over cannot issue the same time twice or go backwards; when the clock is behind the mark the time
issued is the mark plus one millisecond (and counted). The mark lives with the table because
every replica serving the table reaches it under the same lock.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from hoodie.io.fileio import FileIO, join
from hoodie.timeline.instant_time import instant_from_epoch_millis
from hoodie.timeline.layout import TablePaths
from hoodie.transaction.lock import LockError, LockProvider, locked
from hoodie.transaction.time_generator import DEFAULT_MAX_EXPECTED_CLOCK_SKEW_MS, IN_PROCESS_CLOCK_SKEW_MS
from service.clock import SYSTEM, Clock

log = logging.getLogger(__name__)

MARK_FILE = ("hts", "truetime")


class TrueTimeObserver(Protocol):
    def skew_waited(self, table_id: str, seconds: float) -> None: ...

    def time_issued(self, table_id: str, *, behind_mark: bool) -> None: ...


def mark_path(paths: TablePaths) -> str:
    return join(paths.meta, ".aux", *MARK_FILE)


def default_skew_ms(in_process_lock: bool) -> int:
    """Hudi's default wait, or the 1 ms it infers when only in-process writers share the lock."""
    return IN_PROCESS_CLOCK_SKEW_MS if in_process_lock else DEFAULT_MAX_EXPECTED_CLOCK_SKEW_MS


class TableClock:
    """The time source of one table (``hoodie.transaction.time_generator.TimeSource``)."""

    def __init__(
        self,
        table_id: str,
        fileio: FileIO,
        paths: TablePaths,
        lock: LockProvider,
        tz: dt.tzinfo,
        *,
        skew_ms: int,
        lock_timeout_s: float = 60.0,
        observer: TrueTimeObserver | None = None,
        clock_ms: Callable[[], int] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.table_id = table_id
        self.fileio = fileio
        self.path = mark_path(paths)
        self.lock = lock
        self.tz = tz
        self.skew_ms = skew_ms
        self.lock_timeout_s = lock_timeout_s
        self.observer = observer
        # The daemon's clock (simulated in tests: then the skew wait is simulated too).
        self._clock = clock or SYSTEM
        if clock_ms is None:
            clock_ms = (lambda: time.time_ns() // 1_000_000) if clock is None else self._clock_now_ms
        self._clock_ms: Callable[[], int] = clock_ms
        self._local = threading.Lock()  # one mint at a time in this process
        self._last_ms = -1

    def _clock_now_ms(self) -> int:
        return int(self._clock.time() * 1000)

    def new_instant_time(self, *, lock_held: bool = False) -> str:
        """A fresh instant time; ``lock_held`` says the caller already holds the table lock."""
        with self._local:
            if lock_held:
                return self._mint()
            with locked(self.lock, self.lock_timeout_s):
                return self._mint()

    def _read_mark(self) -> int:
        try:
            raw = self.fileio.read_bytes(self.path)
        except FileNotFoundError:
            return -1
        try:
            value = int(json.loads(raw)["last_ms"])
        except (ValueError, KeyError, TypeError) as e:
            # Refuse rather than guess: a lost mark could let a time repeat.
            raise LockError(f"TrueTime mark {self.path} is unreadable ({e}); fix or delete it") from e
        return value

    def _mint(self) -> str:
        now = self._clock_ms()
        started = self._clock.monotonic()
        self._clock.sleep(self.skew_ms / 1000)
        if self.observer is not None:
            self.observer.skew_waited(self.table_id, self._clock.monotonic() - started)
        mark = max(self._read_mark(), self._last_ms)
        millis = max(now, mark + 1)
        instant = instant_from_epoch_millis(millis, self.tz)
        record = {"last_ms": millis, "instant": instant, "issued_at_ms": now}
        self.fileio.write_bytes(self.path, json.dumps(record).encode())
        self._last_ms = millis
        if millis != now:
            log.warning(
                "TrueTime for %s: clock %d ms is not past the last issued time %d ms; issuing %s",
                self.table_id,
                now,
                mark,
                instant,
            )
        if self.observer is not None:
            self.observer.time_issued(self.table_id, behind_mark=millis != now)
        return instant
