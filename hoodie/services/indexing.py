"""INDEXING: build metadata-table partitions while writers keep writing (Hudi's async indexer).

Apache Hudi's ``HoodieIndexer`` builds ``column_stats``, ``partition_stats``, ``bloom_filters`` or
``record_index`` for a table that lacks them, without stopping its writers, and its SQL
``CREATE INDEX`` builds a secondary index the same way once it has written the index's definition.
hts runs the same action, written the way Hudi writes it so that Hudi's writers and readers and
hudi-rs keep working (``hoodie.metadata.index.secondary.enable=true`` asks for every secondary index
the table defines and has not built; a plan Hudi left pending names its own):

* **Schedule** writes ``T.indexing.requested``: a ``HoodieIndexPlan`` naming each partition to
  build and its ``indexUptoInstant``, the last write of the table's contiguous completed writes
  (``ScheduleIndexActionExecutor``). Partitions already built or being built are left out; the
  ``files`` partition comes first when the table has no metadata table yet.
* **Execute**, under the table lock: ``T.indexing.inflight``; per partition, a metadata-table
  deltacommit at the next free initialisation time ``00000000000000<NNN>`` (as Hudi 1.x) opens
  the partition's file groups, each with its initial log; the partitions join
  ``hoodie.table.metadata.partitions.inflight``; and the data table's timeline is fixed as the
  build's snapshot. From that moment every committer (ours re-reads the properties under the
  lock) logs its changes to the new partitions too, in logs that belong to the slice the build
  starts: the initialisation time is older than every data instant.
* **Build**, without the lock, as one task per data partition on the runner (Spark): column
  statistics of every file the ``files`` partition lists in the snapshot, partition statistics
  of the latest file slices (tight bounds), the footer bloom filter of every listed base file
  (stamped with the file's commit time), the record index of every key in the latest slices, at
  the slice's file group and base instant, and each secondary index's ``value$key`` entries of
  those records. The records become base HFiles at the initialisation time, in the file groups
  their keys hash to (a V2 secondary index hashes the value alone).
* **Catch-up and complete**, under the lock: commits that completed during the build already
  logged their changes to the new partitions, so catching up means checking that the attempt
  still owns the instant; the build deltacommits complete, the partitions move from
  ``.inflight`` to ``hoodie.table.metadata.partitions``, and ``T.indexing`` completes with a
  ``HoodieIndexCommitMetadata`` whose ``indexUptoInstant`` is the latest completed write.

A run that died leaves the instant inflight; the next claim (after its heartbeat expired) drops
the partial partitions and builds again. Writers that do not re-read the properties (Apache
Hudi's, configured before the indexer started) miss the new partitions, as they do with Hudi's
own indexer. Expression indexes, and secondary indexes on columns hts cannot keep current
(``hoodie.metadata.secondary``), are refused before anything is written.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from hoodie.errors import InvalidInputError, TableServiceError, UnsupportedTableError
from hoodie.file_group.base_file import BaseFile
from hoodie.io.fileio import join
from hoodie.metadata.column_ranges import partition_stats
from hoodie.metadata.column_stats import file_column_stats, indexed_columns
from hoodie.metadata.init import (
    complete_partition_build,
    free_init_instant_time,
    initialize_metadata_table,
    set_metadata_partitions,
    start_partition_build,
    write_partition_base,
)
from hoodie.metadata.keys import bloom_filter_key, column_stats_key, encode_file_id, partition_stats_key
from hoodie.metadata.records import (
    MetadataPartition,
    Payload,
    column_stats_payload,
    encode_payload,
    record_index_payload,
    secondary_index_payload,
)
from hoodie.metadata.secondary import secondary_entries, secondary_indexes
from hoodie.metadata.sync import base_file_bloom_payload
from hoodie.metadata.table import MetadataTable, open_metadata_table
from hoodie.metadata.writer import instant_files, rollback_metadata_instant
from hoodie.models.compaction import CompactionOperation
from hoodie.models.index import IndexCommitMetadata, IndexPartitionInfo, IndexPlan
from hoodie.read.reader import virtual_key_function
from hoodie.read.slice_reader import read_slice
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD
from hoodie.services.base import (
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
from hoodie.services.compaction_plan import compaction_operation, slice_of
from hoodie.services.options import bool_option
from hoodie.services.partial_check import check_planned_slices
from hoodie.services.slice_tasks import SliceTask, latest_writer_schema, slice_task_fields
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import instant_to_epoch_millis
from hoodie.timeline.timeline import ActiveTimeline, Timeline
from hoodie.transaction.commit import StillInflight, commit
from hoodie.transaction.lock import locked

log = logging.getLogger(__name__)

__all__ = ["IndexingService", "execute_indexing", "requested_partitions", "schedule_indexing"]

PARTITION_KEYS = {
    "hoodie.metadata.index.column.stats.enable": MetadataPartition.COLUMN_STATS,
    "hoodie.metadata.index.partition.stats.enable": MetadataPartition.PARTITION_STATS,
    "hoodie.metadata.record.index.enable": MetadataPartition.RECORD_INDEX,
    "hoodie.metadata.index.bloom.filter.enable": MetadataPartition.BLOOM_FILTERS,
    "hoodie.metadata.index.secondary.enable": MetadataPartition.SECONDARY_PREFIX + "*",  # every defined one
    "hoodie.metadata.index.expression.enable": MetadataPartition.EXPRESSION_PREFIX + "*",
}
"""Hudi's keys that ask for a metadata partition (``HoodieMetadataConfig``)."""
BUILDABLE = (
    MetadataPartition.COLUMN_STATS,
    MetadataPartition.PARTITION_STATS,
    MetadataPartition.BLOOM_FILTERS,
    MetadataPartition.RECORD_INDEX,
)
OPERATION = "BULK_INSERT_PREPPED"
"""What Hudi 1.x records for a metadata partition's build (the v9 fixture's init deltacommits)."""
SECONDARY_ALL = MetadataPartition.SECONDARY_PREFIX + "*"


# -- what to build ------------------------------------------------------------------------------


def requested_partitions(table: HoodieTable, options: Mapping[str, str]) -> list[str]:
    """The metadata partitions ``options`` ask for, in build order; raises naming a bad request.

    ``partition_stats`` comes with ``column_stats`` on a partitioned table unless
    ``hoodie.metadata.index.partition.stats.enable=false``, as Hudi 1.x enables it.
    """
    wanted: list[str] = []
    for key, partition in PARTITION_KEYS.items():
        if key in options and bool_option(options, key, False):
            wanted.append(partition)
    if SECONDARY_ALL in wanted:
        wanted.remove(SECONDARY_ALL)
        defined = _defined_secondary_indexes(table)
        if not defined and not wanted:  # Hudi's default is true: only an error when asked alone
            raise InvalidInputError(
                f"{table.base_path}: no secondary index is defined; define one with Apache Hudi "
                "(CREATE INDEX name ON table (column)), then index it"
            )
        present = {*table.config.metadata_partitions, *table.config.metadata_partitions_inflight}
        # Refuses, naming them, the new ones hts could not keep current.
        secondary_indexes(table, [p for p in defined if p not in present])
        wanted += defined
    refused = [p for p in wanted if not _buildable(p)]
    if refused:
        raise UnsupportedTableError(
            f"{table.base_path}: hts does not build {', '.join(refused)}: it could not keep them "
            "current on later writes. Nothing was written."
        )
    if not wanted:
        keys = ", ".join(f"{k}=true" for k, p in PARTITION_KEYS.items() if p in BUILDABLE)
        raise InvalidInputError(
            f"indexing: no metadata partition requested; pass --option with one of {keys}"
        )
    partitioned = bool(table.config.partition_fields)
    if MetadataPartition.PARTITION_STATS in wanted and not partitioned:
        raise InvalidInputError(
            f"{table.base_path}: partition_stats needs a partitioned table (Hudi refuses it too)"
        )
    if (
        MetadataPartition.COLUMN_STATS in wanted
        and partitioned
        and MetadataPartition.PARTITION_STATS not in wanted
        and "hoodie.metadata.index.partition.stats.enable" not in options
    ):
        wanted.append(MetadataPartition.PARTITION_STATS)
    column_stats = MetadataPartition.COLUMN_STATS in (*wanted, *table.config.metadata_partitions)
    if MetadataPartition.PARTITION_STATS in wanted and not column_stats:
        raise InvalidInputError(
            f"{table.base_path}: partition_stats is built from column statistics; also pass "
            "hoodie.metadata.index.column.stats.enable=true"
        )
    return sorted(wanted, key=_build_order)


def _buildable(partition: str) -> bool:
    return partition in BUILDABLE or partition.startswith(MetadataPartition.SECONDARY_PREFIX)


def _build_order(partition: str) -> tuple[int, str]:
    return (BUILDABLE.index(partition) if partition in BUILDABLE else len(BUILDABLE), partition)


def _defined_secondary_indexes(table: HoodieTable) -> list[str]:
    """Secondary indexes the table's index definitions name (Hudi's SQL ``CREATE INDEX`` writes
    them to ``.hoodie/.index_defs/index.json`` before it builds them)."""
    defs = table.index_definitions()
    return sorted(
        name
        for name, d in defs.items()
        if name.startswith(MetadataPartition.SECONDARY_PREFIX) and d.get("indexType") == "secondary_index"
    )


def _contiguous_completed_writes(timeline: ActiveTimeline) -> Timeline:
    """Completed writes before the first pending write (Hudi's ``getContiguousCompletedWriteTimeline``)."""
    first_pending = timeline.pending().writes().first()
    completed = timeline.completed().writes()
    if first_pending is None:
        return completed
    return completed.before(first_pending.requested_time)


def _check_partial_blocks(table: HoodieTable, timeline: ActiveTimeline) -> None:
    """A build reads every latest slice merged: IS_PARTIAL blocks the table's merger cannot merge
    refuse it (the headers are read only on tables whose merger has no partial merge)."""
    if table.config.is_mor:
        slices = table.file_system_view(timeline=timeline).latest_file_slices()
        check_planned_slices(table, timeline, "indexing", slices)


def schedule_indexing(ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
    """Write ``T.indexing.requested`` for the partitions ``ctx.options`` ask for; None when they
    are all built or being built, or the table has no completed write to index up to."""
    table = ctx.table
    if table.table_version < 8:
        raise UnsupportedTableError(
            f"{table.base_path}: table version {table.table_version}; hts builds metadata partitions "
            "on table versions 8 and 9 only. Nothing was written."
        )
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        config = table.reload_config()
        timeline = table.reload()
        wanted = requested_partitions(table, ctx.options)
        pending = timeline.pending().actions(Action.INDEXING).first()
        if pending is not None:
            log.info("%s: indexing %s is pending; one indexer at a time", table.base_path, pending)
            return None
        present = set(config.metadata_partitions) | set(config.metadata_partitions_inflight)
        todo = [p for p in wanted if p not in present]
        if not todo:
            log.info("%s: %s already built", table.base_path, ", ".join(wanted))
            return None
        if MetadataPartition.FILES not in config.metadata_partitions:
            todo.insert(0, MetadataPartition.FILES)
        upto = _contiguous_completed_writes(timeline).last()
        if upto is None:
            log.info("%s: no completed write to index up to", table.base_path)
            return None
        _check_partial_blocks(table, timeline)
        plan = IndexPlan(
            index_partition_infos=[
                IndexPartitionInfo(
                    metadata_partition_path=p, index_upto_instant=upto.requested_time, extra_metadata={}
                )
                for p in todo
            ]
        )
        reason = f"build {', '.join(todo)} up to {upto.requested_time}"
        return ctx.request(timeline, Action.INDEXING, plan, reason, dry_run=dry_run)


# -- executor side ------------------------------------------------------------------------------


def _latest_records(job: SliceTask, op: CompactionOperation) -> tuple[list[str], pa.Table]:
    """The record keys and the merged records of one latest file slice."""
    table = job.table
    merged = read_slice(table.fileio, table.base_path, slice_of(op), job.read_options())
    keys_of = virtual_key_function(table)
    if keys_of is not None:  # the keys Hudi's readers rebuild (RecordContext.virtualKeyExtractor)
        return [str(k) for k in keys_of(merged).to_pylist()], merged
    return [str(k) for k in merged.column(RECORD_KEY_METADATA_FIELD).to_pylist()], merged


def index_data_partition(task: Task) -> TaskResult:
    """Executor side: the new metadata records of one data partition, by metadata partition."""
    job = SliceTask.of(task)
    table = job.table
    partition = str(task["partition"])
    wanted = set(task["build"])
    out: dict[str, dict[str, Payload]] = {p: {} for p in wanted}
    if wanted & {MetadataPartition.COLUMN_STATS, MetadataPartition.PARTITION_STATS}:
        columns = list(task["columns"])
        latest = set(task["latest_files"])
        in_latest: list[dict[str, Any]] = []
        for name in sorted(task["files"]):
            try:
                stats = file_column_stats(
                    table.fileio,
                    table.base_path,
                    partition,
                    name,
                    columns,
                    job.avro_schema,
                    table_version=table.table_version,
                )
            except FileNotFoundError:  # cleaned meanwhile: the clean logs its tombstones to us
                log.info("%s: %s/%s was deleted during the build", table.base_path, partition, name)
                continue
            if name in latest:
                in_latest.extend(stats)
            if MetadataPartition.COLUMN_STATS in wanted:
                for s in stats:
                    out[MetadataPartition.COLUMN_STATS][
                        column_stats_key(s["columnName"], partition, name)
                    ] = column_stats_payload(s)
        if MetadataPartition.PARTITION_STATS in wanted:
            for s in partition_stats(partition, in_latest, tight_bound=True):
                key = partition_stats_key(s["columnName"], partition)
                out[MetadataPartition.PARTITION_STATS][key] = column_stats_payload(s, partition_stats=True)
    if MetadataPartition.BLOOM_FILTERS in wanted:
        for name in task["files"]:
            base = BaseFile.parse(name, 0)
            if base is None or not name.endswith(".parquet"):
                continue
            try:
                payload = base_file_bloom_payload(table, partition, name, base.commit_time)
            except FileNotFoundError:  # cleaned meanwhile: the clean logs its tombstone to us
                continue
            if payload is not None:
                out[MetadataPartition.BLOOM_FILTERS][bloom_filter_key(partition, name)] = payload
    secondary: dict[str, str] = dict(task.get("secondary") or {})  # index partition -> column
    if MetadataPartition.RECORD_INDEX in wanted or secondary:
        live = secondary_index_payload()
        for raw in task["slices"]:
            op = CompactionOperation.from_avro(raw)
            keys, merged = _latest_records(job, op)
            for index, column in secondary.items():
                out[index].update(dict.fromkeys(secondary_entries(keys, merged, column), live))
            if MetadataPartition.RECORD_INDEX not in wanted:
                continue
            file_id = str(op.file_id)
            millis = instant_to_epoch_millis(str(task["base_times"][file_id]), table.tz)
            located = record_index_payload(partition, encode_file_id(file_id), millis)
            out[MetadataPartition.RECORD_INDEX].update(dict.fromkeys(keys, located))
    # Results travel as JSON (Spark's runner): each record as its datum, written without a file
    # name, in base64; the driver puts them into base HFiles as they are. Record-index keys of
    # one file group share their payload, so it is encoded once.
    version = table.table_version
    texts: dict[int, str] = {}

    def text(payload: Payload) -> str:
        found = texts.get(id(payload))
        if found is None:
            found = texts[id(payload)] = base64.b64encode(encode_payload(payload, version)).decode("ascii")
        return found

    encoded = {p: {key: text(payload) for key, payload in recs.items()} for p, recs in out.items()}
    return {"partition": partition, "records": encoded}


# -- driver side --------------------------------------------------------------------------------


def _drop_partial_build(ctx: ServiceContext, partitions: Sequence[str]) -> None:
    """Remove what an earlier attempt (ours or Apache Hudi's) built of ``partitions`` (lock held):
    the metadata-table deltacommits that wrote only to them, whatever their time (ours use
    initialisation times, Hudi's ``CREATE INDEX`` builds may not), the partition folders, the
    ``.inflight`` entries."""
    table = ctx.table
    config = table.reload_config()
    ours = [p for p in partitions if p not in config.metadata_partitions and p != MetadataPartition.FILES]
    if not ours or not table.has_metadata_table:
        return
    mdt = open_metadata_table(table)
    for instant in mdt.reload():
        if instant.action is not Action.DELTA_COMMIT:
            continue
        if instant.is_completed:
            touched = set(mdt.commit_metadata(instant).partition_to_write_stats or {})
        else:  # pending: the partitions it wrote files to (Hudi's builds may use any time)
            touched = {
                f[len(mdt.base_path) :].lstrip("/").split("/", 1)[0]
                for f in instant_files(mdt, instant.requested_time)
            }
        # A build writes only to its partition; a writer's update always reaches `files` too
        # (and writers commit under the lock we hold, so none is halfway).
        if touched and touched <= set(ours):
            rollback_metadata_instant(table, instant.requested_time, mdt)
    for partition in ours:
        table.fileio.delete_dir(join(mdt.base_path, partition))
    set_metadata_partitions(table, inflight_remove=ours)
    log.info("%s: dropped the partial build of %s", table.base_path, ", ".join(ours))


def _tasks(
    ctx: ServiceContext, snapshot: ActiveTimeline, instant_time: str, build: Sequence[str]
) -> list[Task]:
    table = ctx.table
    schema_json = latest_writer_schema(table, "indexing")
    shared = {
        **slice_task_fields(ctx, snapshot, instant_time, schema_json),
        "build": list(build),
        "columns": indexed_columns(table),
        "secondary": {i.partition: i.column for i in secondary_indexes(table, list(build))},
    }
    listing = MetadataTable.open(table, snapshot).list_files()
    view = table.file_system_view(timeline=snapshot)
    tasks: list[Task] = []
    for partition in sorted(set(listing) | set(view.partitions())):
        files = listing.get(partition, {})
        slices = [s for s in view.latest_file_slices([partition]) if not s.is_empty]
        latest = {s.base_file.name for s in slices if s.base_file} | {
            lf.name for s in slices for lf in s.log_files
        }
        tasks.append(
            {
                **shared,
                "partition": partition,
                "files": sorted(files),
                "latest_files": sorted(latest & set(files)),
                "slices": [compaction_operation(s).to_avro() for s in slices],
                "base_times": {s.file_id: s.base_instant_time for s in slices},
            }
        )
    return tasks


def _undo(ctx: ServiceContext, plan: IndexPlan, instant: Instant) -> None:
    """A cancelled attempt: drop its partial build and put the plan back to requested."""
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        _drop_partial_build(ctx, plan.partition_paths())
        ctx.table.reload().delete_state(instant.requested_time, State.INFLIGHT, Action.INDEXING)


def execute_indexing(ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
    """Build the partitions of a requested (or abandoned inflight) indexing plan and complete it."""
    table = ctx.table
    plan = table.index_plan(instant_time, require_pending(ctx, instant_time, Action.INDEXING, "indexing"))
    partitions = plan.partition_paths()
    if not partitions:
        raise TableServiceError(f"{table.base_path}: indexing {instant_time} has an empty plan")
    unknown = [p for p in partitions if p != MetadataPartition.FILES and not _buildable(p)]
    if not unknown:
        defined = _defined_secondary_indexes(table)
        undefined = [
            p for p in partitions if p.startswith(MetadataPartition.SECONDARY_PREFIX) and p not in defined
        ]
        if undefined:
            raise UnsupportedTableError(
                f"{table.base_path}: indexing {instant_time} asks for {', '.join(undefined)}, which no "
                "index definition names. Nothing was written."
            )
        secondary_indexes(table, partitions)  # refuses those hts cannot keep current
    if unknown:
        raise UnsupportedTableError(
            f"{table.base_path}: indexing {instant_time} asks for {', '.join(unknown)}, which hts "
            "cannot build or keep current. Nothing was written."
        )
    build = [p for p in partitions if p != MetadataPartition.FILES]
    _check_partial_blocks(table, table.timeline)
    with claim_instant(
        ctx, instant_time, Action.INDEXING, "indexing", undo=lambda i: _undo(ctx, plan, i)
    ) as claim:
        with ctx.transaction():
            if claim.instant.is_inflight:
                _drop_partial_build(ctx, partitions)
            config = table.reload_config()
            clash = [
                p
                for p in build
                if p in config.metadata_partitions or p in config.metadata_partitions_inflight
            ]
            if clash:
                raise TableServiceError(
                    f"{table.base_path}: {', '.join(clash)} already built or being built; "
                    f"indexing {instant_time} has nothing to do. Nothing was written."
                )
            timeline = table.reload()
            initialize_metadata_table(table, lambda: ctx.new_instant_time(lock_held=True), timeline)
            current = timeline.get(instant_time, Action.INDEXING)
            assert current is not None
            inflight = current if current.is_inflight else timeline.transition_to_inflight(current)
            builds: dict[str, Instant] = {}
            for partition in build:
                at = free_init_instant_time(open_metadata_table(table).reload())
                builds[partition] = start_partition_build(table, partition, at)
            set_metadata_partitions(table, inflight_add=build)
            snapshot = table.reload()
        # The snapshot is fixed: later commits are not completed in it, so reading by it (the
        # listing included) sees nothing they wrote; they log their own changes to us.
        tasks = _tasks(ctx, snapshot, instant_time, build)
        crash_point("indexing.after_inflight")
        results = runner.run(index_data_partition, tasks, f"indexing {instant_time} of {table.name}")
        records: dict[str, dict[str, bytes]] = {p: {} for p in build}
        for r in results:
            for partition, entries in r["records"].items():
                records[partition].update((key, base64.b64decode(datum)) for key, datum in entries.items())
        stats = {p: write_partition_base(table, p, records[p], builds[p].requested_time) for p in build}
        crash_point("indexing.before_complete")
        with ctx.transaction():
            fresh = table.reload()
            upto = fresh.completed().writes().last()
            metadata = IndexCommitMetadata(
                index_partition_infos=[
                    IndexPartitionInfo(
                        metadata_partition_path=p,
                        index_upto_instant=upto.requested_time if upto else None,
                        extra_metadata={},
                    )
                    for p in partitions
                ]
            )

            def complete_builds(_fresh: ActiveTimeline, _current: Instant) -> None:
                for partition in build:
                    complete_partition_build(
                        table,
                        partition,
                        builds[partition],
                        stats[partition],
                        lambda: ctx.new_instant_time(lock_held=True),
                        operation=OPERATION,
                    )

            done = commit(
                table,
                inflight,
                metadata.to_bytes(table.table_version),
                completion_time=lambda _: ctx.new_instant_time(lock_held=True),
                timeline=fresh,
                requirements=[
                    *ctx.claim_requirements(inflight),
                    StillInflight(
                        "indexing {time} is no longer inflight on {base} (now {now}); "
                        "another process rolled it back or completed it"
                    ),
                ],
                sync=complete_builds,
                publish=lambda _fresh, _current: set_metadata_partitions(
                    table, add=build, inflight_remove=build
                ),
            )
    ctx.maintain_metadata()  # the commit's upkeep, once the claim's heartbeat is gone
    counts = {p: len(records[p]) for p in build}
    log.info("%s: completed indexing %s: %s", table.base_path, done, counts)
    written = [stat for p in build for stat in stats[p]]  # the metadata table's new base files
    return ExecutionResult(done, written, {"partitions": partitions, "records": counts})


class IndexingService:
    """INDEXING as a :class:`~hoodie.services.base.TableService`."""

    name = "indexing"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_indexing(ctx, dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return list(timeline.pending().actions(Action.INDEXING))

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_indexing(ctx, instant_time, runner)


register_service(IndexingService())
