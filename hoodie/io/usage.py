"""What one piece of work did to storage and the CPU: the per-run cost counters.

A run (in the daemon) or a task (on a Spark executor) opens a :func:`measure` scope; inside it,
storage access reported through :func:`count` adds up in that scope's :class:`Usage`, and CPU time
is taken from the process or thread clock. Scopes are per thread and per context (a
``ContextVar``), so runs on different worker threads never mix.

:func:`count` is the hook for the storage layer: every FileIO operation reports through
:func:`hoodie.io.requests.count` with what it moved — the bytes a read transferred and the path of
the file it read from (a file counts once per scope, :attr:`Usage.files_read`, however many ranged
reads it took). A layer that reports requests alone leaves :attr:`Usage.transfers_counted` False, and
a run's bytes and files read are then reported as not counted (null) rather than as zero; with no
request reported at all (:attr:`Usage.requests_counted`) its storage requests are null too.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

COST_KEY = "_hts_cost"
"""The key under which a task result carries its task's :class:`Usage` back to the driver."""


@dataclass
class Usage:
    cpu_seconds: float = 0.0
    storage_requests: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    files_written: int = 0
    requests_by_op: dict[str, int] = field(default_factory=dict)
    read_from: dict[str, int] = field(default_factory=dict)
    """The bytes read from each file opened for reading (a file counts once however many reads it
    took; a file opened but not read holds 0)."""
    requests_counted: bool = False
    """True once the storage layer reported a request (the hook is connected)."""
    transfers_counted: bool = False
    """True once the storage layer reported bytes or files moved with a request."""
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def files_read(self) -> int:
        """How many distinct files were opened for reading."""
        return len(self.read_from)

    def record(
        self,
        op: str,
        *,
        bytes_read: int | None = None,
        bytes_written: int | None = None,
        file_read: str | None = None,
        file_written: bool | None = None,
    ) -> None:
        """One storage request ``op``, with what it moved when the caller knows (``file_read``: the
        path of the file it read from). Thread-safe: Arrow's I/O threads read for a scope too."""
        with self._guard:
            self.requests_counted = True
            self.storage_requests += 1
            self.requests_by_op[op] = self.requests_by_op.get(op, 0) + 1
            if bytes_read is None and bytes_written is None and file_read is None and file_written is None:
                return
            self.transfers_counted = True
            self.bytes_read += bytes_read or 0
            self.bytes_written += bytes_written or 0
            if file_read is not None:
                self.read_from[file_read] = self.read_from.get(file_read, 0) + (bytes_read or 0)
            self.files_written += int(bool(file_written))

    def add(self, other: Usage) -> None:
        with self._guard:
            self.cpu_seconds += other.cpu_seconds
            self.storage_requests += other.storage_requests
            self.bytes_read += other.bytes_read
            for path, n in other.read_from.items():
                self.read_from[path] = self.read_from.get(path, 0) + n
            self.bytes_written += other.bytes_written
            self.files_written += other.files_written
            for op, n in other.requests_by_op.items():
                self.requests_by_op[op] = self.requests_by_op.get(op, 0) + n
            self.requests_counted = self.requests_counted or other.requests_counted
            self.transfers_counted = self.transfers_counted or other.transfers_counted

    def to_json(self) -> dict[str, Any]:
        with self._guard:
            return {
                "cpu_seconds": self.cpu_seconds,
                "storage_requests": self.storage_requests,
                "bytes_read": self.bytes_read,
                "files_read": len(self.read_from),
                "read_from": dict(self.read_from),
                "bytes_written": self.bytes_written,
                "files_written": self.files_written,
                "requests_by_op": dict(self.requests_by_op),
                "requests_counted": self.requests_counted,
                "transfers_counted": self.transfers_counted,
            }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            cpu_seconds=float(data.get("cpu_seconds", 0.0)),
            storage_requests=int(data.get("storage_requests", 0)),
            bytes_read=int(data.get("bytes_read", 0)),
            read_from={str(k): int(v) for k, v in dict(data.get("read_from", {})).items()},
            bytes_written=int(data.get("bytes_written", 0)),
            files_written=int(data.get("files_written", 0)),
            requests_by_op={str(k): int(v) for k, v in dict(data.get("requests_by_op", {})).items()},
            requests_counted=bool(data.get("requests_counted", False)),
            transfers_counted=bool(data.get("transfers_counted", False)),
        )


_CURRENT: contextvars.ContextVar[Usage | None] = contextvars.ContextVar("hts_usage", default=None)


def current() -> Usage | None:
    """The scope measuring this context, if any (for work done later on other threads)."""
    return _CURRENT.get()


def count(
    op: str,
    *,
    bytes_read: int | None = None,
    bytes_written: int | None = None,
    file_read: str | None = None,
    file_written: bool | None = None,
) -> None:
    """One storage request ``op`` (``list``, ``info``, ``read``, ``write``, ``delete``, ...) of the
    current scope (:meth:`Usage.record`); nothing when no scope is open."""
    usage = _CURRENT.get()
    if usage is not None:
        usage.record(
            op,
            bytes_read=bytes_read,
            bytes_written=bytes_written,
            file_read=file_read,
            file_written=file_written,
        )


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
