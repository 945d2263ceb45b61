"""Counting storage requests: every :class:`~hoodie.io.fileio.FileIO` operation, by kind.

A :class:`RequestCounter` receives the operations made while it is active in the current context
(:func:`counting`); counters nest, so a daemon can count per table while a run counts for itself
inside it. What is counted is one storage request: a listing (``list``), an entry's metadata
(``info``), a whole-file or ranged read (``read``), opening a random-access file (``open``; on an
object store the HEAD that finds its size), a write or create (``write``), ``delete``, ``mkdir``
and ``rename``. The reads Parquet and log readers make through a file from
:meth:`FileIO.open_input` are ``read`` requests too (:class:`~hoodie.io.counted.CountedInput`): on
an object store each is one ranged GET. A listing of more than a page is more than one request.
Threads start with no counter: work handed to a pool is counted only if its context is copied, or
through the :class:`Recipients` taken where the work was handed out.

Each request also goes to the run's cost (:mod:`hoodie.io.usage`) with the bytes it read and the
file it read from.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass

from hoodie.io import usage

OPS = ("list", "info", "read", "open", "write", "delete", "mkdir", "rename")

_ACTIVE: ContextVar[tuple[RequestCounter, ...]] = ContextVar("hoodie_io_request_counters", default=())


class RequestCounter:
    """Storage operations by kind; thread-safe."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._counts: dict[str, int] = {}

    def add(self, op: str, n: int = 1) -> None:
        with self._guard:
            self._counts[op] = self._counts.get(op, 0) + n

    def snapshot(self) -> dict[str, int]:
        """Operations so far, by kind (a copy)."""
        with self._guard:
            return dict(self._counts)

    def total(self) -> int:
        with self._guard:
            return sum(self._counts.values())

    def since(self, before: dict[str, int]) -> dict[str, int]:
        """Operations since ``before`` (an earlier :meth:`snapshot`), kinds with none left out."""
        now = self.snapshot()
        return {op: n - before.get(op, 0) for op, n in now.items() if n - before.get(op, 0)}


class counting:  # noqa: N801 - used as a function: ``with counting(c) as c: ...``
    """Count the storage operations made in this context (and the contexts it starts) into ``counter``.

    A plain context manager, not a generator: the daemon enters one per table on every watch tick.
    """

    __slots__ = ("_counter", "_token")

    def __init__(self, counter: RequestCounter | None = None) -> None:
        self._counter = counter if counter is not None else RequestCounter()
        self._token: Token[tuple[RequestCounter, ...]] | None = None

    def __enter__(self) -> RequestCounter:
        self._token = _ACTIVE.set((*_ACTIVE.get(), self._counter))
        return self._counter

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _ACTIVE.reset(self._token)


@dataclass(frozen=True, slots=True)
class Recipients:
    """Where a request made now is counted: the active counters and the measured scope. Taken when a
    file is opened, so the reads Arrow's own threads make through it later count there too."""

    counters: tuple[RequestCounter, ...]
    scope: usage.Usage | None

    @property
    def anyone(self) -> bool:
        return bool(self.counters) or self.scope is not None

    def count(self, op: str, *, bytes_read: int | None = None, file_read: str | None = None) -> None:
        for counter in self.counters:
            counter.add(op)
        if self.scope is not None:
            self.scope.record(op, bytes_read=bytes_read, file_read=file_read)


def recipients() -> Recipients:
    """Who counts a request made in this context."""
    return Recipients(_ACTIVE.get(), usage.current())


def count(op: str, *, bytes_read: int | None = None, file_read: str | None = None) -> None:
    """Record one ``op`` in every counter active in this context, and in the run's cost
    (:mod:`hoodie.io.usage`) when one is measured, with the bytes it read and the path it read from.
    The storage layer reports every transfer, so a request that moved nothing reads 0 bytes."""
    for counter in _ACTIVE.get():  # as ``recipients().count(...)``, without making a Recipients
        counter.add(op)
    scope = usage.current()
    if scope is not None:
        scope.record(op, bytes_read=bytes_read or 0, file_read=file_read)


def report(used: usage.Usage) -> None:
    """What work done elsewhere (a Spark task) reported: its requests count for the counters active
    here, and all of it for the measured scope."""
    for counter in _ACTIVE.get():
        for op, n in used.requests_by_op.items():
            counter.add(op, n)
    usage.add_to_current(used)
