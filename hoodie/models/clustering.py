"""Clustering plans: ``HoodieRequestedReplaceMetadata`` wrapping a ``HoodieClusteringPlan``.

The requested file is ``T.clustering.requested`` in table versions 8/9 and
``T.replacecommit.requested`` in table version 6. An insert-overwrite's ``T.replacecommit.requested``
holds the same record with every field null (:meth:`RequestedReplaceMetadata.empty`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from hoodie.models.base import AvroModel, AvroRecord

__all__ = [
    "CLUSTER_OPERATION",
    "ClusteringGroup",
    "ClusteringPlan",
    "ClusteringStrategy",
    "RequestedReplaceMetadata",
    "SliceInfo",
]

CLUSTER_OPERATION = "CLUSTER"


@dataclass(frozen=True, slots=True, kw_only=True)
class SliceInfo(AvroModel):
    """``HoodieSliceInfo``: one input file slice; ``data_file_path`` is a full URI, ``file_id`` required."""

    data_file_path: str | None = None
    delta_file_paths: list[str] | None = None
    file_id: str | None
    partition_path: str | None = None
    bootstrap_file_path: str | None = None
    version: int | None = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusteringGroup(AvroModel):
    """``HoodieClusteringGroup``: slices rewritten together into ``num_output_file_groups`` new groups."""

    slices: list[SliceInfo] | None = None
    metrics: dict[str, float] | None = None
    num_output_file_groups: int | None = 1
    extra_metadata: dict[str, str] | None = None
    version: int | None = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusteringStrategy(AvroModel):
    """``HoodieClusteringStrategy``: the execution strategy class and its parameters."""

    strategy_class_name: str | None = None
    strategy_params: dict[str, str] | None = None
    version: int | None = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusteringPlan(AvroModel):
    """``HoodieClusteringPlan``. ``missing_schedule_partitions`` does not exist in table version 6."""

    input_groups: list[ClusteringGroup] | None = None
    strategy: ClusteringStrategy | None = None
    extra_metadata: dict[str, str] | None = None
    version: int | None = 1
    preserve_hoodie_metadata: bool | None = None
    missing_schedule_partitions: list[str] | None = None

    def file_groups(self) -> list[tuple[str, str]]:
        """``(partitionPath, fileId)`` of every input slice, in plan order."""
        return [
            (piece.partition_path or "", piece.file_id or "")
            for group in self.input_groups or ()
            for piece in group.slices or ()
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestedReplaceMetadata(AvroRecord):
    """``HoodieRequestedReplaceMetadata``: ``operation_type="CLUSTER"`` plus the plan, for clustering."""

    AVRO_NAME: ClassVar[str] = "HoodieRequestedReplaceMetadata"

    operation_type: str | None = None
    clustering_plan: ClusteringPlan | None = None
    extra_metadata: dict[str, str] | None = None
    version: int | None = 1

    @classmethod
    def empty(cls) -> Self:
        """The all-null record Hudi writes to an insert-overwrite's ``T.replacecommit.requested``."""
        return cls(version=None)

    @property
    def is_clustering(self) -> bool:
        """True when this requests a clustering (as opposed to an insert overwrite)."""
        return self.operation_type == CLUSTER_OPERATION and self.clustering_plan is not None
