"""The writer: insert, upsert, delete, bulk_insert and insert_overwrite for COW and MOR tables.

A write validates and prepares its input before touching storage, tags keys to file groups,
plans which file groups receive which records (:mod:`hoodie.write.partitioner`: updates in
place, inserts into small files first, then new file groups), writes the files under markers,
and completes the instant under the table lock after checking that no concurrent commit touched
the same file groups.
If anything fails after the instant was requested, the files it wrote and the instant are
removed again.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.cdc.write import CDCWrite, refuse_concat_on_cdc_table
from hoodie.config.table_config import TableType
from hoodie.errors import HoodieError, SchemaError, WriteConflictError
from hoodie.file_group.base_file_writer import write_partition_metadata
from hoodie.file_group.file_slice import FileGroupId
from hoodie.file_group.log_writer import (
    ORDERING_WRAPPERS,
    OrderingWrapper,
    ordering_array_wrappers,
    ordering_wrappers,
)
from hoodie.keygen import key_generator_from_properties
from hoodie.merge.log_entries import DeleteEntries, MergeSpec, arrow_family, spec_for
from hoodie.merge.resolve import resolve_merge_config
from hoodie.metadata.keys import decode_file_id
from hoodie.metadata.partitions import enabled_partitions, has_metadata_table
from hoodie.metadata.records import MetadataPartition
from hoodie.metadata.sync import RecordIndexChanges, sync_metadata_table
from hoodie.metadata.table import MetadataTable
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata, WriteStat
from hoodie.read.reader import TableReader, schema_on_read
from hoodie.schema.avro_arrow import add_meta_fields, avro_to_arrow_schema
from hoodie.schema.evolution import check_evolution, write_schema_option
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD
from hoodie.shape.table_shape import ShapeAllows
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import NoConflictingCommit, StillInflight, commit
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig
from hoodie.transaction.lock import InProcessLockProvider, LockProvider
from hoodie.transaction.time_generator import TimeSource, WaitBasedTimeGenerator
from hoodie.write.bucket_info import Bucket
from hoodie.write.bucket_planner import same_buckets
from hoodie.write.handles import WriteContext, append_to_log, create_base_file, merge_into_base
from hoodie.write.input import PreparedInput, dedupe, prepare_input
from hoodie.write.markers import WriteMarkers
from hoodie.write.options import BulkInsertSortMode, WriteOperation, WriteOptions
from hoodie.write.partitioner import WritePartitioner
from hoodie.write.stored_keys import check_stored_keys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """What a write committed."""

    instant: Instant
    operation: WriteOperation
    write_stats: list[WriteStat]
    replaced_file_groups: dict[str, list[str]]

    @property
    def num_inserts(self) -> int:
        return sum(s.num_inserts or 0 for s in self.write_stats)

    @property
    def num_updates(self) -> int:
        return sum(s.num_update_writes or 0 for s in self.write_stats)

    @property
    def num_deletes(self) -> int:
        return sum(s.num_deletes or 0 for s in self.write_stats)


class HoodieWriter:
    """Writes batches (``pyarrow.Table``) to one table."""

    def __init__(
        self,
        table: HoodieTable,
        *,
        options: WriteOptions | None = None,
        lock: LockProvider | None = None,
        time_source: TimeSource | None = None,
        write_props: dict[str, str] | None = None,
        heartbeat: HeartbeatConfig | None = None,
        schema: Mapping[str, Any] | None = None,
    ) -> None:
        """``schema``: the Avro writer schema (without meta fields) this writer records, as Hudi's
        writer deduces it from a batch that evolves the table (checked by ``check_evolution``), or
        given as Hudi's ``hoodie.write.schema`` in ``write_props``; None writes with the table's
        latest schema."""
        self.table = table
        self.schema = schema if schema is not None else write_schema_option(write_props or {})
        self.heartbeat = heartbeat or HeartbeatConfig()
        self.options = options or WriteOptions()
        self.lock = lock or InProcessLockProvider(table.base_path)
        self.time_source = time_source or WaitBasedTimeGenerator(self.lock, table.tz)
        self.write_props = write_props or {}

    # -- public operations --------------------------------------------------------------------
    def insert(self, data: pa.Table) -> WriteResult:
        return self.write(data, WriteOperation.INSERT)

    def upsert(self, data: pa.Table) -> WriteResult:
        return self.write(data, WriteOperation.UPSERT)

    def delete(self, keys: pa.Table) -> WriteResult:
        return self.write(keys, WriteOperation.DELETE)

    def bulk_insert(self, data: pa.Table) -> WriteResult:
        return self.write(data, WriteOperation.BULK_INSERT)

    def insert_overwrite(self, data: pa.Table) -> WriteResult:
        return self.write(data, WriteOperation.INSERT_OVERWRITE)

    def write(self, data: pa.Table, operation: WriteOperation) -> WriteResult:
        """Run one write operation; returns the committed instant and its write stats."""
        table = self.table
        timeline = table.reload()
        schema_json = table.latest_schema_json()
        if schema_json is None:
            raise HoodieError(f"{table.base_path}: the table has no schema; create it with a schema first")
        view = table.file_system_view(timeline=timeline)
        table.shape(self.write_props, view).check("write", operation.value)  # before anything is written
        on_read = schema_on_read(table, timeline)
        if on_read is not None:
            on_read.check_writable(table.base_path)
            if self.schema is not None:
                raise SchemaError(f"{table.base_path}: a schema-on-read table evolves by ALTER TABLE only")
        if self.schema is not None:
            check_evolution(schema_json, self.schema, table.base_path)
            schema_json = dict(self.schema)
        merge = resolve_merge_config(table.config, self.write_props)
        spec = spec_for(merge)
        keygen = key_generator_from_properties({**table.config.props, **self.write_props})
        prepared = prepare_input(
            data, schema_json, keygen, spec, keys_only=operation is WriteOperation.DELETE
        )
        combine = {
            WriteOperation.UPSERT: self.options.combine_before_upsert,
            WriteOperation.DELETE: self.options.combine_before_delete,
        }.get(operation, self.options.combine_before_insert)
        if combine:
            prepared = dedupe(prepared, merge, spec)
        partitions = prepared.partition_values()
        check_stored_keys(table, view, keygen, schema_json, operation.value, partitions, on_read=on_read)

        partitioner = WritePartitioner(table, self.options, self.write_props)
        buckets, replaced = partitioner.plan(prepared, operation, view, timeline)
        refuse_concat_on_cdc_table(table.config, table.fileio, table.base_path, buckets)
        self._check_pending_clustering(buckets, timeline)

        meta_avro = add_meta_fields(schema_json)
        arrow_schema = avro_to_arrow_schema(meta_avro)
        action = self._action(operation)
        instant_time = self.time_source.new_instant_time()
        requested = Instant(instant_time, action, State.REQUESTED)
        markers = WriteMarkers(table.fileio, table.paths, instant_time)
        ctx = WriteContext(
            fileio=table.fileio,
            base_path=table.base_path,
            instant_time=instant_time,
            table_version=table.table_version,
            schema=arrow_schema,
            avro_schema=meta_avro,
            spec=spec,
            options=self.options,
            markers=markers,
            merge=merge,
            cdc=CDCWrite.of(table.config, meta_avro),
            on_read=on_read,
        )
        requested_payload = (
            RequestedReplaceMetadata.empty().to_bytes(table.table_version)
            if action is Action.REPLACE_COMMIT
            else b""
        )
        # The heartbeat tells other processes this write is alive; if we die, it expires and a
        # rollback (ours or Apache Hudi's lazy cleaning of failed writes) removes what we wrote.
        heartbeat = Heartbeat(table.fileio, table.paths, instant_time, self.heartbeat).start()
        timeline.create_requested(requested, requested_payload)
        try:
            inflight = timeline.transition_to_inflight(
                requested, self._workload(buckets, prepared, operation).to_bytes(table.table_version)
            )
            stats = self._execute(ctx, buckets, prepared, view, spec)
            metadata = self._metadata(stats, schema_json, operation, replaced)
            if on_read is not None:
                now = table.reload()
                metadata = on_read.record_write(
                    table.fileio,
                    table.paths.meta,
                    table.paths.layout,
                    instant_time,
                    self.time_source.new_instant_time(),
                    metadata,
                    schema_on_read(table, now),
                )
            done = self._complete(
                timeline,
                inflight,
                metadata,
                stats,
                replaced,
                instant_time,
                lambda fresh: self._record_index_changes(buckets, prepared, replaced, fresh),
                ctx.log_records,
                ctx.base_footers,
                operation,
                partitioner.bucketed,
            )
        except BaseException:
            self._abort(timeline, instant_time, markers)
            heartbeat.stop()
            raise
        markers.delete_all()
        heartbeat.stop()
        log.info("%s: committed %s %s (%d files)", table.base_path, operation.value, done, len(stats))
        self._maintain_metadata()
        self._inline_ttl()
        return WriteResult(done, operation, stats, replaced)

    def _record_index_changes(
        self,
        buckets: list[Bucket],
        prepared: PreparedInput,
        replaced: dict[str, list[str]],
        timeline: ActiveTimeline,
    ) -> RecordIndexChanges | None:
        """How this write moves record keys (for the metadata table's record index), if it has one."""
        table = self.table
        if not has_metadata_table(table) or MetadataPartition.RECORD_INDEX not in enabled_partitions(table):
            return None
        # Updates go to the file group the key was found in (tagging is exact), which the index
        # already names: as Hudi, only new keys, moved keys and deletes change it. While an
        # indexer builds the record index, its base files are not written yet and tagging ran
        # before its snapshot, so every written key is logged (harmless if unchanged).
        building = MetadataPartition.RECORD_INDEX not in table.config.metadata_partitions
        keys = prepared.keys.to_pylist()
        if not pa.types.is_string(prepared.keys.type):
            keys = [str(k) for k in keys]
        changes = RecordIndexChanges()
        for b in buckets:
            located = b.rows if b.kind == "create" or building else b.inserts
            changes.located.update(dict.fromkeys(map(keys.__getitem__, located), (b.partition, b.file_id)))
            changes.deleted.update(map(keys.__getitem__, b.deletes))
        mdt = MetadataTable.open(table, timeline)
        if replaced:
            gone = {(p, f) for p, ids in replaced.items() for f in ids}
            changes.deleted.update(
                k for k in self._keys_in(gone, timeline, mdt, building) if k not in changes.located
            )
        changes.deleted -= set(changes.located)
        return changes

    def _keys_in(
        self, groups: set[tuple[str, str]], timeline: ActiveTimeline, mdt: MetadataTable, building: bool
    ) -> list[str]:
        """Record keys held by file groups ``groups`` (partition, file id) as of ``timeline``."""
        if not building:
            return [
                key
                for key, payload in mdt.read_partition(MetadataPartition.RECORD_INDEX).items()
                if (
                    payload["recordIndexMetadata"].get("partitionName"),
                    decode_file_id(payload["recordIndexMetadata"]),
                )
                in groups
            ]
        view = self.table.file_system_view(timeline=timeline)
        slices = [
            s
            for s in view.latest_file_slices(sorted({p for p, _ in groups}))
            if (s.partition_path, s.file_id) in groups
        ]
        data = TableReader(self.table).read_file_slices(slices)
        return [str(k) for k in data.column(RECORD_KEY_METADATA_FIELD).to_pylist()]

    # -- planning -----------------------------------------------------------------------------
    def _action(self, operation: WriteOperation) -> Action:
        if operation.is_overwrite:
            return Action.REPLACE_COMMIT
        return (
            Action.DELTA_COMMIT if self.table.config.table_type is TableType.MERGE_ON_READ else Action.COMMIT
        )

    def _check_pending_clustering(self, buckets: list[Bucket], timeline: ActiveTimeline) -> None:
        pending = self.table.pending_clustering_file_groups(timeline)
        for b in buckets:
            if b.kind == "create":
                continue
            owner = pending.get(FileGroupId(b.partition, b.file_id))
            if owner is not None:
                raise WriteConflictError(
                    f"file group {b.partition or '<root>'}/{b.file_id} is under pending clustering {owner}; "
                    "updates to it are rejected until the clustering completes or is rolled back"
                )

    # -- execution ----------------------------------------------------------------------------
    def _sorted_rows(self, prepared: PreparedInput, rows: list[int]) -> np.ndarray:
        idx = np.asarray(rows, dtype=np.int64)
        if self.options.bulk_insert_sort_mode is BulkInsertSortMode.NONE or len(idx) < 2:
            return idx
        keys = np.asarray(prepared.keys.take(pa.array(idx)).to_pylist(), dtype=object)
        return idx[np.argsort(keys, kind="stable")]

    def _execute(
        self, ctx: WriteContext, buckets: list[Bucket], prepared: PreparedInput, view: Any, spec: MergeSpec
    ) -> list[WriteStat]:
        stats: list[WriteStat] = []
        created_partitions: set[str] = set()
        pending_compaction = self.table.pending_compaction_operations()
        for number, bucket in enumerate(buckets):
            if bucket.partition not in created_partitions:
                write_partition_metadata(ctx.fileio, ctx.base_path, bucket.partition, ctx.instant_time)
                created_partitions.add(bucket.partition)
            rows = prepared.take(np.asarray(bucket.rows, dtype=np.int64))
            if bucket.kind == "create":
                rows = prepared.take(self._sorted_rows(prepared, bucket.rows))
                stats.append(create_base_file(ctx, bucket.partition, bucket.file_id, rows, number))
                continue
            assert bucket.file_slice is not None
            deletes = prepared.take(np.asarray(bucket.deletes, dtype=np.int64)) if bucket.deletes else None
            if bucket.kind == "merge":
                entries = self._delete_entries(deletes, spec) if deletes is not None else None
                stats.append(
                    merge_into_base(
                        ctx, bucket.file_slice, rows, number, concat=bucket.concat, delete_entries=entries
                    )
                )
                continue
            existing = [lf for lf in view.listing(bucket.partition).log_files if lf.file_id == bucket.file_id]
            log_base = pending_compaction.get(bucket.file_slice.group_id, bucket.file_slice.base_instant_time)
            if self.table.table_version < 8 and log_base != bucket.file_slice.base_instant_time:
                log_base = pending_compaction[bucket.file_slice.group_id]
            stats.append(
                append_to_log(
                    ctx, bucket.file_slice, log_base, existing, rows, number, self._delete_args(deletes, spec)
                )
            )
        return stats

    def _ordering_column(self, rows: PreparedInput, spec: MergeSpec) -> pa.ChunkedArray | None:
        """The ordering values a delete carries (event-time ordering on one field), or None."""
        if not spec.event_time or len(spec.ordering_fields) != 1:
            return None
        name = spec.ordering_fields[0]
        if name not in rows.data.column_names or rows.data[name].null_count == rows.num_rows:
            return None
        return rows.data[name]

    def _delete_args(
        self, deletes: PreparedInput | None, spec: MergeSpec
    ) -> tuple[list[str], list[str], list[OrderingWrapper | None] | None] | None:
        if deletes is None:
            return None
        columns = self._ordering_columns(deletes, spec)
        if columns is not None:  # several ordering fields: an ArrayWrapper, as Hudi 1.1 writes it
            return deletes.keys.to_pylist(), deletes.partitions.to_pylist(), ordering_array_wrappers(columns)
        column = self._ordering_column(deletes, spec)
        wrappers = None if column is None else ordering_wrappers(column)
        return deletes.keys.to_pylist(), deletes.partitions.to_pylist(), wrappers

    def _ordering_columns(self, rows: PreparedInput, spec: MergeSpec) -> list[pa.ChunkedArray] | None:
        """The ordering columns a delete carries under event-time ordering on several fields."""
        names = spec.ordering_fields
        if not spec.event_time or len(names) < 2 or not set(names) <= set(rows.data.column_names):
            return None
        columns = [rows.data[n] for n in names]
        return None if all(c.null_count == rows.num_rows for c in columns) else columns

    def _delete_entries(self, deletes: PreparedInput, spec: MergeSpec) -> DeleteEntries:
        columns = self._ordering_columns(deletes, spec)
        if columns is not None:  # an ArrayComparable: each value's class follows from its type
            values = list(zip(*(c.to_pylist() for c in columns), strict=True))
            return DeleteEntries(deletes.keys, values, ["ArrayWrapper"] * len(values))
        column = self._ordering_column(deletes, spec)
        if column is None:
            return DeleteEntries(deletes.keys, [None] * deletes.num_rows, [None] * deletes.num_rows)
        values = column.to_pylist()
        wrapper = ORDERING_WRAPPERS.get(arrow_family(column.type))
        return DeleteEntries(deletes.keys, values, [wrapper if v is not None else None for v in values])

    # -- commit -------------------------------------------------------------------------------
    def _workload(
        self, buckets: list[Bucket], prepared: PreparedInput, operation: WriteOperation
    ) -> CommitMetadata:
        per_partition: dict[str, list[WriteStat]] = {}
        for b in buckets:
            if b.kind == "create":
                stat = WriteStat(
                    file_id="", prev_commit="null", num_inserts=len(b.rows), partition_path=b.partition
                )
            else:
                assert b.file_slice is not None
                stat = WriteStat(
                    file_id=b.file_id,
                    prev_commit=b.file_slice.base_instant_time,
                    num_update_writes=len(b.rows),
                    num_deletes=len(b.deletes),
                    partition_path=b.partition,
                )
            per_partition.setdefault(b.partition, []).append(stat)
        return CommitMetadata(
            partition_to_write_stats=per_partition,
            compacted=False,
            extra_metadata={},
            version=None,
            operation_type=operation.operation_type,
        )

    def _metadata(
        self,
        stats: list[WriteStat],
        schema_json: dict[str, Any],
        operation: WriteOperation,
        replaced: dict[str, list[str]],
    ) -> CommitMetadata:
        per_partition: dict[str, list[WriteStat]] = {}
        for s in stats:
            per_partition.setdefault(s.partition_path or "", []).append(s)
        for p in replaced:
            per_partition.setdefault(p, [])
        common: dict[str, Any] = {
            "partition_to_write_stats": per_partition,
            "compacted": False,
            "extra_metadata": {"schema": json.dumps(schema_json, separators=(",", ":"))},
            "version": None,
            "operation_type": operation.operation_type,
        }
        if operation.is_overwrite:
            return ReplaceCommitMetadata(**common, partition_to_replace_file_ids=replaced)
        return CommitMetadata(**common)

    def _complete(
        self,
        timeline: ActiveTimeline,
        inflight: Instant,
        metadata: CommitMetadata,
        stats: list[WriteStat],
        replaced: dict[str, list[str]],
        instant_time: str,
        record_index: Callable[[ActiveTimeline], RecordIndexChanges | None],
        log_records: Mapping[str, pa.Table],
        base_footers: Mapping[str, pq.FileMetaData],
        operation: WriteOperation,
        bucketed: bool,
    ) -> Instant:
        touched = {FileGroupId(s.partition_path or "", s.file_id or "") for s in stats}
        touched |= {FileGroupId(p, f) for p, ids in replaced.items() for f in ids}
        payload = metadata.to_bytes(self.table.table_version)

        def sync(fresh: ActiveTimeline, current: Instant) -> None:
            sync_metadata_table(
                self.table,
                fresh,
                current,
                payload,
                lambda: self.time_source.new_instant_time(lock_held=True),
                record_index=lambda: record_index(fresh),
                log_records=log_records,
                base_footers=base_footers,
            )

        # The upkeep runs in write(), after the markers and the heartbeat are gone (Hudi's postCommit).
        return commit(
            self.table,
            inflight,
            payload,
            completion_time=lambda fresh: (
                self.time_source.new_instant_time(lock_held=True) if fresh.layout >= 2 else None
            ),
            lock=self.lock,
            timeout_s=self.options.lock_timeout_s,
            requirements=[
                StillInflight(),
                ShapeAllows("write", self.write_props, operation.value),
                NoConflictingCommit(
                    lambda fresh: self._check_conflicts(timeline, fresh, touched, instant_time, bucketed)
                ),
            ],
            sync=sync,
        )

    def _maintain_metadata(self) -> None:
        """Run the metadata table's services that are due, as Hudi's writers do after each commit."""
        from hoodie.services.base import ServiceContext

        ctx = ServiceContext(
            self.table,
            options=self.write_props,
            lock=self.lock,
            time_source=self.time_source,
            heartbeat=self.heartbeat,
            lock_timeout_s=self.options.lock_timeout_s,
        )
        ctx.maintain_metadata()

    def _inline_ttl(self) -> None:
        """``hoodie.partition.ttl.inline=true``: partition TTL after the commit, as Hudi's writers run it."""
        from hoodie.services.ttl import run_inline

        run_inline(self.table, self.write_props, self.lock, self.time_source, self.heartbeat)

    def _check_conflicts(
        self,
        start: ActiveTimeline,
        now: ActiveTimeline,
        touched: set[FileGroupId],
        instant_time: str,
        bucketed: bool,
    ) -> None:
        """Optimistic concurrency: fail if a commit that completed since we started wrote our file groups
        (``bucketed``: or started a bucket ours started too)."""
        for instant in now.completed().writes():
            if instant.requested_time == instant_time or start.is_completed(instant.requested_time):
                continue
            meta = self.table.commit_metadata(instant, now)
            theirs = {FileGroupId(s.partition_path or "", s.file_id or "") for s in meta.write_stats()}
            if isinstance(meta, ReplaceCommitMetadata):
                theirs |= {FileGroupId(p, f) for p, f in meta.replaced_file_ids()}
            clash = theirs & touched
            if not clash and bucketed:
                clash = same_buckets(theirs, touched)  # two writers may not start one bucket twice
            if clash:
                raise WriteConflictError(
                    f"concurrent commit {instant} wrote file group(s) {sorted(str(g) for g in clash)[:5]} "
                    f"that {instant_time} also wrote; {instant_time} is aborted"
                )
        for fg, owner in self.table.pending_clustering_file_groups(now).items():
            if fg in touched and owner not in start:
                raise WriteConflictError(
                    f"clustering {owner} was scheduled on file group {fg} during write {instant_time}"
                )

    def _abort(self, timeline: ActiveTimeline, instant_time: str, markers: WriteMarkers) -> None:
        """Remove what a failed write created: its data files, markers and pending instant files."""
        try:
            for path in markers.data_file_paths():
                self.table.fileio.delete(path)
            markers.delete_all()
            timeline.reload().delete_instant(instant_time)
        except Exception:  # the original error matters more; a later rollback cleans up leftovers
            log.exception("%s: could not clean up failed write %s", self.table.base_path, instant_time)
