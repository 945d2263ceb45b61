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
from service.registry import TableEntry
from service.watcher import PendingInstant

if TYPE_CHECKING:
    from service.daemon import Daemon

FAILURE_WINDOW_S = 24 * 3600.0
"""Failed runs created this long ago or later count as recent."""
ERROR_CHARS = 160
"""Errors are cut to this many characters here (the table and run pages show them whole)."""


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


def suspended_services(daemon: Daemon) -> dict[str, dict[str, str]]:
    """Table -> service -> why it is suspended there (auto-suspend, ``retry.suspend_after``)."""
    out: dict[str, dict[str, str]] = {}
    for (table_id, service), why in list(daemon.suspended.items()):
        out.setdefault(table_id, {})[service] = _cut(str(why)) or ""
    return out


def health_of(daemon: Daemon, entry: TableEntry) -> tuple[int, str | None]:
    """The table's health score and its worst reason's message (``service.health``)."""
    health = daemon.health_of(entry)
    worst = health.reasons[0].message if health.reasons else None
    return health.score, _cut(worst)


_REFUSED: dict[str, tuple[tuple[object, ...], list[str]]] = {}
"""Per table id: the services its shape refuses, with the (table, timeline, config) objects they were
computed from; computed again when any of them is another object (a reload)."""


def refused_services(daemon: Daemon, entry: TableEntry) -> list[str]:
    """The services ``entry``'s shape refuses (``Daemon.refused``), kept while its table's timeline
    and properties stay the objects they were (the watcher replaces them when they change)."""
    table = entry.table
    if table is None:
        return sorted(daemon.refused(entry))
    key = (table, table.timeline, table.config)
    cached = _REFUSED.get(entry.id)
    if cached is not None and all(a is b for a, b in zip(cached[0], key, strict=True)):
        return cached[1]
    names = sorted(daemon.refused(entry))
    _REFUSED[entry.id] = (key, names)
    return names


def _pending(entry: TableEntry, found: list[PendingInstant]) -> list[dict[str, Any]]:
    """Per service: how many pending instants, the oldest one's age and the table's threshold."""
    by_service: dict[str, dict[str, Any]] = {}
    for p in found:
        row = by_service.get(p.service)
        if row is None:
            row = by_service[p.service] = {"service": p.service, "count": 0, "oldest_s": 0.0}
            limit = age_limit_s(entry, p.service)
            if limit is not None:
                row["limit_s"] = limit
        row["count"] += 1
        row["oldest_s"] = max(row["oldest_s"], round(p.age_s, 1))
        if p.abandoned:
            row["abandoned"] = row.get("abandoned", 0) + 1
        if p.blocked is not None:
            row["blocked"] = row.get("blocked", 0) + 1
    return list(by_service.values())


def fleet(daemon: Daemon, now: float | None = None) -> dict[str, Any]:
    """The fleet page's data (``service.schemas.Fleet``), tables by id; each table's entry holds
    only what differs from the defaults (``FleetTable``), so that it is small and quick to send."""
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
    suspended = suspended_services(daemon)
    tables = []
    for entry in sorted(daemon.registry, key=lambda e: e.id):
        table_id = entry.id
        row: dict[str, Any] = {"id": table_id, "health": entry.health}
        if entry.table is not None:
            row["type"] = entry.table.config.table_type.value
        if entry.error is not None:
            row["error"] = _cut(entry.error)
        if entry.paused:
            row["paused"] = True
        row["health_score"], reason = health_of(daemon, entry)
        if reason is not None:
            row["health_reason"] = reason
        if entry.watch is not None and entry.watch.pending:
            row["pending"] = _pending(entry, entry.watch.pending)
        if table_id in queued:
            row["queued"] = queued[table_id]
        if table_id in running:
            row["running"] = running[table_id]
        if table_id in failures:
            count, run, service, at, error = failures[table_id]
            row["failures"] = {"count": count, "run": run, "service": service, "at": at, "error": _cut(error)}
        refused = refused_services(daemon, entry)
        if refused:
            row["refused"] = refused
        if table_id in suspended:
            row["suspended"] = suspended[table_id]
        tables.append(row)
    return {
        "generated_at": now,
        "paused": daemon.queue.paused,
        "failure_window_s": FAILURE_WINDOW_S,
        "tables": tables,
    }
