"""Tasks that read file slices (compaction, log compaction, clustering), on both sides.

The driver fixes the timeline a job reads by: the writes completed when the instant went
inflight, the first of them (older instants were archived, so they count as committed), and the
latest. Every executor task reads its slice by that same view, whatever completes meanwhile, so
each file group is merged as of one point of the timeline. On a schema-on-read table the driver
also resolves, once, the schema versions as of that latest write and sends them with the tasks:
an executor reads neither the timeline nor the commit metadata again (its table, opened once per
process, would otherwise hold the timeline of its first task).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie.errors import TableServiceError
from hoodie.io.fileio import FileInfo, FileIO
from hoodie.merge.resolve import resolve_merge_config
from hoodie.models.commit import WriteStat
from hoodie.read.reader import schema_on_read, table_schema, virtual_key_function
from hoodie.read.slice_reader import SliceReadOptions
from hoodie.schema.internal_schema import SchemaHistory, SchemaOnRead, parse_internal_schema
from hoodie.services.base import ServiceContext, Task, open_table_for_task
from hoodie.table import HoodieTable
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline

COMPRESSION_KEY = "hoodie.parquet.compression.codec"
SCHEMA_ON_READ_FIELD = "schema_on_read"


def latest_writer_schema(table: HoodieTable, service: str) -> dict[str, Any]:
    """The table's latest Avro schema; a table without one has nothing for ``service`` to do."""
    schema_json = table.latest_schema_json()
    if schema_json is None:
        raise TableServiceError(f"{table.base_path} has no schema; nothing for {service} to do")
    return schema_json


def slice_task_fields(
    ctx: ServiceContext, timeline: ActiveTimeline, instant_time: str, avro_schema: dict[str, Any]
) -> Task:
    """The fields every task of the job at ``instant_time`` carries; ``timeline`` is fresh."""
    completed = timeline.completed().writes()
    first, last = completed.first(), completed.last()
    on_read = schema_on_read(ctx.table, timeline, as_of=last.requested_time) if last else None
    return {
        **ctx.task_base(),
        "instant_time": instant_time,
        "arrow_schema": table_schema(ctx.table).serialize().to_pybytes().hex(),
        "avro_schema": json.dumps(avro_schema),
        "completed_instants": [i.requested_time for i in completed],
        "timeline_start": first.requested_time if first else None,
        "latest_instant": last.requested_time if last else None,
        "compression": ctx.options.get(COMPRESSION_KEY, "gzip"),
        SCHEMA_ON_READ_FIELD: on_read_to_task(on_read),
    }


def on_read_to_task(on_read: SchemaOnRead | None) -> dict[str, Any] | None:
    """A schema-on-read state as task JSON: the query version and every version of the history
    (each as ``SerDeHelper.toJson`` wrote it). Executors only read by it, so the history file's
    own bytes (needed to re-persist it on a write) are not sent."""
    if on_read is None:
        return None
    history = on_read.history
    return {
        "query": on_read.query.raw,
        "versions": [history.versions[v].raw for v in sorted(history.versions)],
        "source": history.source,
    }


def on_read_of_task(data: dict[str, Any] | None) -> SchemaOnRead | None:
    """The schema-on-read state :func:`on_read_to_task` sent."""
    if data is None:
        return None
    source = str(data["source"])
    versions = {}
    for raw in data["versions"]:
        version = parse_internal_schema(raw, source)
        if version.version_id is None:
            raise TableServiceError(f"{source}: a schema version sent to the task has no version-id")
        versions[version.version_id] = version
    return SchemaOnRead(SchemaHistory(versions, source), parse_internal_schema(data["query"], source))


@dataclass(frozen=True)
class SliceTask:
    """An executor's view of a slice-reading task."""

    table: HoodieTable
    instant_time: str
    schema: pa.Schema
    avro_schema: dict[str, Any]
    latest_instant: str | None
    compression: str
    completed: frozenset[str]
    timeline_start: str | None
    schema_on_read: SchemaOnRead | None
    """Schema-on-read tables: each file is read with its own schema version, the output in the
    version of the job's latest instant (the table's latest schema, as Hudi writes it)."""

    @classmethod
    def of(cls, task: Task) -> SliceTask:
        start = task.get("timeline_start")
        return cls(
            table=open_table_for_task(task),
            instant_time=str(task["instant_time"]),
            schema=pa.ipc.read_schema(pa.py_buffer(bytes.fromhex(task["arrow_schema"]))),
            avro_schema=json.loads(task["avro_schema"]),
            latest_instant=task.get("latest_instant"),
            compression=str(task.get("compression", "gzip")),
            completed=frozenset(task["completed_instants"]),
            timeline_start=normalize(start) if start else None,
            schema_on_read=on_read_of_task(task[SCHEMA_ON_READ_FIELD]),
        )

    def is_committed(self, instant_time: str) -> bool:
        """Completed when the job started, or older than the active timeline (archived)."""
        return instant_time in self.completed or (
            self.timeline_start is not None and normalize(instant_time) < self.timeline_start
        )

    def read_options(self, **overrides: Any) -> SliceReadOptions:
        """How to read this task's slices by the job's view of the timeline."""
        fields: dict[str, Any] = {
            "schema": self.schema,
            "merge": resolve_merge_config(self.table.config),
            "table_version": self.table.table_version,
            "is_committed": self.is_committed,
            "latest_instant": self.latest_instant,
            "on_read": self.schema_on_read,
            "virtual_keys": virtual_key_function(self.table),
        }
        return SliceReadOptions(**(fields | overrides))


def require_files(fileio: FileIO, paths: Iterable[str], what: str) -> list[FileInfo]:
    """The entries of ``paths``; each must exist, since a plan named it (``what`` names the job)."""
    out = []
    for path in paths:
        info = fileio.info(path)
        if info is None:
            raise TableServiceError(f"{what}: {path} named by the plan does not exist")
        out.append(info)
    return out


def stats_by_partition(stats: Sequence[WriteStat]) -> dict[str, list[WriteStat]]:
    """Write stats grouped as commit metadata holds them."""
    out: dict[str, list[WriteStat]] = {}
    for s in stats:
        out.setdefault(s.partition_path or "", []).append(s)
    return out
