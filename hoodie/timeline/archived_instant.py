"""Archived instants, shared by both archived-timeline layouts.

An archived instant is one completed instant with the payloads of its state files (the completed
metadata, the plan, the inflight metadata), kept as bytes or decoded records and turned into
typed models on demand. :class:`InstantFiles` is what an archiver collects from the active
timeline before archiving an instant.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import fastavro

from hoodie.errors import MalformedPlanError, TimelineError
from hoodie.models import codec
from hoodie.models.archived import CompactionMetadata
from hoodie.models.base import AvroRecord
from hoodie.models.clean import CleanerPlan, CleanMetadata
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexCommitMetadata, IndexPlan
from hoodie.models.restore import RestoreMetadata, RestorePlan
from hoodie.models.rollback import RollbackMetadata, RollbackPlan
from hoodie.models.savepoint import SavepointMetadata
from hoodie.timeline.instant import Action, Instant, State, parse_instant_file_name
from hoodie.timeline.instant_time import instant_from_epoch_millis, normalize
from hoodie.timeline.timeline import ActiveTimeline

M = TypeVar("M", bound=AvroRecord)


# ------------------------------------------------------------------------------------------------
# payloads and archived instants (shared by both archived-timeline layouts)

_MODEL_LIST: tuple[type[AvroRecord], ...] = (
    CommitMetadata,
    ReplaceCommitMetadata,
    CleanMetadata,
    CleanerPlan,
    CompactionPlan,
    CompactionMetadata,
    RequestedReplaceMetadata,
    RollbackPlan,
    RollbackMetadata,
    SavepointMetadata,
    RestorePlan,
    RestoreMetadata,
    IndexPlan,
    IndexCommitMetadata,
)
_MODELS = {m.AVRO_NAME: m for m in _MODEL_LIST}
COMMIT_RECORD_NAMES = frozenset({CommitMetadata.AVRO_NAME, ReplaceCommitMetadata.AVRO_NAME})

METADATA_RECORD: dict[Action, str] = {
    Action.COMMIT: CommitMetadata.AVRO_NAME,
    Action.DELTA_COMMIT: CommitMetadata.AVRO_NAME,
    Action.SCHEMA_COMMIT: CommitMetadata.AVRO_NAME,
    Action.REPLACE_COMMIT: ReplaceCommitMetadata.AVRO_NAME,
    Action.CLEAN: CleanMetadata.AVRO_NAME,
    Action.ROLLBACK: RollbackMetadata.AVRO_NAME,
    Action.SAVEPOINT: SavepointMetadata.AVRO_NAME,
    Action.RESTORE: RestoreMetadata.AVRO_NAME,
    Action.INDEXING: IndexCommitMetadata.AVRO_NAME,
}
"""The record a completed instant file of each action holds."""
LSM_PLAN_RECORD: dict[Action, str] = {
    Action.COMMIT: CompactionPlan.AVRO_NAME,
    Action.DELTA_COMMIT: CompactionPlan.AVRO_NAME,
    Action.REPLACE_COMMIT: RequestedReplaceMetadata.AVRO_NAME,
    Action.CLEAN: CleanerPlan.AVRO_NAME,
}
"""The plan an LSM row of each completed action can hold (a commit's is its compaction plan)."""


def container_record_name(data: bytes) -> str | None:
    """The record name of the writer schema of an Avro container, or None if ``data`` is not one."""
    if not codec.is_avro_container(data):
        return None
    try:
        schema = fastavro.reader(io.BytesIO(data)).writer_schema
    except Exception:  # fastavro raises many types on a corrupt header
        return None
    name = schema.get("name") if isinstance(schema, dict) else None
    return name.rsplit(".", 1)[-1] if isinstance(name, str) else None


@dataclass(frozen=True, slots=True)
class Payload:
    """A plan or metadata payload of an archived instant, decoded on demand.

    Either ``raw`` (the bytes of an instant file, as the LSM timeline stores them: an Avro container,
    or table version 6 commit-metadata JSON) or ``record`` (an Avro record already decoded from a
    layout-1 archive entry). ``kind`` is the Avro record name expected from the action; for raw
    Avro containers the record name embedded in the container wins (see :attr:`record_name`).
    """

    kind: str
    raw: bytes | None = None
    record: Mapping[str, Any] | None = None
    table_version: int = 8
    source: str = ""

    @property
    def record_name(self) -> str:
        """The Avro record name this payload holds."""
        if self.raw is None:
            return self.kind
        name = container_record_name(self.raw)
        if name is not None:
            return name
        if self.raw and self.kind not in COMMIT_RECORD_NAMES:
            return CommitMetadata.AVRO_NAME  # only commit metadata is ever stored as JSON
        return self.kind

    def decode(self) -> AvroRecord:
        """The payload as its model (``MalformedPlanError`` naming :attr:`source` if undecodable)."""
        name = self.record_name
        model = _MODELS.get(name)
        if model is None:
            raise MalformedPlanError(
                f"{self.source or '<archived payload>'}: no model for Avro record {name}"
            )
        if self.record is not None:
            return model.from_payload(self.record, self.source)
        return model.from_bytes(self.raw or b"", self.table_version, self.source)


@dataclass(frozen=True, slots=True)
class ArchivedInstant:
    """One archived instant, as either archived-timeline layout reads it.

    ``action`` is the action of the instant in its latest ``state`` (``commit`` for a completed
    compaction, ``replacecommit`` for a completed clustering); ``pending_action`` is the action of
    its requested/inflight files (``compaction``, ``logcompaction``, ``clustering``, else the same).
    In layout 2 a replace commit's ``pending_action`` stays ``replacecommit``: tell clustering from
    insert-overwrite by ``plan().is_clustering``.

    ``metadata()`` decodes the completed instant's payload, ``plan()`` the requested plan (cleaner,
    compaction or requested-replace), ``inflight_metadata()`` the commit metadata a replace commit's
    inflight file held. Each returns None when the archive holds no such payload.
    """

    requested_time: str
    action: Action
    completion_time: str | None
    state: State = State.COMPLETED
    pending_action: Action | None = None
    metadata_payload: Payload | None = None
    plan_payload: Payload | None = None
    inflight_payload: Payload | None = None
    source: str = ""

    @property
    def instant(self) -> Instant:
        return Instant(self.requested_time, self.action, self.state, self.completion_time)

    @property
    def sort_key(self) -> tuple[str, int, str]:
        return (normalize(self.requested_time), int(self.state), self.action.value)

    def metadata(self) -> AvroRecord | None:
        return None if self.metadata_payload is None else self.metadata_payload.decode()

    def plan(self) -> AvroRecord | None:
        return None if self.plan_payload is None else self.plan_payload.decode()

    def inflight_metadata(self) -> AvroRecord | None:
        return None if self.inflight_payload is None else self.inflight_payload.decode()

    def metadata_as(self, model: type[M]) -> M | None:
        """:meth:`metadata` checked to be a ``model`` (``MalformedPlanError`` otherwise)."""
        return _expect(self.metadata(), model, self, "metadata")

    def plan_as(self, model: type[M]) -> M | None:
        """:meth:`plan` checked to be a ``model`` (``MalformedPlanError`` otherwise)."""
        return _expect(self.plan(), model, self, "plan")


def _expect(value: AvroRecord | None, model: type[M], instant: ArchivedInstant, what: str) -> M | None:
    if value is None or isinstance(value, model):
        return value
    raise MalformedPlanError(
        f"{instant.source}: archived {instant.action.value} {instant.requested_time} holds a "
        f"{type(value).__name__} {what}, not a {model.__name__}"
    )


@dataclass(frozen=True, slots=True)
class InstantFiles:
    """A completed instant and the bytes of its state files, as the archivers read them.

    ``instant`` is the completed instant (its action is the completed action, with the completion
    time in layout 2); ``pending_action`` the action of its requested/inflight files. ``requested``
    and ``inflight`` are None when the file does not exist. ``transition_times`` holds, per state,
    the file's modification time as an instant time (what layout 1 archives as
    ``stateTransitionTime``).
    """

    instant: Instant
    pending_action: Action
    completed: bytes
    requested: bytes | None = None
    inflight: bytes | None = None
    transition_times: Mapping[State, str] = field(default_factory=dict)

    @property
    def requested_time(self) -> str:
        return self.instant.requested_time

    @classmethod
    def read(cls, timeline: ActiveTimeline, requested_time: str) -> InstantFiles:
        """Read the state files of the completed instant ``requested_time`` from ``timeline``."""
        instant = timeline.get(requested_time)
        if instant is None or not instant.is_completed:
            raise TimelineError(
                f"instant {requested_time} is not completed on {timeline.paths.timeline}; "
                "only completed instants are archived"
            )
        pending = instant.action
        contents: dict[State, bytes] = {}
        times: dict[State, str] = {}
        for state in timeline.states_of(requested_time):
            name = timeline.state_file(requested_time, state)
            mtime = timeline.state_file_mtime_ms(requested_time, state)
            if name is None or mtime is None:
                continue
            contents[state] = timeline.read_state(requested_time, state)
            times[state] = instant_from_epoch_millis(mtime, timeline.tz)
            parsed = parse_instant_file_name(name, timeline.layout)
            if parsed is not None and state is not State.COMPLETED:
                pending = parsed.action
        return cls(
            instant=instant,
            pending_action=pending,
            completed=contents[State.COMPLETED],
            requested=contents.get(State.REQUESTED),
            inflight=contents.get(State.INFLIGHT),
            transition_times=times,
        )
