"""The console's fleet page in one response (``GET /v1/fleet``): every table's state, its pending
services with their ages against the table's thresholds, queued and running work with progress,
recent failures, refused and suspended services.

It is built from what the daemon already holds (the registry, the last look of each table's
watcher, the queue) and one query of the run history, so that serving it for 1,000 tables costs
about what ``GET /v1/tables`` costs. Fields at their default are left out of each table's entry
(a quiet table is its id, type and state), and error messages are cut to ``ERROR_CHARS``.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from hoodie.errors import HoodieError
from hoodie.services.compaction import CompactionPolicy
from hoodie.services.registry import ServiceKind
from service import views
from service.registry import TableEntry

if TYPE_CHECKING:
    from service.daemon import Daemon

FAILURE_WINDOW_S = 24 * 3600.0
"""Failed runs created this long ago or later count as recent."""
ERROR_CHARS = 160
"""Errors are cut to this many characters here (the table and run pages show them whole)."""
_SUMMARY_LEFT_OUT = frozenset({"path", "name", "version", "source"})
"""Summary fields the fleet leaves to the table page (anything else a summary gains is kept)."""


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= ERROR_CHARS:
        return text
    return text[: ERROR_CHARS - 1] + "…"


def age_limit_s(entry: TableEntry, service: str) -> float | None:
    """How old a pending instant of ``service`` may grow before the table falls behind: for
    compaction, Hudi's time trigger ``hoodie.compact.inline.max.delta.seconds`` (compactions are
    to be at most that far apart; ``CompactionPolicy``), else the interval of the daemon's policy
    for the service when it has one enabled; None when the table sets no such threshold."""
    if service == ServiceKind.COMPACTION:
        try:
            return float(CompactionPolicy.from_options(entry.config.options).max_delta_seconds)
        except HoodieError:
            return None
    policy = entry.config.policies.get(service)
    return policy.interval_s if policy is not None and policy.enabled else None


def suspended_services(daemon: Daemon, entry: TableEntry) -> dict[str, str]:
    """Service -> why it is suspended on ``entry`` (auto-suspend, ``retry.suspend_after``): read
    from the daemon's ``suspended`` map keyed by (table, service), like ``gave_up``, when it has one."""
    suspended: dict[tuple[str, str], Any] = getattr(daemon, "suspended", None) or {}
    return {s: _cut(str(why)) or "" for (t, s), why in suspended.items() if t == entry.id}


def fleet(daemon: Daemon, now: float | None = None) -> dict[str, Any]:
    """The fleet page's data (``service.schemas.Fleet``), tables by id."""
    now = time.time() if now is None else now
    running: dict[str, list[dict[str, Any]]] = {}
    queued: dict[str, int] = {}
    for item in daemon.queue.items():
        if item.running:
            done, total = item.progress
            running.setdefault(item.table_id, []).append(
                {"run": item.run_id, "service": item.service, "done": done, "total": total}
            )
        else:
            queued[item.table_id] = queued.get(item.table_id, 0) + 1
    failures = daemon.store.recent_failures(now - FAILURE_WINDOW_S)
    tables = []
    for entry in sorted(daemon.registry, key=lambda e: e.id):
        row = {k: v for k, v in views.summary(entry).items() if k not in _SUMMARY_LEFT_OUT}
        row["error"] = _cut(row["error"])
        pending: dict[str, dict[str, Any]] = {}
        for p in entry.watch.pending if entry.watch is not None else ():
            found = pending.get(p.service)
            if found is None:
                found = pending[p.service] = {"service": p.service, "count": 0, "oldest_s": 0.0}
                found["limit_s"] = age_limit_s(entry, p.service)
            found["count"] += 1
            found["oldest_s"] = max(found["oldest_s"], round(p.age_s, 1))
            found["abandoned"] = found.get("abandoned", 0) + int(p.abandoned)
            found["blocked"] = found.get("blocked", 0) + int(p.blocked is not None)
        row["pending"] = list(pending.values())
        row["queued"] = queued.get(entry.id, 0)
        row["running"] = running.get(entry.id, [])
        failed = failures.get(entry.id)
        if failed is not None:
            count, run, service, at, error = failed
            row["failures"] = {"count": count, "run": run, "service": service, "at": at, "error": _cut(error)}
        row["refused"] = sorted(daemon.refused(entry))
        row["suspended"] = suspended_services(daemon, entry)
        tables.append(row)
    return {
        "generated_at": now,
        "paused": daemon.queue.paused,
        "failure_window_s": FAILURE_WINDOW_S,
        "tables": tables,
    }
