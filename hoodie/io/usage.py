"""What one piece of work did to storage and the CPU: the per-run cost counters.

A run (in the daemon) or a task (on a Spark executor) opens a :func:`measure` scope; inside it,
storage access reported through :func:`count` adds up in that scope's :class:`Usage`, and CPU time
is taken from the process or thread clock. Scopes are per thread and per context (a
``ContextVar``), so runs on different worker threads never mix.

:func:`count` is the hook for the storage layer (``hoodie.io.fileio``): each request it makes
calls ``count(op, bytes_read=..., bytes_written=..., file_read=..., file_written=...)``. Until it is
connected there, :attr:`Usage.requests_counted` stays False and the storage fields of a run's cost
are reported as not counted (null) rather than as zero; bytes and files read or written count only
once a caller passes them (:attr:`Usage.transfers_counted`), so a layer that counts requests alone
leaves them null.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

COST_KEY = "_hts_cost"
"""The key under which a task result carries its task's :class:`Usage` back to the driver."""


@dataclass
class Usage:
    cpu_seconds: float = 0.0
    storage_requests: int = 0
    bytes_read: int = 0
    files_read: int = 0
    bytes_written: int = 0
    files_written: int = 0
    requests_by_op: dict[str, int] = field(default_factory=dict)
    requests_counted: bool = False
    """True once the storage layer reported a request (the hook is connected)."""
    transfers_counted: bool = False
    """True once the storage layer reported bytes or files moved with a request."""

    def add(self, other: Usage) -> None:
        self.cpu_seconds += other.cpu_seconds
        self.storage_requests += other.storage_requests
        self.bytes_read += other.bytes_read
        self.files_read += other.files_read
        self.bytes_written += other.bytes_written
        self.files_written += other.files_written
        for op, n in other.requests_by_op.items():
            self.requests_by_op[op] = self.requests_by_op.get(op, 0) + n
        self.requests_counted = self.requests_counted or other.requests_counted
        self.transfers_counted = self.transfers_counted or other.transfers_counted

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            cpu_seconds=float(data.get("cpu_seconds", 0.0)),
            storage_requests=int(data.get("storage_requests", 0)),
            bytes_read=int(data.get("bytes_read", 0)),
            files_read=int(data.get("files_read", 0)),
            bytes_written=int(data.get("bytes_written", 0)),
            files_written=int(data.get("files_written", 0)),
            requests_by_op={str(k): int(v) for k, v in dict(data.get("requests_by_op", {})).items()},
            requests_counted=bool(data.get("requests_counted", False)),
            transfers_counted=bool(data.get("transfers_counted", False)),
        )


_CURRENT: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("hts_usage", default=None)


def count(
    op: str,
    *,
    bytes_read: int | None = None,
    bytes_written: int | None = None,
    file_read: bool | None = None,
    file_written: bool | None = None,
) -> None:
    """One storage request ``op`` (``list``, ``info``, ``read``, ``write``, ``delete``, ...) of the
    current scope, with what it moved when the caller knows; nothing when no scope is open."""
    usage = _CURRENT.get()
    if usage is None:
        return
    usage.requests_counted = True
    usage.storage_requests += 1
    usage.requests_by_op[op] = usage.requests_by_op.get(op, 0) + 1
    moved = (bytes_read, bytes_written, file_read, file_written)
    if any(m is not None for m in moved):
        usage.transfers_counted = True
        usage.bytes_read += bytes_read or 0
        usage.bytes_written += bytes_written or 0
        usage.files_read += int(bool(file_read))
        usage.files_written += int(bool(file_written))


@contextmanager
def measure(*, process_cpu: bool = False) -> Iterator[Usage]:
    """A scope counting storage requests and CPU time: this thread's (a daemon run, whose worker
    thread does its in-process tasks) or, with ``process_cpu``, the process' (a Spark Python worker,
    where Arrow's threads work for the task too). Nested scopes report to their own Usage only."""
    usage = Usage()
    clock = time.process_time if process_cpu else time.thread_time
    token = _CURRENT.set(usage)
    started = clock()
    try:
        yield usage
    finally:
        usage.cpu_seconds += clock() - started
        _CURRENT.reset(token)


def measuring() -> bool:
    """True inside a :func:`measure` scope."""
    return _CURRENT.get() is not None


def add_to_current(usage: Usage) -> None:
    """Add what a task reported (from another process) to the current scope."""
    current = _CURRENT.get()
    if current is not None:
        current.add(usage)
