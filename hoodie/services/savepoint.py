"""Savepoints: keep a completed commit restorable, as Apache Hudi does.

A savepoint shares the requested time ``T`` of the commit it saves. Creating one writes
``T.savepoint.inflight`` (a savepoint has no requested state) and completes ``T[_C].savepoint`` with
a ``HoodieSavepointMetadata`` listing, per partition, the base and log file names of every file
group's latest slice as of ``T``. Clean must keep those files (:func:`savepointed_files`), so a
restore to ``T`` finds them. Deleting a savepoint removes its completed and inflight files.

Hudi refuses to savepoint an instant older than the earliest commit the last clean retained (its
files may be gone already); so does this module.
"""

from __future__ import annotations

import logging
import time

from hoodie.errors import TableServiceError
from hoodie.file_group.view import list_partition_paths
from hoodie.models.clean import CleanerPlan, CleanMetadata
from hoodie.models.savepoint import SavepointMetadata, SavepointPartitionMetadata
from hoodie.services.base import ExecutionResult, Runner, Scheduled, ServiceContext, register_service
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import commit
from hoodie.transaction.lock import locked

log = logging.getLogger(__name__)

INSTANT_OPTION = "hts.savepoint.instant"
"""Option naming the commit to savepoint (Hudi's procedure argument ``commit_time``); default: the latest."""
USER_OPTION = "hts.savepoint.user"
COMMENTS_OPTION = "hts.savepoint.comments"


def savepoint_files(table: HoodieTable, instant_time: str, tl: ActiveTimeline) -> dict[str, list[str]]:
    """Per partition, the data files of the latest slices as of ``instant_time``, as Hudi lists them
    (``getLatestFileSlicesBeforeOrOn`` including pending-compaction slices): base file then log files."""
    view = table.file_system_view(timeline=tl)
    replaced = table.replaced_file_groups(tl)
    key = normalize(instant_time)
    out: dict[str, list[str]] = {}
    for partition in list_partition_paths(table.fileio, table.base_path):
        names: list[str] = []
        for group in view.file_groups(partition):
            at = replaced.get(group.group_id)
            if at is not None and normalize(at) <= key:
                continue
            latest = next((s for s in group.slices() if normalize(s.base_instant_time) <= key), None)
            if latest is None:
                continue
            if latest.base_file is not None:
                names.append(latest.base_file.name)
            names.extend(lf.name for lf in latest.log_files)
        out[partition] = names
    return out


def _earliest_retained(table: HoodieTable, tl: ActiveTimeline) -> str | None:
    """The earliest commit the latest clean kept (or the first completed commit when none ran)."""
    clean = tl.actions(Action.CLEAN).last()
    if clean is not None and clean.is_completed:
        data = tl.read_state(clean.requested_time, State.COMPLETED, Action.CLEAN)
        return CleanMetadata.from_bytes(data, table.table_version).earliest_commit_to_retain or None
    if clean is not None:
        data = tl.read_state(clean.requested_time, State.REQUESTED, Action.CLEAN)
        keep = CleanerPlan.from_bytes(data, table.table_version).earliest_instant_to_retain
        return keep.timestamp if keep else None
    first = tl.completed().writes().first()
    return first.requested_time if first else None


def plan_savepoint(
    table: HoodieTable, tl: ActiveTimeline, instant_time: str | None, user: str, comments: str
) -> tuple[str, SavepointMetadata]:
    """The instant to savepoint (default: the latest completed commit) and its metadata."""
    commits = tl.completed().writes()
    if instant_time is None:
        last = commits.last()
        if last is None:
            raise TableServiceError(f"{table.base_path} has no completed commit to savepoint")
        instant_time = last.requested_time
    instant = tl.get(instant_time)
    if instant is None or not instant.is_completed or not instant.action.is_write:
        raise TableServiceError(
            f"could not savepoint {instant_time} on {table.base_path}: not a completed commit"
        )
    retained = _earliest_retained(table, tl)
    if retained is not None and normalize(instant_time) < normalize(retained):
        raise TableServiceError(
            f"could not savepoint {instant_time} on {table.base_path}: it is before {retained}, the earliest "
            "commit the last clean retained"
        )
    files = savepoint_files(table, instant_time, tl)
    metadata = SavepointMetadata(
        savepointed_by=user,
        savepointed_at=time.time_ns() // 1_000_000,  # Hudi stores System.currentTimeMillis()
        comments=comments,
        partition_metadata={
            p: SavepointPartitionMetadata(partition_path=p, savepoint_data_file=names)
            for p, names in files.items()
        },
        version=1,
    )
    return instant_time, metadata


def create_savepoint(
    ctx: ServiceContext,
    instant_time: str | None = None,
    *,
    user: str = "",
    comments: str = "",
    dry_run: bool = False,
) -> Scheduled:
    """Savepoint ``instant_time`` (default: the latest completed commit): inflight, then completed."""
    table = ctx.table
    with ctx.transaction():  # no clean may plan while we list the files
        tl = table.reload()
        ts, metadata = plan_savepoint(table, tl, instant_time, user, comments)
        existing = tl.get(ts, Action.SAVEPOINT)
        if existing is not None:
            raise TableServiceError(f"{table.base_path} already has a savepoint at {ts} ({existing})")
        reason = f"savepoint of {ts}"
        if dry_run:
            return Scheduled(None, metadata, reason)
        inflight = tl.create_inflight(Instant(ts, Action.SAVEPOINT, State.INFLIGHT))
        payload = metadata.to_bytes(table.table_version)
        commit(table, inflight, payload, completion_time=ctx.completion_time)
    files = sum(len(p.savepoint_data_file) for p in metadata.partition_metadata.values())
    log.info("%s: savepoint %s created (%d files)", table.base_path, ts, files)
    return Scheduled(ts, metadata, reason)


def complete_savepoint(ctx: ServiceContext, instant_time: str) -> Instant:
    """Complete a savepoint left inflight by a crash (its files are listed afresh)."""
    table = ctx.table
    with ctx.transaction():
        tl = table.reload()
        current = tl.get(instant_time, Action.SAVEPOINT)
        if current is None or not current.is_inflight:
            raise TableServiceError(f"{table.base_path}: no inflight savepoint at {instant_time} ({current})")
        _, metadata = plan_savepoint(
            table, tl, instant_time, _user(ctx), ctx.options.get(COMMENTS_OPTION, "")
        )
        payload = metadata.to_bytes(table.table_version)
        return commit(table, current, payload, completion_time=ctx.completion_time, timeline=tl)


def delete_savepoint(ctx: ServiceContext, instant_time: str) -> bool:
    """Hudi's ``deleteSavepoint``: remove the completed, then the inflight file. False if there was none."""
    table = ctx.table
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        tl = table.reload()
        current = tl.get(instant_time, Action.SAVEPOINT)
        if current is None or not current.is_completed:
            log.warning("%s: no savepoint at %s to delete", table.base_path, instant_time)
            return False
        tl.delete_state(instant_time, State.COMPLETED, Action.SAVEPOINT)
        tl.delete_state(instant_time, State.INFLIGHT, Action.SAVEPOINT)
    log.info("%s: savepoint %s deleted", table.base_path, instant_time)
    return True


def savepoint_metadata(
    table: HoodieTable, instant_time: str, tl: ActiveTimeline | None = None
) -> SavepointMetadata:
    """The metadata of the completed savepoint at ``instant_time``."""
    timeline = tl or table.reload()
    name = timeline.state_file(instant_time, State.COMPLETED, Action.SAVEPOINT)
    if name is None:
        raise TableServiceError(f"{table.base_path} has no completed savepoint at {instant_time}")
    data = timeline.read_state(instant_time, State.COMPLETED, Action.SAVEPOINT)
    return SavepointMetadata.from_bytes(data, table.table_version, timeline.path_of(name))


def savepointed_files(table: HoodieTable, tl: ActiveTimeline | None = None) -> set[tuple[str, str]]:
    """``(partition, file name)`` of every file a completed savepoint keeps: clean must not delete them."""
    timeline = tl or table.reload()
    out: set[tuple[str, str]] = set()
    for sp in timeline.completed().actions(Action.SAVEPOINT):
        out |= savepoint_metadata(table, sp.requested_time, timeline).savepointed_files()
    return out


def _user(ctx: ServiceContext) -> str:
    return ctx.options.get(USER_OPTION, "")  # Hudi's create_savepoint procedure defaults to ""


class SavepointService:
    """Savepoints as a :class:`~hoodie.services.base.TableService`.

    ``schedule`` creates the savepoint of ``hts.savepoint.instant`` (default: the latest commit) at
    once, since a savepoint has nothing to execute; ``pending``/``execute`` complete one a crash
    left inflight.
    """

    name = "savepoint"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return create_savepoint(
            ctx,
            ctx.options.get(INSTANT_OPTION) or None,
            user=_user(ctx),
            comments=ctx.options.get(COMMENTS_OPTION, ""),
            dry_run=dry_run,
        )

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return list(timeline.pending().actions(Action.SAVEPOINT))

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return ExecutionResult(complete_savepoint(ctx, instant_time))


register_service(SavepointService())
