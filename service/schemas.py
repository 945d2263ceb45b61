"""The REST API's bodies as typed models: what ``/openapi.json`` promises, and what routes return.

Routes that answer with a dict are validated against these models on the way out, so the
OpenAPI cannot drift from what the daemon sends. Probes keep their small hand-built bodies;
their models only document them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from service.settings import Policy
from service.store import RunKind, RunState, RunTrigger

INSTANT_PATTERN = r"^(?:[0-9]{14}|[0-9]{17})$"
"""An instant time: ``yyyyMMddHHmmss`` or ``yyyyMMddHHmmssSSS`` (hoodie.timeline.instant_time)."""
TABLE_ID_PATTERN = r"^[^/]+$"
"""A table id: configured, or a discovered table's path below its root with ``/`` as ``.``."""
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


class StorageRequests(_Body):
    total: int = Field(ge=0, description="Storage requests made for the table by this daemon process")
    by_op: dict[str, int] = Field(description="The same by kind: list, info, read, open, write, delete, ...")


class TableWatching(_Body):
    looks: int = Field(ge=0, description="Looks at the timeline since the table was opened")
    reloads: int = Field(ge=0, description="Looks that found the timeline changed and re-read it")
    interval_s: float = Field(ge=0, description="The wait before the next look (adaptive polling)")


class TableDetail(TableSummary):
    model_config = ConfigDict(extra="allow")

    config: TableSettings
    lock: TableLock
    pending: list[PendingService]
    running: list[RunningService]
    storage_requests: StorageRequests
    watching: TableWatching
    refused: dict[str, str] = Field(
        description="service -> why the table's shape refuses it (never scheduled or executed there)"
    )


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
