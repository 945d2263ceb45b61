"""Rollbacks: ``HoodieRollbackPlan`` (``T.rollback.requested``), ``HoodieRollbackMetadata``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hoodie.models.base import AvroModel, AvroRecord, avro_name

__all__ = ["InstantInfo", "RollbackMetadata", "RollbackPartitionMetadata", "RollbackPlan", "RollbackRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InstantInfo(AvroModel):
    """``HoodieInstantInfo``: an instant by requested time and action (both required)."""

    commit_time: str
    action: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackRequest(AvroModel):
    """``HoodieRollbackRequest``: files to delete (absolute paths) and, in table version 6, log blocks
    to roll back (full URI -> size). Table versions 8+ never set ``log_blocks_to_be_deleted``."""

    partition_path: str
    file_id: str | None = None
    latest_base_instant: str | None = None
    files_to_be_deleted: list[str] = field(default_factory=list)
    log_blocks_to_be_deleted: dict[str, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackPlan(AvroRecord):
    """``HoodieRollbackPlan``; note Hudi's capitalised Avro field ``RollbackRequests``."""

    AVRO_NAME: ClassVar[str] = "HoodieRollbackPlan"

    instant_to_rollback: InstantInfo | None = None
    rollback_requests: list[RollbackRequest] | None = field(
        default=None, metadata=avro_name("RollbackRequests")
    )
    version: int | None = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackPartitionMetadata(AvroModel):
    """``HoodieRollbackPartitionMetadata``: deleted files and rollback log files (full URI -> size)."""

    partition_path: str
    success_delete_files: list[str]
    failed_delete_files: list[str]
    rollback_log_files: dict[str, int] | None = None
    log_files_from_failed_commit: dict[str, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackMetadata(AvroRecord):
    """``HoodieRollbackMetadata``: the result of a completed rollback."""

    AVRO_NAME: ClassVar[str] = "HoodieRollbackMetadata"

    start_rollback_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    commits_rollback: list[str]
    partition_metadata: dict[str, RollbackPartitionMetadata]
    version: int | None = 1
    instants_rollback: list[InstantInfo] = field(default_factory=list)
