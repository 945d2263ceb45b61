"""The REST API's bodies as typed models: what ``/openapi.json`` promises, and what routes return.

Routes that answer with a dict are validated against these models on the way out, so the
OpenAPI cannot drift from what the daemon sends. Probes keep their small hand-built bodies;
their models only document them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.health import REASONS
from service.settings import Policy
from service.store import RunKind, RunState, RunTrigger

INSTANT_PATTERN = r"^(?:[0-9]{14}|[0-9]{17})$"
"""An instant time: ``yyyyMMddHHmmss`` or ``yyyyMMddHHmmssSSS`` (hoodie.timeline.instant_time)."""
TABLE_ID_PATTERN = r"^[^/]+$"
"""A table id: configured, or a discovered table's path below its root with ``/`` as ``.``."""
SERVICE_PATTERN = r"^[a-z_]+$"
"""A table service's name (``hoodie.services.registry``): compaction, clean, ..."""
RUN_ID_MAX = 2**63 - 1
"""Run ids are SQLite row ids: 1 up to the largest signed 64-bit integer."""

InstantTime = Annotated[str, Field(pattern=INSTANT_PATTERN, examples=["20261121093000123"])]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(_Body):
    """Every error the API answers: 400, 401, 403, 404, 405, 409 and 422."""

    error: str = Field(description="What is wrong, naming the table, run, instant or value at fault")


# -- requests ---------------------------------------------------------------------------------


class _Request(BaseModel):
    """Bodies are taken as sent: no coercion (``0`` is not ``false``), no unknown fields."""

    model_config = ConfigDict(extra="forbid", strict=True)


class TriggerRequest(_Request):
    """Schedule now and execute: ``options`` are Hudi keys; ``instant`` executes that plan instead."""

    options: dict[str, str] = Field(default_factory=dict)
    instant: InstantTime | None = None


class TrueTimeRequest(_Request):
    lock_held: bool = False
    """The caller already holds the table lock (it asks for a completion time inside its commit)."""


# -- probes -----------------------------------------------------------------------------------


class Live(_Body):
    live: Literal[True]


class NotLive(_Body):
    live: Literal[False]
    reason: str


class Ready(_Body):
    ready: Literal[True]


class NotReady(_Body):
    ready: Literal[False]
    reasons: list[str]


# -- daemon and tables ------------------------------------------------------------------------


class QueueCount(_Body):
    waiting: int = Field(ge=0)
    running: int = Field(ge=0)


class Status(_Body):
    replica: str
    leader: bool
    paused: bool
    tables: int = Field(ge=0)
    spark_master: str
    queue: dict[str, QueueCount] = Field(description="Per service")
    runs: dict[str, int] = Field(description="Runs in the history, per state")


class Paused(_Body):
    paused: bool


class TablePaused(Paused):
    table: str


class HealthReason(_Body):
    """One thing that costs a table health points (``service.health``)."""

    code: str = Field(json_schema_extra={"enum": list(REASONS)}, description="What lowers the score")
    penalty: int = Field(ge=0, le=100, description="Points the score loses for it")
    message: str
    value: float | None = Field(description="What was measured (commits, log files, failures, ...)")
    threshold: float | None = Field(description="The setting it is measured against")
    service: str | None = Field(description="The service that would fix it, or that fails")
    instant: str | None


class ServiceStreakBody(_Body):
    """A service's consecutive failed runs on a table, and its auto-suspension."""

    service: str
    suspended: bool
    suspended_at: float | None = Field(description="When it was suspended (unix time)")
    consecutive_failures: int = Field(ge=0)
    last_error: str | None
    last_run: int | None = Field(description="The last failed run")
    last_failed_at: float | None


class ServiceResumed(ServiceStreakBody):
    table: str


class TableSummary(_Body):
    id: str
    path: str
    type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"] | None
    version: int | None
    name: str | None
    health: Literal["ok", "paused", "opening", "error", "removed"]
    error: str | None
    paused: bool
    source: Literal["static", "discovered"]
    health_score: int = Field(
        ge=0, le=100, description="100 when the table's services keep up, minus each reason's penalty"
    )
    health_reasons: list[HealthReason] = Field(description="Why the score is below 100, worst first")
    suspended: dict[str, ServiceStreakBody] = Field(
        description="service -> its suspension after retry.suspend_after consecutive failed runs "
        "(resume: POST /v1/tables/{id}/services/{service}/resume)"
    )


class TableSettings(_Body):
    properties: dict[str, str] = Field(description="Some of hoodie.properties")
    options: dict[str, str]
    policies: dict[str, Policy]
    priority: int
    max_concurrent: int = Field(ge=1)


class TableLock(_Body):
    provider: str | None
    state: Literal["connected", "suspended", "lost"] | None


class PendingService(_Body):
    service: str
    instant: str
    action: str
    state: Literal["REQUESTED", "INFLIGHT"]
    age_seconds: float = Field(ge=0)
    running_elsewhere: bool
    abandoned: bool
    blocked: str | None


class RunningService(_Body):
    run: int | None
    service: str
    instant: str | None
    tasks_done: int = Field(ge=0)
    tasks_total: int = Field(ge=0)


class RunCost(_Body):
    """What a run used (``service.cost``); storage fields are null while not counted."""

    core_seconds: float = Field(
        ge=0, description="CPU seconds: in process the run's, on Spark driver + tasks"
    )
    bytes_written: int = Field(ge=0, description="From the commit's write stats")
    files_written: int = Field(ge=0, description="From the commit's write stats")
    bytes_read: int | None = Field(
        ge=0, description="Bytes the run's reads transferred from storage (driver and tasks)"
    )
    files_read: int | None = Field(ge=0, description="Distinct files the run opened for reading")
    storage_requests: int | None = Field(ge=0, description="Storage requests (driver and tasks)")
    requests_by_op: dict[str, int] | None


class CostTotals(_Body):
    """A table's runs' costs summed over its run history."""

    runs: int = Field(ge=0, description="Runs with a recorded cost")
    core_seconds: float = Field(ge=0)
    bytes_written: int = Field(ge=0)
    files_written: int = Field(ge=0)
    bytes_read: int | None = Field(ge=0)
    files_read: int | None = Field(ge=0)
    storage_requests: int | None = Field(ge=0)


class StorageRequests(_Body):
    total: int = Field(
        ge=0, description="Storage requests made for the table by this daemon process and its Spark tasks"
    )
    by_op: dict[str, int] = Field(description="The same by kind: list, info, read, open, write, delete, ...")


class TableWatching(_Body):
    looks: int = Field(ge=0, description="Looks at the timeline since the table was opened")
    reloads: int = Field(ge=0, description="Looks that found the timeline changed and re-read it")
    interval_s: float = Field(ge=0, description="The wait before the next look (adaptive polling)")


class TableDetail(TableSummary):
    config: TableSettings
    lock: TableLock
    pending: list[PendingService]
    running: list[RunningService]
    storage_requests: StorageRequests
    watching: TableWatching
    refused: dict[str, str] = Field(
        description="service -> why the table's shape refuses it (never scheduled or executed there)"
    )
    failures: dict[str, ServiceStreakBody] = Field(
        description="service -> its consecutive failed runs (services failing now or suspended)"
    )
    cost: CostTotals


class TimelineInstant(_Body):
    requested_time: str
    completion_time: str | None
    action: str
    state: Literal["REQUESTED", "INFLIGHT", "COMPLETED"]


class Timeline(_Body):
    table: str
    instants: list[TimelineInstant]


class Plan(_Body):
    table: str
    instant: str
    action: str
    state: Literal["REQUESTED", "INFLIGHT", "COMPLETED"]
    kind: str
    plan: dict[str, Any] = Field(description="The plan with Apache Hudi's Avro field names")


class TrueTime(_Body):
    table: str
    instant_time: str
    took_ms: float = Field(ge=0)


# -- runs -------------------------------------------------------------------------------------


class RunBody(_Body):
    id: int = Field(ge=1, le=RUN_ID_MAX)
    table: str
    path: str
    service: str
    kind: RunKind
    instant: str | None
    trigger: RunTrigger
    state: RunState
    attempts: int = Field(ge=0)
    created_at: float
    started_at: float | None
    finished_at: float | None
    duration_s: float | None
    error: str | None
    details: dict[str, Any]
    idempotency_key: str | None
    replica: str
    cost: RunCost | None = Field(description="What the run used; null until its first attempt ended")


# -- the console ------------------------------------------------------------------------------


class WhoAmI(_Body):
    """What the caller's token may do (the console shows actions only to ``admin``)."""

    auth: bool = Field(description="Whether the API asks for tokens at all (none: loopback only)")
    scope: Literal["read", "admin"]
    name: str | None = Field(description="The token's name from api.tokens (None without tokens)")
    triggerable: list[str] = Field(description="The services POST /v1/tables/{table_id}/<service> takes")


class FleetPending(_Body):
    service: str
    count: int = Field(ge=1)
    oldest_s: float = Field(ge=0, description="Age of the oldest pending instant of this service")
    limit_s: float | None = Field(
        default=None,
        description="The table's threshold for that age: compaction's "
        "hoodie.compact.inline.max.delta.seconds, else the service's policy interval_s when the daemon "
        "schedules it",
    )
    abandoned: int = Field(default=0, ge=0)
    blocked: int = Field(default=0, ge=0)


class FleetRunning(_Body):
    run: int | None = None
    service: str
    done: int = Field(default=0, ge=0)
    total: int = Field(default=0, ge=0)


class FleetFailures(_Body):
    count: int = Field(ge=1, description="Failed runs within failure_window_s")
    run: int = Field(ge=1, description="The latest failed run")
    service: str
    at: float | None = None
    error: str | None = None


class FleetTable(_Body):
    """One table, compact: fields at their default are left out."""

    model_config = ConfigDict(extra="allow")

    id: str
    type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"] | None = None
    health: Literal["ok", "paused", "opening", "error", "removed"]
    error: str | None = None
    paused: bool = False
    health_score: int | None = Field(default=None, ge=0, le=100, description="When the daemon scores health")
    health_reason: str | None = Field(default=None, description="The worst reason the score is below 100")
    pending: list[FleetPending] = Field(default_factory=list)
    queued: int = Field(default=0, ge=0)
    running: list[FleetRunning] = Field(default_factory=list)
    failures: FleetFailures | None = None
    refused: list[str] = Field(default_factory=list, description="Services the table's shape refuses")
    suspended: dict[str, str] = Field(default_factory=dict, description="service -> why it is suspended")


class Fleet(_Body):
    generated_at: float
    paused: bool = Field(description="The whole daemon is paused")
    failure_window_s: float
    tables: list[FleetTable]


class PartitionFiles(_Body):
    partition: str
    file_groups: int = Field(ge=0)
    log_files: int = Field(ge=0)
    max_log_files: int = Field(ge=0, description="The most log files in one latest slice")
    bytes: int = Field(ge=0)


class ShapeFeatureBody(_Body):
    shape: str
    evidence: str


class MetadataPartition(_Body):
    name: str
    state: Literal["completed", "inflight"]


class TableStorage(_Body):
    table: str
    file_groups: int = Field(ge=0, description="Live file groups (their latest slices)")
    file_slices: int = Field(ge=0, description="Every slice of the live file groups")
    base_files: int = Field(ge=0)
    log_files: int = Field(ge=0, description="Log files in the latest slices")
    bytes: int = Field(ge=0, description="Bytes in the latest slices")
    partitions_total: int = Field(ge=0)
    partitions: list[PartitionFiles] = Field(description="The first partitions by name (at most 200)")
    metadata_table: bool
    metadata_partitions: list[MetadataPartition]
    shape: list[ShapeFeatureBody]
    refused: dict[str, str]
