"""What a run cost: core-seconds, bytes and files read and written, storage requests.

- ``core_seconds``: in process, the worker thread's CPU time over the whole run (its tasks run in
  that thread); on Spark, the driver thread's CPU time plus the tasks' executor run time from
  Spark's status store (``StageData.executorRunTime``: each task holds a core while it runs), or,
  over Spark Connect, the CPU time each task measured in its Python worker and reported back in its
  result (``hoodie.io.usage.COST_KEY``; ``jobs.spark``). A retried run sums its attempts.
- ``bytes_written`` / ``files_written``: from the commit's write stats (Hudi's totalWriteBytes and
  the files its write stats name), as the run's ``details`` have them; 0 when nothing was committed.
- ``storage_requests`` (and ``requests_by_op``), ``bytes_read`` / ``files_read``: counted at the
  storage layer (every FileIO operation, ``hoodie.io.requests``), by the driver and by every task,
  whose counts travel back in its result: ``bytes_read`` the bytes the reads returned (a Parquet
  footer and the column chunks read, not the file's size), ``files_read`` the distinct files
  opened for reading (base, log, timeline and plan files, metadata-table HFiles; a file the driver
  and a task both read counts once). The requests are null while the storage layer does not report
  them (``requests_counted`` false), the bytes and files read while it reports no transfers
  (``transfers_counted`` false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hoodie.io.usage import Usage

STORAGE_FIELDS = ("bytes_read", "files_read", "storage_requests")
SUMMED = ("core_seconds", "bytes_written", "files_written", *STORAGE_FIELDS)


def run_cost(used: Usage, details: Mapping[str, Any]) -> dict[str, Any]:
    """One attempt's cost from its usage scope and the details of its outcome."""
    requests, transfers = used.requests_counted, used.transfers_counted
    return {
        "core_seconds": round(used.cpu_seconds, 6),
        "bytes_written": int(details.get("bytes_written", 0) or 0),
        "files_written": int(details.get("files_written", 0) or 0),
        "bytes_read": used.bytes_read if transfers else None,
        "files_read": used.files_read if transfers else None,
        "storage_requests": used.storage_requests if requests else None,
        "requests_by_op": dict(used.requests_by_op) if requests else None,
    }


def _plus(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def add_costs(earlier: Mapping[str, Any] | None, attempt: Mapping[str, Any]) -> dict[str, Any]:
    """``earlier`` attempts' cost plus ``attempt``'s (a retried run's cost is all its attempts')."""
    if not earlier:
        return dict(attempt)
    out = {k: _plus(earlier.get(k), attempt.get(k)) for k in SUMMED}
    out["core_seconds"] = round(out["core_seconds"] or 0.0, 6)
    ops: dict[str, int] | None = None
    for part in (earlier.get("requests_by_op"), attempt.get("requests_by_op")):
        if part is not None:
            ops = ops or {}
            for op, n in part.items():
                ops[op] = ops.get(op, 0) + n
    out["requests_by_op"] = ops
    return out
