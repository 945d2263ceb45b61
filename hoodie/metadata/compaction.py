"""The metadata table's compaction, by Apache Hudi 1.x's rules (with their Hudi sources):

* **Compaction is due** after ``hoodie.metadata.compact.max.delta.commits`` (default 10) delta
  commits since the last completed compaction: those that completed after its requested time, or
  are still pending (``CompactionUtils.getDeltaCommitsSinceLatestCompaction``). Every file slice
  with log files is compacted (``UnBoundedCompactionStrategy``).
* **Compaction instant time** (``compactIfNecessary``): if a data-table instant is pending but its
  MDT delta commit completed (a writer died between the two), the compaction is requested one
  millisecond before the first such instant, so that it can still be rolled back; otherwise at a
  new instant time. No compaction is scheduled when the MDT already has an instant at that time
  (the same failed instant keeps blocking), nor, in hts, when it is not after the latest MDT
  compaction. Pending data instants do not otherwise block: Hudi 0.x refused to compact while a
  data instant older than the latest MDT delta commit was pending; 1.x dropped that rule.
* **Plan**: a slice's log files go into the plan only if their delta commit completed before the
  compaction instant (``BaseHoodieCompactionPlanGenerator``); later ones belong to the new slice.
  Executing merges the base file and the valid log blocks (``MetadataTable.read_slice``) into a new
  base HFile named with the compaction instant: keys sorted, values with ``_hoodie_file_name`` set,
  file info ``schema``, ``bloomFilterTypeCode``, ``minRecordKey``, ``maxRecordKey`` and a
  ``bloomFilter`` meta block. It completes as ``T_C.commit`` with ``compacted=true`` and
  ``operationType=COMPACT``.

Call without holding the table lock: the functions take it for short sections only.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Collection, Sequence

from hoodie.errors import TableServiceError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType
from hoodie.file_group.view import FileSystemView
from hoodie.hfile.reader import HFileReader
from hoodie.io.fileio import join
from hoodie.metadata.context import metadata_service_context
from hoodie.metadata.partitions import has_metadata_table
from hoodie.metadata.policy import MetadataTablePolicy
from hoodie.metadata.records import (
    is_live,
    plain_metadata_schema_json,
)
from hoodie.metadata.table import MetadataTable
from hoodie.metadata.writer import base_hfile_bytes
from hoodie.models.commit import CommitMetadata, WriteStat
from hoodie.models.compaction import CompactionOperation, CompactionPlan
from hoodie.read.log_scanner import ScanStats, scan_log_blocks
from hoodie.read.slice_reader import decode_delete_block
from hoodie.services.base import (
    LocalRunner,
    Runner,
    ServiceContext,
    Task,
    TaskResult,
    crash_point,
)
from hoodie.services.claim import claim_instant, require_pending
from hoodie.services.compaction import compacted_slice_stat
from hoodie.services.compaction_plan import compaction_operation, compaction_plan, slice_of
from hoodie.services.slice_tasks import require_files, stats_by_partition
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import format_instant_time, normalize, parse_instant_time
from hoodie.timeline.timeline import ActiveTimeline, Timeline
from hoodie.transaction.commit import InputsPresent
from hoodie.transaction.lock import locked

log = logging.getLogger(__name__)

_MB = 1024 * 1024
_MAX_BASE_FILE_BYTES = 120 * _MB
"""``hoodie.parquet.max.file.size``: Hudi's write-size estimate for a slice without a base file."""


# -- compaction: scheduling ---------------------------------------------------------------------


def deltacommits_since_last_compaction(timeline: Timeline) -> int:
    """Delta commits completed after the last completed compaction was requested, plus pending ones."""
    last = timeline.completed().actions(Action.COMMIT).last()
    deltas = timeline.actions(Action.DELTA_COMMIT)
    if last is None:
        return len(deltas)
    mark = normalize(last.requested_time)
    return sum(
        1
        for i in deltas
        if normalize(i.completion_time or i.requested_time) > mark and i.requested_time != last.requested_time
    )


def _minus_one_milli(instant_time: str, tz: dt.tzinfo) -> str:
    return format_instant_time(parse_instant_time(instant_time, tz) - dt.timedelta(milliseconds=1), tz)


def compaction_instant_time(
    ctx: ServiceContext, data_timeline: Timeline, mdt_timeline: Timeline, tz: dt.tzinfo
) -> tuple[str, Instant | None]:
    """Hudi's MDT compaction time, and the pending data instant that bounded it (call with the lock).

    One millisecond before the first data instant that is pending although its MDT delta commit
    completed; otherwise a new instant time.
    """
    completed = {normalize(i.requested_time) for i in mdt_timeline.completed()}
    bound = data_timeline.pending().filter(lambda i: normalize(i.requested_time) in completed).first()
    if bound is not None:
        return _minus_one_milli(bound.requested_time, tz), bound
    return ctx.new_instant_time(lock_held=True), None


def _completed_before(view: FileSystemView, ts: str, instant_time: str) -> bool:
    done = view.completion_time(ts)
    return done is not None and normalize(done) < normalize(instant_time)


def plan_metadata_compaction(
    mdt: HoodieTable, timeline: ActiveTimeline, instant_time: str, building: Collection[str] = ()
) -> CompactionPlan | None:
    """Every latest MDT slice with log files whose delta commit completed before ``instant_time``,
    except in the partitions an indexer is ``building`` (their base files are not written yet)."""
    view = mdt.file_system_view(timeline=timeline)
    busy = set(mdt.pending_compaction_operations(timeline)) | set(
        mdt.pending_clustering_file_groups(timeline)
    )
    ops: list[CompactionOperation] = []
    for file_slice in view.latest_file_slices():
        if file_slice.group_id in busy or file_slice.partition_path in building:
            continue
        logs = [lf for lf in file_slice.log_files if _completed_before(view, lf.instant_time, instant_time)]
        if logs:
            ops.append(compaction_operation(file_slice, logs, bytes_without_base=_MAX_BASE_FILE_BYTES))
    return compaction_plan(ops)


def _schedule_compaction(
    data_table: HoodieTable, ctx: ServiceContext, mdt: HoodieTable, policy: MetadataTablePolicy, force: bool
) -> str | None:
    """Write ``T.compaction.requested`` on the MDT when due and allowed (call with the table lock)."""
    where = f"{data_table.base_path}: metadata table"
    timeline = mdt.reload()
    if timeline.pending_log_compaction():
        log.info(
            "%s: not compacting while log compaction %s is pending",
            where,
            timeline.pending_log_compaction().first(),
        )
        return None
    deltas = deltacommits_since_last_compaction(timeline)
    if deltas == 0 or (not force and deltas < policy.max_delta_commits):
        log.debug("%s: compaction not due (%d of %d delta commits)", where, deltas, policy.max_delta_commits)
        return None
    instant_time, bound = compaction_instant_time(ctx, data_table.reload(), timeline, data_table.tz)
    last = timeline.filter(lambda i: i.action in (Action.COMMIT, Action.COMPACTION)).last()
    if instant_time in timeline or (
        last is not None and normalize(instant_time) <= normalize(last.requested_time)
    ):
        why = (
            f"data instant {bound.requested_time} is pending although its metadata commit completed "
            "(roll it back); "
            if bound is not None
            else ""
        )
        log.info(
            "%s: compaction blocked: %scompaction time %s is taken or not after the latest compaction %s",
            where,
            why,
            instant_time,
            last.requested_time if last is not None else "-",
        )
        return None
    building = data_table.reload_config().metadata_partitions_inflight
    plan = plan_metadata_compaction(mdt, timeline, instant_time, building)
    if plan is None:
        log.info("%s: no log files completed before %s; nothing to compact", where, instant_time)
        return None
    timeline.create_requested(
        Instant(instant_time, Action.COMPACTION, State.REQUESTED), plan.to_bytes(mdt.table_version)
    )
    log.info(
        "%s: scheduled compaction %s of %d file slice(s) after %d delta commits%s%s",
        where,
        instant_time,
        len(plan.operations or ()),
        deltas,
        " (forced)" if force and deltas < policy.max_delta_commits else "",
        f", bounded by pending data instant {bound.requested_time}" if bound else "",
    )
    return instant_time


# -- compaction: execution ----------------------------------------------------------------------


def _hfile_keys(reader: HFileReader) -> list[str]:
    return [k.decode("utf-8") for k, _ in reader.items()]


def _log_counts(mdt: MetadataTable, file_slice: FileSlice, stats: ScanStats) -> tuple[int, set[str]]:
    """Records, and distinct keys, in the log blocks the merge takes (for the write stat)."""
    records = 0
    seen: set[str] = set()
    blocks = scan_log_blocks(
        mdt.table.fileio,
        mdt.table.base_path,
        file_slice,
        is_committed=mdt.block_committed(mdt.view()),
        latest_instant=None,
        stats=stats,
        hfile_blocks=True,
    )
    for block in blocks:
        if block.block_type is BlockType.HFILE_DATA:
            reader = HFileReader.from_log_block(block)
            keys = _hfile_keys(reader)
        elif block.block_type is BlockType.DELETE:
            keys = list(decode_delete_block(block, mdt.table_version).keys)
        else:
            continue
        records += len(keys)
        seen.update(keys)
    return records, seen


def compact_metadata_file_group(task: Task) -> TaskResult:
    """Executor side: merge one MDT file slice into a new base HFile; returns its write stat."""
    started = time.monotonic()
    data_table = HoodieTable.open(str(task["table_uri"]), **dict(task.get("storage_options") or {}))
    mdt = MetadataTable.open(data_table, data_table.reload())
    instant_time = str(task["instant_time"])
    op = CompactionOperation.from_avro(task["operation"])
    file_slice = slice_of(op)
    fileio, base_path = mdt.table.fileio, mdt.table.base_path
    require_files(fileio, file_slice.file_paths(base_path), f"metadata compaction {instant_time}")
    merged = mdt.read_slice(file_slice)
    base_keys: set[str] = set()
    base_path_of_slice = file_slice.base_file_path(base_path)
    if base_path_of_slice is not None:
        base_keys = set(_hfile_keys(HFileReader.open(fileio, base_path_of_slice)))
    stats = ScanStats()
    log_records, log_keys = _log_counts(mdt, file_slice, stats)
    scan_ms = int((time.monotonic() - started) * 1000)
    live = {k: p for k, p in merged.items() if p is not None and is_live(p)}  # Hudi drops deletes
    new = BaseFile(file_slice.file_id, str(task["write_token"]), instant_time, "hfile")
    data = base_hfile_bytes(live, new.name, mdt.table_version, create_time_ms=time.time_ns() // 1_000_000)
    fileio.write_bytes(join(base_path, file_slice.partition_path, new.name), data)
    crash_point("metadata_compaction.task_after_write")
    updated = sum(1 for k in live if k in base_keys and k in log_keys)
    stat = compacted_slice_stat(
        file_slice,
        new.name,
        prev_commit=file_slice.base_file.commit_time if file_slice.base_file else "null",
        rows=len(live),
        updated=updated,
        deleted=len((base_keys | log_keys) - live.keys()),
        log_records=log_records,
        log_keys=len(log_keys),
        size=len(data),
        stats=stats,
        scan_ms=scan_ms,
        started=started,
    )
    return {"write_stat": stat.to_avro()}


def _outputs(mdt: HoodieTable, instant_time: str, ops: Sequence[CompactionOperation]) -> list[str]:
    """Paths of base files an attempt of compaction ``instant_time`` wrote (complete or torn)."""
    wanted = {(op.partition_path or "", op.file_id or "") for op in ops}
    out = []
    for partition in sorted({p for p, _ in wanted}):
        for entry in mdt.fileio.list_dir(join(mdt.base_path, partition)):
            base = BaseFile.parse(entry.name)
            if base is not None and base.commit_time == instant_time and (partition, base.file_id) in wanted:
                out.append(entry.path)
    return out


def _missing_inputs(mdt: HoodieTable, slices: Sequence[FileSlice]) -> list[str]:
    return [p for s in slices for p in s.file_paths(mdt.base_path) if mdt.fileio.info(p) is None]


def _abandon(
    mctx: ServiceContext, instant_time: str, ops: Sequence[CompactionOperation], missing: list[str]
) -> None:
    """Drop a compaction whose inputs were rolled back meanwhile: its outputs, then its instant."""
    mdt = mctx.table
    log.warning(
        "%s: abandoning compaction %s: %d input file(s) are gone (rolled back), e.g. %s",
        mdt.base_path,
        instant_time,
        len(missing),
        missing[0],
    )
    for path in _outputs(mdt, instant_time, ops):
        mdt.fileio.delete(path)
    with locked(mctx.table_lock, mctx.lock_timeout_s):
        mdt.reload().delete_instant(instant_time, Action.COMPACTION)


def _execute_compaction(
    data_table: HoodieTable, ctx: ServiceContext, mctx: ServiceContext, instant_time: str, runner: Runner
) -> Instant | None:
    """Run the MDT compaction plan at ``instant_time`` (requested, or an interrupted inflight one)."""
    mdt = mctx.table
    timeline = require_pending(mctx, instant_time, Action.COMPACTION, "metadata compaction")
    plan = mdt.compaction_plan(instant_time, timeline)
    ops = list(plan.operations or ())
    slices = [slice_of(op) for op in ops]
    missing = _missing_inputs(mdt, slices)
    if missing:
        _abandon(mctx, instant_time, ops, missing)
        return None

    def undo(instant: Instant) -> None:
        for path in _outputs(mdt, instant_time, ops):
            mdt.fileio.delete(path)
        mdt.reload().delete_state(instant_time, State.INFLIGHT, Action.COMPACTION)

    with claim_instant(mctx, instant_time, Action.COMPACTION, "metadata compaction", undo=undo) as claim:
        if claim.instant.is_inflight:
            log.info("%s: re-running interrupted compaction %s", mdt.base_path, instant_time)
            for path in _outputs(mdt, instant_time, ops):
                mdt.fileio.delete(path)
            inflight = claim.instant
        else:
            inflight = mdt.reload().transition_to_inflight(
                Instant(instant_time, Action.COMPACTION, State.REQUESTED)
            )
        crash_point("metadata_compaction.after_inflight")
        base = {
            "table_uri": data_table.uri() if data_table.fileio.scheme != "file" else data_table.base_path,
            "storage_options": dict(ctx.storage_options),
            "instant_time": instant_time,
        }
        tasks = [{**base, "operation": op.to_avro(), "write_token": f"{i}-0-{i}"} for i, op in enumerate(ops)]
        results = runner.run(
            compact_metadata_file_group, tasks, f"metadata compaction {instant_time} of {data_table.name}"
        )
        stats = [WriteStat.from_avro(r["write_stat"]) for r in results]
        metadata = CommitMetadata(
            partition_to_write_stats=stats_by_partition(stats),
            compacted=True,
            extra_metadata={"schema": plain_metadata_schema_json(mdt.table_version)},
            version=None,
            operation_type="COMPACT",
        )
        crash_point("metadata_compaction.before_complete")

        def inputs_still_there(_: ActiveTimeline) -> None:
            gone = _missing_inputs(mdt, slices)
            if gone:
                raise TableServiceError(
                    f"{mdt.base_path}: compaction {instant_time} read {gone[0]}, which was rolled back "
                    "meanwhile; not completing it"
                )

        done = mctx.complete(
            inflight, metadata.to_bytes(mdt.table_version), InputsPresent(inputs_still_there)
        )
    log.info("%s: completed compaction %s (%d file groups)", mdt.base_path, done, len(stats))
    return done


def compact_metadata_table(
    data_table: HoodieTable,
    ctx: ServiceContext,
    *,
    force: bool = False,
    policy: MetadataTablePolicy | None = None,
    runner: Runner | None = None,
    mctx: ServiceContext | None = None,
) -> Instant | None:
    """Finish a pending MDT compaction, or schedule one when due (``force``: whatever the delta
    commit count) and allowed, and run it. Returns the completed ``commit``, or None."""
    if not has_metadata_table(data_table):
        return None
    mctx = mctx or metadata_service_context(data_table, ctx)
    policy = policy or MetadataTablePolicy.from_options(ctx.options)
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        pending = mctx.table.reload().pending_compaction().first()
        if pending is not None:
            instant_time: str | None = pending.requested_time
            log.info("%s: resuming pending compaction %s", mctx.table.base_path, instant_time)
        else:
            instant_time = _schedule_compaction(data_table, ctx, mctx.table, policy, force)
    if instant_time is None:
        return None
    return _execute_compaction(data_table, ctx, mctx, instant_time, runner or LocalRunner())
