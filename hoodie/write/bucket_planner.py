"""Writes to a simple-bucket-index table: every record goes to the one file group of its bucket.

Hudi persists none of the bucket settings: every writer is told ``hoodie.index.type=BUCKET``,
``hoodie.bucket.index.num.buckets`` and optionally ``hoodie.bucket.index.hash.field``
(``HoodieIndexConfig``), and the table is recognisable only from its file ids (the first 8
characters are the bucket number, :mod:`hoodie.index.bucket`).

As Hudi's Spark writer (``HoodieSimpleBucketIndex`` tags, ``SparkBucketIndexPartitioner``
routes): a record whose bucket already has a file group in its partition goes to it (an update
there, whether or not the key exists: a merge for COPY_ON_WRITE, a log append for
MERGE_ON_READ); a bucket without one gets a new file group ``{bucket:08d}<uuid rest>-0`` with a
base file (the simple bucket index cannot index log files, so MERGE_ON_READ inserts go to a base
file too); deletes whose bucket has no file group are dropped. No small-file packing, no
splitting by size. insert_overwrite writes new file ids for every bucket and replaces the
partition's file groups. The operations are ``HoodieSimpleBucketLayout.SUPPORTED_OPERATIONS``
(insert, upsert, delete, insert_overwrite) and bulk_insert; insert_overwrite_table is refused.

bulk_insert, as Hudi's bucket bulk insert writers (``BucketBulkInsertDataInternalWriterHelper`` for
rows, ``RDDSimpleBucketBulkInsertPartitioner`` for records): one new file group per bucket written,
with a base file of its records (sorted as the bulk insert sort mode says). Its id is the record
writer's ``{bucket:08d}<uuid rest>-0`` (``FSUtils.createNewFileId(prefix, 0)``, as hts's inserts);
the row writer names it by the bare prefix ``{bucket:08d}<uuid rest>``; Hudi reads either
(``BucketIdentifier.bucketIdFromFileId`` takes the first 8 characters). A bucket that already has
a file group in its partition is refused: there the row writer (Spark's default) starts a second
file group of the bucket, which Hudi's simple bucket index then refuses to load, while the record
writer appends to the existing one; which of the two a table's writers use is not on storage.

Refused before anything is written, naming the evidence: a bucket count below a bucket present,
two file groups of one bucket in a partition, file groups without the bucket form, the
consistent-hashing engine, a bulk_insert into a bucket that has a file group, and an
insert_overwrite under non-blocking concurrency control (the table's shape, ``hoodie.shape``,
refuses bucket tables written without the bucket options, the consistent-hashing and
partition-level bucket indexes). Under NBCC
(``hoodie.write.concurrency.mode=NON_BLOCKING_CONCURRENCY_CONTROL`` or the table's fixed NBCC file
ids) a bucket without a file group is started as the log-only file group of its fixed id
``{bucket:08d}-0000-0000-0000-000000000000-0``, as Hudi does; bulk_insert is refused there.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hoodie.config.table_config import TableType
from hoodie.errors import InvalidInputError, UnsupportedTableError
from hoodie.file_group.file_slice import FileGroupId, FileSlice
from hoodie.index.bucket import (
    BucketHashError,
    bucket_id_from_file_id,
    bucket_ids,
    hash_keys,
    is_bucket_file_id,
    is_nbcc_bucket_file_id,
    java_split,
    legacy_hash_keys,
    nbcc_bucket_file_id,
    new_bucket_file_id,
)
from hoodie.table import HoodieTable
from hoodie.write.bucket_info import Bucket
from hoodie.write.input import PreparedInput
from hoodie.write.options import WriteOperation

INDEX_TYPE = "hoodie.index.type"
BUCKET_ENGINE = "hoodie.index.bucket.engine"
NUM_BUCKETS = "hoodie.bucket.index.num.buckets"
HASH_FIELD = "hoodie.bucket.index.hash.field"
CONCURRENCY_MODE = "hoodie.write.concurrency.mode"
NBCC = "NON_BLOCKING_CONCURRENCY_CONTROL"
DEFAULT_NUM_BUCKETS = 256  # HoodieIndexConfig.BUCKET_INDEX_NUM_BUCKETS
SUPPORTED_OPERATIONS = frozenset(
    {
        WriteOperation.INSERT,
        WriteOperation.UPSERT,
        WriteOperation.DELETE,
        WriteOperation.INSERT_OVERWRITE,
        WriteOperation.BULK_INSERT,
    }
)
"""HoodieSimpleBucketLayout.SUPPORTED_OPERATIONS, and bulk_insert (Hudi's bucket bulk insert writers)."""


def _options_hint() -> str:
    return f"--option {INDEX_TYPE}=BUCKET --option {NUM_BUCKETS}=N"


@dataclass(frozen=True)
class BucketLayout:
    """A write's bucket settings and the table's bucket -> file slice map, per partition."""

    table: HoodieTable
    num_buckets: int
    hash_fields: tuple[str, ...]
    nbcc: bool
    groups: dict[str, dict[int, FileSlice]]

    # -- resolving ----------------------------------------------------------------------------
    @classmethod
    def resolve(
        cls,
        table: HoodieTable,
        write_props: dict[str, str],
        view: Any,
        operation: WriteOperation,
        partitions: Sequence[str],
    ) -> BucketLayout | None:
        """The bucket layout of a write to ``partitions`` (``None``: not written with the bucket index);
        refusals raise. The table's shape was checked first (``hoodie.shape``): it refuses writes to
        consistent-hashing and partition-level bucket tables, and to a bucket table without the
        bucket settings."""
        index_type = write_props.get(INDEX_TYPE, "").strip().upper()
        if index_type != "BUCKET":
            return None
        num_buckets, hash_fields = check_bucket_options(write_props, table.config.record_key_fields)
        # As HoodieSimpleBucketIndex, only the partitions written are loaded.
        slices = view.latest_file_slices([p for p in partitions if p in set(view.partitions())])
        foreign = next((s for s in slices if not is_bucket_file_id(s.file_id)), None)
        if foreign is not None:
            raise UnsupportedTableError(
                f"{table.base_path}: {INDEX_TYPE}=BUCKET but file group "
                f"{foreign.partition_path or '<root>'}/{foreign.file_id} has no bucket file id: the table "
                "was not written with the bucket index"
            )
        mode = write_props.get(CONCURRENCY_MODE, "").strip().upper()
        sample = next((found for _, found in _slices_by_partition(view, partitions) if found), [])
        nbcc = mode == NBCC or any(is_nbcc_bucket_file_id(s.file_id) for s in [*slices, *sample])
        groups: dict[str, dict[int, FileSlice]] = {}
        for s in slices:
            bucket = bucket_id_from_file_id(s.file_id)
            where = s.partition_path or "<root>"
            if bucket >= num_buckets:
                raise UnsupportedTableError(
                    f"{table.base_path}: file group {where}/{s.file_id} is bucket {bucket}, but "
                    f"{NUM_BUCKETS}={num_buckets}; give the table's bucket count"
                )
            other = groups.setdefault(s.partition_path, {}).setdefault(bucket, s)
            if other is not s:
                # HoodieSimpleBucketIndex.loadBucketIdToFileIdMappingForPartition
                raise UnsupportedTableError(
                    f"{table.base_path}: Find multiple files at partition path={s.partition_path} that "
                    f"belong to the same bucket id = {bucket} ({other.file_id}, {s.file_id})"
                )
        layout = cls(table, num_buckets, hash_fields, nbcc, groups)
        layout._check_operation(operation, mode)
        return layout

    def _check_operation(self, operation: WriteOperation, mode: str) -> None:
        where = self.table.base_path
        if operation not in SUPPORTED_OPERATIONS:
            raise UnsupportedTableError(
                f"{where}: {operation.value} is not supported on a simple bucket index table "
                "(HoodieSimpleBucketLayout supports insert, upsert, delete and insert_overwrite; "
                "bulk_insert is written as Hudi's bucket bulk insert writers write it)"
            )
        if self.nbcc:
            evidence = f"{CONCURRENCY_MODE}={NBCC}" if mode == NBCC else "NBCC bucket file ids"
            if self.table.table_version < 8:  # CommonClientUtils.validateTableVersion
                raise UnsupportedTableError(
                    f"{where}: {evidence}: non-blocking concurrency control needs table version 8 or "
                    f"later, the table is version {self.table.table_version}"
                )
            if self.table.config.table_type is not TableType.MERGE_ON_READ:
                raise UnsupportedTableError(
                    f"{where}: {evidence}: non-blocking concurrency control requires a MERGE_ON_READ table"
                )
            if operation.is_overwrite:
                raise UnsupportedTableError(
                    f"{where}: {evidence}: insert_overwrite is not supported with non-blocking "
                    "concurrency control"
                )
            if operation is WriteOperation.BULK_INSERT:  # BucketBulkInsertDataInternalWriterHelper
                raise UnsupportedTableError(
                    f"{where}: {evidence}: bulk_insert under non-blocking concurrency control writes base "
                    "files under the buckets' fixed file ids; hts does not write them"
                )

    # -- planning -----------------------------------------------------------------------------
    def buckets_of(self, prepared: PreparedInput) -> np.ndarray:
        """The bucket of every prepared record; keys whose bucket Hudi releases disagree on are refused."""
        keys = prepared.keys.to_pylist()
        try:
            buckets = bucket_ids(keys, self.hash_fields, self.num_buckets)
        except BucketHashError as e:
            raise UnsupportedTableError(f"{self.table.base_path}: {e}") from e
        if self.table.table_version < 8:
            self._check_legacy_agreement(keys)
        return buckets

    def _check_legacy_agreement(self, keys: list[str]) -> None:
        """Table version 6 is written by Hudi 0.14/0.15 as well as 1.x, which take hash keys apart
        differently (HUDI-8403): keys they bucket differently are refused."""
        for key in keys:
            if ":" not in key and "," not in key:
                continue
            current = hash_keys(key, self.hash_fields)
            if any(v is None or v == "" for v in current):
                raise UnsupportedTableError(
                    f"{self.table.base_path}: record key {key!r} has a null or empty hash field on this "
                    "version-6 bucket table; whether Hudi 0.14/0.15 hash its placeholder like Hudi 1.x "
                    "is unconfirmed, so hts does not place it"
                )
            for legacy in legacy_hash_keys(key, self.hash_fields):
                if legacy != current:
                    raise UnsupportedTableError(
                        f"{self.table.base_path}: record key {key!r}: Hudi 0.14/0.15 and Hudi 1.x hash it "
                        f"differently ({legacy} vs {current}) on this version-6 bucket table; "
                        "hts cannot tell which its other writers use"
                    )

    def plan(self, prepared: PreparedInput, operation: WriteOperation) -> list[Bucket]:
        """Route every record to its bucket's file group (new ones for buckets without one)."""
        if operation is WriteOperation.BULK_INSERT:
            return self.plan_bulk_insert(prepared)
        mor = self.table.config.is_mor
        buckets = self.buckets_of(prepared)
        partitions = prepared.partitions.to_pylist()
        planned: dict[tuple[str, int], Bucket] = {}
        started: set[tuple[str, int]] = set()  # file groups this write starts
        for i, (partition, bucket) in enumerate(zip(partitions, buckets.tolist(), strict=True)):
            delete = operation is WriteOperation.DELETE or bool(prepared.is_delete[i])
            key = (partition, bucket)
            target = planned.get(key)
            if target is None:
                existing = self.groups.get(partition, {}).get(bucket)
                if existing is not None:
                    kind = "append" if mor else "merge"
                    concat = operation is WriteOperation.INSERT and not mor
                    target = Bucket(kind, partition, existing.file_id, existing, concat=concat)
                elif delete:
                    continue  # deletes without a location are dropped (HoodieIndexUtils tagging)
                elif self.nbcc:
                    # SparkBucketIndexPartitioner: under NBCC a new bucket is an update of its fixed
                    # file id, written to a log (a log-only file group, no base file).
                    fixed = nbcc_bucket_file_id(bucket)
                    target = Bucket("append", partition, fixed, FileSlice(partition, fixed, ""))
                    started.add(key)
                else:
                    target = Bucket("create", partition, new_bucket_file_id(bucket))
                    started.add(key)
                planned[key] = target
            if key in started:
                if not delete:  # a delete has no location in a file group this write starts
                    target.rows.append(i)
                    target.inserts.append(i)
            elif operation is WriteOperation.DELETE or (mor and delete):
                target.deletes.append(i)
            else:
                target.rows.append(i)
                if not delete:
                    target.inserts.append(i)  # the record index learns every key written here
        return list(planned.values())

    def plan_bulk_insert(self, prepared: PreparedInput) -> list[Bucket]:
        """bulk_insert: a new file group per bucket written; buckets with a file group are refused."""
        return self._new_file_groups(prepared, refuse_existing=True)

    def plan_overwrite(self, prepared: PreparedInput) -> list[Bucket]:
        """insert_overwrite: a new file group per bucket written (``SparkBucketIndexPartitioner``)."""
        return self._new_file_groups(prepared, refuse_existing=False)

    def _new_file_groups(self, prepared: PreparedInput, *, refuse_existing: bool) -> list[Bucket]:
        buckets = self.buckets_of(prepared)
        planned: dict[tuple[str, int], Bucket] = {}
        partitions = prepared.partitions.to_pylist()
        for i, (partition, bucket) in enumerate(zip(partitions, buckets.tolist(), strict=True)):
            if prepared.is_delete[i]:
                continue
            target = planned.get((partition, bucket))
            if target is None:
                existing = self.groups.get(partition, {}).get(bucket) if refuse_existing else None
                if existing is not None:
                    raise UnsupportedTableError(
                        f"{self.table.base_path}: bulk_insert of record key {prepared.keys[i].as_py()!r} "
                        f"into bucket {bucket} of partition {partition or '<root>'}, which has file group "
                        f"{existing.file_id}: Hudi's row writer (BucketBulkInsertDataInternalWriterHelper) "
                        "would start a second file group of the bucket and its record writer would append "
                        "to this one; write these records with insert or upsert"
                    )
                target = Bucket("create", partition, new_bucket_file_id(bucket))
                planned[(partition, bucket)] = target
            target.rows.append(i)
        return list(planned.values())


def _slices_by_partition(view: Any, partitions: Sequence[str]) -> Iterator[tuple[str, list[FileSlice]]]:
    """Each partition's live file slices, the partitions written first (the rest listed lazily)."""
    existing = view.partitions()
    present = set(existing)
    first = [p for p in dict.fromkeys(partitions) if p in present]
    for p in [*first, *(p for p in existing if p not in set(first))]:
        yield p, view.latest_file_slices([p])


def check_bucket_options(
    props: dict[str, str], record_key_fields: Sequence[str]
) -> tuple[int, tuple[str, ...]]:
    """The bucket count and hash fields of ``hoodie.index.type=BUCKET`` write options; bad values
    and engines hts does not write are refused (callers check before creating a table, too)."""
    if not record_key_fields:
        raise UnsupportedTableError(
            f"{INDEX_TYPE}=BUCKET needs record key fields to hash; the table's keys are generated"
        )
    engine = props.get(BUCKET_ENGINE, "SIMPLE").strip().upper()
    if engine != "SIMPLE":
        raise UnsupportedTableError(
            f"{BUCKET_ENGINE}={props[BUCKET_ENGINE]}: hts writes only the SIMPLE bucket engine"
        )
    return _num_buckets(props), _hash_fields(record_key_fields, props)


def _num_buckets(props: dict[str, str]) -> int:
    raw = props.get(NUM_BUCKETS)
    if raw is None:
        return DEFAULT_NUM_BUCKETS
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidInputError(f"invalid value {raw!r} for {NUM_BUCKETS}: not an integer") from None
    if value <= 0:
        raise InvalidInputError(f"invalid value {raw!r} for {NUM_BUCKETS}: must be positive")
    return value


def _hash_fields(record_key_fields: Sequence[str], props: dict[str, str]) -> tuple[str, ...]:
    raw = props.get(HASH_FIELD, "")
    if not raw:
        return tuple(record_key_fields)
    fields = java_split(raw)
    # HoodieIndexConfig.validateBucketIndexConfig
    if not set(fields) <= set(record_key_fields):
        raise InvalidInputError(
            f"{HASH_FIELD}={raw}: the bucket index key must be a subset of the record key fields "
            f"{list(record_key_fields)}"
        )
    return tuple(fields)


def same_buckets(theirs: set[FileGroupId], ours: set[FileGroupId]) -> set[FileGroupId]:
    """Our file groups whose (partition, bucket) a concurrent commit also wrote: on a bucket table two
    writers creating a file group for one bucket conflict although their file ids differ
    (``BucketIndexConcurrentFileWritesConflictResolutionStrategy``)."""

    def buckets(groups: set[FileGroupId]) -> dict[tuple[str, int], FileGroupId]:
        return {
            (g.partition_path, bucket_id_from_file_id(g.file_id)): g
            for g in groups
            if is_bucket_file_id(g.file_id)
        }

    mine = buckets(ours)
    return {mine[k] for k in mine.keys() & buckets(theirs).keys()}
