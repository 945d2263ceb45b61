"""A base file's batches decoded on a thread, a few batches ahead of the merge that consumes them.

A slice read has work that holds one core (scanning the log file, decoding its Avro blocks,
merging log entries by key, matching each base batch's keys) and work that pyarrow spreads over
its own threads without the GIL (decoding Parquet column chunks). Reading the base file from the
moment the slice's read begins lets both run at once: the first batches are decoded while the
logs are, and each later batch while the one before it is merged.
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

_T = TypeVar("_T")


class ReadAhead(Generic[_T]):
    """The items of ``source``, taken on one thread up to ``depth`` items ahead of the consumer.

    Taking starts when this object is made. Memory holds at most ``depth`` items besides the one
    the consumer has. An error raised by ``source`` is raised to the consumer when it reaches the
    item that failed; :meth:`close` stops the thread and closes ``source`` (a generator's
    ``finally`` then runs on the caller's thread, after the thread is done with it)."""

    def __init__(self, source: Iterator[_T], depth: int, name: str = "hts-read-ahead") -> None:
        if depth < 1:
            raise ValueError(f"read-ahead depth must be at least 1, not {depth}")
        self._source = source
        # The thread runs in this context: files it opens count where the caller's reads count
        # (hoodie.io.requests). One worker, so the context is never entered twice at once.
        self._context = contextvars.copy_context()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._pending: deque[Future[_T | None]] = deque()
        self._closed = False
        for _ in range(depth):
            self._submit()

    def _take(self) -> _T | None:
        return next(self._source, None)

    def _submit(self) -> None:
        self._pending.append(self._pool.submit(self._context.run, self._take))

    def __iter__(self) -> Iterator[_T]:
        return self

    def __next__(self) -> _T:
        if self._closed or not self._pending:
            raise StopIteration
        try:
            item = self._pending.popleft().result()
        except BaseException:
            self.close()
            raise
        if item is None:
            self.close()
            raise StopIteration
        self._submit()
        return item

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for future in self._pending:
            future.cancel()
        wait(self._pending)
        self._pending.clear()
        self._pool.shutdown(wait=True)
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> ReadAhead[_T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_ahead_from_first(source: Iterator[_T], depth: int, name: str) -> Iterator[_T]:
    """The items of ``source`` through a :class:`ReadAhead` that starts at the first ``next``, not
    before (a base file whose decoding must wait until the logs are spilled)."""
    with ReadAhead(source, depth, name) as ahead:
        yield from ahead
