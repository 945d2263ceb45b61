"""Executing a clustering plan: one task per clustering group, then one replace commit.

A task reads every slice of its group merged by the table's merge mode (base file plus log
blocks), orders the records as the layout options say (:mod:`hoodie.services.layout`), splits
them into ``numOutputFileGroups`` files of even size and writes each as the base file of a new
file group named with the clustering instant. With ``preserveHoodieMetadata`` (Hudi's default)
records keep ``_hoodie_commit_time`` and ``_hoodie_commit_seqno``; ``_hoodie_file_name`` always
becomes the new file's name. The instant completes as a ``replacecommit`` whose
``partitionToReplaceFileIds`` lists every input file group, with ``operationType=CLUSTER``.

Plans name files by full URI, possibly of another machine (a table copied elsewhere): a task
keeps only the file name and looks for it in the slice's partition of the table it runs on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from hoodie.errors import TableServiceError
from hoodie.file_group.base_file import BaseFile, new_file_id, write_token
from hoodie.file_group.base_file_writer import set_constant
from hoodie.file_group.file_slice import FileGroupId, FileSlice
from hoodie.file_group.log_file import LogFile
from hoodie.io.fileio import join
from hoodie.models.clustering import ClusteringGroup, ClusteringPlan, SliceInfo
from hoodie.models.commit import ReplaceCommitMetadata, RuntimeStats, WriteStat
from hoodie.read.reader import table_schema
from hoodie.read.slice_reader import read_parquet, read_slice
from hoodie.schema.avro_arrow import add_meta_fields
from hoodie.schema.meta_fields import (
    COMMIT_SEQNO_METADATA_FIELD,
    COMMIT_TIME_METADATA_FIELD,
    FILENAME_METADATA_FIELD,
)
from hoodie.services.base import (
    CRASH_ENV,
    ExecutionResult,
    Runner,
    ServiceContext,
    Task,
    TaskResult,
    crash_point,
)
from hoodie.services.claim import claim_instant, require_pending
from hoodie.services.clustering_copy import (
    BINARY_COPY_STRATEGIES,
    RUN_PACKAGE,
    SORT_COLUMNS_KEY,
    copy_group,
    decide_binary_copy,
    write_rewritten_file,
)
from hoodie.services.layout import LayoutOptions, parse_sort_columns, sort_for_layout
from hoodie.services.partial_check import check_planned_slices
from hoodie.services.rollback import recover_inflight
from hoodie.services.slice_tasks import (
    COMPRESSION_KEY,
    SliceTask,
    latest_writer_schema,
    require_files,
    slice_task_fields,
    stats_by_partition,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import NoConflictingCommit
from hoodie.write.markers import IOType, WriteMarkers

__all__ = [
    "EXECUTION_STRATEGIES",
    "SORT_COLUMNS_KEY",
    "SPARK_SORT_AND_SIZE",
    "cluster_group",
    "execute_clustering",
    "slice_of",
]

log = logging.getLogger(__name__)

SPARK_SORT_AND_SIZE = RUN_PACKAGE + "SparkSortAndSizeExecutionStrategy"
EXECUTION_STRATEGIES = frozenset(
    {SPARK_SORT_AND_SIZE, RUN_PACKAGE + "JavaSortAndSizeExecutionStrategy", *BINARY_COPY_STRATEGIES}
)


def _file_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def slice_of(info: SliceInfo) -> FileSlice:
    """The file slice a plan's ``HoodieSliceInfo`` names (file names only; see the module doc)."""
    partition = info.partition_path or ""
    file_id = info.file_id or ""
    base = None
    if info.data_file_path:
        base = BaseFile.parse(_file_name(info.data_file_path))
        if base is None or base.file_id != file_id:
            raise TableServiceError(
                f"clustering slice {partition}/{file_id} names {info.data_file_path!r}, "
                "which is not a base file of that file group"
            )
    logs = []
    for path in info.delta_file_paths or ():
        lf = LogFile.parse(_file_name(path))
        if lf is None or lf.file_id != file_id:
            raise TableServiceError(
                f"clustering slice {partition}/{file_id} names {path!r}, "
                "which is not a log file of that file group"
            )
        logs.append(lf)
    logs.sort(key=lambda lf: lf.sort_key)
    if base is None and not logs:
        raise TableServiceError(f"clustering slice {partition}/{file_id} names no file at all")
    base_instant = base.commit_time if base is not None else logs[0].instant_time
    return FileSlice(partition, file_id, base_instant, base, tuple(logs))


def _with_sizes(table: HoodieTable, file_slice: FileSlice, instant_time: str) -> FileSlice:
    """The slice with file sizes from storage; every file the plan names must still exist."""
    infos = require_files(table.fileio, file_slice.file_paths(table.base_path), f"clustering {instant_time}")
    sizes = [info.size for info in infos]
    base = file_slice.base_file.with_size(sizes.pop(0)) if file_slice.base_file is not None else None
    logs = tuple(lf.with_size(size) for lf, size in zip(file_slice.log_files, sizes, strict=True))
    return dataclasses.replace(file_slice, base_file=base, log_files=logs)


def _rewrite_commit_metadata(data: pa.Table, instant_time: str, task_index: int) -> pa.Table:
    """Records stamped with the clustering instant (when the plan does not preserve metadata)."""
    n = data.num_rows
    if COMMIT_TIME_METADATA_FIELD in data.column_names:
        i = data.schema.get_field_index(COMMIT_TIME_METADATA_FIELD)
        data = data.set_column(i, data.schema.field(i), pa.array([instant_time] * n, pa.string()))
    if COMMIT_SEQNO_METADATA_FIELD in data.column_names:
        i = data.schema.get_field_index(COMMIT_SEQNO_METADATA_FIELD)
        seqnos = [f"{instant_time}_{task_index}_{k}" for k in range(n)]
        data = data.set_column(i, data.schema.field(i), pa.array(seqnos, pa.string()))
    return data


def _splits(rows: int, parts: int) -> list[tuple[int, int]]:
    """``(offset, length)`` of ``min(parts, rows)`` contiguous runs of near-equal length."""
    parts = max(1, min(parts, rows))
    if rows == 0:
        return []
    base, extra = divmod(rows, parts)
    out = []
    offset = 0
    for k in range(parts):
        length = base + (1 if k < extra else 0)
        out.append((offset, length))
        offset += length
    return out


def cluster_group(task: Task) -> TaskResult:
    """Executor side: rewrite one clustering group into new file groups; returns their write stats."""
    started = time.monotonic()
    job = SliceTask.of(task)
    table, instant_time, schema = job.table, job.instant_time, job.schema
    group = ClusteringGroup.from_avro(task["group"])
    task_index = int(task["group_index"])
    opts = job.read_options()
    partitions = {info.partition_path or "" for info in group.slices or ()}
    if len(partitions) > 1:
        raise TableServiceError(
            f"clustering {instant_time}: group {task_index} spans partitions {sorted(partitions)}; "
            "only partition-aware plans (one partition per group) are supported"
        )
    partition = partitions.pop() if partitions else ""
    slices = [_with_sizes(table, slice_of(info), instant_time) for info in group.slices or ()]
    copied = copy_group(task, job, slices, partition)
    if copied is not None:
        return copied
    parts: list[pa.Table] = []
    scan_start = time.monotonic()
    for file_slice in slices:
        base_file = file_slice.base_file_path(table.base_path)
        if base_file and not file_slice.log_files:
            # A base file alone: read whole with threads (the rows read_slice would stream in batches).
            parts.append(read_parquet(table.fileio, base_file, schema, on_read=opts.on_read))
        else:
            parts.append(read_slice(table.fileio, table.base_path, file_slice, opts))
    scan_ms = int((time.monotonic() - scan_start) * 1000)
    data = pa.concat_tables(parts) if parts else schema.empty_table()
    if not task["preserve_metadata"]:
        data = _rewrite_commit_metadata(data, instant_time, task_index)
    layout = LayoutOptions.from_options(task["layout"])
    data = sort_for_layout(data, parse_sort_columns(task.get("sort_columns")), layout)
    file_ids: list[str] = list(task["file_ids"])
    markers = WriteMarkers(table.fileio, table.paths, instant_time)
    stats: list[dict[str, Any]] = []
    runs = _splits(data.num_rows, len(file_ids))
    for j, (offset, length) in enumerate(runs):
        create_start = time.monotonic()
        chunk = data.slice(offset, length)
        new = BaseFile(file_ids[j], write_token(task_index, int(task["attempt"]), j), instant_time)
        if FILENAME_METADATA_FIELD in chunk.column_names:
            chunk = set_constant(chunk, FILENAME_METADATA_FIELD, new.name)
        markers.create(partition, new.name, IOType.CREATE)
        path = join(table.base_path, partition, new.name)
        if os.environ.get(CRASH_ENV) == "clustering.task_mid_write":
            with table.fileio.open_output(path) as half:  # a torn file, as a killed writer leaves one
                half.write(b"PAR1" + b"\0" * 64)
            crash_point("clustering.task_mid_write")
        size = write_rewritten_file(table, path, chunk, job.avro_schema, job.compression)
        crash_point("clustering.task_after_write")
        stat = WriteStat(
            file_id=new.file_id,
            path=join(partition, new.name),
            prev_commit="null",
            num_writes=length,
            num_deletes=0,
            num_update_writes=0,
            total_write_bytes=size,
            total_write_errors=0,
            partition_path=partition,
            total_log_records=0,
            total_updated_records_compacted=0,
            num_inserts=length,
            total_log_blocks=0,
            total_corrupt_log_block=0,
            total_rollback_blocks=0,
            file_size_in_bytes=size,
            runtime_stats=RuntimeStats(
                total_scan_time=0,
                total_create_time=int((time.monotonic() - create_start) * 1000),
                total_upsert_time=0,
            ),
            total_log_files_compacted=0,
            total_log_read_time_ms=0,
            total_log_size_compacted=0,
            num_updates=0,
        )
        stats.append(stat.to_avro())
    return {
        "write_stats": stats,
        "rows": data.num_rows,
        "scan_ms": scan_ms,
        "task_ms": int((time.monotonic() - started) * 1000),
    }


# -- driver side -----------------------------------------------------------------------------


def _input_groups(plan: ClusteringPlan) -> set[FileGroupId]:
    return {FileGroupId(p, f) for p, f in plan.file_groups()}


def _plan_files(plan: ClusteringPlan) -> set[str]:
    """Names of every base and log file the plan reads."""
    names: set[str] = set()
    for group in plan.input_groups or ():
        for piece in group.slices or ():
            if piece.data_file_path:
                names.add(_file_name(piece.data_file_path))
            names.update(_file_name(p) for p in piece.delta_file_paths or ())
    return names


@dataclass(frozen=True)
class _ReadState:
    """What the tasks of one execution read: the plan's files and the instants counted committed."""

    instant_time: str
    inputs: frozenset[FileGroupId]
    plan_files: frozenset[str]
    read_committed: frozenset[str]
    planned_at_ms: int | None


def _completed_after_planning(instant: Instant, fresh: ActiveTimeline, state: _ReadState) -> bool:
    if normalize(instant.requested_time) > normalize(state.instant_time):
        return True
    if fresh.layout >= 2:  # layout 2 records completion times, from the same clock as instant times
        return instant.completion_time is not None and normalize(instant.completion_time) > normalize(
            state.instant_time
        )
    # Layout 1 has no completion time; compare file times as Hudi does for such instants.
    done_ms = fresh.state_file_mtime_ms(instant.requested_time, State.COMPLETED, instant.action)
    return state.planned_at_ms is None or done_ms is None or done_ms >= state.planned_at_ms


def _no_lost_writes(table: HoodieTable, state: _ReadState) -> Callable[[ActiveTimeline], None]:
    """Completion precondition: no write the tasks did not read touched the rewritten file groups.

    A write that completed after the plan was made and touched an input file group is lost by the
    rewrite unless the tasks read all of it: it counted as committed when they read, and every
    file it wrote there is one the plan names (a layout 1 delta commit appending to a planned log).
    """

    def check(fresh: ActiveTimeline) -> None:
        for instant in fresh.completed().writes():
            if instant.requested_time == state.instant_time or not _completed_after_planning(
                instant, fresh, state
            ):
                continue
            meta = table.commit_metadata(instant, fresh)
            touched = [
                s
                for s in meta.write_stats()
                if FileGroupId(s.partition_path or "", s.file_id or "") in state.inputs
            ]
            replaced = meta.replaced_file_ids() if isinstance(meta, ReplaceCommitMetadata) else set()
            read_all = instant.requested_time in state.read_committed and all(
                _file_name(s.path or "") in state.plan_files for s in touched
            )
            clash = (
                {FileGroupId(s.partition_path or "", s.file_id or "") for s in touched}
                if not read_all
                else set()
            )
            clash |= {FileGroupId(p, f) for p, f in replaced} & state.inputs
            if clash:
                raise TableServiceError(
                    f"{instant} completed after clustering {state.instant_time} was planned and wrote file "
                    f"group(s) {sorted(str(g) for g in clash)[:5]} that the clustering rewrites; "
                    f"clustering {state.instant_time} cannot complete and must be rolled back"
                )

    return check


def _drop_unreferenced(
    table: HoodieTable, instant_time: str, stats: Sequence[WriteStat], ours: Callable[[str], bool]
) -> list[str]:
    """Delete files of this attempt (``ours``: by write token) the markers list but no write stat names
    (left by retried or failed tasks). Another attempt's files are never touched: an executor that
    took the instant over may be writing them."""
    written = {join(table.base_path, s.path or "") for s in stats}
    removed = []
    for path in WriteMarkers(table.fileio, table.paths, instant_time).data_file_paths():
        if path not in written and ours(path.rsplit("/", 1)[-1]) and table.fileio.exists(path):
            table.fileio.delete(path)
            removed.append(path)
    return removed


def execute_clustering(ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
    """Run a requested (or abandoned inflight) clustering plan to completion."""
    table = ctx.table
    ctx.check_shape("clustering")
    found = require_pending(ctx, instant_time, Action.REPLACE_COMMIT, "clustering")
    pending = found.get(instant_time, Action.REPLACE_COMMIT)
    assert pending is not None
    if not table.is_clustering(pending, found):
        raise TableServiceError(f"{table.base_path}: {pending} is not a clustering")
    requested = table.clustering_plan(instant_time, found)
    plan = requested.clustering_plan
    assert plan is not None  # is_clustering checked it
    if table.config.is_mor:  # IS_PARTIAL blocks the merger cannot merge (e.g. a plan Hudi scheduled)
        slices = [slice_of(info) for g in plan.input_groups or () for info in g.slices or ()]
        check_planned_slices(table, found, "clustering", slices)
    strategy = plan.strategy.strategy_class_name if plan.strategy else None
    if strategy not in EXECUTION_STRATEGIES:
        raise TableServiceError(
            f"clustering {instant_time} uses execution strategy {strategy!r}; supported: "
            f"{', '.join(sorted(EXECUTION_STRATEGIES))}"
        )
    for group in plan.input_groups or ():
        for piece in group.slices or ():
            slice_of(piece)  # every name must parse: a bad plan fails before anything is written
    inputs = _input_groups(plan)
    params = (plan.strategy.strategy_params if plan.strategy else None) or {}
    # One decision for the whole plan, before anything is written (a refusal raises here).
    binary_copy = decide_binary_copy(
        table, plan, instant_time, ctx.options, ctx.options.get(COMPRESSION_KEY, "gzip"), table_schema(table)
    )
    with claim_instant(
        ctx, instant_time, Action.REPLACE_COMMIT, "clustering", undo=lambda i: recover_inflight(ctx, i)
    ) as claim:
        instant = claim.instant
        if instant.is_inflight:
            recover_inflight(ctx, instant)
        timeline = table.reload()
        schema_json = latest_writer_schema(table, "clustering")
        meta_avro = add_meta_fields(schema_json) if table.config.populate_meta_fields else schema_json
        inflight = claim.go_inflight(timeline, {partition for partition, _ in plan.file_groups()})
        crash_point("clustering.after_inflight")
        base = slice_task_fields(ctx, timeline.reload(), instant_time, meta_avro)
        shared = {
            **base,
            "preserve_metadata": bool(plan.preserve_hoodie_metadata),
            "sort_columns": params.get(SORT_COLUMNS_KEY),
            "layout": LayoutOptions.from_options(ctx.options).to_options(),
            "binary_copy": binary_copy,
            "attempt": claim.attempt,
        }
        tasks = [
            {
                **shared,
                "group": group.to_avro(),
                "group_index": i,
                "file_ids": [new_file_id() for _ in range(max(1, group.num_output_file_groups or 1))],
            }
            for i, group in enumerate(plan.input_groups or ())
        ]
        results = claim.run(runner, cluster_group, tasks, f"clustering {instant_time} of {table.name}")
        stats = [WriteStat.from_avro(s) for r in results for s in r["write_stats"]]
        replaced: dict[str, list[str]] = {}
        for partition, file_id in plan.file_groups():
            replaced.setdefault(partition, []).append(file_id)
        metadata = ReplaceCommitMetadata(
            partition_to_write_stats=stats_by_partition(stats),
            compacted=False,
            extra_metadata={"schema": json.dumps(schema_json, separators=(",", ":"))},
            version=None,
            operation_type="CLUSTER",
            partition_to_replace_file_ids=replaced,
        )
        dropped = _drop_unreferenced(table, instant_time, stats, claim.owns)
        crash_point("clustering.before_complete")
        done = ctx.complete(
            inflight,
            metadata.to_bytes(table.table_version),
            NoConflictingCommit(
                _no_lost_writes(
                    table,
                    _ReadState(
                        instant_time,
                        frozenset(inputs),
                        frozenset(_plan_files(plan)),
                        frozenset(base["completed_instants"]),
                        timeline.state_file_mtime_ms(instant_time, State.REQUESTED, instant.action),
                    ),
                ),
            ),
        )
        claim.finish()
    rows = sum(int(r["rows"]) for r in results)
    log.info(
        "%s: completed clustering %s: %d file group(s) rewritten into %d file(s), %d rows",
        table.base_path,
        done,
        len(inputs),
        len(stats),
        rows,
    )
    return ExecutionResult(
        done,
        stats,
        {
            "replaced_file_groups": len(inputs),
            "rows": rows,
            "output_files": len(stats),
            "dropped_files": dropped,
            "groups": len(plan.input_groups or ()),
        },
    )
