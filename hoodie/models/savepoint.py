"""Savepoints: ``HoodieSavepointMetadata`` (``T.savepoint``). Files it names must never be cleaned."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from hoodie.models.base import AvroModel, AvroRecord

__all__ = ["SavepointMetadata", "SavepointPartitionMetadata"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SavepointPartitionMetadata(AvroModel):
    """``HoodieSavepointPartitionMetadata``: the data files a savepoint keeps in one partition."""

    partition_path: str
    savepoint_data_file: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class SavepointMetadata(AvroRecord):
    """``HoodieSavepointMetadata``."""

    AVRO_NAME: ClassVar[str] = "HoodieSavepointMetadata"

    savepointed_by: str
    savepointed_at: int
    comments: str
    partition_metadata: dict[str, SavepointPartitionMetadata]
    version: int | None = 1

    def savepointed_files(self) -> set[tuple[str, str]]:
        """``(partition, data file)`` pairs protected by this savepoint."""
        return {
            (partition, name)
            for partition, meta in self.partition_metadata.items()
            for name in meta.savepoint_data_file
        }
