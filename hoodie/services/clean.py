"""Clean: delete file slices outside retention, as Apache Hudi's cleaner does.

Scheduling plans with :mod:`hoodie.services.clean_planner` under the table lock and writes
``T.clean.requested`` (an Avro ``HoodieCleanerPlan``); nothing is written when no file is due.
Executing moves the instant to inflight (table version 6 copies the plan into
``T.clean.inflight``, as Hudi 0.14/0.15 do; versions 8 and 9 leave it empty, as Hudi 1.x does),
deletes the files one task per partition through the runner, removes the partitions the plan
names, and completes ``T.clean`` with ``HoodieCleanMetadata`` (version 2: file names per
partition). A file already gone is recorded as a failed delete, as Hudi records it, and does not
stop the clean, so an interrupted clean simply runs its plan again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from hoodie.errors import TableServiceError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.log_file import LogFile
from hoodie.io.fileio import join
from hoodie.models.clean import CleanerPlan, CleanMetadata, CleanPartitionMetadata
from hoodie.services.base import (
    ExecutionResult,
    Runner,
    Scheduled,
    ServiceContext,
    Task,
    TaskResult,
    crash_point,
    open_table_for_task,
    register_service,
)
from hoodie.services.claim import claim_instant, require_pending
from hoodie.services.clean_planner import (
    CleanPlanning,
    TableListing,
    last_clean_metadata,
    list_partitions,
    plan_clean,
)
from hoodie.services.clean_policy import CleanPolicy, CleanTrigger
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.lock import locked

__all__ = [
    "CleanPlanning",
    "CleanPolicy",
    "CleanService",
    "CleanTrigger",
    "TableListing",
    "clean_plan",
    "delete_clean_files",
    "execute_clean",
    "list_partitions",
    "plan_clean",
    "schedule_clean",
    "trigger_reason",
]

log = logging.getLogger(__name__)

INFLIGHT_PLAN_TABLE_VERSION = 6
"""Up to this table version the inflight file holds a copy of the plan (Hudi 0.x)."""


# -- scheduling -------------------------------------------------------------------------------


def trigger_reason(table: HoodieTable, timeline: ActiveTimeline, policy: CleanPolicy) -> str | None:
    """Why a clean may be planned now under ``policy.trigger``, or None if it may not.

    NUM_COMMITS counts completed commits requested after the last clean's last completed commit
    (all completed commits when no clean completed yet) against ``hoodie.clean.max.commits``.
    """
    if policy.trigger is None:
        return "requested"
    commits = timeline.writes().completed()
    last = last_clean_metadata(table, timeline)
    if last is not None:
        mark = normalize(last.last_completed_commit_timestamp)
        commits = commits.filter(lambda i: normalize(i.requested_time) > mark)
    if len(commits) < policy.max_commits:
        return None
    count = len(commits)
    return f"{policy.trigger.value}: {count} commit(s) since the last clean (threshold {policy.max_commits})"


def _file_count(plan: CleanerPlan) -> int:
    return sum(len(v) for v in (plan.file_paths_to_be_deleted_per_partition or {}).values())


def schedule_clean(
    ctx: ServiceContext,
    policy: CleanPolicy,
    *,
    dry_run: bool = False,
    listing: Mapping[str, Sequence[str]] | None = None,
) -> Scheduled | None:
    """Plan and, unless ``dry_run``, write ``T.clean.requested``; None when nothing is due.

    No new clean is planned while another is pending (Hudi's ``hoodie.clean.allow.multiple``
    defaults to false): run the pending one first.
    """
    table = ctx.table
    ctx.check_shape("clean")
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        timeline = table.reload()
        pending = timeline.pending().actions(Action.CLEAN)
        if pending:
            log.info("%s: clean %s is pending; not planning another", table.base_path, pending.first())
            return None
        reason = trigger_reason(table, timeline, policy)
        if reason is None:
            return None
        planning = plan_clean(table, policy, timeline=timeline, listing=listing)
        plan = planning.plan
        if plan is None:
            return None
        scheduled = ctx.request(timeline, Action.CLEAN, plan, reason, dry_run=dry_run)
    if not dry_run:
        log.info(
            "%s: scheduled clean %s of %d file(s) in %d partition(s), retaining from %s (%s)",
            table.base_path,
            scheduled.instant_time,
            _file_count(plan),
            len(plan.file_paths_to_be_deleted_per_partition or {}),
            planning.earliest.requested_time if planning.earliest else "-",
            reason,
        )
    return scheduled


# -- execution --------------------------------------------------------------------------------


def clean_plan(table: HoodieTable, instant_time: str, timeline: ActiveTimeline | None = None) -> CleanerPlan:
    """The plan in ``T.clean.requested``."""
    tl = timeline or table.timeline
    data = tl.read_state(instant_time, State.REQUESTED, Action.CLEAN)
    if not data:
        raise TableServiceError(f"{table.base_path}: clean {instant_time} has an empty requested file")
    return CleanerPlan.from_bytes(data, table.table_version, f"{instant_time}.clean.requested")


def _paths_by_partition(table: HoodieTable, plan: CleanerPlan) -> dict[str, list[str]]:
    """Storage paths to delete per partition; plan version 1 listed bare file names."""
    out: dict[str, list[str]] = {}
    for partition, entries in plan.files_to_delete().items():
        paths = []
        for entry in entries:
            if "/" in entry:
                paths.append(table.fileio.strip_uri(entry))
            else:
                paths.append(join(table.base_path, partition, entry))
        out[partition] = paths
    return out


def delete_clean_files(task: Task) -> TaskResult:
    """Executor side: delete one partition's files; a file already gone counts as a failed delete."""
    table = open_table_for_task(task)
    fileio = table.fileio
    patterns: list[str] = []
    deleted: list[str] = []
    failed: list[str] = []
    for i, path in enumerate(task["paths"]):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        patterns.append(name)
        try:
            ok = fileio.delete(path)
        except OSError as e:
            log.warning("clean %s: could not delete %s: %s", task["instant_time"], path, e)
            ok = False
        (deleted if ok else failed).append(name)
        if i == 0:
            crash_point("clean.task_mid_write")
    crash_point("clean.task_after_write")
    return {"partition": task["partition"], "patterns": patterns, "deleted": deleted, "failed": failed}


def _delete_partition(table: HoodieTable, partition: str) -> bool:
    """Remove a partition folder the plan names, unless a data file appeared in it since."""
    path = join(table.base_path, partition)
    entries = table.fileio.list_dir(path)
    live = [e.name for e in entries if not e.is_dir and (BaseFile.parse(e.name) or LogFile.parse(e.name))]
    if live:
        log.warning("%s: not deleting partition %s: it holds %s", table.base_path, partition, live[:5])
        return False
    try:
        table.fileio.delete_dir(path)
    except OSError as e:
        log.warning("%s: could not delete partition %s: %s", table.base_path, partition, e)
        return False
    return True


def execute_clean(ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
    """Run a requested (or interrupted inflight) clean plan to completion."""
    table = ctx.table
    ctx.check_shape("clean")
    started = time.monotonic()
    plan = clean_plan(table, instant_time, require_pending(ctx, instant_time, Action.CLEAN, "clean"))
    with claim_instant(ctx, instant_time, Action.CLEAN, "clean") as claim:
        instant = claim.instant
        timeline = table.reload()
        if instant.is_requested:
            payload = (
                plan.to_bytes(table.table_version)
                if table.table_version <= INFLIGHT_PLAN_TABLE_VERSION
                else b""
            )
            inflight = timeline.transition_to_inflight(instant, payload)
        else:
            inflight = instant
            log.info("%s: re-running interrupted clean %s", table.base_path, instant_time)
        crash_point("clean.after_inflight")
        by_partition = _paths_by_partition(table, plan)
        base = ctx.task_base()
        tasks = [
            {**base, "instant_time": instant_time, "partition": partition, "paths": paths}
            for partition, paths in by_partition.items()
        ]
        results = runner.run(delete_clean_files, tasks, f"clean {instant_time} of {table.name}")
        dropped: set[str] = set()
        if table.config.is_partitioned:
            for partition in plan.partitions_to_be_deleted or ():
                if partition and _delete_partition(table, partition):
                    dropped.add(partition)
        policy = plan.policy
        partition_metadata = {
            r["partition"]: CleanPartitionMetadata(
                partition_path=r["partition"],
                policy=policy,
                delete_path_patterns=list(r["patterns"]),
                success_delete_files=list(r["deleted"]),
                failed_delete_files=list(r["failed"]),
                is_partition_deleted=r["partition"] in dropped,
            )
            for r in results
        }
        earliest = plan.earliest_instant_to_retain
        metadata = CleanMetadata(
            start_clean_time=instant_time,
            time_taken_in_millis=int((time.monotonic() - started) * 1000),
            total_files_deleted=sum(len(r["deleted"]) for r in results),
            earliest_commit_to_retain=earliest.timestamp if earliest is not None else "",
            last_completed_commit_timestamp=plan.last_completed_commit_timestamp,
            partition_metadata=partition_metadata,
            bootstrap_partition_metadata={},
            extra_metadata=dict(plan.extra_metadata or {}),
        )
        crash_point("clean.before_complete")
        done = ctx.complete(inflight, metadata.to_bytes(table.table_version))
    failed = sum(len(r["failed"]) for r in results)
    log.info(
        "%s: completed clean %s: %d file(s) deleted, %d already gone or failed, %d partition(s) removed",
        table.base_path,
        done,
        metadata.total_files_deleted,
        failed,
        len(dropped),
    )
    return ExecutionResult(
        done,
        details={
            "files_deleted": metadata.total_files_deleted,
            "files_failed": failed,
            "partitions_deleted": sorted(dropped),
            "earliest_commit_to_retain": metadata.earliest_commit_to_retain,
        },
    )


class CleanService:
    """Clean as a :class:`~hoodie.services.base.TableService`."""

    name = "clean"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_clean(ctx, CleanPolicy.from_options(ctx.options), dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return list(timeline.pending().actions(Action.CLEAN))

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_clean(ctx, instant_time, runner)


register_service(CleanService())
