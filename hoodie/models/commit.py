"""Commit metadata: ``HoodieCommitMetadata``, ``HoodieReplaceCommitMetadata`` and their write stats.

These are the payloads of commit, deltacommit and replacecommit instants (and of commit,
deltacommit and replacecommit *inflight* files, which hold a ``HoodieCommitMetadata`` "workload
profile"). Table version 6 stores them as Jackson JSON, table versions 8 and 9 as Avro containers;
:meth:`CommitMetadata.from_bytes` recognises either encoding from the bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Self

from hoodie.models import codec
from hoodie.models.base import AvroModel, AvroRecord

__all__ = [
    "SCHEMA_KEY",
    "CommitMetadata",
    "ReplaceCommitMetadata",
    "RuntimeStats",
    "WriteOperationType",
    "WriteStat",
]

SCHEMA_KEY = "schema"
"""``extraMetadata`` key holding the writer Avro schema (without Hudi meta fields)."""

JSON_TABLE_VERSION = 6
"""Commit metadata is JSON up to this table version and Avro after it."""


class WriteOperationType(StrEnum):
    """``operationType`` values Hudi writes (the metadata field itself stays a plain string)."""

    INSERT = "INSERT"
    INSERT_PREPPED = "INSERT_PREPPED"
    UPSERT = "UPSERT"
    UPSERT_PREPPED = "UPSERT_PREPPED"
    BULK_INSERT = "BULK_INSERT"
    BULK_INSERT_PREPPED = "BULK_INSERT_PREPPED"
    DELETE = "DELETE"
    DELETE_PREPPED = "DELETE_PREPPED"
    DELETE_PARTITION = "DELETE_PARTITION"
    INSERT_OVERWRITE = "INSERT_OVERWRITE"
    INSERT_OVERWRITE_TABLE = "INSERT_OVERWRITE_TABLE"
    CLUSTER = "CLUSTER"
    COMPACT = "COMPACT"
    LOG_COMPACT = "LOG_COMPACT"
    INDEX = "INDEX"
    ALTER_SCHEMA = "ALTER_SCHEMA"
    BOOTSTRAP = "BOOTSTRAP"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeStats(AvroModel):
    """``HoodieRuntimeStats``: milliseconds spent scanning logs, creating and upserting files."""

    total_scan_time: int | None = None
    total_create_time: int | None = None
    total_upsert_time: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteStat(AvroModel):
    """``HoodieWriteStat``: what one write did to one file group (every field nullable, default null).

    ``path`` is relative to the table base path. A stat with ``log_version`` set describes a log
    write (Java's ``HoodieDeltaWriteStat``) and carries ``log_offset``, ``base_file`` and ``log_files``.
    """

    file_id: str | None = None
    path: str | None = None
    prev_commit: str | None = None
    num_writes: int | None = None
    num_deletes: int | None = None
    num_update_writes: int | None = None
    total_write_bytes: int | None = None
    total_write_errors: int | None = None
    partition_path: str | None = None
    total_log_records: int | None = None
    total_log_files: int | None = None
    total_updated_records_compacted: int | None = None
    num_inserts: int | None = None
    total_log_blocks: int | None = None
    total_corrupt_log_block: int | None = None
    total_rollback_blocks: int | None = None
    file_size_in_bytes: int | None = None
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: list[str] | None = None
    cdc_stats: dict[str, int] | None = None
    prev_base_file: str | None = None
    min_event_time: int | None = None
    max_event_time: int | None = None
    runtime_stats: RuntimeStats | None = None
    total_log_files_compacted: int | None = None
    total_log_read_time_ms: int | None = None
    total_log_size_compacted: int | None = None
    temp_path: str | None = None
    num_updates: int | None = None

    @property
    def is_log_write(self) -> bool:
        """True for a log (delta) write stat."""
        return self.log_version is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitMetadata(AvroRecord):
    """``HoodieCommitMetadata``: the write stats of a commit, per partition, and its extra metadata.

    ``version`` is the Avro default 1; Hudi itself leaves it null in the files it writes.
    """

    AVRO_NAME: ClassVar[str] = "HoodieCommitMetadata"
    REPLACE: ClassVar[bool] = False

    partition_to_write_stats: dict[str, list[WriteStat]] | None = None
    compacted: bool | None = None
    extra_metadata: dict[str, str] | None = None
    version: int | None = 1
    operation_type: str | None = None

    def write_stats(self) -> Iterator[WriteStat]:
        """Every write stat of every partition."""
        for stats in (self.partition_to_write_stats or {}).values():
            yield from stats or ()

    def partitions(self) -> list[str]:
        """The partitions written, in file order ("" for a non-partitioned table)."""
        return list(self.partition_to_write_stats or {})

    @property
    def schema(self) -> str | None:
        """The writer Avro schema stored in ``extraMetadata["schema"]``, if any."""
        return (self.extra_metadata or {}).get(SCHEMA_KEY) or None

    def to_bytes(self, table_version: int) -> bytes:
        """JSON for table version 6, an Avro container for 8 and 9."""
        if table_version <= JSON_TABLE_VERSION:
            codec.load_schema(self.AVRO_NAME, table_version)  # rejects unsupported versions
            return codec.encode_commit_json(self.to_avro(), replace=self.REPLACE)
        return self.to_avro_container(table_version)

    @classmethod
    def from_bytes(cls, data: bytes, table_version: int, source: str = "") -> Self:
        """Decode either encoding (chosen by the bytes, so a JSON file in any version still reads)."""
        if codec.is_avro_container(data) or not data:
            return cls.from_avro_container(data, table_version, source)
        return cls.from_payload(codec.decode_commit_json(data, source), source)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaceCommitMetadata(CommitMetadata):
    """``HoodieReplaceCommitMetadata``: commit metadata plus the file groups each partition replaced."""

    AVRO_NAME: ClassVar[str] = "HoodieReplaceCommitMetadata"
    REPLACE: ClassVar[bool] = True

    partition_to_replace_file_ids: dict[str, list[str]] | None = None

    def replaced_file_ids(self) -> set[tuple[str, str]]:
        """``(partition, fileId)`` of every replaced file group."""
        return {
            (partition, file_id)
            for partition, file_ids in (self.partition_to_replace_file_ids or {}).items()
            for file_id in file_ids or ()
        }
