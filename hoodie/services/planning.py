"""The file-system view table-service planners work from: listings from the metadata table's
``files`` partition when the table has one (as Hudi's planners do through its metadata-backed
file-system view), else one storage listing per partition folder."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hoodie.file_group.file_index import paused_gc
from hoodie.file_group.view import FileSystemView, ListingSource, PartitionListing
from hoodie.metadata.records import MetadataPartition
from hoodie.metadata.table import MetadataTable
from hoodie.table import HoodieTable
from hoodie.timeline.timeline import ActiveTimeline

FilesLister = Callable[[Sequence[str] | None], dict[str, dict[str, int]]]
"""Data partition -> {file name: size} for the given partitions, or for all of them on None."""


def metadata_files(table: HoodieTable, timeline: ActiveTimeline) -> FilesLister | None:
    """The ``files`` partition's listing of ``table``, or None when the table has none."""
    if table.table_version < 8 or MetadataPartition.FILES not in table.config.metadata_partitions:
        return None
    return MetadataTable.open(table, timeline).list_files


def metadata_listing_source(table: HoodieTable, timeline: ActiveTimeline) -> ListingSource | None:
    """Partition listings read from the ``files`` partition, or None when the table has none."""
    lister = metadata_files(table, timeline)
    if lister is None:
        return None

    def source(partitions: Sequence[str] | None) -> list[PartitionListing]:
        files = lister(partitions)
        with paused_gc():  # two lists per partition, by the ten thousand
            return [PartitionListing.of(p, files[p]) for p in sorted(files)]

    return source


def planning_view(table: HoodieTable, timeline: ActiveTimeline) -> FileSystemView:
    """The latest file-system view of ``table``, listed from its metadata table when it has one."""
    return table.file_system_view(timeline=timeline, source=metadata_listing_source(table, timeline))
