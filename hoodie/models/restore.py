"""Restores: ``HoodieRestorePlan`` (``T.restore.requested``) and ``HoodieRestoreMetadata`` (``T.restore``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hoodie.models.base import AvroRecord
from hoodie.models.rollback import InstantInfo, RollbackMetadata

__all__ = ["RestoreMetadata", "RestorePlan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RestorePlan(AvroRecord):
    """``HoodieRestorePlan``: the instants a restore rolls back (Avro default version 2)."""

    AVRO_NAME: ClassVar[str] = "HoodieRestorePlan"

    instants_to_rollback: list[InstantInfo] = field(default_factory=list)
    version: int | None = 2
    savepoint_to_restore_timestamp: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RestoreMetadata(AvroRecord):
    """``HoodieRestoreMetadata``: one list of rollback results per rolled-back instant."""

    AVRO_NAME: ClassVar[str] = "HoodieRestoreMetadata"

    start_restore_time: str
    time_taken_in_millis: int
    instants_to_rollback: list[str]
    hoodie_restore_metadata: dict[str, list[RollbackMetadata | None]]
    version: int | None = 1
    restore_instant_info: list[InstantInfo] = field(default_factory=list)
    extra_metadata: dict[str, str] | None = None
