"""Cleaning: ``HoodieCleanerPlan`` (``T.clean.requested``) and ``HoodieCleanMetadata`` (``T.clean``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from hoodie.models.base import AvroModel, AvroRecord

__all__ = [
    "CLEAN_METADATA_VERSION",
    "CLEAN_PLAN_VERSION",
    "ActionInstant",
    "CleanFileInfo",
    "CleanMetadata",
    "CleanPartitionMetadata",
    "CleanerPlan",
    "CleaningPolicy",
]

CLEAN_PLAN_VERSION = 2
"""Plan version Hudi 0.14-1.1 writes: files listed in ``filePathsToBeDeletedPerPartition`` as full paths."""

CLEAN_METADATA_VERSION = 2
"""Clean-metadata version Hudi 0.14-1.1 writes: deleted files listed by file name."""


class CleaningPolicy(StrEnum):
    """Values of the ``policy`` fields."""

    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"


@dataclass(frozen=True, slots=True, kw_only=True)
class ActionInstant(AvroModel):
    """``HoodieActionInstant``: an instant by time, action and state name (all required)."""

    timestamp: str
    action: str
    state: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanFileInfo(AvroModel):
    """``HoodieCleanFileInfo``: a file to delete (a full path in plan version 2)."""

    file_path: str | None = None
    is_bootstrap_base_file: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanerPlan(AvroRecord):
    """``HoodieCleanerPlan``. ``version`` defaults to :data:`CLEAN_PLAN_VERSION` (Avro default: 1)."""

    AVRO_NAME: ClassVar[str] = "HoodieCleanerPlan"

    earliest_instant_to_retain: ActionInstant | None = None
    last_completed_commit_timestamp: str = ""
    policy: str
    files_to_be_deleted_per_partition: dict[str, list[str]] | None = None
    version: int | None = CLEAN_PLAN_VERSION
    file_paths_to_be_deleted_per_partition: dict[str, list[CleanFileInfo]] | None = None
    partitions_to_be_deleted: list[str] | None = None
    extra_metadata: dict[str, str] | None = None

    def files_to_delete(self) -> dict[str, list[str]]:
        """Partition -> paths to delete, from whichever field the plan version uses."""
        if self.file_paths_to_be_deleted_per_partition is not None:
            return {
                partition: [info.file_path for info in infos if info.file_path is not None]
                for partition, infos in self.file_paths_to_be_deleted_per_partition.items()
            }
        return {k: list(v) for k, v in (self.files_to_be_deleted_per_partition or {}).items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanPartitionMetadata(AvroModel):
    """``HoodieCleanPartitionMetadata``: what the clean did in one partition (file names in version 2)."""

    partition_path: str
    policy: str
    delete_path_patterns: list[str]
    success_delete_files: list[str]
    failed_delete_files: list[str]
    is_partition_deleted: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CleanMetadata(AvroRecord):
    """``HoodieCleanMetadata``. ``version`` defaults to :data:`CLEAN_METADATA_VERSION` (Avro default: 1)."""

    AVRO_NAME: ClassVar[str] = "HoodieCleanMetadata"

    start_clean_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    earliest_commit_to_retain: str
    last_completed_commit_timestamp: str = ""
    partition_metadata: dict[str, CleanPartitionMetadata]
    version: int | None = CLEAN_METADATA_VERSION
    bootstrap_partition_metadata: dict[str, CleanPartitionMetadata] | None = None
    extra_metadata: dict[str, str] | None = None
