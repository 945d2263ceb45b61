"""Counting storage requests: every :class:`~hoodie.io.fileio.FileIO` operation, by kind.

A :class:`RequestCounter` receives the operations made while it is active in the current context
(:func:`counting`); counters nest, so a daemon can count per table while a run counts for itself
inside it. What is counted is one FileIO call: a listing (``list``), an entry's metadata
(``info``), a whole-file or ranged read (``read``), opening a random-access file (``open``; the
reads made through it are not seen), a write or create (``write``), ``delete``, ``mkdir`` and
``rename``. On an object store each is at least one HTTP request (a listing of more than a page is
more); Parquet reads that pyarrow makes through :attr:`FileIO.arrow_fs` directly are not counted.
Threads start with no counter: work handed to a pool is counted only if its context is copied.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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


@contextmanager
def counting(counter: RequestCounter | None = None) -> Iterator[RequestCounter]:
    """Count the storage operations made in this context (and the contexts it starts) into ``counter``."""
    active = counter if counter is not None else RequestCounter()
    token = _ACTIVE.set((*_ACTIVE.get(), active))
    try:
        yield active
    finally:
        _ACTIVE.reset(token)


def count(op: str) -> None:
    """Record one ``op`` in every counter active in this context, and in the run's cost
    (:func:`hoodie.io.usage.count`) when one is measured."""
    for counter in _ACTIVE.get():
        counter.add(op)
    usage.count(op)
