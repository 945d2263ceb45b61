"""Partition TTL: expired partitions deleted with a ``delete_partition`` replacecommit, as Apache Hudi's
``SparkPartitionTTLActionExecutor`` does.

Which partitions have expired is :mod:`hoodie.services.ttl_strategy`. The commit is Hudi's
delete-partition commit (``startDeletePartitionCommit`` + ``SparkDeletePartitionCommitActionExecutor``):

- ``T.replacecommit.requested``: ``HoodieRequestedReplaceMetadata`` with ``operationType``
  ``DELETE_PARTITION`` and empty ``extraMetadata``;
- ``T.replacecommit.inflight``: the commit metadata of an empty workload (no write stats) with
  ``operationType`` ``DELETE_PARTITION`` (``saveWorkloadProfileMetadataToInflight``);
- ``T.replacecommit``: ``HoodieReplaceCommitMetadata`` with no write stats and
  ``partitionToReplaceFileIds`` naming every file group of each expired partition's latest file slices
  (``getAllExistingFileIds``), and the table schema in ``extraMetadata`` as the write client stores it;
- the metadata table's ``files`` partition marks the partitions deleted in its partition list
  (``HoodieTableMetadataUtil.getPartitionsDeleted``).

No data file is touched: readers stop seeing the partitions at once, and a later clean deletes the
replaced file groups and the emptied partition folders (``hoodie.services.clean``).

Tables whose metadata table has a secondary index are refused by the shape matrix (Hudi's metadata
writer refuses the commit there: ``Shape.SECONDARY_INDEXED``); the metadata partitions hts keeps
(``files``, ``record_index``, ``partition_stats``) are updated as Hudi does (``hoodie.metadata.sync``),
and column stats and bloom filters have nothing to update (no write stats).

When a pending compaction, log compaction or clustering has a file group in an expired partition,
Hudi's delete refuses (``DeletePartitionUtils.checkForPendingTableServiceActions``) and its TTL
executor does nothing until next time; so does hts, saying which instants stand in the way.

Where hts differs in what it leaves on the timeline (never in what readers see): Hudi writes the
requested instant before it evaluates the strategy and leaves it pending when nothing expired or a
pending service blocked the delete; hts writes nothing then.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, NoReturn

from hoodie.errors import TableServiceError
from hoodie.models.base import AvroRecord
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata, WriteOperationType
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    Scheduled,
    ServiceContext,
    crash_point,
    register_service,
    service_named,
)
from hoodie.services.planning import planning_view
from hoodie.services.ttl_strategy import TTLConfig, expired_partitions
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig
from hoodie.transaction.lock import LockProvider
from hoodie.transaction.time_generator import TimeSource

log = logging.getLogger(__name__)

SERVICE = "ttl"
DELETE_PARTITION = WriteOperationType.DELETE_PARTITION.value


@dataclass(frozen=True, slots=True, kw_only=True)
class TTLPlan(AvroRecord):
    """What one partition TTL run deletes and why. Hudi keeps no TTL plan on its timeline (the
    replacecommit is the plan), so this record has no Hudi schema and is never written."""

    AVRO_NAME: ClassVar[str] = "HtsPartitionTTLPlan"

    instant_time: str
    """The instant the partitions were judged at: the replacecommit's when it runs; a schedule or a dry
    run judges at a fresh time, and the run judges again at its own instant (partitions only age)."""
    strategy: str
    days_retain: int
    partition_to_replace_file_ids: dict[str, list[str]]
    reasons: dict[str, str]
    expired_total: int
    blocked_by: list[str]
    """Pending compaction, log compaction or clustering instants with file groups in the partitions:
    while there are any, nothing is deleted."""

    def to_bytes(self, table_version: int) -> NoReturn:
        raise TableServiceError("a partition TTL plan is never written to the timeline")

    @property
    def partitions(self) -> list[str]:
        return list(self.partition_to_replace_file_ids)


def _blocking_instants(table: HoodieTable, timeline: ActiveTimeline, partitions: set[str]) -> list[str]:
    """``checkForPendingTableServiceActions``: pending compaction, log compaction and clustering
    instants with a file group in ``partitions``."""
    found: set[str] = set()
    for fg, ts in table.pending_compaction_operations(timeline).items():
        if fg.partition_path in partitions:
            found.add(ts)
    for instant in timeline.pending_log_compaction():
        plan = table.compaction_plan(instant.requested_time, timeline)
        if any(partition in partitions for partition, _ in plan.file_groups()):
            found.add(instant.requested_time)
    for fg, ts in table.pending_clustering_file_groups(timeline).items():
        if fg.partition_path in partitions:
            found.add(ts)
    return sorted(found)


def plan_ttl(
    table: HoodieTable, timeline: ActiveTimeline, config: TTLConfig, instant_time: str
) -> TTLPlan | None:
    """The partitions to delete at ``instant_time`` with their file groups, or None when none expired."""
    view = planning_view(table, timeline)
    expired, total = expired_partitions(table, timeline, view, config, instant_time)
    if not expired:
        return None
    replaced = {
        e.partition: sorted({s.file_id for s in view.latest_file_slices([e.partition])}) for e in expired
    }
    return TTLPlan(
        instant_time=instant_time,
        strategy=config.strategy.value,
        days_retain=config.days_retain,
        partition_to_replace_file_ids=replaced,
        reasons={e.partition: e.why(config.strategy) for e in expired},
        expired_total=total,
        blocked_by=_blocking_instants(table, timeline, set(replaced)),
    )


def describe(plan: TTLPlan, *, dry_run: bool) -> str:
    head = (
        f"{len(plan.partitions)} of {plan.expired_total} expired partition(s) "
        f"({plan.strategy}, days.retain={plan.days_retain})"
    )
    why = "; ".join(plan.reasons.values())
    if plan.blocked_by:
        return (
            f"{head} not deleted: pending table service instant(s) {plan.blocked_by} have file groups in "
            f"them (Hudi's delete_partition waits for them): {why}"
        )
    return f"{'would delete' if dry_run else 'deleting'} {head}: {why}"


def schedule_ttl(ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
    """Find the expired partitions; nothing is written. The returned instant is None on a dry run or when
    a pending table service blocks the delete."""
    config = TTLConfig.from_options(ctx.options)
    table = ctx.table
    ctx.check_shape(SERVICE)
    with ctx.transaction():
        timeline = table.reload()
        plan = plan_ttl(table, timeline, config, ctx.new_instant_time(lock_held=True))
    if plan is None:
        return None
    reason = describe(plan, dry_run=dry_run)
    log.info("%s: %s", table.base_path, reason)
    blocked = dry_run or bool(plan.blocked_by)
    return Scheduled(None if blocked else plan.instant_time, plan, reason)


def execute_ttl(ctx: ServiceContext) -> ExecutionResult:
    """Delete the partitions expired now, in one replacecommit written and completed under the table lock."""
    config = TTLConfig.from_options(ctx.options)
    table = ctx.table
    ctx.check_shape(SERVICE)
    with ctx.transaction():
        timeline = table.reload()
        instant_time = ctx.new_instant_time(lock_held=True)
        plan = plan_ttl(table, timeline, config, instant_time)
        if plan is None or plan.blocked_by:
            raise TableServiceError(
                f"{table.base_path}: no partition to delete at {instant_time}"
                + (f" ({describe(plan, dry_run=False)})" if plan is not None else " (none has expired)")
                + ". Nothing was written."
            )
        done = _commit(ctx, timeline, plan)
    log.info("%s: completed partition TTL %s: %s", table.base_path, done, describe(plan, dry_run=False))
    return ExecutionResult(
        done,
        details={
            "partitions_deleted": plan.partitions,
            "file_groups_replaced": sum(len(v) for v in plan.partition_to_replace_file_ids.values()),
            "reasons": dict(plan.reasons),
            "expired_total": plan.expired_total,
        },
    )


def _commit(ctx: ServiceContext, timeline: ActiveTimeline, plan: TTLPlan) -> Instant:
    table = ctx.table
    version = table.table_version
    instant_time = plan.instant_time
    requested = Instant(instant_time, Action.REPLACE_COMMIT, State.REQUESTED)
    schema = table.latest_schema_json()
    heartbeat = Heartbeat(table.fileio, table.paths, instant_time, ctx.heartbeat).start()
    try:
        timeline.create_requested(
            requested,
            RequestedReplaceMetadata(operation_type=DELETE_PARTITION, extra_metadata={}).to_bytes(version),
        )
        workload = CommitMetadata(
            partition_to_write_stats={},
            compacted=False,
            extra_metadata={},
            version=None,
            operation_type=DELETE_PARTITION,
        )
        inflight = timeline.transition_to_inflight(requested, workload.to_bytes(version))
        crash_point("ttl.after_inflight")
        metadata = ReplaceCommitMetadata(
            partition_to_write_stats={},
            compacted=False,
            extra_metadata={} if schema is None else {"schema": json.dumps(schema, separators=(",", ":"))},
            version=None,
            operation_type=DELETE_PARTITION,
            partition_to_replace_file_ids=plan.partition_to_replace_file_ids,
        )
        crash_point("ttl.before_complete")
        done = ctx.complete(inflight, metadata.to_bytes(version))
    except BaseException:
        heartbeat.stop()
        try:
            table.reload().delete_instant(instant_time)
        except Exception:  # the original error matters more; a rollback removes what is left
            log.exception("%s: could not remove the failed partition TTL %s", table.base_path, instant_time)
        raise
    heartbeat.stop()
    return done


def run_inline(
    table: HoodieTable,
    options: Mapping[str, str],
    lock: LockProvider,
    time_source: TimeSource,
    heartbeat: HeartbeatConfig,
) -> ExecutionResult | None:
    """After a writer's commit: partition TTL when ``hoodie.partition.ttl.inline`` is true (Hudi's
    ``BaseHoodieTableServiceClient.runTableServicesInline``), else nothing."""
    if not TTLConfig.from_options(options).inline:
        return None
    from hoodie.services.orchestrator import service_context

    ctx = service_context(table, options, lock=lock, time_source=time_source)
    ctx.heartbeat = heartbeat
    service = service_named(SERVICE)
    scheduled = service.schedule(ctx)
    if scheduled is None or scheduled.instant_time is None:
        return None
    return service.execute(ctx, scheduled.instant_time, LocalRunner())


class PartitionTTLService:
    """Partition TTL as a :class:`~hoodie.services.base.TableService`; its plan never goes on the timeline
    (scheduling and executing are one run, like Hudi's ``managePartitionTTL``)."""

    name = SERVICE

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_ttl(ctx, dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return []

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_ttl(ctx)


register_service(PartitionTTLService())
