"""Clustering: plan, schedule and execute the rewrite of small file groups, as Apache Hudi does.

The plan (``HoodieRequestedReplaceMetadata`` with ``operationType=CLUSTER``) groups the latest
slices of small file groups per partition. Hudi's size-based planner
(``SparkSizeBasedClusteringPlanStrategy``) takes slices whose base file is below
``small.file.limit`` (a slice without a base file counts as 0 bytes there; its log files do not
count), leaves out file groups under pending compaction, log compaction or clustering and replaced
ones, orders the slices by base file size, largest first, and packs them into
groups of at most ``max.bytes.per.group``, counting a slice without base file as
``hoodie.parquet.max.file.size``. A group asks for ``ceil(bytes / target.file.max.bytes)`` output
file groups. The last group of a partition holding a single slice is dropped unless sort columns
are configured or ``single.group.clustering.enabled`` is true (its default). At most
``max.num.groups`` groups are planned, per partition and overall.

Which partitions are looked at: from table version 8 on, Hudi plans incrementally by default
(``hoodie.table.services.incremental.enabled``): only partitions written since the last completed
clustering plus those it left out (``missingSchedulePartitions``); the first clustering of a table
looks at all partitions. Then a regex, an explicit selection and a filter mode narrow them down.

Table versions 8 and 9 request ``T.clustering.requested``; table version 6 requests
``T.replacecommit.requested``. Execution is :mod:`hoodie.services.clustering_executor`.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import TableServiceError, UnsupportedTableError
from hoodie.file_group.file_index import paused_gc
from hoodie.file_group.file_slice import FileGroupId, FileSlice
from hoodie.file_group.view import FileSystemView
from hoodie.models.clustering import (
    CLUSTER_OPERATION,
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
)
from hoodie.read.reader import table_schema
from hoodie.services.base import (
    ExecutionResult,
    Runner,
    Scheduled,
    ServiceContext,
    register_service,
)
from hoodie.services.clustering_executor import (
    EXECUTION_STRATEGIES,
    SORT_COLUMNS_KEY,
    SPARK_SORT_AND_SIZE,
    execute_clustering,
    slice_of,
)
from hoodie.services.incremental import incremental_enabled, incremental_option, partitions_written_since
from hoodie.services.layout import parse_sort_columns
from hoodie.services.options import bool_option, int_option
from hoodie.services.partial_check import check_planned_slices
from hoodie.services.planning import planning_view
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.lock import locked

__all__ = [
    "ClusteringPolicy",
    "ClusteringService",
    "PartitionFilterMode",
    "clustering_partitions",
    "execute_clustering",
    "last_clustering",
    "pending_clustering",
    "plan_clustering",
    "schedule_clustering",
    "trigger_reason",
]

log = logging.getLogger(__name__)

_MB = 1024 * 1024
_PREFIX = "hoodie.clustering.plan.strategy."
_PLAN_PACKAGE = "org.apache.hudi.client.clustering.plan.strategy."
SIZE_BASED_PLANS = frozenset(
    {
        _PLAN_PACKAGE + "SparkSizeBasedClusteringPlanStrategy",
        _PLAN_PACKAGE + "JavaSizeBasedClusteringPlanStrategy",
    }
)
# Deprecated plan strategies Hudi rewrites to the size-based one plus a partition filter mode.
_DEPRECATED_PLANS = {
    _PLAN_PACKAGE + "SparkRecentDaysClusteringPlanStrategy": "RECENT_DAYS",
    _PLAN_PACKAGE + "SparkSelectedPartitionsClusteringPlanStrategy": "SELECTED_PARTITIONS",
    _PLAN_PACKAGE + "JavaRecentDaysClusteringPlanStrategy": "RECENT_DAYS",
}
CLUSTERING_PLAN_VERSION = 1


class PartitionFilterMode(StrEnum):
    """``hoodie.clustering.plan.partition.filter.mode``."""

    NONE = "NONE"
    RECENT_DAYS = "RECENT_DAYS"
    SELECTED_PARTITIONS = "SELECTED_PARTITIONS"
    DAY_ROLLING = "DAY_ROLLING"


@dataclass(frozen=True)
class ClusteringPolicy:
    """How to plan clusterings, from Hudi's clustering config keys (defaults are Hudi's)."""

    small_file_limit: int = 300 * _MB
    target_file_max_bytes: int = 1024 * _MB
    max_bytes_per_group: int = 2048 * _MB
    max_num_groups: int = 30
    parquet_max_file_size: int = 120 * _MB
    sort_columns: str | None = None
    single_group_clustering: bool = True
    execution_strategy: str = SPARK_SORT_AND_SIZE
    preserve_commit_metadata: bool = True
    filter_mode: PartitionFilterMode = PartitionFilterMode.NONE
    partition_regex: str | None = None
    partition_selected: tuple[str, ...] = ()
    begin_partition: str | None = None
    end_partition: str | None = None
    lookback_partitions: int = 2
    skip_latest_partitions: int = 0
    incremental: bool | None = None
    """``None``: Hudi's default for the table version (on from version 8)."""
    max_commits: int | None = None
    """Schedule only after this many commits since the last clustering (``None``: always)."""

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ClusteringPolicy:
        plan_class = options.get("hoodie.clustering.plan.strategy.class", "").strip()
        mode_raw = options.get("hoodie.clustering.plan.partition.filter.mode", "NONE")
        if plan_class in _DEPRECATED_PLANS:
            mode_raw = _DEPRECATED_PLANS[plan_class]
        elif plan_class and plan_class not in SIZE_BASED_PLANS:
            raise UnsupportedTableError(
                f"unsupported hoodie.clustering.plan.strategy.class={plan_class!r} "
                f"(supported: {', '.join(sorted(SIZE_BASED_PLANS | set(_DEPRECATED_PLANS)))})"
            )
        try:
            mode = PartitionFilterMode(mode_raw.strip().upper())
        except ValueError as e:
            allowed = ", ".join(m.value for m in PartitionFilterMode)
            raise TableServiceError(
                f"unsupported hoodie.clustering.plan.partition.filter.mode={mode_raw!r} ({allowed})"
            ) from e
        execution = options.get("hoodie.clustering.execution.strategy.class", SPARK_SORT_AND_SIZE).strip()
        if execution not in EXECUTION_STRATEGIES:
            raise UnsupportedTableError(
                f"unsupported hoodie.clustering.execution.strategy.class={execution!r} "
                f"(supported: {', '.join(sorted(EXECUTION_STRATEGIES))})"
            )
        triggers = [
            int_option(options, key, 4)
            for key in ("hoodie.clustering.inline.max.commits", "hoodie.clustering.async.max.commits")
            if key in options
        ]
        regex = options.get(_PREFIX + "partition.regex.pattern") or None
        if regex is not None:
            try:
                re.compile(regex)
            except re.error as e:
                raise TableServiceError(
                    f"{_PREFIX}partition.regex.pattern={regex!r} is not a regex: {e}"
                ) from e
        selected = tuple(p for p in (options.get(_PREFIX + "partition.selected") or "").split(",") if p)
        return cls(
            small_file_limit=int_option(options, _PREFIX + "small.file.limit", 300 * _MB),
            target_file_max_bytes=int_option(options, _PREFIX + "target.file.max.bytes", 1024 * _MB),
            max_bytes_per_group=int_option(options, _PREFIX + "max.bytes.per.group", 2048 * _MB),
            max_num_groups=int_option(options, _PREFIX + "max.num.groups", 30),
            parquet_max_file_size=int_option(options, "hoodie.parquet.max.file.size", 120 * _MB),
            sort_columns=(options.get(_PREFIX + "sort.columns") or "").strip() or None,
            single_group_clustering=bool_option(options, _PREFIX + "single.group.clustering.enabled", True),
            execution_strategy=execution,
            preserve_commit_metadata=bool_option(options, "hoodie.clustering.preserve.commit.metadata", True),
            filter_mode=mode,
            partition_regex=regex,
            partition_selected=selected,
            begin_partition=options.get(_PREFIX + "cluster.begin.partition") or None,
            end_partition=options.get(_PREFIX + "cluster.end.partition") or None,
            lookback_partitions=int_option(options, _PREFIX + "daybased.lookback.partitions", 2),
            skip_latest_partitions=int_option(options, _PREFIX + "daybased.skipfromlatest.partitions", 0),
            incremental=incremental_option(options),
            max_commits=max(triggers) if triggers else None,
        )

    def incremental_for(self, table_version: int) -> bool:
        """Incremental scheduling exists from table version 8 (Hudi 1.0) and is on by default there."""
        return incremental_enabled(self.incremental, table_version)


# -- the timeline's clusterings --------------------------------------------------------------


def pending_clustering(table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
    """Requested and inflight clusterings, oldest first (``clustering``, or a v6 ``replacecommit``)."""
    return [
        i
        for i in timeline.pending().actions(Action.CLUSTERING, Action.REPLACE_COMMIT)
        if table.is_clustering(i, timeline)
    ]


def last_clustering(table: HoodieTable, timeline: ActiveTimeline, *, completed_only: bool) -> Instant | None:
    """The newest clustering instant (by requested time), completed or, unless asked, pending too."""
    for instant in reversed(timeline.actions(Action.CLUSTERING, Action.REPLACE_COMMIT).instants):
        if instant.is_completed:
            if table.commit_metadata(instant, timeline).operation_type == CLUSTER_OPERATION:
                return instant
        elif not completed_only and table.is_clustering(instant, timeline):
            return instant
    return None


def trigger_reason(table: HoodieTable, timeline: ActiveTimeline, policy: ClusteringPolicy) -> str | None:
    """Why clustering should be planned now, or None while too few commits followed the last one."""
    if policy.max_commits is None:
        return "requested"
    last = last_clustering(table, timeline, completed_only=False)
    commits = timeline.completed().actions(Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
    if last is not None:
        commits = commits.after(last.requested_time)
    if len(commits) < policy.max_commits:
        return None
    since = f"since clustering {last.requested_time}" if last else "on the timeline"
    return f"{len(commits)} commits {since} (max.commits={policy.max_commits})"


# -- partitions ------------------------------------------------------------------------------


def _incremental_partitions(
    table: HoodieTable, timeline: ActiveTimeline, last: Instant
) -> tuple[set[str], list[str]]:
    """Partitions written since ``last`` (a completed clustering), and the partitions it missed."""
    plan = table.clustering_plan(last.requested_time, timeline).clustering_plan
    missing = list((plan.missing_schedule_partitions if plan else None) or [])
    return partitions_written_since(table, timeline, last) | set(missing), missing


def _filter_partitions(
    partitions: list[str], policy: ClusteringPolicy, now: dt.datetime
) -> tuple[list[str], list[str]]:
    """``ClusteringPlanPartitionFilter``: (partitions to plan, partitions skipped for later)."""
    mode = policy.filter_mode
    if mode is PartitionFilterMode.RECENT_DAYS:
        newest_first = sorted(partitions, reverse=True)
        skip = min(max(policy.skip_latest_partitions, 0), len(newest_first))
        limit = policy.lookback_partitions if policy.lookback_partitions > 0 else len(partitions)
        return newest_first[skip : skip + limit], newest_first[:skip]
    if mode is PartitionFilterMode.SELECTED_PARTITIONS:
        begin, end = policy.begin_partition, policy.end_partition
        return [p for p in partitions if (begin is None or p >= begin) and (end is None or p <= end)], []
    if mode is PartitionFilterMode.DAY_ROLLING:
        ordered = sorted(partitions)
        return [p for i, p in enumerate(ordered) if i % 24 == now.hour], []
    return partitions, []


def clustering_partitions(
    table: HoodieTable,
    timeline: ActiveTimeline,
    policy: ClusteringPolicy,
    all_partitions: Callable[[], Iterable[str]],
    now: dt.datetime,
) -> tuple[list[str], list[str]]:
    """The partitions to plan, and the ones recorded as missed (``missingSchedulePartitions``)."""
    incremental = policy.incremental_for(table.table_version)
    last = last_clustering(table, timeline, completed_only=True) if incremental else None
    missing: list[str] = []
    if policy.partition_selected:
        partitions = list(policy.partition_selected)
        if last is not None:
            missing = _incremental_partitions(table, timeline, last)[1]
    else:
        if last is not None:
            partitions = sorted(_incremental_partitions(table, timeline, last)[0])
        else:
            partitions = sorted(all_partitions())
        if policy.partition_regex:
            pattern = re.compile(policy.partition_regex)
            partitions = [p for p in partitions if pattern.fullmatch(p)]
    chosen, skipped = _filter_partitions(partitions, policy, now)
    return chosen, missing + skipped


# -- planning --------------------------------------------------------------------------------


def _metrics(slices: list[FileSlice], default_base_size: int) -> dict[str, float]:
    """The five metrics Hudi records per group (``FileSliceMetricUtils``)."""
    log_files = sum(len(s.log_files) for s in slices)
    log_size = sum(lf.size for s in slices for lf in s.log_files if lf.size >= 0)
    base = sum(s.base_file.size for s in slices if s.base_file is not None)
    write = sum(
        s.base_file.size if s.base_file and s.base_file.size > 0 else default_base_size for s in slices
    )
    read_mb = (base + log_size) // _MB
    write_mb = write // _MB
    return {
        "TOTAL_LOG_FILES": float(log_files),
        "TOTAL_IO_MB": float(read_mb + write_mb),
        "TOTAL_IO_READ_MB": float(read_mb),
        "TOTAL_LOG_FILES_SIZE": float(log_size),
        "TOTAL_IO_WRITE_MB": float(write_mb),
    }


def _slice_info(table: HoodieTable, s: FileSlice) -> SliceInfo:
    base = s.base_file_path(table.base_path)
    return SliceInfo(
        data_file_path=table.fileio.to_uri(base) if base else "",
        delta_file_paths=[table.fileio.to_uri(p) for p in s.log_file_paths(table.base_path)],
        file_id=s.file_id,
        partition_path=s.partition_path,
        bootstrap_file_path="",
        version=1,
    )


def _slice_size(s: FileSlice, policy: ClusteringPolicy) -> int:
    return s.base_file.size if s.base_file is not None else policy.parquet_max_file_size


def _groups_for_partition(
    sizes: Sequence[int], total: int, policy: ClusteringPolicy
) -> tuple[list[tuple[int, int]], bool]:
    """Bin-pack one partition's eligible slices (``sizes``, largest first, ties by file id) into
    ranges of their positions; True when the group limit left slices out. Slices that fit one
    group together (``total``) are that group, as the loop would find."""
    single_ok = policy.single_group_clustering or bool(parse_sort_columns(policy.sort_columns))
    if total <= policy.max_bytes_per_group:
        return ([(0, len(sizes))] if len(sizes) > 1 or (len(sizes) == 1 and single_ok) else []), False
    packed: list[tuple[int, int]] = []
    first = 0
    total = 0
    partial = False
    for at, size in enumerate(sizes):
        if at > first and total + size > policy.max_bytes_per_group:
            packed.append((first, at))
            first, total = at, 0
            if len(packed) >= policy.max_num_groups:
                partial = True
                break
        total += size
    if len(sizes) > first and not partial and (len(sizes) - first > 1 or single_ok):
        packed.append((first, len(sizes)))
    return packed, partial


def _clustering_group(
    table: HoodieTable, group: list[FileSlice], policy: ClusteringPolicy
) -> ClusteringGroup:
    """The plan entry of one packed group (built only for the groups a plan keeps)."""
    return ClusteringGroup(
        slices=[_slice_info(table, s) for s in group],
        metrics=_metrics(group, policy.parquet_max_file_size),
        num_output_file_groups=max(
            1, math.ceil(sum(_slice_size(s, policy) for s in group) / policy.target_file_max_bytes)
        ),
        extra_metadata=None,
        version=1,
    )


def _busy_file_groups(table: HoodieTable, timeline: ActiveTimeline) -> set[FileGroupId]:
    """File groups of pending compaction, log compaction and clustering plans."""
    busy = set(table.pending_compaction_operations(timeline)) | set(
        table.pending_clustering_file_groups(timeline)
    )
    for instant in timeline.pending_log_compaction():
        plan = table.compaction_plan(instant.requested_time, timeline)
        busy.update(FileGroupId(p, f) for p, f in plan.file_groups())
    return busy


def _plan_groups(
    table: HoodieTable,
    view: FileSystemView,
    policy: ClusteringPolicy,
    partitions: list[str],
    missing: list[str],
    busy: set[FileGroupId],
) -> tuple[list[list[FileSlice]], bool] | None:
    """The packed groups of latest slices (objects only for those the plan takes), whether the plan
    is incremental; partitions left out are added to ``missing``. None when nothing qualifies."""
    index = view.file_index(partitions)
    # The latest slice of every live file group, as arrays: (group, base file size or -1 for none).
    numbers, base_sizes = view.latest_base_sizes(index, exclude=busy)
    small = np.maximum(base_sizes, 0) < policy.small_file_limit
    numbers, base_sizes = numbers[small], base_sizes[small]
    sizes = np.where(base_sizes >= 0, base_sizes, policy.parquet_max_file_size)  # _slice_size
    # By partition (the index's partitions are ``partitions``), then largest first, ties by file id.
    parts = index.group_part(numbers)
    id_rank = np.empty(len(index.file_ids), dtype=np.int64)
    id_rank[np.asarray(pc.sort_indices(index.file_ids).to_numpy(), dtype=np.int64)] = np.arange(
        len(index.file_ids), dtype=np.int64
    )
    ids = index.group_keys[numbers] % max(len(index.file_ids), 1)
    order = np.lexsort((id_rank[ids], -sizes, parts))
    numbers, sizes = numbers[order], sizes[order]
    bounds = np.searchsorted(parts[order], np.arange(len(partitions) + 1)).tolist()
    totals = np.add.reduceat(sizes, bounds[:-1]).tolist() if len(sizes) else [0] * len(partitions)
    packed: list[tuple[str, int, int]] = []  # partition and a range of the ordered slices
    incremental = policy.incremental_for(table.table_version)
    for part, partition in enumerate(partitions):
        lo, hi = bounds[part], bounds[part + 1]
        total = int(totals[part]) if hi > lo else 0
        fits = total <= policy.max_bytes_per_group
        found, partial = _groups_for_partition(
            range(hi - lo) if fits else sizes[lo:hi].tolist(), total, policy
        )
        if len(found) > policy.max_num_groups or partial:
            missing.append(partition)
        packed.extend((partition, lo + start, lo + stop) for start, stop in found[: policy.max_num_groups])
    if len(packed) > policy.max_num_groups:
        missing.extend(partition for partition, _, _ in packed[policy.max_num_groups :])
        packed = packed[: policy.max_num_groups]
    if not packed:
        return None
    # Objects only for the file groups the plan takes.
    chosen = np.concatenate([numbers[start:stop] for _, start, stop in packed])
    taken = np.zeros(index.num_groups, dtype=bool)
    taken[chosen] = True
    latest = {s.group_id: s for s in view.latest_slices(index, taken)}
    file_ids = iter(index.file_id.take(pa.array(index.first_rows(chosen))).to_pylist())
    groups = [
        [latest[FileGroupId(p, next(file_ids))] for _ in range(stop - start)] for p, start, stop in packed
    ]
    return groups, incremental


def plan_clustering(
    table: HoodieTable,
    policy: ClusteringPolicy,
    timeline: ActiveTimeline | None = None,
    *,
    now: dt.datetime | None = None,
) -> RequestedReplaceMetadata | None:
    """The clustering plan Hudi's size-based strategy would make, or None if nothing qualifies."""
    tl = timeline or table.reload()
    view = planning_view(table, tl)
    sort_columns = parse_sort_columns(policy.sort_columns)
    if sort_columns:
        schema = table_schema(table)
        missing_columns = [c for c in sort_columns if c not in schema.names]
        if missing_columns:
            raise TableServiceError(
                f"{_PREFIX}sort.columns names {missing_columns}, which {table.base_path} does not have "
                f"(columns: {', '.join(schema.names)})"
            )
    moment = now or dt.datetime.now(table.tz)
    partitions, missing = clustering_partitions(table, tl, policy, view.partitions, moment)
    if not partitions:
        return None
    busy = _busy_file_groups(table, tl)
    with paused_gc():  # objects for every eligible file group: no heap walks while they are built
        found = _plan_groups(table, view, policy, partitions, missing, busy)
    if found is None:
        return None
    groups, incremental = found
    params = {SORT_COLUMNS_KEY: policy.sort_columns} if policy.sort_columns else {}
    plan = ClusteringPlan(
        input_groups=[_clustering_group(table, g, policy) for g in groups],
        strategy=ClusteringStrategy(
            strategy_class_name=policy.execution_strategy, strategy_params=params, version=1
        ),
        extra_metadata={},
        version=CLUSTERING_PLAN_VERSION,
        preserve_hoodie_metadata=policy.preserve_commit_metadata,
        missing_schedule_partitions=list(dict.fromkeys(missing)) if incremental else None,
    )
    return RequestedReplaceMetadata(
        operation_type=CLUSTER_OPERATION, clustering_plan=plan, extra_metadata={}, version=1
    )


def schedule_clustering(
    ctx: ServiceContext, policy: ClusteringPolicy, *, dry_run: bool = False, now: dt.datetime | None = None
) -> Scheduled | None:
    """Plan and, unless ``dry_run``, write the requested clustering; None if there is nothing to do."""
    table = ctx.table
    ctx.check_shape("clustering")
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        timeline = table.reload()
        reason = trigger_reason(table, timeline, policy)
        if reason is None:
            return None
        requested = plan_clustering(table, policy, timeline, now=now)
        if requested is None:
            return None
        if requested.clustering_plan is not None and table.config.is_mor:
            slices = [
                slice_of(info)
                for g in requested.clustering_plan.input_groups or ()
                for info in g.slices or ()
            ]
            check_planned_slices(table, timeline, "clustering", slices)
        action = Action.CLUSTERING if table.table_version >= 8 else Action.REPLACE_COMMIT
        scheduled = ctx.request(timeline, action, requested, reason, dry_run=dry_run)
    plan = requested.clustering_plan
    assert plan is not None
    if not dry_run:
        log.info(
            "%s: scheduled clustering %s of %d file group(s) in %d group(s) (%s)",
            table.base_path,
            scheduled.instant_time,
            len(plan.file_groups()),
            len(plan.input_groups or ()),
            reason,
        )
    return scheduled


class ClusteringService:
    """Clustering as a :class:`~hoodie.services.base.TableService`."""

    name = "clustering"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options), dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return pending_clustering(table, timeline)

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_clustering(ctx, instant_time, runner)


register_service(ClusteringService())
