"""Log compaction of MERGE_ON_READ file slices: plan, schedule, execute — as Apache Hudi does.

The minor compaction: a slice's log records are merged among themselves (never with the base
file) into ONE new log file named with the ``logcompaction`` instant, holding a data block of the
surviving records (their ``_hoodie_commit_time``/``_hoodie_commit_seqno`` kept) and a delete block
of the surviving deletes (their ordering values kept; one per ordering-value type, as hudi-rs reads
no block that mixes them). Every block carries ``COMPACTED_BLOCK_TIMES``, the instants it stands
for, newest first. The old logs stay: readers that know the header (ours, hudi-rs, Java's
optimized scan) skip what it covers; readers that do not re-apply each key's surviving entry,
which is its merge state already. The plan (``T.logcompaction.requested``) is a
``HoodieCompactionPlan`` with Hudi's ``LogCompactionExecutionHelper`` strategy; the instant
completes as a ``LOG_COMPACT`` deltacommit.
A delta commit requested before the instant but not covered by it would be read before merged
records older than it, so scheduling refuses while delta commits are pending and the completing
write re-checks that none wrote to a planned file group since. An abandoned attempt is rolled back
together with its plan, as Hudi does; the next schedule plans its file groups again.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.config.table_config import RecordMergeMode
from hoodie.errors import TableServiceError, UnsupportedTableError
from hoodie.file_group.file_index import group_any
from hoodie.file_group.file_slice import FileGroupId, FileSlice
from hoodie.file_group.log_block import BlockType, HeaderKey, LogBlock, encode_block
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_writer import DELETE_BLOCK_VERSION, WRAPPER_NAMESPACE, ordering_wrappers
from hoodie.io.fileio import join
from hoodie.merge.config import MergeConfig
from hoodie.merge.log_entries import DeleteEntries, spec_for, supports
from hoodie.merge.resolve import resolve_merge_config
from hoodie.merge.vectorized import merge_logs_only
from hoodie.models.codec import load_schema
from hoodie.models.commit import CommitMetadata, RuntimeStats, WriteOperationType, WriteStat
from hoodie.models.compaction import CompactionOperation, CompactionPlan, CompactionStrategy
from hoodie.read.log_scanner import ScanStats, scan_log_blocks
from hoodie.read.slice_reader import decode_data_block, decode_delete_block
from hoodie.schema.avro_arrow import add_meta_fields, encode_avro_block_content
from hoodie.schema.meta_fields import (
    FILENAME_METADATA_FIELD,
    PARTITION_PATH_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
)
from hoodie.services.base import (
    CRASH_ENV,
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
from hoodie.services.claim import claim_instant, require_pending
from hoodie.services.compaction_plan import compaction_operation, compaction_plan, slice_of
from hoodie.services.options import bool_option, int_option
from hoodie.services.planning import planning_view
from hoodie.services.rollback import execute_rollback, schedule_rollback
from hoodie.services.slice_tasks import (
    SliceTask,
    latest_writer_schema,
    require_files,
    slice_task_fields,
    stats_by_partition,
)
from hoodie.shape.partial_blocks import check_partial_blocks
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import NoConflictingCommit
from hoodie.transaction.lock import locked
from hoodie.write.markers import IOType, WriteMarkers

log = logging.getLogger(__name__)

SERVICE = "logcompaction"
COMPACTOR_CLASS = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"
"""``HoodieCompactionStrategy.compactorClassName`` of every log-compaction plan Hudi writes."""
ENABLE_KEY = "hoodie.log.compaction.enable"
THRESHOLD_KEY = "hoodie.log.compaction.blocks.threshold"
BLOCK_FORMAT_KEY = "hoodie.logfile.data.block.format"
SUPPORTED_TABLE_VERSIONS = (6, 8, 9)
_MB = 1024 * 1024


@dataclass(frozen=True)
class LogCompactionPolicy:
    """Which slices to log-compact: those with at least ``blocks_threshold`` log files or blocks.

    Without ``hoodie.log.compaction.blocks.threshold`` (Hudi's default is 5) every slice with two
    log files or blocks qualifies; an explicit ``hoodie.log.compaction.enable=false`` plans nothing.
    """

    blocks_threshold: int = 2
    enabled: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> LogCompactionPolicy:
        return cls(int_option(options, THRESHOLD_KEY, 2, 1), bool_option(options, ENABLE_KEY, True))


# -- checks -----------------------------------------------------------------------------------


def require_log_compactable(table: HoodieTable) -> MergeConfig:
    """The table's merge config, or an error naming what log compaction cannot handle."""
    where = table.base_path
    if not table.config.is_mor:
        raise TableServiceError(
            f"{where} is {table.config.table_type.value}: only MERGE_ON_READ tables have logs to compact"
        )
    if table.table_version not in SUPPORTED_TABLE_VERSIONS:
        raise UnsupportedTableError(
            f"{where}: log compaction of table version {table.table_version} is not supported "
            f"(supported: {', '.join(map(str, SUPPORTED_TABLE_VERSIONS))})"
        )
    if not table.config.populate_meta_fields:
        raise UnsupportedTableError(
            f"{where}: hoodie.populate.meta.fields=false; log compaction keeps each record's "
            "_hoodie_commit_time and needs the meta fields"
        )
    merge = resolve_merge_config(table.config)
    if not supports(merge):
        partial = merge.partial_update_mode.value if merge.partial_update_mode else None
        raise UnsupportedTableError(
            f"{where}: log compaction supports COMMIT_TIME_ORDERING and EVENT_TIME_ORDERING without "
            f"partial updates, not hoodie.record.merge.mode={merge.mode.value} "
            f"(hoodie.table.partial.update.mode={partial})"
        )
    if merge.mode is RecordMergeMode.EVENT_TIME_ORDERING and len(merge.ordering_fields) > 1:
        raise UnsupportedTableError(
            f"{where}: log compaction supports one ordering field, not {','.join(merge.ordering_fields)}"
        )
    return merge


# -- planning ---------------------------------------------------------------------------------


def _already_log_compacted(blocks: list[LogBlock]) -> bool:
    """Whether everything a scan applies is one earlier log compaction's output (nothing to merge)."""
    instants = {b.instant_time for b in blocks}
    return len(instants) == 1 and all(b.compacted_block_times for b in blocks)


def plan_log_compaction(
    table: HoodieTable, policy: LogCompactionPolicy, timeline: ActiveTimeline | None = None
) -> CompactionPlan | None:
    """A plan over the latest slices whose log files or effective log blocks reach the threshold.

    Effective blocks are those a reader applies: committed, not rolled back, with blocks covered
    by an earlier log compaction counted once. File groups under a pending compaction, clustering
    or log compaction are left out, as are replaced ones.
    """
    merge = require_log_compactable(table)
    tl = timeline or table.reload()
    view = planning_view(table, tl)
    busy = set(table.pending_compaction_operations(tl)) | set(table.pending_clustering_file_groups(tl))
    for pending in tl.pending_log_compaction():
        busy.update(
            FileGroupId(*fg) for fg in table.compaction_plan(pending.requested_time, tl).file_groups()
        )
    last = tl.completed().writes().last()
    latest = last.requested_time if last else None
    ops: list[CompactionOperation] = []
    index = view.file_index(view.partitions())
    # Groups whose every log file is empty (as listed) have no blocks to scan: no slice objects.
    written = group_any(index.group[index.is_log & (index.size > 0)], index.num_groups)
    for file_slice in view.latest_slices(index, view.with_log_files(index, exclude=busy) & written):
        if not any(lf.size for lf in file_slice.log_files):
            continue  # no log files, or only empty ones (as listed): no blocks to scan
        blocks = scan_log_blocks(
            table.fileio,
            table.base_path,
            file_slice,
            is_committed=view.is_committed,
            latest_instant=latest,
        )
        check_partial_blocks(table.base_path, SERVICE, blocks, merge)
        if not blocks or _already_log_compacted(blocks):
            continue
        threshold = policy.blocks_threshold
        if len(file_slice.log_files) >= threshold or len(blocks) >= threshold:
            ops.append(compaction_operation(file_slice))
    return compaction_plan(
        ops,
        strategy=CompactionStrategy(compactor_class_name=COMPACTOR_CLASS, strategy_params={}, version=1),
        preserve_hoodie_metadata=True,
    )


def schedule_log_compaction(
    ctx: ServiceContext, policy: LogCompactionPolicy, *, dry_run: bool = False
) -> Scheduled | None:
    """Plan and, unless ``dry_run``, write ``T.logcompaction.requested``; None if nothing to do."""
    table = ctx.table
    ctx.check_shape(SERVICE)
    require_log_compactable(table)
    if not policy.enabled:
        log.info("%s: log compaction not scheduled: %s=false", table.base_path, ENABLE_KEY)
        return None
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        timeline = table.reload()
        writing = timeline.pending().actions(Action.DELTA_COMMIT)
        if writing:
            raise TableServiceError(
                f"cannot schedule log compaction on {table.base_path} while delta commits are pending "
                f"({', '.join(str(i) for i in writing)}): their logs would sort before the merged log "
                "without being part of it; retry once they complete or are rolled back"
            )
        plan = plan_log_compaction(table, policy, timeline)
        if plan is None:
            return None
        reason = (
            f"{len(plan.operations or ())} file slice(s) with at least {policy.blocks_threshold} "
            "log files or blocks"
        )
        scheduled = ctx.request(timeline, Action.LOG_COMPACTION, plan, reason, dry_run=dry_run)
    if not dry_run:
        log.info("%s: scheduled log compaction %s (%s)", table.base_path, scheduled.instant_time, reason)
    return scheduled


# -- the per-file-group task ------------------------------------------------------------------


def _log_slice_of(op: CompactionOperation) -> FileSlice:
    """The slice an operation names, without its base file (log compaction never reads it)."""
    file_slice = dataclasses.replace(slice_of(op), base_file=None)
    if not file_slice.log_files:
        raise TableServiceError(f"log compaction of {op.file_id} names no log files")
    return file_slice


def valid_block_instants(blocks: list[LogBlock]) -> list[str]:
    """The instants of the blocks a scan applies, newest first: the COMPACTED_BLOCK_TIMES Hudi writes."""
    return list(dict.fromkeys(b.instant_time for b in reversed(blocks) if b.instant_time is not None))


def delete_records(
    merged_deletes: DeleteEntries, deleted_rows: pa.Table, merge: MergeConfig, partition_path: str
) -> list[dict[str, Any]]:
    """``HoodieDeleteRecord``s of the surviving deletes, each with the ordering value it merged with."""
    records: list[dict[str, Any]] = []
    keys, values = merged_deletes.keys.to_pylist(), merged_deletes.ordering_values
    for key, value, cls in zip(keys, values, merged_deletes.ordering_classes, strict=True):
        if cls == "ArrayWrapper" or isinstance(value, (list, tuple)):
            raise UnsupportedTableError(f"delete of {key!r}: multi-field ordering values are not supported")
        ordering = None if cls is None else (WRAPPER_NAMESPACE + cls, {"value": value})
        records.append({"recordKey": key, "partitionPath": partition_path, "orderingVal": ordering})
    if not deleted_rows.num_rows:
        return records
    # A winning data row flagged as a delete becomes a delete entry, as Hudi's append handle writes
    # it: with the row's ordering value under event-time ordering, else the default Integer 0.
    wrappers: list[tuple[str, dict[str, Any]] | None] = [None] * deleted_rows.num_rows
    field = merge.ordering_fields[0] if merge.ordering_fields else ""
    if merge.mode is RecordMergeMode.EVENT_TIME_ORDERING and field in deleted_rows.column_names:
        wrappers = ordering_wrappers(deleted_rows[field])
    keys, parts = (
        deleted_rows[c].to_pylist() for c in (RECORD_KEY_METADATA_FIELD, PARTITION_PATH_METADATA_FIELD)
    )
    for key, part, wrapped in zip(keys, parts, wrappers, strict=True):
        ordering = wrapped or (WRAPPER_NAMESPACE + "IntWrapper", {"value": 0})
        records.append({"recordKey": key, "partitionPath": part or partition_path, "orderingVal": ordering})
    return records


def delete_blocks(
    records: list[dict[str, Any]], header: Mapping[HeaderKey, str], table_version: int
) -> list[bytes]:
    """DELETE blocks of ``HoodieDeleteRecord`` dicts: one per ordering-value type (Java reads a
    block that mixes them, hudi-rs refuses it), and one empty block when there are no records."""
    schema = fastavro.parse_schema(load_schema("HoodieDeleteRecordList", table_version))
    by_type: dict[str | None, list[dict[str, Any]]] = {}
    for record in records:
        by_type.setdefault(record["orderingVal"] and record["orderingVal"][0], []).append(record)
    out: list[bytes] = []
    for group in by_type.values() if by_type else [[]]:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, {"deleteRecordList": group})
        payload = buf.getvalue()
        content = struct.pack(">ii", DELETE_BLOCK_VERSION, len(payload)) + payload
        out.append(encode_block(BlockType.DELETE, header, content))
    return out


def _data_block(
    rows: pa.Table,
    writer_schema: Mapping[str, Any],
    header: Mapping[HeaderKey, str],
    block_format: str,
    compression: str,
) -> bytes:
    if block_format == "parquet":
        sink = io.BytesIO()
        pq.write_table(rows, sink, compression=compression, use_compliant_nested_type=True)
        return encode_block(BlockType.PARQUET_DATA, header, sink.getvalue())
    return encode_block(BlockType.AVRO_DATA, header, encode_avro_block_content(rows, writer_schema))


def _new_log_file(task: Task, file_slice: FileSlice, instant_time: str, table_version: int) -> LogFile:
    """The output log: named with the instant (v8+) or the slice's base instant (v6), next version."""
    table = open_table_for_task(task)
    name_instant = instant_time if table_version >= 8 else file_slice.base_instant_time
    folder = join(table.base_path, file_slice.partition_path)
    versions = [
        lf.version
        for lf in (LogFile.parse(e.name) for e in table.fileio.list_dir(folder))
        if lf is not None and lf.file_id == file_slice.file_id and lf.instant_time == name_instant
    ]
    return LogFile(file_slice.file_id, name_instant, max(versions, default=0) + 1, str(task["write_token"]))


def log_compact_file_group(task: Task) -> TaskResult:
    """Executor side: merge one slice's log blocks into one new log file; returns its write stat."""
    started = time.monotonic()
    job = SliceTask.of(task)
    table, instant_time, schema, writer_schema = job.table, job.instant_time, job.schema, job.avro_schema
    fileio = table.fileio
    op = CompactionOperation.from_avro(task["operation"])
    file_slice = _log_slice_of(op)
    require_files(fileio, file_slice.log_file_paths(table.base_path), f"log compaction {instant_time}")
    merge = require_log_compactable(table)

    stats = ScanStats()
    blocks = scan_log_blocks(
        fileio,
        table.base_path,
        file_slice,
        is_committed=job.is_committed,
        latest_instant=instant_time,
        stats=stats,
    )
    check_partial_blocks(table.base_path, SERVICE, blocks, merge)
    on_read = job.schema_on_read
    batches: list[pa.Table | DeleteEntries] = []
    for block in blocks:
        if block.block_type is BlockType.DELETE:
            d = decode_delete_block(block, table.table_version)
            batches.append(
                DeleteEntries(pa.array(d.keys, pa.string()), d.ordering_values, d.ordering_classes)
            )
        else:
            batches.append(decode_data_block(block, schema, on_read=on_read))
    log_records = sum(len(b) if isinstance(b, DeleteEntries) else b.num_rows for b in batches)
    merged = merge_logs_only(batches, spec_for(merge), schema)
    scan_ms = int((time.monotonic() - started) * 1000)

    partition = file_slice.partition_path
    rows = merged.rows if merged.rows.num_rows else schema.empty_table()
    if rows.num_rows:
        idx = rows.schema.get_field_index(FILENAME_METADATA_FIELD)
        rows = rows.set_column(
            idx, rows.schema.field(idx), pa.array([file_slice.file_id] * rows.num_rows, pa.string())
        )
    deletes = delete_records(merged.deletes, merged.deleted_rows, merge, partition)
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.SCHEMA: json.dumps(writer_schema, separators=(",", ":")),
        HeaderKey.COMPACTED_BLOCK_TIMES: ",".join(valid_block_instants(blocks)),
    }
    parts: list[bytes] = []
    if rows.num_rows:
        block_format = str(task.get("block_format", "avro"))
        parts.append(_data_block(rows, writer_schema, header, block_format, job.compression))
    if deletes or not parts:  # with nothing left, an empty block still stands for what it covers
        parts.extend(delete_blocks(deletes, header, table.table_version))
    data = b"".join(parts)

    new = _new_log_file(task, file_slice, instant_time, table.table_version)
    WriteMarkers(fileio, table.paths, instant_time).create(partition, new.name, IOType.APPEND)
    path = join(table.base_path, partition, new.name)
    if os.environ.get(CRASH_ENV) == f"{SERVICE}.task_mid_write":
        with fileio.open_output(path) as half:  # a torn log, as a killed writer leaves one
            half.write(data[: len(data) // 2])
        crash_point(f"{SERVICE}.task_mid_write")
    fileio.create_new(path, data)
    crash_point(f"{SERVICE}.task_after_write")
    all_logs = sorted([*file_slice.log_files, new], key=lambda lf: lf.sort_key)
    total_ms = int((time.monotonic() - started) * 1000)
    stat = WriteStat(
        file_id=file_slice.file_id,
        path=join(partition, new.name),
        prev_commit=file_slice.base_instant_time,
        num_writes=rows.num_rows,
        num_deletes=len(deletes),
        num_update_writes=rows.num_rows,
        total_write_bytes=len(data),
        total_write_errors=0,
        partition_path=partition,
        total_log_records=log_records,
        total_updated_records_compacted=rows.num_rows + len(deletes),
        num_inserts=0,
        total_log_blocks=stats.total_log_blocks,
        total_corrupt_log_block=stats.total_corrupt_blocks,
        total_rollback_blocks=stats.total_rollback_blocks,
        file_size_in_bytes=len(data),
        log_version=new.version,
        log_offset=0,
        base_file=(op.data_file_path or "").rsplit("/", 1)[-1],
        log_files=[lf.name for lf in all_logs],
        runtime_stats=RuntimeStats(total_scan_time=scan_ms, total_create_time=0, total_upsert_time=total_ms),
        total_log_files_compacted=len(file_slice.log_files),
        total_log_read_time_ms=scan_ms,
        total_log_size_compacted=stats.total_log_size,
    )
    return {"write_stat": stat.to_avro(), "rows": rows.num_rows, "deletes": len(deletes)}


# -- execution --------------------------------------------------------------------------------


def _completed_after(timeline: ActiveTimeline, instant: Instant, instant_time: str) -> bool:
    """Whether ``instant`` completed after ``instant_time`` was requested."""
    if timeline.layout >= 2:
        done_at = instant.completion_time
        return done_at is not None and normalize(done_at) > normalize(instant_time)
    done = timeline.state_file_mtime_ms(instant.requested_time, State.COMPLETED, Action.DELTA_COMMIT)
    requested = timeline.state_file_mtime_ms(instant_time, State.REQUESTED, Action.LOG_COMPACTION)
    return done is not None and requested is not None and done >= requested


def interleaved_writes(
    table: HoodieTable, timeline: ActiveTimeline, instant_time: str, plan: CompactionPlan
) -> list[str]:
    """Delta commits requested before ``instant_time`` whose logs the plan does not cover but that a
    reader would order before its output: pending ones, and completed ones that wrote to a planned
    file group after the plan was made."""
    groups = set(plan.file_groups())
    planned = {
        (op.partition_path or "", p.rsplit("/", 1)[-1])
        for op in plan.operations or ()
        for p in op.delta_file_paths or ()
    }
    key = normalize(instant_time)
    found: list[str] = []
    for instant in timeline.actions(Action.DELTA_COMMIT):
        if normalize(instant.requested_time) >= key:
            continue
        if not instant.is_completed:
            found.append(f"{instant} (pending)")
            continue
        if not _completed_after(timeline, instant, instant_time):
            continue
        for stat in table.commit_metadata(instant, timeline).write_stats():
            partition = stat.partition_path or ""
            name = (stat.path or "").rsplit("/", 1)[-1]
            if (partition, stat.file_id or "") in groups and (partition, name) not in planned:
                found.append(f"{instant} wrote {join(partition, name)}")
    return found


def execute_log_compaction(ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
    """Run a requested log-compaction plan to completion; roll back an abandoned inflight one."""
    table = ctx.table
    ctx.check_shape(SERVICE)
    require_log_compactable(table)
    plan = table.compaction_plan(
        instant_time, require_pending(ctx, instant_time, Action.LOG_COMPACTION, "log compaction")
    )
    for op in plan.operations or ():
        _log_slice_of(op)  # a bad plan fails before anything is written
    with claim_instant(
        ctx,
        instant_time,
        Action.LOG_COMPACTION,
        "log compaction",
        undo=lambda i: _roll_back_abandoned(ctx, i),
    ) as claim:
        if claim.instant.action is not Action.LOG_COMPACTION:
            raise TableServiceError(f"{table.base_path}: {claim.instant} is not a log compaction")
        if claim.instant.is_inflight:
            return _roll_back_abandoned(ctx, claim.instant)
        timeline = table.reload()

        def still_ordered(fresh: ActiveTimeline) -> None:
            late = interleaved_writes(table, fresh, instant_time, plan)
            if late:
                raise TableServiceError(
                    f"log compaction {instant_time} on {table.base_path} no longer covers every log before "
                    f"it: {'; '.join(late)}. Roll the log compaction back; it cannot complete safely"
                )

        block_format = ctx.options.get(BLOCK_FORMAT_KEY, "avro").strip().lower()
        if block_format not in ("avro", "parquet"):
            raise TableServiceError(f"unsupported {BLOCK_FORMAT_KEY}={block_format!r} (avro, parquet)")
        still_ordered(timeline)
        schema_json = latest_writer_schema(table, SERVICE)
        inflight = claim.go_inflight(timeline, {op.partition_path or "" for op in plan.operations or ()})
        crash_point(f"{SERVICE}.after_inflight")
        shared = slice_task_fields(ctx, timeline.reload(), instant_time, add_meta_fields(schema_json))
        shared["block_format"] = block_format
        tasks = [
            {**shared, "operation": op.to_avro(), "write_token": claim.write_token(i, i)}
            for i, op in enumerate(plan.operations or ())
        ]
        description = f"log compaction {instant_time} of {table.name}"
        results = claim.run(runner, log_compact_file_group, tasks, description)
        stats = [WriteStat.from_avro(r["write_stat"]) for r in results]
        metadata = CommitMetadata(
            partition_to_write_stats=stats_by_partition(stats),
            compacted=False,
            extra_metadata={"schema": json.dumps(schema_json, separators=(",", ":"))},
            version=None,
            operation_type=WriteOperationType.LOG_COMPACT.value,
        )
        crash_point(f"{SERVICE}.before_complete")
        done = ctx.complete(
            inflight, metadata.to_bytes(table.table_version), NoConflictingCommit(still_ordered)
        )
        claim.finish()
    counts = {
        "records": sum(int(r["rows"]) for r in results),
        "deletes": sum(int(r["deletes"]) for r in results),
    }
    log.info(
        "%s: completed log compaction %s of %d file groups: %s", table.base_path, done, len(stats), counts
    )
    return ExecutionResult(done, stats, counts)


def _roll_back_abandoned(ctx: ServiceContext, instant: Instant) -> ExecutionResult:
    """An abandoned attempt is not run again: as in Hudi, a log-compaction plan is disposable, so the
    attempt is rolled back together with its plan, and a later schedule plans the file groups anew."""
    ts = instant.requested_time
    reason = f"abandoned {instant}"
    rollback = schedule_rollback(ctx, ts, action=Action.LOG_COMPACTION, pending_only=True, reason=reason)
    assert rollback.instant_time is not None
    done, metadata = execute_rollback(ctx, rollback.instant_time, LocalRunner(), delete_instants=True)
    assert done is not None
    log.warning("%s: rolled back abandoned log compaction %s with %s", ctx.table.base_path, ts, done)
    return ExecutionResult(done, [], {"rolled_back": ts, "files_deleted": metadata.total_files_deleted})


class LogCompactionService:
    """Log compaction as a :class:`~hoodie.services.base.TableService`."""

    name = SERVICE

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_log_compaction(ctx, LogCompactionPolicy.from_options(ctx.options), dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return list(timeline.pending_log_compaction())

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_log_compaction(ctx, instant_time, runner)


register_service(LogCompactionService())
