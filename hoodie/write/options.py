"""Write operations and the writer's options, keyed by Apache Hudi's config names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any

from hoodie.bloom import BloomFilterTypeCode
from hoodie.errors import InvalidInputError
from hoodie.file_group.base_file_writer import BloomOptions


class WriteOperation(StrEnum):
    INSERT = "insert"
    UPSERT = "upsert"
    DELETE = "delete"
    BULK_INSERT = "bulk_insert"
    INSERT_OVERWRITE = "insert_overwrite"
    INSERT_OVERWRITE_TABLE = "insert_overwrite_table"

    @property
    def operation_type(self) -> str:
        """The ``operationType`` Hudi records in commit metadata."""
        return self.value.upper()

    @property
    def is_overwrite(self) -> bool:
        return self in (WriteOperation.INSERT_OVERWRITE, WriteOperation.INSERT_OVERWRITE_TABLE)

    @property
    def looks_up_index(self) -> bool:
        """Whether incoming keys are tagged to existing file groups (insert and bulk_insert do not)."""
        return self in (WriteOperation.UPSERT, WriteOperation.DELETE)


class LogBlockFormat(StrEnum):
    AVRO = "avro"
    PARQUET = "parquet"


class BulkInsertSortMode(StrEnum):
    NONE = "NONE"
    GLOBAL_SORT = "GLOBAL_SORT"
    PARTITION_SORT = "PARTITION_SORT"


def _hudi_key(key: str) -> dict[str, str]:
    return {"hudi": key}


@dataclass(frozen=True)
class WriteOptions:
    """Writer settings; each field maps to the Apache Hudi config key in its metadata."""

    log_block_format: LogBlockFormat = field(
        default=LogBlockFormat.AVRO, metadata=_hudi_key("hoodie.logfile.data.block.format")
    )
    parquet_compression: str = field(default="gzip", metadata=_hudi_key("hoodie.parquet.compression.codec"))
    small_file_limit: int = field(default=104_857_600, metadata=_hudi_key("hoodie.parquet.small.file.limit"))
    max_file_size: int = field(default=125_829_120, metadata=_hudi_key("hoodie.parquet.max.file.size"))
    record_size_estimate: int = field(
        default=1024, metadata=_hudi_key("hoodie.copyonwrite.record.size.estimate")
    )
    insert_split_size: int = field(
        default=500_000, metadata=_hudi_key("hoodie.copyonwrite.insert.split.size")
    )
    auto_split_inserts: bool = field(default=True, metadata=_hudi_key("hoodie.copyonwrite.insert.auto.split"))
    combine_before_insert: bool = field(default=False, metadata=_hudi_key("hoodie.combine.before.insert"))
    combine_before_upsert: bool = field(default=True, metadata=_hudi_key("hoodie.combine.before.upsert"))
    combine_before_delete: bool = field(default=True, metadata=_hudi_key("hoodie.combine.before.delete"))
    bulk_insert_sort_mode: BulkInsertSortMode = field(
        default=BulkInsertSortMode.NONE, metadata=_hudi_key("hoodie.bulkinsert.sort.mode")
    )
    bloom_num_entries: int = field(default=60000, metadata=_hudi_key("hoodie.index.bloom.num_entries"))
    bloom_fpp: float = field(default=0.000000001, metadata=_hudi_key("hoodie.index.bloom.fpp"))
    bloom_type: BloomFilterTypeCode = field(
        default=BloomFilterTypeCode.DYNAMIC_V0, metadata=_hudi_key("hoodie.bloom.index.filter.type")
    )
    bloom_max_entries: int = field(
        default=100000, metadata=_hudi_key("hoodie.bloom.index.filter.dynamic.max.entries")
    )
    lock_timeout_s: float = field(default=60.0, metadata=_hudi_key("hoodie.write.lock.wait_time_ms"))

    @property
    def bloom(self) -> BloomOptions:
        return BloomOptions(self.bloom_num_entries, self.bloom_fpp, self.bloom_type, self.bloom_max_entries)

    @classmethod
    def from_hudi_config(cls, config: Mapping[str, str]) -> WriteOptions:
        """Options from Hudi config keys; unknown ``hoodie.*`` keys are ignored, bad values named."""
        by_key = {f.metadata["hudi"]: f for f in fields(cls) if "hudi" in f.metadata}
        updates: dict[str, Any] = {}
        for key, raw in config.items():
            f = by_key.get(key)
            if f is None:
                continue
            default = getattr(cls(), f.name)
            try:
                if key == "hoodie.write.lock.wait_time_ms":
                    updates[f.name] = float(raw) / 1000.0
                elif isinstance(default, bool):
                    if raw.strip().lower() not in ("true", "false"):
                        raise ValueError(raw)
                    updates[f.name] = raw.strip().lower() == "true"
                elif isinstance(default, StrEnum):
                    updates[f.name] = type(default)(
                        raw.strip().upper() if default.value.isupper() else raw.strip()
                    )
                elif isinstance(default, int):
                    updates[f.name] = int(raw)
                elif isinstance(default, float):
                    updates[f.name] = float(raw)
                else:
                    updates[f.name] = raw.strip()
            except ValueError as e:
                raise InvalidInputError(f"invalid value {raw!r} for {key}") from e
        return replace(cls(), **updates)


ALLOW_DUPLICATE_ON_INSERTS = "hoodie.merge.allow.duplicate.on.inserts"


def allow_duplicate_on_inserts(write_props: Mapping[str, str], table_version: int) -> bool:
    """Whether an insert routed to a small base file is concatenated (Hudi's ``HoodieConcatHandle``)
    rather than merged with the file's records (``HoodieMergeHandle``), as
    ``HoodieMergeHandleFactory`` picks the handle for a non-changing operation.

    ``hoodie.merge.allow.duplicate.on.inserts`` (``HoodieWriteConfig``) defaulted to false since it
    came (0.8, HUDI-1234) through 0.14, and to true on master from March 2024 (HUDI-6089, so in 1.0;
    whether 0.15 took it is UNCONFIRMED here). A write config, not persisted: the default follows the
    writer hts writes as, table version 6 as Hudi 0.14, 8 and later as 1.x.
    """
    raw = write_props.get(ALLOW_DUPLICATE_ON_INSERTS)
    if raw is None:
        return table_version >= 8
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise InvalidInputError(f"invalid value {raw!r} for {ALLOW_DUPLICATE_ON_INSERTS}")
    return value == "true"
