"""What the API shows of a table: its summary, configuration, timeline and plans, as JSON."""

from __future__ import annotations

from typing import Any

from hoodie.errors import HoodieError
from hoodie.models.base import AvroRecord
from hoodie.models.index import IndexPlan
from hoodie.models.restore import RestorePlan
from hoodie.services.clean import clean_plan
from hoodie.services.recovery import read_plan
from hoodie.services.registry import owner_of
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from service.errors import NotFound
from service.health import Health
from service.registry import TableEntry
from service.store import ServiceStreak

_SHOWN_PROPERTIES = (
    "hoodie.table.name",
    "hoodie.table.type",
    "hoodie.table.version",
    "hoodie.timeline.layout.version",
    "hoodie.table.timeline.timezone",
    "hoodie.table.recordkey.fields",
    "hoodie.table.partition.fields",
    "hoodie.table.precombine.field",
    "hoodie.table.ordering.fields",
    "hoodie.record.merge.mode",
    "hoodie.table.metadata.partitions",
)


def summary(entry: TableEntry, health: Health, suspended: dict[str, dict[str, Any]]) -> dict[str, Any]:
    table = entry.table
    return {
        "id": entry.id,
        "path": entry.uri,
        "type": table.config.table_type.value if table is not None else None,
        "version": table.table_version if table is not None else None,
        "name": table.name if table is not None else None,
        "health": entry.health,
        "error": entry.error,
        "paused": entry.paused,
        "source": entry.config.source,
        "health_score": health.score,
        "health_reasons": [r.as_json() for r in health.reasons],
        "suspended": suspended,
    }


def detail(
    entry: TableEntry,
    running: list[dict[str, Any]],
    gave_up: dict[str, str],
    refused: dict[str, str],
    health: Health,
    streaks: list[ServiceStreak],
    cost: dict[str, Any],
) -> dict[str, Any]:
    table = entry.table
    watch = entry.watch
    requests = entry.requests.snapshot()
    pending = []
    for p in entry.watch.pending if entry.watch is not None else ():
        item = p.as_json()
        if p.instant.requested_time in gave_up:
            item["blocked"] = gave_up[p.instant.requested_time]
        pending.append(item)
    props = {}
    if table is not None:
        props = {k: table.config.props[k] for k in _SHOWN_PROPERTIES if k in table.config.props}
    suspended = {s.service: s.as_json() for s in streaks if s.suspended}
    return {
        **summary(entry, health, suspended),
        "config": {
            "properties": props,
            "options": entry.config.options,
            "policies": {name: p.model_dump() for name, p in entry.config.policies.items()},
            "priority": entry.config.priority,
            "max_concurrent": entry.config.max_concurrent,
        },
        "lock": {
            "provider": entry.lock.kind if entry.lock is not None else None,
            "state": entry.lock.state.value if entry.lock is not None else None,
        },
        "pending": pending,
        "running": running,
        "storage_requests": {"total": sum(requests.values()), "by_op": requests},
        "watching": {
            "looks": watch.looks if watch is not None else 0,
            "reloads": watch.reloads if watch is not None else 0,
            "interval_s": watch.interval_s if watch is not None else 0.0,
        },
        "refused": refused,
        "failures": {s.service: s.as_json() for s in streaks if s.consecutive_failures or s.suspended},
        "cost": cost,
    }


PARTITIONS_SHOWN = 200
"""The storage view lists this many partitions (by name) in detail; totals cover them all."""


def storage(table: HoodieTable, options: dict[str, str], refused: dict[str, str]) -> dict[str, Any]:
    """File groups and slices in summary, the metadata table's partitions, and the table's shape."""
    view = table.file_system_view(timeline=table.reload())
    totals = {"file_groups": 0, "file_slices": 0, "base_files": 0, "log_files": 0, "bytes": 0}
    partitions: list[dict[str, Any]] = []
    names = sorted(view.partitions())
    for name in names:
        latest = view.latest_file_slices([name])
        logs = [len(s.log_files) for s in latest]
        size = sum(s.total_size for s in latest)
        totals["file_groups"] += len(latest)
        totals["file_slices"] += len(view.all_file_slices([name]))
        totals["base_files"] += sum(1 for s in latest if s.base_file is not None)
        totals["log_files"] += sum(logs)
        totals["bytes"] += size
        if len(partitions) < PARTITIONS_SHOWN:
            partitions.append(
                {
                    "partition": name,
                    "file_groups": len(latest),
                    "log_files": sum(logs),
                    "max_log_files": max(logs, default=0),
                    "bytes": size,
                }
            )
    config = table.config
    inflight = [{"name": p, "state": "inflight"} for p in config.metadata_partitions_inflight]
    completed = [{"name": p, "state": "completed"} for p in config.metadata_partitions]
    shape = table.shape(options)
    return {
        **totals,
        "partitions_total": len(names),
        "partitions": partitions,
        "metadata_table": table.has_metadata_table,
        "metadata_partitions": completed + inflight,
        "shape": [{"shape": f.shape.value, "evidence": f.evidence} for f in shape.features],
        "refused": refused,
    }


def timeline(table: HoodieTable) -> list[dict[str, Any]]:
    tl = table.reload()
    return [
        {
            "requested_time": i.requested_time,
            "completion_time": i.completion_time,
            "action": i.action.value,
            "state": i.state.name,
        }
        for i in tl
    ]


def _find(tl: ActiveTimeline, instant_time: str) -> Instant:
    found = [i for i in tl if i.requested_time == instant_time]
    if not found:
        raise NotFound(f"no instant {instant_time} on the active timeline")
    # A savepoint shares its commit's time; prefer the instant that has a plan.
    found.sort(key=lambda i: i.action is Action.SAVEPOINT)
    return found[0]


def _owner(action: Action) -> str:
    """The service whose plans have ``action`` (``hoodie.services.registry``)."""
    kind = owner_of(action)
    if kind is None:
        raise NotFound(f"{action.value} instants are not planned by a table service")
    return kind.value


def plan(table: HoodieTable, instant_time: str) -> dict[str, Any]:
    """The plan of ``instant_time`` with Apache Hudi's Avro field names."""
    tl = table.reload()
    instant = _find(tl, instant_time)
    action = instant.action
    model: AvroRecord
    if action in (Action.COMPACTION, Action.LOG_COMPACTION) or (
        instant.is_completed and action in (Action.COMMIT, Action.DELTA_COMMIT) and _has_plan(tl, instant)
    ):
        model = table.compaction_plan(instant_time, tl)
        kind = _owner(Action.LOG_COMPACTION if action is Action.LOG_COMPACTION else Action.COMPACTION)
    elif action in (Action.CLUSTERING, Action.REPLACE_COMMIT):
        model = table.clustering_plan(instant_time, tl)
        kind = (
            _owner(Action.CLUSTERING)
            if action is Action.CLUSTERING or table.is_clustering(instant, tl)
            else "replace"
        )
    elif action is Action.CLEAN:
        model = clean_plan(table, instant_time, tl)
        kind = _owner(action)
    elif action is Action.ROLLBACK:
        model = read_plan(table, tl, instant_time)
        kind = _owner(action)
    elif action is Action.INDEXING:
        data = tl.read_state(instant_time, State.REQUESTED, Action.INDEXING)
        model = IndexPlan.from_bytes(data, table.table_version, instant_time)
        kind = _owner(action)
    elif action is Action.RESTORE:
        data = tl.read_state(instant_time, State.REQUESTED, Action.RESTORE)
        model = RestorePlan.from_bytes(data, table.table_version, instant_time)
        kind = _owner(action)
    else:
        raise NotFound(f"{instant} has no plan ({action.value} instants are not planned)")
    return {
        "instant": instant_time,
        "action": action.value,
        "state": instant.state.name,
        "kind": kind,
        "plan": model.to_avro(),
    }


def _has_plan(tl: ActiveTimeline, instant: Instant) -> bool:
    try:
        return bool(tl.read_state(instant.requested_time, State.REQUESTED, Action.COMPACTION))
    except (OSError, HoodieError):
        return False
