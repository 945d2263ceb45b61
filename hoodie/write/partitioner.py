"""Which file group receives which records of a write (Hudi's ``UpsertPartitioner`` and, for bucket
tables, the bucket index's partitioner).

Updates and deletes go to the file group their key was tagged to; inserts fill small base files
first (not on MOR slices with logs, nor groups under pending compaction or clustering), then new
file groups of ``max_file_size / average record size`` records each (``bulk_insert``: new groups
only). The insert operation's records in a small base file are appended to its records as they
are (``HoodieConcatHandle``) when ``hoodie.merge.allow.duplicate.on.inserts`` holds, otherwise
merged with them by key (``HoodieMergeHandle``). ``insert_overwrite`` writes new file groups and
replaces the partition's (or, for ``insert_overwrite_table``, every partition's). A
simple-bucket-index write is routed by bucket instead (:mod:`hoodie.write.bucket_planner`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from hoodie.file_group.base_file import new_file_id
from hoodie.file_group.file_slice import FileSlice
from hoodie.table import HoodieTable
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.write.bucket_info import Bucket
from hoodie.write.bucket_planner import BucketLayout
from hoodie.write.index import tag_keys
from hoodie.write.input import PreparedInput
from hoodie.write.options import WriteOperation, WriteOptions, allow_duplicate_on_inserts


class WritePartitioner:
    """Plans one write's buckets over a table's file-system view (``plan``)."""

    def __init__(self, table: HoodieTable, options: WriteOptions, write_props: Mapping[str, str]) -> None:
        self.table = table
        self.options = options
        self.write_props = write_props
        self.bucketed = False
        """Whether the planned write routes by bucket (the simple bucket index)."""

    def plan(
        self, prepared: PreparedInput, operation: WriteOperation, view: Any, timeline: ActiveTimeline
    ) -> tuple[list[Bucket], dict[str, list[str]]]:
        """The buckets of the write, and the file groups it replaces (partition -> file ids)."""
        if operation.is_overwrite:
            return self._plan_overwrite(prepared, view, operation)
        slices_by_partition = self._live_slices(view, prepared.partition_values())
        buckets = self._plan(prepared, operation, slices_by_partition, view, timeline)
        if not allow_duplicate_on_inserts(self.write_props, self.table.table_version):
            for bucket in buckets:  # HoodieMergeHandle: the inserts merge with the file's records
                bucket.concat = False
        return buckets, {}

    def _live_slices(self, view: Any, partitions: Iterable[str]) -> dict[str, list[FileSlice]]:
        existing = set(view.partitions())
        return {p: view.latest_file_slices([p]) for p in partitions if p in existing}

    def _avg_record_size(self, timeline: ActiveTimeline) -> int:
        threshold = self.options.small_file_limit
        for instant in reversed(timeline.completed().writes().instants):
            meta = self.table.commit_metadata(instant, timeline)
            stats = list(meta.write_stats())
            total_bytes = sum(s.total_write_bytes or 0 for s in stats)
            records = sum(s.num_writes or 0 for s in stats)
            if total_bytes > threshold and records > 0:
                return max(1, math.ceil(total_bytes / records))
        return self.options.record_size_estimate

    def _records_per_new_file(self, avg: int) -> int:
        if self.options.auto_split_inserts:
            return max(1, self.options.max_file_size // max(avg, 1))
        return max(1, self.options.insert_split_size)

    def _plan(
        self,
        prepared: PreparedInput,
        operation: WriteOperation,
        slices_by_partition: dict[str, list[FileSlice]],
        view: Any,
        timeline: ActiveTimeline,
    ) -> list[Bucket]:
        bucketed = self._bucket_layout(view, operation, prepared)
        if bucketed is not None:
            return bucketed.plan(prepared, operation)
        mor = self.table.config.is_mor
        buckets: dict[str, Bucket] = {}
        inserts: dict[str, list[int]] = {}
        tagged: list[FileSlice | None] = [None] * prepared.num_rows
        if operation.looks_up_index and prepared.num_rows:
            tagged = tag_keys(
                self.table.fileio,
                self.table.base_path,
                slices_by_partition,
                prepared.keys,
                prepared.partitions,
                self.table.table_version,
                view.is_committed,
            ).slices
        partitions = prepared.partitions.to_pylist()
        for i, found in enumerate(tagged):
            delete = operation is WriteOperation.DELETE or bool(prepared.is_delete[i])
            if found is None:
                if not delete:
                    inserts.setdefault(partitions[i], []).append(i)
                continue
            bucket = buckets.get(found.file_id)
            if bucket is None:
                kind = "append" if mor else "merge"
                bucket = buckets[found.file_id] = Bucket(kind, found.partition_path, found.file_id, found)
            if operation is WriteOperation.DELETE or (mor and delete):
                bucket.deletes.append(i)
            else:
                bucket.rows.append(i)
        if operation is not WriteOperation.DELETE:
            self._assign_inserts(inserts, buckets, slices_by_partition, view, operation, timeline)
        return list(buckets.values())

    def _assign_inserts(
        self,
        inserts: dict[str, list[int]],
        buckets: dict[str, Bucket],
        slices_by_partition: dict[str, list[FileSlice]],
        view: Any,
        operation: WriteOperation,
        timeline: ActiveTimeline,
    ) -> None:
        if not inserts:
            return
        avg = self._avg_record_size(timeline)
        per_file = self._records_per_new_file(avg)
        pending_compaction = self.table.pending_compaction_operations(timeline)
        pending_clustering = self.table.pending_clustering_file_groups(timeline)
        mor = self.table.config.is_mor
        concat = operation is WriteOperation.INSERT
        for partition, rows in inserts.items():
            if operation is WriteOperation.BULK_INSERT:
                small: list[FileSlice] = []
            else:
                small = sorted(
                    (
                        s
                        for s in slices_by_partition.get(partition, [])
                        if s.base_file is not None
                        and s.base_file.size < self.options.small_file_limit
                        and s.group_id not in pending_compaction
                        and s.group_id not in pending_clustering
                        and not (mor and (s.log_files or s.file_id in buckets))
                    ),
                    key=lambda s: s.base_file.size if s.base_file else 0,
                )
            remaining = list(rows)
            for s in small:
                if not remaining:
                    break
                assert s.base_file is not None
                capacity = max(0, (self.options.max_file_size - s.base_file.size) // max(avg, 1))
                if capacity == 0:
                    continue
                take, remaining = remaining[:capacity], remaining[capacity:]
                bucket = buckets.get(s.file_id)
                if bucket is None:
                    bucket = buckets[s.file_id] = Bucket("merge", partition, s.file_id, s, concat=concat)
                bucket.rows.extend(take)
                bucket.inserts.extend(take)
            for start in range(0, len(remaining), per_file):
                chunk = remaining[start : start + per_file]
                file_id = new_file_id()
                buckets[file_id] = Bucket("create", partition, file_id, None, chunk)

    def _plan_overwrite(
        self, prepared: PreparedInput, view: Any, operation: WriteOperation
    ) -> tuple[list[Bucket], dict[str, list[str]]]:
        bucketed = self._bucket_layout(view, operation, prepared)
        partitions = prepared.partitions.to_pylist()
        targets = (
            set(view.partitions()) if operation is WriteOperation.INSERT_OVERWRITE_TABLE else set(partitions)
        )
        replaced: dict[str, list[str]] = {}
        for p in sorted(targets & set(view.partitions())):
            ids = [s.file_id for s in view.latest_file_slices([p])]
            if ids:
                replaced[p] = ids
        if bucketed is not None:
            return bucketed.plan_overwrite(prepared), replaced
        per_file = self._records_per_new_file(self.options.record_size_estimate)
        by_partition: dict[str, list[int]] = {}
        for i, p in enumerate(partitions):
            if not prepared.is_delete[i]:
                by_partition.setdefault(p, []).append(i)
        buckets = []
        for p, rows in by_partition.items():
            for start in range(0, len(rows), per_file):
                buckets.append(Bucket("create", p, new_file_id(), None, rows[start : start + per_file]))
        return buckets, replaced

    def _bucket_layout(
        self, view: Any, operation: WriteOperation, prepared: PreparedInput
    ) -> BucketLayout | None:
        """The simple bucket index's routing for this write (refusals raise before anything is written)."""
        partitions = prepared.partition_values()
        layout = BucketLayout.resolve(self.table, dict(self.write_props), view, operation, partitions)
        self.bucketed = layout is not None
        return layout
