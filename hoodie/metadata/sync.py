"""Keeping the metadata table in step with the data table: the updates each action makes.

``sync_metadata_table`` is called by every committer (the writer and each table service) with
the table lock held, after the data-table instant's payload is final and before its completed
file is written. It turns the action's payload into metadata-table updates, as Apache Hudi's
metadata writer does (hudi-format.md §6.4), and commits them at the same instant time:

* commit / deltacommit / compaction / log compaction / clustering / insert overwrite: every new
  file goes to ``files`` (and ``__all_partitions__`` lists the partitions written), to
  ``column_stats`` per indexed column, and to ``partition_stats`` (re-aggregated over the
  partition's latest file slices, as tight bounds, once ``column_stats`` is built); every new
  base file's footer bloom filter goes to ``bloom_filters``; the record index gains the keys of
  new file groups and follows records that clustering moved, and is left alone by compaction;
  a write moves secondary-index entries to the values it wrote (``secondary``);
* clean: deleted files become tombstones in ``files``, ``column_stats`` and ``bloom_filters``;
* rollback and restore: not here; the metadata table's instants are rolled back or restored
  with them (:mod:`hoodie.metadata.undo`), and :func:`restore_updates` syncs a restored one.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.alloc import gc_paused
from hoodie.bloom import BLOOM_FILTER_FOOTER_KEY, BLOOM_TYPE_FOOTER_KEY
from hoodie.errors import UnsupportedShapeError, UnsupportedTableError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.view import FileSystemView
from hoodie.io.fileio import join
from hoodie.keygen.factory import key_generator_from_properties
from hoodie.metadata.keys import (
    ALL_PARTITIONS_KEY,
    bloom_filter_key,
    column_stats_key,
    encode_file_id,
    partition_id,
    partition_stats_key,
)
from hoodie.metadata.partitions import enabled_partitions, has_metadata_table
from hoodie.metadata.records import (
    MetadataPartition,
    Payload,
    bloom_filter_payload,
    column_stats_payload,
    files_payload,
    merge_payloads,
    record_index_payload,
)
from hoodie.metadata.table import MetadataTable
from hoodie.metadata.writer import MetadataWriter, Updates
from hoodie.models.clean import CleanMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata, WriteStat
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import instant_to_epoch_millis
from hoodie.timeline.timeline import ActiveTimeline

if TYPE_CHECKING:
    from hoodie.table import HoodieTable

log = logging.getLogger(__name__)

__all__ = [
    "RecordIndexChanges",
    "metadata_updates",
    "require_supported_metadata",
    "restore_updates",
    "sync_metadata_table",
]


@dataclass
class RecordIndexChanges:
    """What a write did to record locations (the writer knows; a commit's payload does not).

    ``located``: record key -> (partition, file id) for keys whose location is new or changed;
    ``deleted``: keys that no longer exist.
    """

    located: dict[str, tuple[str, str]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)


def require_supported_metadata(table: HoodieTable, what: str, *, secondary_ok: bool = False) -> None:
    """Refuse (naming the shape, ``hoodie.shape``) a commit hts cannot reflect in this table's metadata
    table: the commit's re-check of what the shape refused before anything was written, as the
    properties are now (an indexer may have added a partition meanwhile)."""
    from hoodie.shape.matrix import WRITE, Shape, cell
    from hoodie.shape.table_shape import metadata_features

    for found in metadata_features(table, expression=True):
        if secondary_ok and found.shape is Shape.SECONDARY_INDEX:
            continue
        reason = cell(found.shape, WRITE) or found.shape.value
        raise UnsupportedShapeError(table.base_path, found.shape.value, found.evidence, what, reason)


def _file_name(stat: WriteStat) -> str:
    return posixpath.basename(stat.path or "")


def _record_keys(table: HoodieTable, partition: str, file_name: str) -> list[str]:
    path = join(table.base_path, partition, file_name)
    with table.fileio.open_input(path) as f:
        pf = pq.ParquetFile(f)
        if (
            RECORD_KEY_METADATA_FIELD in pf.schema_arrow.names
            and table.config.populate_meta_fields is not False
        ):
            column = pf.read(columns=[RECORD_KEY_METADATA_FIELD]).column(0)
            return [str(k) for k in column.to_pylist()]
        data = pf.read()
    keygen = key_generator_from_properties(dict(table.config.props))
    return [str(k) for k in keygen.record_keys(data).to_pylist()]


class _Builder:
    """Collects the updates of one data-table instant, partition by partition."""

    def __init__(
        self,
        table: HoodieTable,
        timeline: ActiveTimeline,
        instant_time: str,
        log_records: Mapping[str, pa.Table] | None = None,
        base_footers: Mapping[str, pq.FileMetaData] | None = None,
    ) -> None:
        self.table = table
        self.log_records = log_records or {}
        self.base_footers = base_footers or {}
        self.timeline = timeline
        self.instant_time = instant_time
        self.partitions = enabled_partitions(table)
        self.updates: dict[str, dict[str, Payload | None]] = {}
        self._mdt: MetadataTable | None = None
        self._view: FileSystemView | None = None
        self._columns: list[str] | None = None

    @property
    def mdt(self) -> MetadataTable:
        if self._mdt is None:
            self._mdt = MetadataTable.open(self.table, self.timeline)
        return self._mdt

    def enabled(self, partition: str) -> bool:
        return partition in self.partitions

    def put(self, partition: str, key: str, payload: Payload | None) -> None:
        bucket = self.updates.setdefault(partition, {})
        bucket[key] = merge_payloads(bucket.get(key), payload) if key in bucket else payload

    @property
    def columns(self) -> list[str]:
        if self._columns is None:
            from hoodie.metadata.column_stats import indexed_columns

            self._columns = indexed_columns(self.table)
        return self._columns

    # -- files --------------------------------------------------------------------------------
    def files_added(self, added: Mapping[str, Mapping[str, int]]) -> None:
        if not added:
            return
        self.put(
            MetadataPartition.FILES,
            ALL_PARTITIONS_KEY,
            files_payload({partition_id(p): (0, False) for p in added}, all_partitions=True),
        )
        for partition, files in added.items():
            entries = {name: (size, False) for name, size in files.items()}
            self.put(MetadataPartition.FILES, partition_id(partition), files_payload(entries))

    def files_deleted(
        self, deleted: Mapping[str, Iterable[str]], partitions_deleted: Iterable[str] = ()
    ) -> None:
        for partition, names in deleted.items():
            entries = {name: (0, True) for name in names}
            if entries:
                self.put(MetadataPartition.FILES, partition_id(partition), files_payload(entries))
        gone = {partition_id(p): (0, True) for p in partitions_deleted}
        if gone:
            self.put(MetadataPartition.FILES, ALL_PARTITIONS_KEY, files_payload(gone, all_partitions=True))

    # -- column and partition stats -----------------------------------------------------------
    def _latest_slice_stats(self, added: Mapping[str, Mapping[str, int]]) -> dict[str, list[Payload]]:
        """Per partition, the column stats (from the metadata table, in one read) of the files
        of its latest slices that this instant does not write, as Hudi's
        ``getPartitionLatestFileSlicesIncludingInflight`` sees them: a file group that gets a
        new base file here starts a new slice, so its current slice does not count; a
        replacecommit is still inflight, so the groups it replaces still count."""
        keys: dict[str, str] = {}
        for partition, new_files in added.items():
            rebased = {base.file_id for n in new_files if (base := BaseFile.parse(n, 0)) is not None}
            for file_slice in self.view.latest_file_slices([partition]):
                if file_slice.file_id in rebased:
                    continue
                names = [file_slice.base_file.name] if file_slice.base_file is not None else []
                names += [lf.name for lf in file_slice.log_files]
                for name in names:
                    if name not in new_files:
                        keys.update((column_stats_key(c, partition, name), partition) for c in self.columns)
        out: dict[str, list[Payload]] = {}
        if keys:
            for key, payload in self.mdt.read_partition(MetadataPartition.COLUMN_STATS, keys).items():
                out.setdefault(keys[key], []).append(payload["ColumnStatsMetadata"])
        return out

    @property
    def view(self) -> FileSystemView:
        if self._view is None:
            self._view = self.table.file_system_view(timeline=self.timeline)
        return self._view

    def stats_added(self, added: Mapping[str, Mapping[str, int]]) -> None:
        """Column stats of the new files, and partition stats as Hudi 1.x computes them: with
        ``column_stats`` built, over the latest slices including this instant's files, as tight
        bounds; otherwise (column stats still being built) over the new files only, not tight."""
        want_files = self.enabled(MetadataPartition.COLUMN_STATS)
        want_partitions = self.enabled(MetadataPartition.PARTITION_STATS)
        if not (want_files or want_partitions) or not added:
            return
        from hoodie.metadata.column_ranges import partition_stats
        from hoodie.metadata.column_stats import file_column_stats, footer_column_stats, log_records_stats

        schema = self.table.latest_schema_json()
        assert schema is not None
        computed: dict[str, list[dict[str, Any]]] = {}
        for partition, files in added.items():
            for name in sorted(files):
                records = self.log_records.get(join(partition, name))
                footer = self.base_footers.get(join(partition, name))
                if records is not None:
                    stats = log_records_stats(
                        records, name, self.columns, schema, table_version=self.table.table_version
                    )
                elif footer is not None:
                    stats = footer_column_stats(
                        footer, name, self.columns, table_version=self.table.table_version
                    )
                else:
                    stats = file_column_stats(
                        self.table.fileio,
                        self.table.base_path,
                        partition,
                        name,
                        self.columns,
                        schema,
                        table_version=self.table.table_version,
                    )
                computed.setdefault(partition, []).extend(stats)
                if want_files:
                    for s in stats:
                        key = column_stats_key(s["columnName"], partition, name)
                        self.put(MetadataPartition.COLUMN_STATS, key, column_stats_payload(s))
        if not want_partitions:
            return
        tight = MetadataPartition.COLUMN_STATS in self.table.config.metadata_partitions
        current = self._latest_slice_stats(added) if tight else {}
        for partition, stats in computed.items():
            if not stats:
                continue
            for s in partition_stats(partition, current.get(partition, []) + stats, tight_bound=tight):
                key = partition_stats_key(s["columnName"], partition)
                self.put(
                    MetadataPartition.PARTITION_STATS, key, column_stats_payload(s, partition_stats=True)
                )

    def partition_stats_deleted(self, partitions: Iterable[str]) -> None:
        """A DELETE_PARTITION deletes the partitions' stats of every indexed column."""
        if not self.enabled(MetadataPartition.PARTITION_STATS):
            return
        from hoodie.metadata.column_stats import partition_tombstone

        for partition in partitions:
            for column in self.columns:
                stub = partition_tombstone(column, table_version=self.table.table_version)
                self.put(
                    MetadataPartition.PARTITION_STATS,
                    partition_stats_key(column, partition),
                    column_stats_payload(stub, partition_stats=True),
                )

    # -- secondary indexes ----------------------------------------------------------------------
    def secondary(self, metadata: CommitMetadata) -> None:
        from hoodie.metadata.secondary import secondary_index_updates, secondary_indexes

        indexes = secondary_indexes(self.table, self.partitions)
        updates = secondary_index_updates(self.table, self.timeline, self.instant_time, metadata, indexes)
        for partition, entries in updates.items():
            for key, payload in entries.items():
                self.put(partition, key, payload)

    # -- bloom filters ------------------------------------------------------------------------
    def blooms_added(self, added: Mapping[str, Mapping[str, int]]) -> None:
        """One record per new base file, holding the filter from its footer."""
        if not self.enabled(MetadataPartition.BLOOM_FILTERS):
            return
        for partition, files in added.items():
            for name in files:
                if not name.endswith(".parquet"):
                    continue
                payload = base_file_bloom_payload(self.table, partition, name, self.instant_time)
                if payload is not None:
                    self.put(MetadataPartition.BLOOM_FILTERS, bloom_filter_key(partition, name), payload)

    def blooms_deleted(self, deleted: Mapping[str, Iterable[str]]) -> None:
        if not self.enabled(MetadataPartition.BLOOM_FILTERS):
            return
        for partition, names in deleted.items():
            for name in names:
                if name.endswith(".parquet"):
                    tombstone = bloom_filter_payload(DEFAULT_BLOOM_TYPE, self.instant_time, b"", deleted=True)
                    self.put(MetadataPartition.BLOOM_FILTERS, bloom_filter_key(partition, name), tombstone)

    def stats_deleted(self, deleted: Mapping[str, Iterable[str]]) -> None:
        if not self.enabled(MetadataPartition.COLUMN_STATS):
            return
        from hoodie.metadata.column_stats import tombstone

        for partition, names in deleted.items():
            for name in names:
                for column in self.columns:
                    key = column_stats_key(column, partition, name)
                    self.put(
                        MetadataPartition.COLUMN_STATS,
                        key,
                        column_stats_payload(
                            tombstone(partition, name, column, table_version=self.table.table_version)
                        ),
                    )

    # -- record index -------------------------------------------------------------------------
    def locate(self, changes: RecordIndexChanges, instant_time: str) -> None:
        if not self.enabled(MetadataPartition.RECORD_INDEX):
            return
        millis = instant_to_epoch_millis(instant_time, self.table.tz)
        # One (immutable) payload per location: keys share it, and it is encoded once.
        payloads: dict[tuple[str, str], Payload] = {}
        for location in set(changes.located.values()):
            partition, file_id = location
            payloads[location] = record_index_payload(partition, encode_file_id(file_id), millis)
        bucket = self.updates.setdefault(MetadataPartition.RECORD_INDEX, {})
        if not bucket:
            bucket.update((key, payloads[location]) for key, location in changes.located.items())
        else:
            for key, location in changes.located.items():
                self.put(MetadataPartition.RECORD_INDEX, key, payloads[location])
        for key in changes.deleted:
            self.put(MetadataPartition.RECORD_INDEX, key, None)


DEFAULT_BLOOM_TYPE = "DYNAMIC_V0"
"""``hoodie.bloom.index.filter.type``'s default: the type named in tombstones."""


def base_file_bloom_payload(
    table: HoodieTable, partition: str, file_name: str, instant_time: str
) -> Payload | None:
    """The ``bloom_filters`` record of a base file, from its footer (None when it has no filter:
    Hudi then writes no record either)."""
    path = join(table.base_path, partition, file_name) if partition else join(table.base_path, file_name)
    with table.fileio.open_input(path) as f:
        footer = pq.ParquetFile(f).metadata.metadata or {}
    text = footer.get(BLOOM_FILTER_FOOTER_KEY.encode())
    if text is None:
        log.warning("%s has no bloom filter in its footer; no bloom_filters record", path)
        return None
    kind = (footer.get(BLOOM_TYPE_FOOTER_KEY.encode()) or b"SIMPLE").decode()
    return bloom_filter_payload(kind, instant_time, text)


def _written_files(metadata: CommitMetadata) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for partition, stats in (metadata.partition_to_write_stats or {}).items():
        files = out.setdefault(partition, {})
        for stat in stats:
            name = _file_name(stat)
            if not name:
                continue
            size = int(stat.file_size_in_bytes or stat.total_write_bytes or 0)
            files[name] = max(files.get(name, 0), size)
    return {p: f for p, f in out.items() if f}


def _with_cdc_logs(
    added: Mapping[str, Mapping[str, int]], metadata: CommitMetadata
) -> dict[str, dict[str, int]]:
    """``added`` and the CDC logs of the write stats: files of their partitions too (Hudi's
    ``HoodieTableMetadataUtil`` puts ``cdcStats`` into the files partition, and only there)."""
    out = {p: dict(f) for p, f in added.items()}
    for partition, stats in (metadata.partition_to_write_stats or {}).items():
        for stat in stats:
            for path, size in (stat.cdc_stats or {}).items():
                out.setdefault(partition, {})[path.rsplit("/", 1)[-1]] = int(size)
    return out


def _new_file_locations(table: HoodieTable, metadata: CommitMetadata) -> RecordIndexChanges:
    """Every record of every new base file, at its new file group (clustering moves records)."""
    changes = RecordIndexChanges()
    for partition, stats in (metadata.partition_to_write_stats or {}).items():
        for stat in stats:
            name = _file_name(stat)
            if stat.is_log_write or not name.endswith(".parquet") or not stat.file_id:
                continue
            for key in _record_keys(table, partition, name):
                changes.located[key] = (partition, stat.file_id)
    return changes


def _dropped_keys(b: _Builder, partitions: list[str]) -> RecordIndexChanges:
    """HoodieBackedTableMetadataWriter's record-index update for a DELETE_PARTITION: every key of the
    partitions' latest base files (the view the commit is made on, where they are not replaced yet)
    leaves the record index (getRecordIndexReplacedRecords)."""
    changes = RecordIndexChanges()
    for file_slice in b.view.latest_base_files(partitions):
        assert file_slice.base_file is not None
        changes.deleted.update(_record_keys(b.table, file_slice.partition_path, file_slice.base_file.name))
    return changes


def metadata_updates(
    table: HoodieTable,
    timeline: ActiveTimeline,
    instant: Instant,
    payload: bytes,
    *,
    record_index: RecordIndexChanges | None = None,
    log_records: Mapping[str, pa.Table] | None = None,
    base_footers: Mapping[str, pq.FileMetaData] | None = None,
) -> dict[str, dict[str, Payload | None]]:
    """The metadata-table updates of data-table ``instant`` completing with ``payload``
    (``log_records``: the records of log files the writer just wrote, ``base_footers``: the
    footers of its base files, both by ``partition/name``)."""
    b = _Builder(table, timeline, instant.requested_time, log_records, base_footers)
    version = table.table_version
    action = instant.action.completed_action
    if action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
        model = ReplaceCommitMetadata if action is Action.REPLACE_COMMIT else CommitMetadata
        metadata = model.from_bytes(payload, version)
        added = _written_files(metadata)
        b.files_added(_with_cdc_logs(added, metadata))
        if isinstance(metadata, ReplaceCommitMetadata) and metadata.operation_type == "DELETE_PARTITION":
            # HoodieTableMetadataUtil.getPartitionsDeleted: the partitions leave the partition list.
            dropped = list(metadata.partition_to_replace_file_ids or {})
            b.files_deleted({}, dropped)
            b.partition_stats_deleted(dropped)
            if record_index is None and b.enabled(MetadataPartition.RECORD_INDEX):
                record_index = _dropped_keys(b, dropped)
        service = instant.action in (Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING)
        b.stats_added(added)
        b.blooms_added(added)
        if not service:
            b.secondary(metadata)
        if instant.action is Action.CLUSTERING:
            if b.enabled(MetadataPartition.RECORD_INDEX):  # reading every moved key costs seconds
                b.locate(_new_file_locations(table, metadata), instant.requested_time)
        elif record_index is not None:
            b.locate(record_index, instant.requested_time)
        elif not service and b.enabled(MetadataPartition.RECORD_INDEX):
            raise UnsupportedTableError(
                f"{table.base_path}: {instant} needs its record-index changes to update the metadata table"
            )
    elif action is Action.CLEAN:
        clean = CleanMetadata.from_bytes(payload, version)
        deleted = {
            p: [posixpath.basename(f) for f in m.success_delete_files]
            for p, m in clean.partition_metadata.items()
        }
        gone = [p for p, m in clean.partition_metadata.items() if m.is_partition_deleted]
        b.files_deleted(deleted, gone)
        b.stats_deleted(deleted)
        b.blooms_deleted(deleted)
    else:
        return {}
    return {p: u for p, u in b.updates.items() if u}


def restore_updates(
    table: HoodieTable,
    timeline: ActiveTimeline,
    instant_time: str,
    *,
    added: Mapping[str, Mapping[str, int]],
    deleted: Mapping[str, Iterable[str]],
    partitions_deleted: Iterable[str],
) -> dict[str, dict[str, Payload | None]]:
    """The metadata-table updates that bring a restored metadata table in line with storage, as
    Hudi's restore sync: ``files`` and ``column_stats`` (``buildRestore`` of those two indexes)."""
    b = _Builder(table, timeline, instant_time)
    b.files_added(added)
    b.files_deleted(deleted, partitions_deleted)
    if b.enabled(MetadataPartition.COLUMN_STATS):
        b.stats_added(added)
        b.stats_deleted(deleted)
    return {p: u for p, u in b.updates.items() if u}


def sync_metadata_table(
    table: HoodieTable,
    timeline: ActiveTimeline,
    instant: Instant,
    payload: bytes,
    completion_time: Callable[[], str],
    *,
    record_index: Callable[[], RecordIndexChanges | None] | None = None,
    log_records: Mapping[str, pa.Table] | None = None,
    base_footers: Mapping[str, pq.FileMetaData] | None = None,
) -> Instant | None:
    """Write the metadata-table deltacommit for ``instant`` (call before completing ``instant``).

    Returns the metadata table's completed instant, or None when the table has no metadata table.
    The table's properties are read afresh: an indexer may have added a partition to keep current;
    ``record_index`` (the writer's) is asked for the record-key changes after that, since what it
    logs depends on whether the record index is built or being built.
    """
    if table.has_metadata_table:
        table.reload_config()
    if not has_metadata_table(table):
        return None
    require_supported_metadata(
        table,
        f"completing {instant}",
        secondary_ok=instant.action not in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT),
    )
    with gc_paused():
        changes = record_index() if record_index is not None else None
        updates: Updates = metadata_updates(
            table,
            timeline,
            instant,
            payload,
            record_index=changes,
            log_records=log_records,
            base_footers=base_footers,
        )
        return MetadataWriter(table).commit(instant.requested_time, updates, completion_time)
