"""Compaction plans: ``HoodieCompactionPlan`` (``T.compaction.requested``, ``T.logcompaction.requested``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hoodie.models.base import AvroModel, AvroRecord

__all__ = ["COMPACTION_PLAN_VERSION", "CompactionOperation", "CompactionPlan", "CompactionStrategy"]

COMPACTION_PLAN_VERSION = 2
"""The plan version Hudi 0.14-1.1 writes: paths in operations are file names relative to the partition."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOperation(AvroModel):
    """``HoodieCompactionOperation``: one file slice to compact.

    ``base_instant_time`` and ``file_id`` have no Avro default. In plan version 2,
    ``delta_file_paths`` are log file names and ``data_file_path`` the base file name (None for a
    log-only file group).
    """

    base_instant_time: str | None
    delta_file_paths: list[str] | None = None
    data_file_path: str | None = None
    file_id: str | None
    partition_path: str | None = None
    metrics: dict[str, float] | None = None
    bootstrap_file_path: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStrategy(AvroModel):
    """``HoodieCompactionStrategy``: the executor class and its parameters (log compaction sets it)."""

    compactor_class_name: str | None = None
    strategy_params: dict[str, str] | None = None
    version: int | None = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan(AvroRecord):
    """``HoodieCompactionPlan``.

    ``version`` defaults to :data:`COMPACTION_PLAN_VERSION` (2), the version Hudi writes; the Avro
    default (1, absolute paths) only applies when decoding a file that lacks the field.
    ``missing_schedule_partitions`` does not exist in table version 6 and is dropped there.
    """

    AVRO_NAME: ClassVar[str] = "HoodieCompactionPlan"

    operations: list[CompactionOperation] | None = None
    extra_metadata: dict[str, str] | None = None
    version: int | None = COMPACTION_PLAN_VERSION
    strategy: CompactionStrategy | None = None
    preserve_hoodie_metadata: bool | None = False
    missing_schedule_partitions: list[str] | None = None

    def file_groups(self) -> list[tuple[str, str]]:
        """``(partitionPath, fileId)`` of every operation, in plan order."""
        return [(op.partition_path or "", op.file_id or "") for op in self.operations or ()]
