"""Restore: bring the table back to a savepoint by rolling back everything after it, as Hudi does.

Scheduling writes ``T.restore.requested`` holding a ``HoodieRestorePlan`` (version 2): the instants
to roll back, newest first, and the savepoint. Pending clusterings after the savepoint come first;
then every write-timeline instant after it (completed or pending): after its requested time in table
version 6, after its completion time in 8+ (a MERGE_ON_READ compaction compares by requested time,
since the log files written meanwhile are sliced onto it). Executing goes ``T.restore.inflight``,
rolls each instant back with a listing-based rollback whose instant is never completed (its metadata
goes into the restore instead), completes ``T[_C].restore`` with a ``HoodieRestoreMetadata``, and then
removes every rollback instant after the savepoint from the timeline.

As in Hudi, a restore refuses to roll back a savepointed commit (delete that savepoint first). It
also refuses while a write it would roll back still has a live heartbeat. A table with a metadata
table has it restored too, before the restore completes (:mod:`hoodie.metadata.undo`): the
metadata table's own restore uses this module with ``to_instant`` (no savepoint there).
"""

from __future__ import annotations

import logging
import time

from hoodie.errors import InstantBusyError, TableServiceError
from hoodie.metadata.context import metadata_service_context
from hoodie.metadata.init import files_on_storage
from hoodie.metadata.partitions import has_metadata_table
from hoodie.metadata.sync import restore_updates
from hoodie.metadata.table import MetadataTable
from hoodie.metadata.undo import check_metadata_restorable
from hoodie.metadata.writer import MetadataWriter
from hoodie.models.restore import RestoreMetadata, RestorePlan
from hoodie.models.rollback import InstantInfo, RollbackMetadata
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    Scheduled,
    ServiceContext,
    crash_point,
    register_service,
)
from hoodie.services.rollback import execute_rollback, schedule_rollback
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import StillInflight, commit
from hoodie.transaction.heartbeat import Heartbeat, is_heartbeat_expired
from hoodie.transaction.lock import locked

log = logging.getLogger(__name__)

RESTORE_PLAN_VERSION = 2
RESTORE_METADATA_VERSION = 1
SAVEPOINT_OPTION = "hts.restore.savepoint"
"""Option naming the savepoint to restore to (Hudi's ``savepoint_time``); default: the latest savepoint."""


def _after(instant: Instant, savepoint: Instant, mor: bool, layout: int) -> bool:
    """Whether ``instant`` comes after the savepointed commit, by Hudi's restore ordering."""
    by_requested = layout < 2 or (mor and instant.action in (Action.COMPACTION, Action.COMMIT))
    if by_requested:
        return normalize(instant.requested_time) > normalize(savepoint.requested_time)
    if instant.completion_time is None:
        return True  # pending instants order after every completed one
    saved = savepoint.completion_time or savepoint.requested_time
    return normalize(instant.completion_time) > normalize(saved)


def instants_to_restore(table: HoodieTable, tl: ActiveTimeline, savepoint_time: str) -> list[Instant]:
    """The instants a restore to ``savepoint_time`` rolls back, in the order it rolls them back."""
    saved = tl.get(savepoint_time)
    if saved is None or not saved.is_completed or not saved.action.is_write:
        raise TableServiceError(f"{table.base_path}: savepoint {savepoint_time} names no completed commit")
    clustering = [
        i
        for i in reversed(tl.pending().writes().instants)
        if normalize(i.requested_time) > normalize(savepoint_time) and table.is_clustering(i, tl)
    ]
    by_completion = sorted(
        tl.writes(),
        key=lambda i: (
            i.completion_time is None,
            normalize(i.completion_time or i.requested_time),
            i.sort_key,
        ),
        reverse=True,
    )
    ordered = list(reversed(tl.writes().instants)) if tl.layout < 2 else by_completion
    mor = table.config.is_mor
    rest = [i for i in ordered if i not in clustering and _after(i, saved, mor, tl.layout)]
    return clustering + rest


def schedule_restore(
    ctx: ServiceContext,
    savepoint_time: str | None = None,
    *,
    dry_run: bool = False,
    to_instant: bool = False,
) -> Scheduled:
    """Plan a restore to ``savepoint_time`` (default: the latest savepoint); write ``T.restore.requested``.

    ``to_instant`` restores to a completed commit that has no savepoint, as Hudi restores a
    metadata table to its data table's savepoint.
    """
    table = ctx.table
    if savepoint_time is not None and not to_instant:
        check_metadata_restorable(table, savepoint_time)
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        tl = table.reload()
        pending = tl.pending().actions(Action.RESTORE)
        if pending:
            raise TableServiceError(
                f"{table.base_path}: restore {pending.instants[0]} is still pending; run it first"
            )
        savepoints = tl.completed().actions(Action.SAVEPOINT)
        if savepoint_time is None:
            last = savepoints.last()
            if last is None:
                raise TableServiceError(f"{table.base_path} has no savepoint to restore to")
            savepoint_time = last.requested_time
            check_metadata_restorable(table, savepoint_time)
        elif savepoint_time not in savepoints and not to_instant:
            raise TableServiceError(f"{table.base_path} has no completed savepoint at {savepoint_time}")
        instants = instants_to_restore(table, tl, savepoint_time)
        times = {i.requested_time for i in instants}
        saved = [s.requested_time for s in savepoints if s.requested_time in times]
        if saved:
            raise TableServiceError(
                f"cannot restore {table.base_path} to {savepoint_time}: commits {saved} it would roll "
                "back are savepointed; delete those savepoints first"
            )
        live = [
            str(i)
            for i in instants
            if not i.is_completed
            and not is_heartbeat_expired(table.fileio, table.paths, i.requested_time, ctx.heartbeat)
        ]
        if live:
            raise InstantBusyError(
                f"cannot restore {table.base_path} to {savepoint_time}: {live} still being written "
                "(their heartbeat is alive)"
            )
        plan = RestorePlan(
            instants_to_rollback=[
                InstantInfo(commit_time=i.requested_time, action=i.action.value) for i in instants
            ],
            version=RESTORE_PLAN_VERSION,
            savepoint_to_restore_timestamp=savepoint_time,
        )
        reason = f"restore to savepoint {savepoint_time} ({len(instants)} instant(s) to roll back)"
        if dry_run:
            return Scheduled(None, plan, reason)
        restore_time = ctx.new_instant_time(lock_held=True)
        tl.create_requested(
            Instant(restore_time, Action.RESTORE, State.REQUESTED), plan.to_bytes(table.table_version)
        )
    log.info("%s: scheduled restore %s: %s", table.base_path, restore_time, reason)
    return Scheduled(restore_time, plan, reason)


def execute_restore(ctx: ServiceContext, restore_time: str, runner: Runner) -> ExecutionResult:
    """Run a requested (or interrupted) restore: roll back its instants, then complete it."""
    table = ctx.table
    tl = table.reload()
    current = tl.get(restore_time, Action.RESTORE)
    if current is None or current.is_completed:
        raise TableServiceError(f"{table.base_path}: no pending restore at {restore_time} (found {current})")
    if not is_heartbeat_expired(table.fileio, table.paths, restore_time, ctx.heartbeat):
        raise InstantBusyError(
            f"restore {restore_time} on {table.base_path} is being executed by another process "
            "(its heartbeat is alive)"
        )
    name = tl.state_file(restore_time, State.REQUESTED, Action.RESTORE) or restore_time
    plan = RestorePlan.from_bytes(
        tl.read_state(restore_time, State.REQUESTED, Action.RESTORE), table.table_version, tl.path_of(name)
    )
    savepoint = plan.savepoint_to_restore_timestamp
    if savepoint is None:
        raise TableServiceError(f"restore plan {tl.path_of(name)} names no savepoint")
    if current.is_requested:
        check_metadata_restorable(table, savepoint)
    started = time.monotonic()
    inflight = tl.transition_to_inflight(current) if current.is_requested else current
    beat = Heartbeat(table.fileio, table.paths, restore_time, ctx.heartbeat).start()
    try:
        crash_point("restore.after_inflight")
        rolled: list[Instant] = []
        results: dict[str, list[RollbackMetadata | None]] = {}
        for info in plan.instants_to_rollback:
            target = table.reload().get(info.commit_time, Action(info.action))
            if target is None or target.action.value != info.action:
                log.warning(
                    "%s: %s %s was already rolled back", table.base_path, info.action, info.commit_time
                )
                continue
            scheduled = schedule_rollback(ctx, info.commit_time, action=target.action, is_restore=True)
            assert scheduled.instant_time is not None
            _, metadata = execute_rollback(
                ctx, scheduled.instant_time, runner, publish=False, delete_instants=True
            )
            results[info.commit_time] = [metadata]
            rolled.append(target)
        metadata_out = RestoreMetadata(
            start_restore_time=restore_time,
            time_taken_in_millis=int((time.monotonic() - started) * 1000),
            instants_to_rollback=[i.requested_time for i in rolled],
            hoodie_restore_metadata=results,
            version=RESTORE_METADATA_VERSION,
            restore_instant_info=[
                InstantInfo(commit_time=i.requested_time, action=i.action.value) for i in rolled
            ],
            extra_metadata=None,
        )
        crash_point("restore.before_complete")
        done = _finish(ctx, inflight, savepoint, metadata_out)
    finally:
        beat.stop()
    log.info(
        "%s: restored to savepoint %s (%d instants rolled back)", table.base_path, savepoint, len(rolled)
    )
    return ExecutionResult(
        done, details={"savepoint": savepoint, "rolled_back": [i.requested_time for i in rolled]}
    )


def _finish(ctx: ServiceContext, inflight: Instant, savepoint: str, metadata: RestoreMetadata) -> Instant:
    """Under the lock: restore the metadata table, complete the restore, then drop every rollback
    instant after the savepoint."""
    table = ctx.table
    with ctx.transaction():
        fresh = table.reload()
        done = commit(
            table,
            inflight,
            metadata.to_bytes(table.table_version),
            completion_time=ctx.completion_time,
            timeline=fresh,
            requirements=[
                StillInflight("restore {time} is no longer inflight on {base} (now {now})"),
                *ctx.shape_requirements(),
            ],
            sync=lambda _fresh, _current: restore_metadata_table(ctx, savepoint),
        )
        for rb in fresh.actions(Action.ROLLBACK).after(savepoint):
            for state in (State.COMPLETED, State.INFLIGHT, State.REQUESTED):
                fresh.delete_state(rb.requested_time, state, Action.ROLLBACK)
    return done


def restore_to_savepoint(ctx: ServiceContext, savepoint_time: str | None, runner: Runner) -> ExecutionResult:
    """Schedule and run a restore to ``savepoint_time`` (default: the latest savepoint)."""
    scheduled = schedule_restore(ctx, savepoint_time)
    assert scheduled.instant_time is not None
    return execute_restore(ctx, scheduled.instant_time, runner)


class RestoreService:
    """Restore as a :class:`~hoodie.services.base.TableService` (``hts.restore.savepoint`` picks one)."""

    name = "restore"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_restore(ctx, ctx.options.get(SAVEPOINT_OPTION) or None, dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return list(timeline.pending().actions(Action.RESTORE))

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_restore(ctx, instant_time, runner)


register_service(RestoreService())


def restore_metadata_table(ctx: ServiceContext, savepoint_time: str) -> Instant | None:
    """Restore the MDT to ``savepoint_time`` and sync it with storage (call with the table lock
    held, after the data rollbacks and before the data restore completes)."""
    table = ctx.table
    if not has_metadata_table(table):
        return None
    mctx = metadata_service_context(table, ctx)
    pending = mctx.table.reload().pending().actions(Action.RESTORE)
    if pending:
        restore_time = pending.instants[0].requested_time
    else:
        scheduled = schedule_restore(mctx, savepoint_time, to_instant=True)
        assert scheduled.instant_time is not None
        restore_time = scheduled.instant_time
    execute_restore(mctx, restore_time, LocalRunner())
    data_timeline = table.reload()
    mdt = MetadataTable.open(table, data_timeline)
    listed = mdt.list_files()
    stored = files_on_storage(table, data_timeline)
    added = {
        p: {n: size for n, size in files.items() if listed.get(p, {}).get(n) != size}
        for p, files in stored.items()
    }
    deleted = {p: [n for n in files if n not in stored.get(p, {})] for p, files in listed.items()}
    gone = [p for p in listed if p not in stored]
    sync_time = ctx.new_instant_time(lock_held=True)
    updates = restore_updates(
        table,
        data_timeline,
        sync_time,
        added={p: f for p, f in added.items() if f},
        deleted={p: n for p, n in deleted.items() if n},
        partitions_deleted=gone,
    )
    done = MetadataWriter(table).commit(
        sync_time, updates, lambda: ctx.new_instant_time(lock_held=True), operation="UPSERT_PREPPED"
    )
    log.info(
        "%s: metadata table restored to %s and synced with storage at %s (%d files added, %d removed)",
        table.base_path,
        savepoint_time,
        done,
        sum(len(f) for f in added.values()),
        sum(len(n) for n in deleted.values()),
    )
    return done
