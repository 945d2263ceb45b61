"""Rollback: undo a failed, abandoned or (for restore) completed instant, as Apache Hudi does.

A rollback is an instant of its own. Scheduling writes ``R.rollback.requested`` holding a
``HoodieRollbackPlan``: the instant to roll back and one request per file (group) saying which
files to delete and, in table version 6, which log files got blocks of the failed instant (how the
plan is worked out, and which instants are candidates, is :mod:`hoodie.services.recovery`).
Executing writes ``R.rollback.inflight``, deletes the files, and in table version 6 writes a ROLLBACK
command block into a new log file of each slice the instant appended to; then, under the table lock,
it removes the rolled-back instant's state files and completes ``R[_C].rollback`` with a
``HoodieRollbackMetadata``. An inflight compaction or clustering keeps its plan: only its inflight
file goes, so it returns to REQUESTED and runs again. A completed instant is unpublished (its
completed file removed) before any of its files are deleted. Each request is one task, so the work
runs in process or on Spark.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from hoodie.errors import InstantBusyError, TableServiceError
from hoodie.file_group.log_block import rollback_block
from hoodie.file_group.log_file import LogFile
from hoodie.io.fileio import join
from hoodie.metadata.context import metadata_service_context
from hoodie.metadata.undo import check_metadata_rollback, refuse_compacted
from hoodie.models.rollback import (
    InstantInfo,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackRequest,
)
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    Scheduled,
    ServiceContext,
    Task,
    TaskResult,
    crash_point,
    open_table_for_task,
    register_service,
)
from hoodie.services.recovery import (
    build_rollback_plan,
    group_by_file_group,
    is_table_service,
    pending_rollbacks,
    read_plan,
    rollback_candidates,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import StillInflight, commit
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig, heartbeat_path, is_heartbeat_expired
from hoodie.transaction.lock import locked
from hoodie.write.markers import IOType, WriteMarkers

log = logging.getLogger(__name__)


# -- scheduling -------------------------------------------------------------------------------


def check_completed_rollback(tl: ActiveTimeline, instant: Instant) -> None:
    """Hudi's rules for rolling back a completed instant: not savepointed, and nothing after it."""
    ts = instant.requested_time
    savepoint = tl.get(ts, Action.SAVEPOINT)
    if savepoint is not None and savepoint.is_completed:
        raise TableServiceError(f"{instant} is savepointed; delete savepoint {ts} before rolling it back")
    later = [str(i) for i in tl.writes().after(ts)]
    if later:
        raise TableServiceError(
            f"cannot roll back {instant}: instants after it must be rolled back first: {later}"
        )


def check_abandoned(ctx: ServiceContext, instant: Instant) -> None:
    """Refuse to roll back a pending instant that another process still beats for."""
    table = ctx.table
    if instant.requested_time in ctx.owned_instants:
        return  # our own claimed attempt (hoodie.services.claim): the live heartbeat is ours
    if not is_heartbeat_expired(table.fileio, table.paths, instant.requested_time, ctx.heartbeat):
        raise InstantBusyError(
            f"{instant} on {table.base_path} is being executed by another process "
            "(its heartbeat is alive); not rolling it back"
        )


def schedule_rollback(
    ctx: ServiceContext,
    instant_time: str,
    *,
    action: Action | None = None,
    is_restore: bool = False,
    pending_only: bool = False,
    dry_run: bool = False,
    reason: str = "requested",
    verify: bool = True,
    rollback_time: str | None = None,
) -> Scheduled:
    """Plan the rollback of ``instant_time`` and, unless ``dry_run``, write ``R.rollback.requested``
    (at ``rollback_time``, default a new instant time).

    Outside a restore, a pending instant must be abandoned (its heartbeat expired), and a completed
    one must be the latest, not savepointed, and not yet compacted into the metadata table;
    ``pending_only`` refuses an instant that completed since it was found failed. Everything is
    checked again under the table lock. ``verify`` off skips those checks: the metadata table rolls
    back the deltacommit of a data instant being rolled back, whatever came after it.
    """
    table = ctx.table
    ctx.check_shape("rollback")
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        tl = table.reload()
        instant = tl.get(instant_time, action)
        if instant is None or not instant.action.is_write:
            raise TableServiceError(f"{table.base_path}: no write or table-service instant at {instant_time}")
        if instant.is_completed and pending_only:
            raise TableServiceError(
                f"{instant} on {table.base_path} completed meanwhile; not rolling it back"
            )
        if instant.is_completed and verify and not is_restore:
            check_completed_rollback(tl, instant)
            check_metadata_rollback(table, instant)
        if not instant.is_completed and verify and not is_restore:
            check_abandoned(ctx, instant)
        existing = pending_rollbacks(table, tl).get(instant.requested_time)
        if existing is not None and not is_restore:
            rb, plan = existing
            return Scheduled(rb.requested_time, plan, f"resuming rollback {rb.requested_time}")
        plan = build_rollback_plan(table, instant, tl, is_restore=is_restore)
        if dry_run:
            return Scheduled(None, plan, reason)
        rollback_time = rollback_time or ctx.new_instant_time(lock_held=True)
        tl.create_requested(
            Instant(rollback_time, Action.ROLLBACK, State.REQUESTED), plan.to_bytes(table.table_version)
        )
    log.info("%s: scheduled rollback %s of %s (%s)", table.base_path, rollback_time, instant, reason)
    return Scheduled(rollback_time, plan, reason)


# -- execution --------------------------------------------------------------------------------


def rollback_file_group(task: Task) -> TaskResult:
    """Executor side: carry out one rollback request (delete files, or append a v6 rollback block)."""
    table = open_table_for_task(task)
    fileio = table.fileio
    req = RollbackRequest.from_avro(task["request"])
    partition = req.partition_path
    out: TaskResult = {
        "partition": partition,
        "deleted": [],
        "failed": [],
        "rollback_logs": {},
        "failed_logs": {},
    }
    if req.files_to_be_deleted:
        for p in req.files_to_be_deleted:
            path = fileio.strip_uri(p)
            if not fileio.delete(path) and fileio.exists(path):
                raise TableServiceError(f"rollback {task['rollback_time']}: could not delete {path}")
            out["deleted"].append(p)  # a file already gone counts as deleted, as in Hudi
        return out
    if not req.log_blocks_to_be_deleted:
        return out
    if table.table_version >= 8:
        raise TableServiceError(
            f"rollback {task['rollback_time']}: table version {table.table_version} rollback requests never "
            f"carry logBlocksToBeDeleted (partition {partition!r}, file id {req.file_id})"
        )
    folder = join(table.base_path, partition)
    file_id, base = req.file_id or "", req.latest_base_instant or ""
    versions = [
        x.version
        for e in fileio.list_dir(folder)
        if (x := LogFile.parse(e.name)) is not None
        and (x.file_id, x.instant_time, x.extension) == (file_id, base, "log")
    ]
    new = LogFile(file_id, base, max(versions, default=0) + 1, str(task["write_token"]))
    WriteMarkers(fileio, table.paths, task["rollback_time"]).create(partition, new.name, IOType.APPEND)
    path = join(folder, new.name)
    fileio.create_new(path, rollback_block(task["rollback_time"], task["target_time"]))
    crash_point("rollback.task_after_write")
    size = fileio.info(path)
    out["rollback_logs"] = {fileio.to_uri(path): size.size if size else 0}
    out["failed_logs"] = {
        k: v for k, v in req.log_blocks_to_be_deleted.items() if fileio.strip_uri(k).rstrip("/") != folder
    }
    return out


@dataclass
class _Partition:
    deleted: list[str]
    failed: list[str]
    rollback_logs: dict[str, int]
    failed_logs: dict[str, int]


def rollback_metadata(
    rollback_time: str, target: InstantInfo, results: list[TaskResult], elapsed_ms: int
) -> RollbackMetadata:
    """``HoodieRollbackMetadata`` of the task results, merged per partition."""
    parts: dict[str, _Partition] = {}
    for r in results:
        p = parts.setdefault(r["partition"], _Partition([], [], {}, {}))
        p.deleted += r["deleted"]
        p.failed += r["failed"]
        p.rollback_logs.update(r["rollback_logs"])
        p.failed_logs.update(r["failed_logs"])
    return RollbackMetadata(
        start_rollback_time=rollback_time,
        time_taken_in_millis=elapsed_ms,
        total_files_deleted=sum(len(p.deleted) for p in parts.values()),
        commits_rollback=[target.commit_time],
        partition_metadata={
            k: RollbackPartitionMetadata(
                partition_path=k,
                success_delete_files=p.deleted,
                failed_delete_files=p.failed,
                rollback_log_files=p.rollback_logs,
                log_files_from_failed_commit=p.failed_logs,
            )
            for k, p in parts.items()
        },
        version=1,
        instants_rollback=[target],
    )


def _earlier_rollback_logs(table: HoodieTable, rollback_time: str) -> dict[str, dict[str, int]]:
    """v6: rollback log files an earlier attempt of this rollback wrote (its APPEND markers)."""
    out: dict[str, dict[str, int]] = {}
    for partition, name, io_type in WriteMarkers(table.fileio, table.paths, rollback_time).files():
        path = join(table.base_path, partition, name)
        info = table.fileio.info(path)
        if io_type is IOType.APPEND and info is not None:
            out.setdefault(partition, {})[table.fileio.to_uri(path)] = info.size
    return out


def execute_rollback(
    ctx: ServiceContext,
    rollback_time: str,
    runner: Runner,
    *,
    publish: bool = True,
    delete_instants: bool | None = None,
) -> tuple[Instant | None, RollbackMetadata]:
    """Run a requested (or interrupted inflight) rollback; returns the completed rollback instant
    (None when ``publish`` is off, as inside a restore) and its metadata.

    ``delete_instants`` None removes the rolled-back instant's state files, except that a pending
    table service only loses its inflight file (it goes back to REQUESTED).
    """
    table = ctx.table
    tl = table.reload()
    rb = tl.get(rollback_time, Action.ROLLBACK)
    if rb is None or rb.is_completed:
        raise TableServiceError(f"{table.base_path}: no pending rollback at {rollback_time} (found {rb})")
    plan = read_plan(table, tl, rollback_time)
    info = plan.instant_to_rollback
    if info is None:
        raise TableServiceError(f"rollback plan {rollback_time} on {table.base_path} names no instant")
    target_action = Action(info.action)
    target = tl.get(info.commit_time, target_action)
    # A table service keeps its plan, unless it had completed when the rollback was planned (its
    # completed file then named it commit/deltacommit/replacecommit, and a restore deletes it).
    revert = delete_instants is False or (
        delete_instants is None
        and target is not None
        and target.action is target_action
        and is_table_service(table, target, tl)
    )
    if publish and not is_heartbeat_expired(table.fileio, table.paths, rollback_time, ctx.heartbeat):
        raise InstantBusyError(
            f"rollback {rollback_time} on {table.base_path} is being executed by another process "
            "(its heartbeat is alive)"
        )
    earlier = _earlier_rollback_logs(table, rollback_time) if table.table_version < 8 else {}
    started = time.monotonic()
    inflight = tl.transition_to_inflight(rb) if rb.is_requested else rb
    beat = Heartbeat(table.fileio, table.paths, rollback_time, ctx.heartbeat).start() if publish else None
    try:
        if target is not None and target.is_completed:
            with locked(ctx.table_lock, ctx.lock_timeout_s):  # unpublish before deleting its files
                if publish:
                    check_metadata_rollback(table, target)
                table.reload().delete_state(info.commit_time, State.COMPLETED, target_action)
        crash_point("rollback.after_inflight")
        requests = plan.rollback_requests or []
        if table.table_version < 8:
            requests = group_by_file_group(requests)
        shared = {**ctx.task_base(), "rollback_time": rollback_time, "target_time": info.commit_time}
        tasks = [
            {**shared, "request": r.to_avro(), "write_token": f"{i}-0-{i}"} for i, r in enumerate(requests)
        ]
        results = runner.run(rollback_file_group, tasks, f"rollback {rollback_time} of {table.name}")
        for partition, logs in earlier.items():
            for r in results:
                if r["partition"] == partition:
                    r["rollback_logs"] = {**logs, **r["rollback_logs"]}
                    break
        metadata = rollback_metadata(rollback_time, info, results, int((time.monotonic() - started) * 1000))
        crash_point("rollback.before_complete")
        done = _finish(ctx, inflight, info, metadata, revert=revert, publish=publish)
    finally:
        if beat is not None:
            beat.stop()
    fileio = table.fileio
    WriteMarkers(fileio, table.paths, info.commit_time).delete_all()
    WriteMarkers(fileio, table.paths, rollback_time).delete_all()
    if not revert:
        fileio.delete(heartbeat_path(table.paths, info.commit_time))  # the failed writer's stale beat
    log.info(
        "%s: rolled back %s %s (%d files deleted)",
        table.base_path,
        info.action,
        info.commit_time,
        metadata.total_files_deleted,
    )
    if done is not None:
        ctx.maintain_metadata()
    return done, metadata


def _finish(
    ctx: ServiceContext,
    inflight: Instant,
    info: InstantInfo,
    metadata: RollbackMetadata,
    *,
    revert: bool,
    publish: bool,
) -> Instant | None:
    """Under the lock: drop the rolled-back instant's state files, then complete the rollback."""
    table = ctx.table
    still_inflight = StillInflight("rollback {time} is no longer inflight on {base} (now {now})")

    def drop_target(fresh: ActiveTimeline, current: Instant) -> None:
        action = Action(info.action)
        target = fresh.get(info.commit_time, action)
        if publish and table.has_metadata_table:  # a restore restores the metadata table itself
            rollback_metadata_commit(ctx, info.commit_time, current.requested_time)
        if target is not None and revert:
            fresh.delete_state(info.commit_time, State.INFLIGHT, action)
        elif target is not None:
            for state in (State.COMPLETED, State.INFLIGHT, State.REQUESTED):
                fresh.delete_state(info.commit_time, state, action)

    with ctx.transaction():
        fresh = table.reload()
        if not publish:  # a restore's rollback: the restore completes instead
            still_inflight.check(table, fresh, inflight)
            drop_target(fresh, inflight)
            return None
        # The upkeep runs in execute_rollback, once the markers and the heartbeat are gone.
        return commit(
            table,
            inflight,
            metadata.to_bytes(table.table_version),
            completion_time=ctx.completion_time,
            timeline=fresh,
            requirements=[still_inflight, *ctx.shape_requirements()],
            sync=drop_target,
        )


def rollback(
    ctx: ServiceContext, instant_time: str, runner: Runner, *, action: Action | None = None
) -> ExecutionResult:
    """Roll back the instant at ``instant_time`` (pending, or the latest completed), or resume the
    pending rollback at ``instant_time``. A pending write or table service must be abandoned."""
    table = ctx.table
    tl = table.reload()
    pending_rb = tl.get(instant_time, Action.ROLLBACK)
    if pending_rb is not None and not pending_rb.is_completed and action in (None, Action.ROLLBACK):
        rollback_time = instant_time
    else:
        target = tl.get(instant_time, action)
        if target is None or not target.action.is_write:
            raise TableServiceError(f"{table.base_path}: nothing to roll back at {instant_time}")
        pending = not target.is_completed
        scheduled = schedule_rollback(ctx, instant_time, action=target.action, pending_only=pending)
        assert scheduled.instant_time is not None
        rollback_time = scheduled.instant_time
    done, metadata = execute_rollback(ctx, rollback_time, runner)
    assert done is not None
    return ExecutionResult(
        done,
        details={
            "rolled_back": metadata.commits_rollback,
            "files_deleted": metadata.total_files_deleted,
            "rollback_log_files": sum(
                len(p.rollback_log_files or {}) for p in metadata.partition_metadata.values()
            ),
        },
    )


class RollbackService:
    """Rollback as a :class:`~hoodie.services.base.TableService`.

    ``pending`` lists rollback candidates newest first (Hudi rolls back in reverse order); pass the
    heartbeat configuration of the writers (``hoodie.client.heartbeat.*``) when it is not the default.
    """

    name = "rollback"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        tl = ctx.table.reload()
        for instant in rollback_candidates(ctx.table, tl, ctx.heartbeat):
            if instant.action is not Action.ROLLBACK:
                why = f"{instant} abandoned: its heartbeat expired"
                return schedule_rollback(
                    ctx,
                    instant.requested_time,
                    action=instant.action,
                    pending_only=True,
                    dry_run=dry_run,
                    reason=why,
                )
        return None

    def pending(
        self, table: HoodieTable, timeline: ActiveTimeline, heartbeat: HeartbeatConfig | None = None
    ) -> list[Instant]:
        return rollback_candidates(table, timeline, heartbeat or HeartbeatConfig())

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return rollback(ctx, instant_time, runner)


register_service(RollbackService())


def rollback_metadata_commit(ctx: ServiceContext, target_time: str, rollback_time: str) -> Instant | None:
    """Roll back the MDT deltacommit at ``target_time`` with an MDT rollback at ``rollback_time``
    (call with the table lock held, before the data rollback completes); None if it has none."""
    table = ctx.table
    mctx = metadata_service_context(table, ctx)
    mdt = mctx.table
    tl = mdt.reload()
    planned = pending_rollbacks(mdt, tl).get(target_time)
    target = tl.get(target_time, Action.DELTA_COMMIT)
    if planned is None and target is None:
        log.info(
            "%s: %s never reached the metadata table; nothing to roll back there",
            table.base_path,
            target_time,
        )
        return None
    if planned is not None:
        mdt_rollback = planned[0].requested_time
    else:
        assert target is not None
        if target.is_completed:
            refuse_compacted(table, tl, target)
        scheduled = schedule_rollback(
            mctx, target_time, action=Action.DELTA_COMMIT, verify=False, rollback_time=rollback_time
        )
        assert scheduled.instant_time is not None
        mdt_rollback = scheduled.instant_time
    done, _ = execute_rollback(mctx, mdt_rollback, LocalRunner())
    log.info("%s: rolled back metadata-table deltacommit %s (%s)", table.base_path, target_time, done)
    return done


# -- recovering a table service ---------------------------------------------------------------


def recover_inflight(ctx: ServiceContext, instant: Instant) -> list[str]:
    """Roll back an abandoned inflight compaction, log compaction or clustering attempt.

    Records a rollback instant (or resumes one an earlier recovery left pending) that deletes what
    the attempt wrote and removes its inflight file; the REQUESTED plan stays. Refuses while another
    process beats for the instant (unless ``ctx`` claimed it). Returns the files deleted.
    """
    table = ctx.table
    ts = instant.requested_time
    if ts not in ctx.owned_instants and not is_heartbeat_expired(
        table.fileio, table.paths, ts, ctx.heartbeat
    ):
        raise InstantBusyError(
            f"{instant} on {table.base_path} is being executed by another process (its heartbeat is alive); "
            "not rolling it back"
        )
    current = table.reload().get(ts, instant.action)
    if current is None or not current.is_inflight:
        return []
    scheduled = schedule_rollback(ctx, ts, action=current.action, reason=f"re-running {current}")
    assert scheduled.instant_time is not None
    _, metadata = execute_rollback(ctx, scheduled.instant_time, LocalRunner(), delete_instants=False)
    removed = [f for p in metadata.partition_metadata.values() for f in p.success_delete_files]
    log.warning(
        "%s: rolled back abandoned attempt of %s with rollback %s (%d file(s) removed)",
        table.base_path,
        instant,
        scheduled.instant_time,
        len(removed),
    )
    return removed
