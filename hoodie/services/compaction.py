"""Compaction of MERGE_ON_READ file slices: plan, schedule, execute — as Apache Hudi does.

A plan (``HoodieCompactionPlan`` version 2) holds one operation per file slice with log files:
the base file name, the log file names, the slice's base instant and Hudi's metrics. Executing
it merges each slice by the table's merge mode into a new base file of the same file group,
named with the compaction instant; records keep ``_hoodie_commit_time`` and
``_hoodie_commit_seqno``, and ``_hoodie_file_name`` becomes the new file's name. The instant
completes as a ``commit`` with ``compacted=true`` and ``operationType=COMPACT``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.cdc.write import CDCWrite, log_compaction_changes
from hoodie.errors import TableServiceError, UnsupportedTableError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.base_file_writer import BaseFileWriter, set_constant
from hoodie.file_group.file_index import paused_gc
from hoodie.file_group.file_slice import FileSlice
from hoodie.io.fileio import join
from hoodie.merge.trace import MergeTrace
from hoodie.models.commit import CommitMetadata, RuntimeStats, WriteStat
from hoodie.models.compaction import CompactionOperation, CompactionPlan
from hoodie.read.log_scanner import ScanStats
from hoodie.read.slice_reader import SliceMergeInfo
from hoodie.read.spill import iter_compacted_slice
from hoodie.read.spill_budget import MemoryBudget
from hoodie.schema.avro_arrow import add_meta_fields
from hoodie.schema.meta_fields import FILENAME_METADATA_FIELD, RECORD_KEY_METADATA_FIELD
from hoodie.services.base import (
    CRASH_ENV,
    ExecutionResult,
    Runner,
    Scheduled,
    ServiceContext,
    Task,
    TaskResult,
    crash_point,
    register_service,
)
from hoodie.services.claim import claim_instant, require_pending
from hoodie.services.compaction_plan import compaction_plan, operation_of, slice_of
from hoodie.services.incremental import compaction_partitions, incremental_enabled, incremental_option
from hoodie.services.options import int_option
from hoodie.services.partial_check import check_planned_slices
from hoodie.services.planning import planning_view
from hoodie.services.rollback import recover_inflight
from hoodie.services.slice_tasks import (
    SliceTask,
    latest_writer_schema,
    require_files,
    slice_task_fields,
    stats_by_partition,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.lock import locked
from hoodie.write.markers import IOType, WriteMarkers

log = logging.getLogger(__name__)

_MB = 1024 * 1024
_STRATEGY_PACKAGE = "org.apache.hudi.table.action.compact.strategy."


class CompactionStrategy(StrEnum):
    """Hudi's compaction strategies (``hoodie.compaction.strategy``)."""

    UNBOUNDED = "UnBoundedCompactionStrategy"
    LOG_FILE_SIZE = "LogFileSizeBasedCompactionStrategy"
    LOG_FILE_NUM = "LogFileNumBasedCompactionStrategy"
    BOUNDED_IO = "BoundedIOCompactionStrategy"
    DAY_BASED = "DayBasedCompactionStrategy"

    @classmethod
    def parse(cls, value: str) -> CompactionStrategy:
        name = value.strip().rsplit(".", 1)[-1]
        try:
            return cls(name)
        except ValueError as e:
            known = ", ".join(_STRATEGY_PACKAGE + m.value for m in cls)
            raise UnsupportedTableError(
                f"unsupported hoodie.compaction.strategy={value!r} (supported: {known})"
            ) from e


class TriggerStrategy(StrEnum):
    """When to schedule (``hoodie.compact.inline.trigger.strategy``)."""

    NUM_COMMITS = "NUM_COMMITS"
    NUM_COMMITS_AFTER_LAST_REQUEST = "NUM_COMMITS_AFTER_LAST_REQUEST"
    TIME_ELAPSED = "TIME_ELAPSED"
    NUM_AND_TIME = "NUM_AND_TIME"
    NUM_OR_TIME = "NUM_OR_TIME"


@dataclass(frozen=True)
class CompactionPolicy:
    """How to plan compactions; ``trigger=None`` plans whenever some slice has log files."""

    strategy: CompactionStrategy = CompactionStrategy.LOG_FILE_SIZE
    trigger: TriggerStrategy | None = None
    max_delta_commits: int = 5
    max_delta_seconds: int = 3600
    log_file_size_threshold: int = 0
    log_file_num_threshold: int = 0
    target_io_mb: int = 500 * 1024
    day_based_partitions: int = 10
    incremental: bool | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> CompactionPolicy:
        trigger: TriggerStrategy | None = None
        raw_trigger = options.get("hoodie.compact.inline.trigger.strategy")
        if raw_trigger:
            try:
                trigger = TriggerStrategy(raw_trigger.strip().upper())
            except ValueError as e:
                allowed = ", ".join(t.value for t in TriggerStrategy)
                raise TableServiceError(
                    f"unsupported hoodie.compact.inline.trigger.strategy={raw_trigger!r} ({allowed})"
                ) from e
        elif "hoodie.compact.inline.max.delta.commits" in options:
            trigger = TriggerStrategy.NUM_COMMITS
        elif "hoodie.compact.inline.max.delta.seconds" in options:
            trigger = TriggerStrategy.TIME_ELAPSED
        strategy = CompactionStrategy.LOG_FILE_SIZE
        if options.get("hoodie.compaction.strategy"):
            strategy = CompactionStrategy.parse(options["hoodie.compaction.strategy"])
        return cls(
            strategy=strategy,
            trigger=trigger,
            max_delta_commits=int_option(options, "hoodie.compact.inline.max.delta.commits", 5),
            max_delta_seconds=int_option(options, "hoodie.compact.inline.max.delta.seconds", 3600),
            log_file_size_threshold=int_option(options, "hoodie.compaction.logfile.size.threshold", 0),
            log_file_num_threshold=int_option(options, "hoodie.compaction.logfile.num.threshold", 0),
            target_io_mb=int_option(options, "hoodie.compaction.target.io", 500 * 1024),
            day_based_partitions=int_option(options, "hoodie.compaction.daybased.target.partitions", 10),
            incremental=incremental_option(options),
        )


# -- planning ---------------------------------------------------------------------------------


def _last_compaction(timeline: ActiveTimeline, table: HoodieTable) -> Instant | None:
    """The newest compaction, pending or completed (a completed one is a ``commit`` with compacted=true)."""
    for instant in reversed(timeline.instants):
        if instant.action is Action.COMPACTION:
            return instant
        if (
            instant.action is Action.COMMIT
            and instant.is_completed
            and table.config.is_mor
            and table.commit_metadata(instant, timeline).compacted
        ):
            return instant
    return None


def trigger_reason(
    table: HoodieTable, timeline: ActiveTimeline, policy: CompactionPolicy, now_ms: int
) -> str | None:
    """Why compaction should be scheduled now under ``policy.trigger``, or None if it should not."""
    if policy.trigger is None:
        return "requested"
    last = _last_compaction(timeline, table)
    since = timeline.completed().actions(Action.DELTA_COMMIT)
    if last is not None:
        since = since.after(last.requested_time)
    if policy.trigger is TriggerStrategy.NUM_COMMITS_AFTER_LAST_REQUEST:
        pending = timeline.pending_compaction().last()
        if pending is not None:
            since = since.after(pending.requested_time)
    commits = len(since)
    first = timeline.first()
    anchor = last.requested_time if last is not None else (first.requested_time if first else None)
    elapsed_s = 0.0
    if anchor is not None:
        elapsed_s = now_ms / 1000 - parse_instant_time(anchor, table.tz).timestamp()
    by_num = commits >= policy.max_delta_commits
    by_time = elapsed_s >= policy.max_delta_seconds
    fired = {
        TriggerStrategy.NUM_COMMITS: by_num,
        TriggerStrategy.NUM_COMMITS_AFTER_LAST_REQUEST: by_num,
        TriggerStrategy.TIME_ELAPSED: by_time,
        TriggerStrategy.NUM_AND_TIME: by_num and by_time,
        TriggerStrategy.NUM_OR_TIME: by_num or by_time,
    }[policy.trigger]
    if not fired:
        return None
    return f"{policy.trigger.value}: {commits} delta commits, {elapsed_s:.0f}s since the last compaction"


_DATE_PARTITION = re.compile(r"(\d{4})[/-]?(\d{2})[/-]?(\d{2})")


def _select(ops: list[CompactionOperation], policy: CompactionPolicy) -> list[CompactionOperation]:
    """Apply the strategy's filter and order, as Hudi's compaction strategies do."""

    def size(op: CompactionOperation) -> float:
        return (op.metrics or {}).get("TOTAL_LOG_FILES_SIZE", 0.0)

    def count(op: CompactionOperation) -> int:
        return len(op.delta_file_paths or [])

    s = policy.strategy
    if s is CompactionStrategy.LOG_FILE_SIZE:
        ops = sorted((op for op in ops if size(op) >= policy.log_file_size_threshold), key=size, reverse=True)
        return _bounded(ops, policy.target_io_mb)
    if s is CompactionStrategy.LOG_FILE_NUM:
        ops = sorted(
            (op for op in ops if count(op) >= policy.log_file_num_threshold), key=count, reverse=True
        )
        return _bounded(ops, policy.target_io_mb)
    if s is CompactionStrategy.BOUNDED_IO:
        return _bounded(ops, policy.target_io_mb)
    if s is CompactionStrategy.DAY_BASED:
        partitions = sorted({op.partition_path or "" for op in ops}, key=_day_key, reverse=True)
        keep = set(partitions[: policy.day_based_partitions])
        return [op for op in ops if (op.partition_path or "") in keep]
    return ops


def _day_key(partition: str) -> str:
    m = _DATE_PARTITION.search(partition)
    return "".join(m.groups()) if m else partition


def _bounded(ops: list[CompactionOperation], target_io_mb: int) -> list[CompactionOperation]:
    out: list[CompactionOperation] = []
    total = 0.0
    for op in ops:
        io = (op.metrics or {}).get("TOTAL_IO_MB", 0.0)
        if out and total + io > target_io_mb:
            break
        out.append(op)
        total += io
    return out


def _left_out(
    ops: list[CompactionOperation], chosen: list[CompactionOperation], policy: CompactionPolicy
) -> list[str]:
    """Partitions of operations the strategy filtered out, in plan order (``missingSchedulePartitions``).

    Hudi's ``CompactionStrategy.orderAndFilter`` records them so the next incremental plan looks
    there again; the day-based strategy rolls partitions and records none.
    """
    if policy.strategy is CompactionStrategy.DAY_BASED:
        return []
    kept = {id(op) for op in chosen}
    return sorted({op.partition_path or "" for op in ops if id(op) not in kept})


def plan_compaction(
    table: HoodieTable, policy: CompactionPolicy, timeline: ActiveTimeline | None = None
) -> CompactionPlan | None:
    """A plan over the latest slices that have log files, or None if there is nothing to compact.

    File groups under a pending compaction or clustering are left out (their slices are spoken
    for), as are replaced file groups. With incremental planning (:mod:`hoodie.services.incremental`)
    only the partitions written since the last compaction, and those it left out, are listed.
    """
    if not table.config.is_mor:
        raise TableServiceError(
            f"{table.base_path} is {table.config.table_type.value}: only MERGE_ON_READ tables compact"
        )
    tl = timeline or table.reload()
    # The listing, its index and thousands of operations (objects without cycles): no heap walks
    # while they are built.
    with paused_gc():
        view = planning_view(table, tl)
        incremental = incremental_enabled(policy.incremental, table.table_version)
        partitions = compaction_partitions(table, tl, incremental)
        if partitions is None:
            partitions = view.partitions()
        if not partitions:
            return None
        busy = set(table.pending_compaction_operations(tl)) | set(table.pending_clustering_file_groups(tl))
        ops: list[CompactionOperation] = []
        # Chosen over the whole listing as arrays: objects only for live groups with log files.
        index = view.file_index(partitions)
        for latest in view.latest_slice_files(index, view.with_log_files(index, exclude=busy)):
            if latest.log_file_names:
                ops.append(operation_of(latest))
        chosen = _select(ops, policy)
        missing = _left_out(ops, chosen, policy) if incremental else None
        return compaction_plan(chosen, missing_schedule_partitions=missing)


def schedule_compaction(
    ctx: ServiceContext, policy: CompactionPolicy, *, dry_run: bool = False, now_ms: int | None = None
) -> Scheduled | None:
    """Plan and, unless ``dry_run``, write ``T.compaction.requested``; None if nothing to do."""
    table = ctx.table
    ctx.check_shape("compaction")
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        timeline = table.reload()
        reason = trigger_reason(table, timeline, policy, now_ms or time.time_ns() // 1_000_000)
        if reason is None:
            return None
        if table.table_version < 8:
            # Layout 1 names new log files by the slice's base instant: a write still in flight
            # would land in the old slice and be lost, so Hudi refuses to schedule around it.
            writing = timeline.pending().actions(Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
            if writing:
                raise TableServiceError(
                    f"cannot schedule compaction on table version 6 while writes are inflight: "
                    f"{[str(i) for i in writing]}"
                )
        plan = plan_compaction(table, policy, timeline)
        if plan is None:
            return None
        check_planned_slices(table, timeline, "compaction", map(slice_of, plan.operations or ()))
        scheduled = ctx.request(timeline, Action.COMPACTION, plan, reason, dry_run=dry_run)
    if not dry_run:
        log.info(
            "%s: scheduled compaction %s of %d file slice(s) (%s)",
            table.base_path,
            scheduled.instant_time,
            len(plan.operations or ()),
            reason,
        )
    return scheduled


# -- execution --------------------------------------------------------------------------------


def _merge_counts(info: SliceMergeInfo, out_keys: pa.ChunkedArray | None) -> tuple[int, int, int, int]:
    """(updated, deleted, log records, distinct log keys) of a slice merge, as Hudi counts them."""
    counts = info.counts
    if counts is not None:
        return counts.base_replaced, counts.base_deleted, counts.log_entries, counts.log_keys
    log_keys = info.all_log_keys()
    if not len(log_keys):  # no log blocks applied: every row is a base row, untouched
        return 0, 0, 0, 0
    # The per-record merge (CUSTOM modes) reports keys, not counts: work them out.
    base_keys = info.base_keys if info.base_keys is not None else pa.array([], pa.string())
    written = (
        out_keys.combine_chunks().cast(pa.string()) if out_keys is not None else pa.array([], pa.string())
    )
    updated = pc.sum(pc.and_(pc.is_in(written, value_set=base_keys), pc.is_in(written, value_set=log_keys)))
    surviving = pc.sum(pc.is_in(base_keys, value_set=written))
    return (
        int(updated.as_py() or 0),
        len(base_keys) - int(surviving.as_py() or 0),
        info.log_records,
        len(pc.unique(log_keys)),
    )


def compacted_slice_stat(
    file_slice: FileSlice,
    new_name: str,
    *,
    prev_commit: str,
    rows: int,
    updated: int,
    deleted: int,
    log_records: int,
    log_keys: int,
    size: int,
    stats: ScanStats,
    scan_ms: int,
    started: float,
) -> WriteStat:
    """The write stat of the new base file ``new_name`` that compacting ``file_slice`` wrote
    (data and metadata-table compaction alike): ``rows`` written, ``updated`` of them from the
    logs, ``deleted`` dropped, ``log_keys`` keys among ``log_records`` log records."""
    return WriteStat(
        file_id=file_slice.file_id,
        path=join(file_slice.partition_path, new_name),
        prev_commit=prev_commit,
        num_writes=rows,
        num_deletes=deleted,
        num_update_writes=updated,
        total_write_bytes=size,
        total_write_errors=0,
        partition_path=file_slice.partition_path,
        total_log_records=log_records,
        total_updated_records_compacted=log_keys,
        num_inserts=rows - updated,
        total_log_blocks=stats.total_log_blocks,
        total_corrupt_log_block=stats.total_corrupt_blocks,
        total_rollback_blocks=stats.total_rollback_blocks,
        file_size_in_bytes=size,
        prev_base_file=file_slice.base_file.name if file_slice.base_file else None,
        runtime_stats=RuntimeStats(
            total_scan_time=scan_ms,
            total_create_time=0,
            total_upsert_time=int((time.monotonic() - started) * 1000),
        ),
        total_log_files_compacted=len(file_slice.log_files),
        total_log_read_time_ms=scan_ms,
        total_log_size_compacted=stats.total_log_size,
        num_updates=0,
    )


def compact_file_group(task: Task) -> TaskResult:
    """Executor side: compact one file slice into a new base file; returns its write stat."""
    started = time.monotonic()
    job = SliceTask.of(task)
    table, instant_time = job.table, job.instant_time
    op = CompactionOperation.from_avro(task["operation"])
    file_slice = slice_of(op)
    fileio = table.fileio
    found = require_files(fileio, file_slice.file_paths(table.base_path), f"compaction {instant_time}")
    log_bytes = sum(f.size for f in found[len(found) - len(file_slice.log_files) :])
    info = SliceMergeInfo()
    stats = ScanStats()
    opts = job.read_options(stats=stats, info=info)
    scan_start = time.monotonic()
    new = BaseFile(file_slice.file_id, str(task["write_token"]), instant_time)
    WriteMarkers(fileio, table.paths, instant_time).create(
        file_slice.partition_path, new.name, IOType.MERGE if file_slice.base_file else IOType.CREATE
    )
    path = join(table.base_path, file_slice.partition_path, new.name)
    if os.environ.get(CRASH_ENV) == "compaction.task_mid_write":
        with fileio.open_output(path) as half:  # a torn file, as a killed writer leaves one
            half.write(b"PAR1" + b"\0" * 64)
        crash_point("compaction.task_mid_write")
    # The merged slice streams into the new base file part by part (memory: one part and the logs).
    writer = BaseFileWriter(fileio, path, job.avro_schema, compression=job.compression)
    rows = nbytes = 0
    out_keys: list[pa.ChunkedArray] = []
    cdc = CDCWrite.of(table.config, job.avro_schema)
    parts: list[pa.Table] = []  # kept for the CDC log only
    if cdc is not None:
        info.trace = MergeTrace()  # the merge hands over where each old row went
    budget = MemoryBudget.of_task(task)  # over budget, log records spill (hoodie.memory.*)
    for merged in iter_compacted_slice(
        fileio,
        table.base_path,
        file_slice,
        opts,
        budget,
        log_bytes=log_bytes,
        cdc=cdc is not None,
        writer=writer,
    ):
        part = set_constant(merged, FILENAME_METADATA_FIELD, new.name)
        writer.write(part)
        rows += part.num_rows
        nbytes += part.nbytes
        if info.counts is None:
            out_keys.append(part[RECORD_KEY_METADATA_FIELD])
        if cdc is not None:
            parts.append(part)
    result = writer.close(job.schema)
    markers = WriteMarkers(fileio, table.paths, instant_time)
    cdc_stats = (
        log_compaction_changes(
            cdc,
            fileio,
            table.base_path,
            markers,
            file_slice,
            instant_time,
            new.write_token,
            job.schema,
            parts,
            info.trace,
        )
        if cdc is not None
        else None
    )
    scan_ms = int((time.monotonic() - scan_start) * 1000)
    crash_point("compaction.task_after_write")
    keys = pa.chunked_array([c for k in out_keys for c in k.chunks], pa.string()) if out_keys else None
    updated, deleted, log_records, log_keys = _merge_counts(info, keys)
    stat = compacted_slice_stat(
        file_slice,
        new.name,
        prev_commit=file_slice.base_instant_time,
        rows=rows,
        updated=updated,
        deleted=deleted,
        log_records=log_records,
        log_keys=log_keys,
        size=result.size,
        stats=stats,
        scan_ms=scan_ms,
        started=started,
    )
    if cdc_stats is not None:
        stat = dataclasses.replace(stat, cdc_stats=cdc_stats)
    return {"write_stat": stat.to_avro(), "rows": rows, "bytes": nbytes}


def execute_compaction(ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
    """Run a requested (or abandoned inflight) compaction plan to completion."""
    table = ctx.table
    ctx.check_shape("compaction")
    plan = table.compaction_plan(
        instant_time, require_pending(ctx, instant_time, Action.COMPACTION, "compaction")
    )
    slices = [slice_of(op) for op in plan.operations or ()]  # a bad plan fails before anything is written
    check_planned_slices(table, table.timeline, "compaction", slices)  # e.g. a plan Hudi scheduled
    budget = MemoryBudget.from_options(ctx.options)  # bad memory keys fail before anything too
    schema_json = latest_writer_schema(table, "compaction")
    with claim_instant(
        ctx, instant_time, Action.COMPACTION, "compaction", undo=lambda i: recover_inflight(ctx, i)
    ) as claim:
        if claim.instant.is_inflight:
            recover_inflight(ctx, claim.instant)
            timeline = table.reload()
        else:
            timeline = table.timeline  # read under the lock by the claim, just now
        inflight = claim.go_inflight(timeline, {op.partition_path or "" for op in plan.operations or ()})
        crash_point("compaction.after_inflight")
        shared = slice_task_fields(ctx, timeline.reload(), instant_time, add_meta_fields(schema_json))
        tasks = [
            {**shared, **budget.to_task(), "operation": op.to_avro(), "write_token": claim.write_token(i, i)}
            for i, op in enumerate(plan.operations or ())
        ]
        results = claim.run(runner, compact_file_group, tasks, f"compaction {instant_time} of {table.name}")
        stats = [WriteStat.from_avro(r["write_stat"]) for r in results]
        metadata = CommitMetadata(
            partition_to_write_stats=stats_by_partition(stats),
            compacted=True,
            extra_metadata={"schema": json.dumps(schema_json, separators=(",", ":"))},
            version=None,
            operation_type="COMPACT",
        )
        crash_point("compaction.before_complete")
        done = ctx.complete(inflight, metadata.to_bytes(table.table_version))
        claim.finish()
    log.info("%s: completed compaction %s (%d file groups)", table.base_path, done, len(stats))
    return ExecutionResult(done, stats)


class CompactionService:
    """Compaction as a :class:`~hoodie.services.base.TableService`."""

    name = "compaction"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_compaction(ctx, CompactionPolicy.from_options(ctx.options), dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return list(timeline.pending_compaction())

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_compaction(ctx, instant_time, runner)


register_service(CompactionService())
