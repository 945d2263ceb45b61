"""Async index building: ``HoodieIndexPlan`` (``T.indexing.requested``), ``HoodieIndexCommitMetadata``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hoodie.models.base import AvroModel, AvroRecord

__all__ = ["IndexCommitMetadata", "IndexPartitionInfo", "IndexPlan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPartitionInfo(AvroModel):
    """``HoodieIndexPartitionInfo``: a metadata-table partition built up to ``index_upto_instant``."""

    version: int | None = 1
    metadata_partition_path: str | None = None
    index_upto_instant: str | None = None
    extra_metadata: dict[str, str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexPlan(AvroRecord):
    """``HoodieIndexPlan``: the metadata partitions an indexing instant will build."""

    AVRO_NAME: ClassVar[str] = "HoodieIndexPlan"

    version: int | None = 1
    index_partition_infos: list[IndexPartitionInfo] | None = None

    def partition_paths(self) -> list[str]:
        """The metadata partition paths of the plan, in order."""
        return [
            i.metadata_partition_path for i in self.index_partition_infos or () if i.metadata_partition_path
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexCommitMetadata(AvroRecord):
    """``HoodieIndexCommitMetadata``: the partitions a completed indexing instant built."""

    AVRO_NAME: ClassVar[str] = "HoodieIndexCommitMetadata"

    version: int | None = 1
    operation_type: str | None = None
    index_partition_infos: list[IndexPartitionInfo] | None = None
