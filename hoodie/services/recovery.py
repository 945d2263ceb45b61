"""Recovering an abandoned inflight table service so its plan can run again.

A compaction or clustering plan is immutable: a failed attempt is rolled back and the same plan
is executed again. An attempt counts as abandoned when its heartbeat has expired; if another
process still beats for it, we refuse rather than roll back a live execution (the failure mode
Hudi's HUDI-7503 fixes). Rolling back deletes every data file the attempt created (its markers,
and any file of the plan's file groups named with the instant), then the inflight file, leaving
the REQUESTED plan in place.
"""

from __future__ import annotations

import logging

from hoodie.errors import TableServiceError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.view import list_partition_paths
from hoodie.io.fileio import join
from hoodie.services.base import ServiceContext
from hoodie.timeline.instant import Instant, State
from hoodie.transaction.heartbeat import is_heartbeat_expired
from hoodie.transaction.lock import locked
from hoodie.write.markers import WriteMarkers

log = logging.getLogger(__name__)


def files_written_by(ctx: ServiceContext, instant_time: str) -> list[str]:
    """Every data file named with ``instant_time``: marker-listed files plus a listing of partitions."""
    table = ctx.table
    found = set(WriteMarkers(table.fileio, table.paths, instant_time).data_file_paths())
    for partition in list_partition_paths(table.fileio, table.base_path):
        for entry in table.fileio.list_dir(join(table.base_path, partition)):
            base = BaseFile.parse(entry.name)
            if base is not None and base.commit_time == instant_time:
                found.add(entry.path)
                continue
            lf = LogFile.parse(entry.name)
            if lf is not None and table.table_version >= 8 and lf.instant_time == instant_time:
                found.add(entry.path)
    return sorted(p for p in found if table.fileio.exists(p))


def recover_inflight(ctx: ServiceContext, instant: Instant) -> list[str]:
    """Undo an abandoned inflight attempt of a table service; returns the files removed."""
    table = ctx.table
    ts = instant.requested_time
    if not is_heartbeat_expired(table.fileio, table.paths, ts, ctx.heartbeat):
        raise TableServiceError(
            f"{instant} on {table.base_path} is being executed by another process (its heartbeat is alive); "
            "not rolling it back"
        )
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        current = table.reload().get(ts, instant.action)
        if current is None or not current.is_inflight:
            return []
        removed = files_written_by(ctx, ts)
        for path in removed:
            table.fileio.delete(path)
        WriteMarkers(table.fileio, table.paths, ts).delete_all()
        table.reload().delete_state(ts, State.INFLIGHT, instant.action)
    log.warning(
        "%s: rolled back abandoned attempt of %s (%d file(s) removed)", table.base_path, instant, len(removed)
    )
    return removed
