"""Rollbacks and restores of a data table, carried into its metadata table as Apache Hudi 1.x does.

**Rollback** (``HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata, ...)``): the metadata
table's (MDT) deltacommit with the rolled-back instant's time is rolled back by an MDT ``rollback``
instant at the data rollback's time (a v8 MERGE_ON_READ rollback: the log files it wrote are
deleted), before the data rollback completes. When the MDT never got that deltacommit there is
nothing to undo. A completed deltacommit that an MDT compaction has already merged into base files
cannot be undone that way: Hudi fails the rollback and points to restore; hts refuses when the
rollback is planned, before anything is written.

**Restore** (``update(HoodieRestoreMetadata, ...)``): the data table's instants after the savepoint
are rolled back without touching the MDT; then, before the data restore completes, the MDT is
restored to the savepoint's time (an MDT ``restore`` rolling back every MDT instant after it, by
Hudi's restore ordering) and one more MDT deltacommit, at a new instant time, brings ``files`` and
``column_stats`` in line with what storage holds now (the data cleans after the savepoint deleted
files that the restored MDT lists again). Hudi's readers accept that deltacommit although no data
instant has its time: a completed MDT deltacommit is valid unless its data instant is pending.

A restore needs the MDT to still hold the savepoint: its deltacommit active, every MDT file group
a file slice based at or before it (the MDT cleaner may have removed them), and no MDT partition
built after it (rolling its build back would leave a partition the table's properties list but
storage lacks). :func:`check_metadata_restorable` refuses otherwise, naming what is missing.

This module holds the checks; the MDT rollback and restore themselves are carried out by the
rollback and restore services (``hoodie.services.rollback.rollback_metadata_commit``,
``hoodie.services.restore.restore_metadata_table``), which use their own machinery on the MDT.
"""

from __future__ import annotations

import logging

from hoodie.errors import TableServiceError
from hoodie.metadata.init import INIT_PREFIX
from hoodie.metadata.partitions import has_metadata_table
from hoodie.metadata.table import MetadataTable
from hoodie.models.commit import CommitMetadata
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline

log = logging.getLogger(__name__)

__all__ = [
    "check_metadata_restorable",
    "check_metadata_rollback",
]


def _compacted_past(mdt_timeline: ActiveTimeline, deltacommit: Instant) -> Instant | None:
    """The latest completed MDT compaction if it already merged the completed ``deltacommit``
    (Hudi's ``validateRollback``: the deltacommit completed at or before the compaction's time)."""
    compaction = mdt_timeline.completed().actions(Action.COMMIT).last()
    if compaction is None or deltacommit.completion_time is None:
        return None
    if len(deltacommit.requested_time) != len(compaction.requested_time):
        return None  # an initialisation instant: compared by Hudi only at equal lengths
    if normalize(deltacommit.completion_time) <= normalize(compaction.requested_time):
        return compaction
    return None


def refuse_compacted(table: HoodieTable, mdt_timeline: ActiveTimeline, deltacommit: Instant) -> None:
    compaction = _compacted_past(mdt_timeline, deltacommit)
    if compaction is not None:
        raise TableServiceError(
            f"cannot roll back {deltacommit.requested_time} on {table.base_path}: the metadata table's "
            f"compaction {compaction.requested_time} already merged its update (as Apache Hudi, hts does "
            "not roll back a commit the metadata table compacted); restore to a savepoint instead"
        )


def check_metadata_rollback(table: HoodieTable, instant: Instant) -> None:
    """Refuse to roll back completed ``instant`` when the MDT can no longer undo its update."""
    if not has_metadata_table(table):
        return
    mdt = MetadataTable.open(table)
    deltacommit = mdt.timeline.get(instant.requested_time, Action.DELTA_COMMIT)
    if deltacommit is not None and deltacommit.is_completed:
        refuse_compacted(table, mdt.timeline, deltacommit)


# -- restore ------------------------------------------------------------------------------------


def check_metadata_restorable(table: HoodieTable, savepoint_time: str) -> None:
    """Refuse, before anything is written, a restore the MDT cannot follow."""
    if not has_metadata_table(table):
        return
    where = f"cannot restore {table.base_path} to {savepoint_time}"
    if table.table_version < 8:
        raise TableServiceError(
            f"{where}: table version {table.table_version} has a metadata table; hts restores metadata "
            "tables of table versions 8 and 9 only. Nothing was written."
        )
    pending_indexing = table.reload().pending().actions(Action.INDEXING)
    if pending_indexing:
        raise TableServiceError(
            f"{where}: indexing {pending_indexing.instants[0].requested_time} is still pending; run or "
            "cancel it first"
        )
    mdt = MetadataTable.open(table)
    saved = mdt.timeline.get(savepoint_time, Action.DELTA_COMMIT)
    if saved is None or not saved.is_completed or saved.completion_time is None:
        raise TableServiceError(
            f"{where}: the metadata table has no completed deltacommit {savepoint_time} (it was "
            "created after the savepoint); drop the metadata table or restore with Apache Hudi"
        )
    later = [
        i
        for i in mdt.timeline.completed().actions(Action.DELTA_COMMIT)
        if normalize(i.completion_time or "") > normalize(saved.completion_time)
    ]
    built_after = sorted(
        f"{i.requested_time} ({', '.join(sorted(meta.partition_to_write_stats or {}))})"
        for i in later
        if _is_build(i, meta := mdt.table.commit_metadata(i, mdt.timeline))
    )
    if built_after:
        raise TableServiceError(
            f"{where}: metadata-table partitions were built after the savepoint (deltacommits "
            f"{built_after}); restoring would undo those builds"
        )
    view = mdt.view()
    late = sorted(
        f"{p}/{group.file_id}"
        for p in table.config.metadata_partitions
        for group in view.file_groups(p)
        if not any(normalize(s.base_instant_time) <= normalize(savepoint_time) for s in group.slices())
    )
    if late:
        raise TableServiceError(
            f"{where}: metadata-table file groups {late} have no file slice at or before the savepoint "
            "(cleaned after later compactions); the metadata table cannot be restored"
        )


_BUILD_OPERATIONS = ("BULK_INSERT_PREPPED", "BULK_INSERT")


def _is_build(instant: Instant, meta: CommitMetadata) -> bool:
    """Whether an MDT deltacommit built partitions: at an initialisation time, or (Hudi's
    ``CREATE INDEX`` may build at a regular time) recorded as a bulk insert; updates are upserts."""
    return instant.requested_time.startswith(INIT_PREFIX) or meta.operation_type in _BUILD_OPERATIONS
