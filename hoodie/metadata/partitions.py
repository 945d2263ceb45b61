"""Which metadata-table partitions a table keeps, and which of them hts keeps current.

Read from ``hoodie.properties`` (``hoodie.table.metadata.partitions`` and its ``.inflight``
sibling); the table's shape (``hoodie.shape``) and every metadata-table writer ask here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hoodie.errors import UnsupportedTableError
from hoodie.metadata.records import MetadataPartition

if TYPE_CHECKING:
    from hoodie.table import HoodieTable

SUPPORTED_PARTITIONS = (
    MetadataPartition.FILES,
    MetadataPartition.COLUMN_STATS,
    MetadataPartition.PARTITION_STATS,
    MetadataPartition.RECORD_INDEX,
    MetadataPartition.BLOOM_FILTERS,
)


def enabled_partitions(table: HoodieTable) -> list[str]:
    """Metadata partitions to keep up to date: the built ones and those being built (indexing)."""
    out = list(table.config.metadata_partitions)
    out += [p for p in table.config.metadata_partitions_inflight if p not in out]
    return out


def secondary_index_partitions(table: HoodieTable) -> list[str]:
    """The secondary indexes among :func:`enabled_partitions`, maintained by hts or not."""
    return [p for p in enabled_partitions(table) if p.startswith(MetadataPartition.SECONDARY_PREFIX)]


def has_metadata_table(table: HoodieTable) -> bool:
    return table.has_metadata_table and bool(enabled_partitions(table))


def unmaintained_partitions(table: HoodieTable, partitions: list[str]) -> list[tuple[str, str | None]]:
    """The ``partitions`` of the metadata table hts cannot keep current, each with why for a secondary
    index it cannot maintain (None: a partition kind it does not maintain at all). ``hoodie.shape``
    names them as the table's shape."""
    from hoodie.metadata.secondary import secondary_indexes

    out: list[tuple[str, str | None]] = []
    for partition in partitions:
        if partition in SUPPORTED_PARTITIONS:
            continue
        if partition.startswith(MetadataPartition.SECONDARY_PREFIX):
            try:
                secondary_indexes(table, [partition])
            except UnsupportedTableError as e:
                out.append((partition, str(e).removeprefix(f"{table.base_path}: ")))
            continue
        out.append((partition, None))
    return out
