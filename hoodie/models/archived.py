"""Archived timeline entries.

* :class:`ArchivedMetaEntry` (``HoodieArchivedMetaEntry``): one record per archived instant state in
  the table version 6 archive log files (``.hoodie/archived/.commits_.archive.*``), which nests
  the metadata or plan of the instant in the field matching its action.
* :class:`LSMTimelineInstant` (``HoodieLSMTimelineInstant``): one row per archived instant in the
  table version 8/9 LSM history parquet files; ``metadata`` and ``plan`` hold the serialized
  instant files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hoodie.models.base import AvroModel, AvroRecord, avro_name
from hoodie.models.clean import CleanerPlan, CleanMetadata
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata, WriteStat
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexCommitMetadata
from hoodie.models.rollback import RollbackMetadata
from hoodie.models.savepoint import SavepointMetadata

__all__ = ["ArchivedMetaEntry", "CompactionMetadata", "CompactionWriteStat", "LSMTimelineInstant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionWriteStat(AvroModel):
    """``HoodieCompactionWriteStat`` (deprecated; only in very old archives). No field has a default."""

    partition_path: str | None
    total_log_records: int | None
    total_log_files: int | None
    total_updated_records_compacted: int | None
    hoodie_write_stat: WriteStat | None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionMetadata(AvroRecord):
    """``HoodieCompactionMetadata`` (deprecated, referenced by the archived entry)."""

    AVRO_NAME: ClassVar[str] = "HoodieCompactionMetadata"

    partition_to_compaction_write_stats: dict[str, list[CompactionWriteStat]] | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivedMetaEntry(AvroRecord):
    """``HoodieArchivedMetaEntry``: ``action_type``/``action_state``/``commit_time`` plus one payload."""

    AVRO_NAME: ClassVar[str] = "HoodieArchivedMetaEntry"

    hoodie_commit_metadata: CommitMetadata | None = None
    hoodie_clean_metadata: CleanMetadata | None = None
    hoodie_compaction_metadata: CompactionMetadata | None = None
    hoodie_rollback_metadata: RollbackMetadata | None = None
    hoodie_save_point_metadata: SavepointMetadata | None = field(
        default=None, metadata=avro_name("hoodieSavePointMetadata")
    )
    commit_time: str | None = None
    action_type: str | None = None
    version: int | None = 1
    hoodie_compaction_plan: CompactionPlan | None = None
    hoodie_cleaner_plan: CleanerPlan | None = None
    action_state: str | None = None
    hoodie_replace_commit_metadata: ReplaceCommitMetadata | None = None
    hoodie_requested_replace_metadata: RequestedReplaceMetadata | None = None
    hoodie_inflight_replace_metadata: CommitMetadata | None = field(
        default=None, metadata=avro_name("HoodieInflightReplaceMetadata")
    )
    hoodie_index_commit_metadata: IndexCommitMetadata | None = None
    state_transition_time: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LSMTimelineInstant(AvroRecord):
    """``HoodieLSMTimelineInstant``: a row of the LSM timeline history (``version`` is a plain int)."""

    AVRO_NAME: ClassVar[str] = "HoodieLSMTimelineInstant"

    instant_time: str | None = None
    completion_time: str | None = None
    action: str | None = None
    metadata: bytes | None = None
    plan: bytes | None = None
    version: int = 1
