"""The file-system view table-service planners work from: listings from the metadata table's
``files`` partition when the table has one (as Hudi's planners do through its metadata-backed
file-system view), else one storage listing per partition folder."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hoodie.file_group.view import FileSystemView, ListingColumns, ListingSource
from hoodie.metadata.records import MetadataPartition
from hoodie.metadata.table import MetadataTable
from hoodie.table import HoodieTable
from hoodie.timeline.timeline import ActiveTimeline

FilesColumns = Callable[[Sequence[str] | None], ListingColumns]
"""The files of the given partitions (of all of them on None) as columns, partitions sorted."""


def metadata_files(table: HoodieTable, timeline: ActiveTimeline) -> FilesColumns | None:
    """The ``files`` partition's listing of ``table`` (``MetadataTable.file_columns``: decoded into
    columns, no dict per partition or file), or None when the table has none."""
    if table.table_version < 8 or MetadataPartition.FILES not in table.config.metadata_partitions:
        return None
    return MetadataTable.open(table, timeline).file_columns


def metadata_listing_source(table: HoodieTable, timeline: ActiveTimeline) -> ListingSource | None:
    """Partition listings read from the ``files`` partition, or None when the table has none: cut
    from its columns."""
    columns = metadata_files(table, timeline)
    if columns is None:
        return None
    return lambda partitions: columns(partitions).listings()


def planning_view(table: HoodieTable, timeline: ActiveTimeline) -> FileSystemView:
    """The latest file-system view of ``table``, listed from its metadata table when it has one."""
    return table.file_system_view(timeline=timeline, source=metadata_listing_source(table, timeline))
