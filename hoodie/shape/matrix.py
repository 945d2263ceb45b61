"""The decision matrix: for each table shape and operation, handled as Apache Hudi does or refused.

A *shape* is a setting or artefact a table's writers chose that changes what a writer, a reader
or a table service must put on disk (the census: ``docs/table-shapes.md``). Every cell not listed
here is handled. A refused cell carries the reason: what Hudi does there that hts does not (the
Hudi class that settles it is cited next to each reason).

Operations are the table services by their service names (``hoodie.services.registry.ServiceKind``)
plus ``read`` and ``write``; a write cell may be narrowed to one write operation as
``write:<operation>`` (``hoodie.write.options.WriteOperation`` values).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from hoodie.errors import UnsupportedShapeError
from hoodie.services.registry import ALL, SPECS, ServiceKind

READ = "read"
WRITE = "write"
WRITE_OPERATIONS = ("insert", "upsert", "delete", "bulk_insert", "insert_overwrite", "insert_overwrite_table")
SERVICE_OPERATIONS = ALL
OPERATIONS = (READ, WRITE, *SERVICE_OPERATIONS)
OPEN = "opening the table (and so every operation)"


class Shape(StrEnum):
    """The shapes of the census, by the name messages and the README use."""

    CDC = "CDC"
    SIMPLE_BUCKET = "simple bucket index"
    NBCC = "non-blocking concurrency control (NBCC) bucket"
    CONSISTENT_HASHING = "consistent-hashing bucket index"
    PARTITION_BUCKET = "partition-level bucket index"
    FLINK_STATE = "Flink-state index"
    SCHEMA_ON_READ = "schema-on-read evolution"
    PARTIAL_UPDATES = "partial-update mode"
    OPERATION_FIELD = "operation metadata field (_hoodie_operation)"
    PARTIAL_BLOCKS = "partial-update log blocks"
    UNMERGED_PARTIAL_BLOCKS = "partial-update log blocks without a partial merge"
    EXPRESSION_INDEX = "expression index"
    METADATA_TABLE = "metadata table"
    SAVEPOINTS = "savepointed"
    TIMELINE_TIMEZONE = "timeline time zone"
    LOG_COMPACTED = "log-compacted"
    VIRTUAL_KEYS = "virtual keys"
    BUCKET_SETTINGS_MISSING = "undeclared simple bucket index"
    METADATA_TABLE_VERSION = "metadata-indexed version-6"
    METADATA_PARTITION = "unmaintained metadata partition"
    SECONDARY_INDEX = "unmaintained secondary index"
    SECONDARY_INDEXED = "secondary-indexed"
    UNREADABLE_SCHEMA = "unreadable evolved schema"
    KEY_GENERATOR = "unsupported key generator"
    UNSUPPORTED_MERGE = "unsupported record merging"
    CUSTOM_MERGE = "custom merge mode"
    MULTI_FIELD_ORDERING = "multi-field ordering"
    VERSION_6 = "version-6"
    UNKNOWN_PROPERTY = "unknown property"
    # refused when the table is opened
    BOOTSTRAP = "bootstrapped"
    TABLE_FORMAT = "non-native table format"
    BASE_FILE_FORMAT = "non-Parquet base file format"
    MULTIPLE_BASE_FILE_FORMATS = "multiple base file formats"
    DROP_PARTITION_COLUMNS = "dropped partition columns"
    VIRTUAL_KEYS_KEYGEN = "virtual keys with a key generator that cannot rebuild keys"
    TABLE_VERSION = "unsupported table version"
    LOG_FILE_FORMAT = "unsupported log file format"
    UNIMPLEMENTED_PROPERTY = "unimplemented property"


# -- reasons ----------------------------------------------------------------------------------

_SCHEMA_ON_READ_INDEXING = (
    "Hudi's index builds read each file with the InternalSchema of its commit (renamed and dropped "
    "columns resolved by field id); hts's builds of column_stats, bloom_filters and secondary indexes "
    "take the files' own column names, which a rename or drop makes differ"
)
_PARTIAL_LOG_COMPACTION = (
    "Hudi's log compaction writes the merged log records of a file slice as one new block; hts's log "
    "compaction merges complete records only (COMMIT_TIME_ORDERING and EVENT_TIME_ORDERING), not "
    "partial-update modes nor IS_PARTIAL blocks"
)
_UNMERGED_PARTIAL_BLOCKS = (
    "Hudi's file-group reader merges IS_PARTIAL blocks with the table merger's partialMerge "
    "(PartialUpdateBufferedRecordMerger) and fails when the merger does not implement it "
    "(HoodieRecordMerger.partialMerge): there is no merged record to read or write"
)
_OPERATION_FIELD_MERGE = (
    "Hudi's readers take rows whose _hoodie_operation is D or -U as deletes "
    "(RecordContext.isDeleteHoodieOperation) and its compaction and clustering keep the column in the "
    "files they write (CompactionUtil.inferChangelogMode turns the changelog mode on from the latest "
    "data file's schema); hts neither reads nor writes that column, so deleted records would come back"
)
_OPERATION_FIELD_WRITE = (
    "Hudi's writers of this table (hoodie.allow.operation.metadata.field=true, e.g. Flink's changelog "
    "mode) write _hoodie_operation into every log block and base file (HoodieWriteHandle), and Hudi "
    "takes the table's changelog mode from the latest data file's schema "
    "(TableSchemaResolver.hasOperationField); hts writes no such column, so its commit would turn the "
    "mode off for every later reader and service"
)
_BUCKET_CLUSTERING = (
    "clustering writes new file groups with random ids, and Hudi's bucket index maps keys to file groups by "
    "the bucket number in the file id (BucketIdentifier.bucketIdFromFileId): writers would fail or "
    "duplicate keys (HoodieSimpleBucketLayout has no CLUSTER operation; Flink's "
    "ClusteringUtil.validateClusteringScheduling refuses it)"
)
_BUCKET_WRITE = (
    "HoodieSimpleBucketLayout.SUPPORTED_OPERATIONS has insert, upsert, delete and insert_overwrite only; "
    "hts's writer routes those (and bulk_insert, as Hudi's bucket bulk insert writers) by bucket "
    "(hoodie.write.bucket_planner) and refuses the others"
)
_NBCC_BULK_INSERT = (
    "under non-blocking concurrency control Hudi's bucket bulk insert writes base files under each "
    "bucket's fixed NBCC file id (BucketBulkInsertDataInternalWriterHelper.getNextBucketFileId); "
    "hts does not write them"
)
_NBCC_OVERWRITE = (
    "Hudi rejects insert_overwrite under non-blocking concurrency control (the bucket partitioners "
    "refuse it; HoodieWriteConfig: NBCC needs MOR with the simple bucket index)"
)
_CONSISTENT_CLUSTERING = (
    "the only clustering Hudi allows is the resize of the hashing ring "
    "(HoodieClusteringConfig forces SparkConsistentBucketClusteringPlanStrategy), which writes new "
    ".hashing_meta files; other clustering creates file groups unknown to the ring"
)
_CONSISTENT_WRITE = (
    "Hudi's writer routes keys through the hashing ring in .hashing_meta "
    "(ConsistentBucketIndexUtils.loadMetadata) and dual-writes during a resize; hts does not"
)
_CONSISTENT_ARCHIVAL = (
    "Hudi recovers a resize's .hashing_meta without its .commit marker from the resize replacecommit on the "
    "active timeline (ConsistentBucketIndexUtils.loadMetadata); hts neither writes nor repairs the markers, "
    "so it does not archive those replacecommits"
)
_PARTITION_BUCKET_WRITE = (
    "Hudi's writer takes each partition's bucket count from the latest committed .hashing_config "
    "(PartitionBucketIndexHashingConfig, PartitionBucketIndexUtils); hts does not"
)
_PARTITION_BUCKET_CLUSTERING = (
    "Hudi rescales a partition-level bucket index only with an insert-overwrite that writes a new "
    ".hashing_config (partitionBucketIndexManager); other clustering breaks the bucket file ids"
)
_PARTITION_BUCKET_ROLLBACK = (
    "Hudi's rollback of a rescale replacecommit deletes its .hashing_config "
    "(PartitionBucketIndexUtils / rollbackHashingConfig); hts's rollback does not"
)
_PARTITION_BUCKET_ARCHIVAL = (
    "Hudi's archival moves the .hashing_config files older than the active timeline to archive/ "
    "(PartitionBucketIndexHashingConfig.archiveHashingConfigIfNecessary); hts's archival does not"
)
_FLINK_STATE_CLUSTERING = (
    "the Flink job keeps its key -> file group index in Flink state and is not told about file groups an "
    "external clustering replaces: its updates would go to replaced file groups or duplicate keys "
    "(Hudi documents Flink clustering for append-only pipelines)"
)
_EXPRESSION_INDEX = (
    "Hudi keeps an expression index current by evaluating its engine expression on every new file "
    "(HoodieTableMetadataUtil, expr_index_ partitions); hts cannot evaluate Spark expressions, so it "
    "does not commit anything the index would have to follow"
)
_BUCKET_SETTINGS_MISSING = (
    "Hudi does not persist the bucket settings (HoodieIndexConfig: no table property), so every writer "
    "must be given them to route keys by BucketIdentifier: pass --option hoodie.index.type=BUCKET "
    "--option hoodie.bucket.index.num.buckets=N (N above the highest bucket present) "
    "[--option hoodie.bucket.index.hash.field=FIELDS], as the table's other writers are"
)
_METADATA_TABLE_VERSION = (
    "every commit is mirrored into the metadata table in the same transaction "
    "(HoodieBackedTableMetadataWriter); hts writes metadata tables of table versions 8 and 9 only, "
    "so it commits nothing the version-6 metadata table would miss"
)
_METADATA_PARTITION = (
    "every commit updates each built metadata partition (HoodieTableMetadataUtil); hts maintains files, "
    "column_stats, partition_stats, record_index, bloom_filters and secondary indexes only, and an index "
    "it did not update would go stale"
)
_SECONDARY_INDEX = (
    "a write updates every secondary index with the keys it changes (SecondaryIndexRecordGenerationUtils); "
    "hts keeps single-column identity indexes on string, int, long, double and boolean columns only"
)
_SECONDARY_INDEXED = (
    "Hudi's metadata writer refuses to commit an insert overwrite or a delete_partition on a table with a "
    'secondary index (HoodieBackedTableMetadataWriter.updateSecondaryIndexIfPresent: "Can not perform '
    'operation ... on secondary index", WriteOperationType.isInsertOverwriteOrDeletePartition)'
)
_UNREADABLE_SCHEMA = (
    "Hudi reads older files with the latest schema through its type promotions "
    "(HoodieAvroUtils.rewriteRecordWithNewSchema, InternalSchemaMerger); hts does not implement this change, "
    "so it would read (or rewrite) the values wrongly"
)
_LOG_COMPACTION_META_FIELDS = (
    "hts's log compaction keeps each record's _hoodie_commit_time from the meta fields, which a table "
    "without meta fields does not have"
)
_VIRTUAL_KEYS_MERGE = (
    "Hudi's writers leave the meta fields of a table without them null (HoodieAvroParquetWriter and "
    "HoodieSparkParquetWriter populate them only with populateMetaFields) and key its stored rows by their "
    "record key fields (RecordContext.virtualKeyExtractor); hts's writer and its compaction and clustering "
    "key stored rows by _hoodie_record_key and write it populated"
)
_LOG_COMPACTION_MERGE = (
    "hts's log compaction merges with the vectorized commit-time and event-time merge only "
    "(one ordering field, full records); Hudi merges these with the table's payload or merger"
)
_KEY_GENERATOR = (
    "Hudi's writers generate record keys and partition paths with this key generator (KeyGenerator); "
    "hts does not implement it"
)
_UNSUPPORTED_MERGE = (
    "Hudi merges two versions of a key with the table's payload class or record merger "
    "(HoodieRecordPayload, HoodieRecordMerger); hts implements Hudi's built-in ones only (and "
    "mergers registered with hoodie.merge.mergers.register_record_merger)"
)
_VERSION_6_INDEXING = (
    "indexing builds metadata-table partitions, and hts builds and keeps metadata tables of table "
    "versions 8 and 9 only (Hudi 0.14/0.15 write version 6's); upgrade the table with Apache Hudi first"
)
_FLINK_STATE_TTL = (
    "the Flink job keeps its key -> file group index in Flink state and is not told about file groups a "
    "delete_partition replacecommit replaces: its updates would go to replaced file groups and be lost"
)
_SCHEMA_ON_READ_TTL = (
    "Hudi's write client records the InternalSchema with a commit (saveInternalSchema: latest_schema and "
    ".schemacommit) on the commit paths that call it, and a delete_partition may or may not take one "
    "depending on how it is run (inline TTL, HoodieTTLJob, run_ttl); hts does not commit one"
)
_UNKNOWN_PROPERTY = (
    "hts knows the keys Hudi persists in hoodie.properties for table versions 6, 8 and 9 "
    "(HoodieTableConfig, its PERSISTED_CONFIG_LIST and the merge properties); a key from a later "
    "release or a plugin may change what every writer and service must write"
)
_OPEN_REASONS: dict[Shape, str] = {
    Shape.BOOTSTRAP: (
        "Hudi stitches skeleton files with the external source files (HoodieFileGroupReader bootstrap "
        "iterators); hts does not"
    ),
    Shape.TABLE_FORMAT: (
        "a non-native HoodieTableFormat plugin must see every commit, clean and rollback; "
        "hts does not call it"
    ),
    Shape.BASE_FILE_FORMAT: "hts reads and writes Parquet base files only",
    Shape.MULTIPLE_BASE_FILE_FORMATS: (
        "Hudi picks each new base file's format from the writer config "
        "(CommonClientUtils.getBaseFileFormat); hts writes Parquet only"
    ),
    Shape.DROP_PARTITION_COLUMNS: (
        "Hudi re-appends dropped partition columns from the partition path "
        "(TableSchemaResolver.handlePartitionColumnsIfNeeded); hts expects them in the data files"
    ),
    Shape.VIRTUAL_KEYS_KEYGEN: (
        "without meta fields Hudi rebuilds keys only with SimpleKeyGenerator, ComplexKeyGenerator or "
        "NonpartitionedKeyGenerator (BaseHoodieWriteClient.validateAgainstTableProperties)"
    ),
    Shape.TABLE_VERSION: (
        "hts implements table versions 6, 8 and 9 (version 10 changes the storage layout, "
        "HoodieLSMTreeLayout); upgrade or downgrade the table with Apache Hudi first"
    ),
    Shape.LOG_FILE_FORMAT: "hts reads and writes HOODIE_LOG log files only",
    Shape.UNIMPLEMENTED_PROPERTY: (
        "Hudi's writers act on this key (HoodieTableConfig), and hts does not implement it"
    ),
}

_COMMITTING = (
    WRITE,
    "compaction",
    "logcompaction",
    "clustering",
    "clean",
    "archival",
    "indexing",
    "rollback",
    "restore",
    "metadata",
    "ttl",
)
"""The operations that commit to the data table (and so to its metadata table)."""
_READS_EVERY_COLUMN = (READ, WRITE, *(s.kind.value for s in SPECS.values() if s.reads_every_column))

# Archival too: it is bounded by, and checked against, the metadata table (hoodie.services.archival).
_EXPR_REFUSED = dict.fromkeys(_COMMITTING, _EXPRESSION_INDEX)

MATRIX: Mapping[Shape, Mapping[str, str]] = MappingProxyType(
    {
        # COW rewrites and MOR compactions write Hudi's CDC logs with cdcStats (hoodie.cdc): every
        # operation is handled; clustering and log compaction commit with operation types the CDC
        # extractor skips (HoodieCDCExtractor keeps only WriteOperationType.yieldChanges). An
        # insert Hudi would append to a small file without a CDC log (HoodieConcatHandle) is refused
        # by the writer once the plan routes it there (hoodie.cdc.write.refuse_concat_on_cdc_table).
        Shape.CDC: {},
        # Writes are routed by bucket (hoodie.write.bucket_planner, which also refuses bulk_insert into a
        # bucket that has a file group; written without its bucket options, the table is the
        # undeclared simple bucket index below).
        # Partition TTL is handled on every bucket layout: DELETE_PARTITION is in the layouts'
        # SUPPORTED_OPERATIONS (HoodieSimpleBucketLayout, HoodieConsistentBucketLayout) and Hudi's
        # delete-partition commit writes no bucket metadata; later writes start new buckets.
        Shape.SIMPLE_BUCKET: {
            f"{WRITE}:insert_overwrite_table": _BUCKET_WRITE,
            "clustering": _BUCKET_CLUSTERING,
        },
        Shape.NBCC: {
            f"{WRITE}:bulk_insert": _NBCC_BULK_INSERT,
            f"{WRITE}:insert_overwrite": _NBCC_OVERWRITE,
            f"{WRITE}:insert_overwrite_table": _BUCKET_WRITE,
            "clustering": _BUCKET_CLUSTERING,
        },
        Shape.CONSISTENT_HASHING: {
            WRITE: _CONSISTENT_WRITE,
            "clustering": _CONSISTENT_CLUSTERING,
            "archival": _CONSISTENT_ARCHIVAL,
        },
        Shape.PARTITION_BUCKET: {
            WRITE: _PARTITION_BUCKET_WRITE,
            "clustering": _PARTITION_BUCKET_CLUSTERING,
            "rollback": _PARTITION_BUCKET_ROLLBACK,
            "restore": _PARTITION_BUCKET_ROLLBACK,
            "archival": _PARTITION_BUCKET_ARCHIVAL,
        },
        Shape.FLINK_STATE: {"clustering": _FLINK_STATE_CLUSTERING, "ttl": _FLINK_STATE_TTL},
        # Each file is read with the InternalSchema of its own instant, columns matched by field id
        # (hoodie.read.reader.schema_on_read, as InternalSchemaCache / InternalSchemaMerger), and
        # writes record latest_schema and the .schemacommit history as saveInternalSchema does.
        Shape.SCHEMA_ON_READ: {"indexing": _SCHEMA_ON_READ_INDEXING, "ttl": _SCHEMA_ON_READ_TTL},
        # Reads, compaction and clustering merge partial updates onto the previous version
        # (hoodie.merge.buffer, the per-record engine); log compaction is refused.
        Shape.PARTIAL_UPDATES: {"logcompaction": _PARTIAL_LOG_COMPACTION},
        # Recognised as Hudi does (hoodie.shape.operation_field). Whatever reads or rewrites records is
        # refused (indexing builds from the merged latest slices); services that move whole files or
        # only the timeline (clean, archival, rollback, restore, savepoint, partition TTL's
        # delete_partition, the metadata table's upkeep) are handled.
        Shape.OPERATION_FIELD: {
            READ: _OPERATION_FIELD_MERGE,
            WRITE: _OPERATION_FIELD_WRITE,
            "compaction": _OPERATION_FIELD_MERGE,
            "logcompaction": _OPERATION_FIELD_MERGE,
            "clustering": _OPERATION_FIELD_MERGE,
            "indexing": _OPERATION_FIELD_MERGE,
        },
        # Seen in the headers of the log files a plan merges (hoodie.shape.partial_blocks), at
        # schedule time; reads, compaction and clustering merge them as Hudi does (KEEP_VALUES).
        Shape.PARTIAL_BLOCKS: {"logcompaction": _PARTIAL_LOG_COMPACTION},
        # Whatever merges a slice's log records (indexing builds from the merged latest slices):
        # writes only append to logs (or rewrite COW base files, which have no logs).
        Shape.UNMERGED_PARTIAL_BLOCKS: dict.fromkeys(
            (*(op for op in _READS_EVERY_COLUMN if op != WRITE), "indexing"), _UNMERGED_PARTIAL_BLOCKS
        ),
        Shape.EXPRESSION_INDEX: _EXPR_REFUSED,
        Shape.METADATA_TABLE: {},
        Shape.SAVEPOINTS: {},
        Shape.TIMELINE_TIMEZONE: {},
        Shape.LOG_COMPACTED: {},
        # Reads rebuild the keys (hoodie.keygen.virtual_record_keys); what rewrites stored rows is refused.
        # Census section 13's UNCONFIRMED, settled from the source: the files carry the meta columns
        # null (HoodieWriteHandle writes writeSchemaWithMetaFields, filled only with populateMetaFields),
        # or leave them out in releases whose addMetadataFields takes populateMetaFields; reads take
        # neither (a virtual table's read schema has no meta columns).
        Shape.VIRTUAL_KEYS: {
            WRITE: _VIRTUAL_KEYS_MERGE,
            "compaction": _VIRTUAL_KEYS_MERGE,
            "logcompaction": _LOG_COMPACTION_META_FIELDS,
            "clustering": _VIRTUAL_KEYS_MERGE,
        },
        # hoodie.write.bucket_planner routes writes given the settings; without them nothing is written.
        Shape.BUCKET_SETTINGS_MISSING: {WRITE: _BUCKET_SETTINGS_MISSING, "clustering": _BUCKET_CLUSTERING},
        # Every operation that commits to the data table (savepoints are not mirrored into the
        # metadata table: its own cleaner reads the data table's savepoints).
        Shape.METADATA_TABLE_VERSION: dict.fromkeys(_COMMITTING, _METADATA_TABLE_VERSION),
        Shape.METADATA_PARTITION: dict.fromkeys(_COMMITTING, _METADATA_PARTITION),
        # Table services move records without changing their secondary keys (the index maps
        # secondary key -> record key): only writes must update it.
        Shape.SECONDARY_INDEX: {WRITE: _SECONDARY_INDEX},
        # Partition TTL commits delete_partition replacecommits; both overwrites replace file groups.
        Shape.SECONDARY_INDEXED: {
            f"{WRITE}:insert_overwrite": _SECONDARY_INDEXED,
            f"{WRITE}:insert_overwrite_table": _SECONDARY_INDEXED,
            "ttl": _SECONDARY_INDEXED,
        },
        # Reading is refused too: the values would be read wrongly. Services that move records
        # without rewriting them (clean, archival, rollback, restore, savepoint) are handled.
        Shape.UNREADABLE_SCHEMA: dict.fromkeys(_READS_EVERY_COLUMN, _UNREADABLE_SCHEMA),
        # Keys are generated by writes only: services and reads take them from the meta fields.
        Shape.KEY_GENERATOR: {WRITE: _KEY_GENERATOR},
        # Whatever merges two versions of a key: reads, writes and the services that rewrite records.
        Shape.UNSUPPORTED_MERGE: dict.fromkeys(_READS_EVERY_COLUMN, _UNSUPPORTED_MERGE),
        Shape.CUSTOM_MERGE: {"logcompaction": _LOG_COMPACTION_MERGE},
        Shape.MULTI_FIELD_ORDERING: {"logcompaction": _LOG_COMPACTION_MERGE},
        Shape.VERSION_6: {"indexing": _VERSION_6_INDEXING},
        # Reads are handled: Hudi's readers take from hoodie.properties only the keys they know
        # (HoodieTableConfig is a TypedProperties; each reader option looks up its own ConfigProperty)
        # and a persisted key that changes how files are read comes with a new table version
        # (HoodieTableVersion and its upgrade handlers: partial-update mode and the merge properties
        # came with version 9), which hts refuses on open. Everything else may write.
        Shape.UNKNOWN_PROPERTY: {op: _UNKNOWN_PROPERTY for op in OPERATIONS if op != READ},
        **{shape: {op: reason for op in OPERATIONS} for shape, reason in _OPEN_REASONS.items()},
    }
)
OPEN_REFUSED = frozenset(_OPEN_REASONS)


def cell(shape: Shape, operation: str, write_operation: str | None = None) -> str | None:
    """The reason ``operation`` is refused on ``shape``; None when hts handles it as Hudi does."""
    row = MATRIX[shape]
    if operation == WRITE and write_operation is not None:
        specific = row.get(f"{WRITE}:{write_operation}")
        if specific is not None:
            return specific
    return row.get(operation)


def refuse_on_open(where: str, shape: Shape, evidence: str) -> UnsupportedShapeError:
    """The error for a shape refused as soon as the table is opened."""
    return UnsupportedShapeError(where, shape.value, evidence, OPEN, _OPEN_REASONS[shape])


def summary(shape: Shape, operation: str) -> str:
    """A README cell: ``handled``, ``refused`` or ``refused (<write operations>)``."""
    row = MATRIX[shape]
    if operation in row:
        return "refused"
    if operation == WRITE:
        narrowed = [op for op in WRITE_OPERATIONS if f"{WRITE}:{op}" in row]
        if narrowed:
            return f"refused ({', '.join(narrowed)})"
    return "handled"


README_COLUMNS = (READ, WRITE, *(op for op in SERVICE_OPERATIONS if op != ServiceKind.METADATA))
"""The README's columns: every service but the metadata table's upkeep."""


def markdown_table() -> str:
    """The matrix as the README shows it (a test keeps the README equal to this)."""
    header = ["shape", *(c.replace("logcompaction", "log compaction") for c in README_COLUMNS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for shape in Shape:
        cells = [summary(shape, op) for op in README_COLUMNS]
        lines.append("| " + " | ".join([shape.value, *cells]) + " |")
    return "\n".join(lines)
