"""The service context the metadata table's services and undo run in.

Apart from ``hoodie.metadata.services`` (which builds on compaction, clean and archival) so that
rollback and restore, which undo the metadata table's update before they complete, need not
import those services.
"""

from __future__ import annotations

from hoodie.errors import UnsupportedTableError
from hoodie.metadata.table import open_metadata_table
from hoodie.services.base import ServiceContext
from hoodie.table import HoodieTable


def metadata_service_context(data_table: HoodieTable, ctx: ServiceContext) -> ServiceContext:
    """A context for the MDT of ``data_table``: the data table's lock, instant times and heartbeats."""
    if data_table.table_version < 8:
        raise UnsupportedTableError(
            f"{data_table.base_path}: table version {data_table.table_version} has a metadata table; "
            "hts runs metadata-table services on table versions 8 and 9 only"
        )
    return ServiceContext(
        table=open_metadata_table(data_table),
        lock=ctx.table_lock,
        time_source=ctx,
        storage_options=ctx.storage_options,
        heartbeat=ctx.heartbeat,
        lock_timeout_s=ctx.lock_timeout_s,
    )
