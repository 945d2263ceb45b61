"""A table's shape, computed from storage (and the options an operator declares), and its checks.

Storage tells most shapes (census: ``docs/table-shapes.md``): ``hoodie.properties`` (already parsed
into :class:`~hoodie.config.table_config.TableConfig`; a key hts does not know is a shape too), the
file ids of the latest file groups (re-checked from new writes' write stats only),
``.hoodie/.bucket_index/...``, ``.hoodie/.schema/``, the commits' extra metadata (``latest_schema``;
the commit schemas, for changes outside Hudi's type promotions), the metadata partitions and
index definitions, and the timeline. The rules of the metadata partitions hts keeps and of the
schemas it reads are asked of their owners (:mod:`hoodie.metadata.sync`, :mod:`hoodie.read.reader`),
as are the key generator and merge resolution (:mod:`hoodie.keygen`, :mod:`hoodie.merge.resolve`).
Hudi does not persist the index type (``HoodieIndexConfig``: no table property), so a table written
with the Flink-state index, or a bucket index without file groups yet, is known only from the
options the operator passes (``--option`` on the CLI, a table's ``options`` in the daemon's
settings), with Hudi's own keys. One data file's schema is read, as Hudi reads it, for the operation
meta field (:mod:`hoodie.shape.operation_field`), when the latest commit that wrote data changed; no
log block is scanned for its records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hoodie.config.table_config import RecordMergeMode, TableKeys, unknown_property
from hoodie.errors import InvalidTableConfigError, UnsupportedShapeError, UnsupportedTableError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.index.bucket import bucket_id_from_file_id, is_bucket_file_id, is_nbcc_bucket_file_id
from hoodie.io.fileio import join
from hoodie.shape.matrix import SERVICE_OPERATIONS, WRITE, Shape, cell
from hoodie.shape.operation_field import OperationFieldProbe, operation_field
from hoodie.timeline.instant import Action

if TYPE_CHECKING:
    from hoodie.file_group.view import FileSystemView
    from hoodie.table import HoodieTable

INDEX_TYPE_KEYS = ("hoodie.index.type", "index.type")  # HoodieIndexConfig.INDEX_TYPE, FlinkOptions.INDEX_TYPE
BUCKET_ENGINE_KEY = (
    "hoodie.index.bucket.engine"  # HoodieIndexConfig.BUCKET_INDEX_ENGINE_TYPE (default SIMPLE)
)
# HoodieTableMetaClient: BUCKET_INDEX_METAFOLDER_NAME and its two sub-folders.
BUCKET_INDEX_FOLDER = ".bucket_index"
CONSISTENT_HASHING_FOLDER = "consistent_hashing_metadata"
PARTITION_BUCKET_FOLDER = "partition_bucket_index_meta"
HASHING_META_SUFFIX = ".hashing_meta"  # HoodieConsistentHashingMetadata.HASHING_METADATA_FILE_SUFFIX
HASHING_CONFIG_SUFFIX = ".hashing_config"  # PartitionBucketIndexHashingConfig.HASHING_CONFIG_FILE_SUFFIX
SCHEMA_FOLDER = ".schema"  # FileBasedInternalSchemaStorageManager.SCHEMA_NAME
SCHEMA_COMMIT_SUFFIX = ".schemacommit"  # FileBasedInternalSchemaStorageManager.SCHEMA_COMMIT_ACTION
LATEST_SCHEMA_KEY = "latest_schema"  # SerDeHelper.LATEST_SCHEMA
EXPRESSION_INDEX_PREFIXES = ("expr_index_", "func_index_")  # HoodieTableMetadataUtil (func_ before 1.0)
EXPRESSION_INDEX_ENABLE_KEY = "hoodie.metadata.index.expression.enable"  # HoodieMetadataConfig
# HoodieWriteConfig.ALLOW_OPERATION_METADATA_FIELD: a writer option, persisted nowhere.
ALLOW_OPERATION_FIELD_KEY = "hoodie.allow.operation.metadata.field"
DECLARED_KEYS = (*INDEX_TYPE_KEYS, BUCKET_ENGINE_KEY, EXPRESSION_INDEX_ENABLE_KEY, ALLOW_OPERATION_FIELD_KEY)
"""The options a shape may be declared with (everything else in the options is ignored here)."""


@dataclass(frozen=True, slots=True)
class ShapeFeature:
    """One shape a table has, and the evidence it was recognised by (``key=value`` or a path)."""

    shape: Shape
    evidence: str


@dataclass(frozen=True)
class TableShape:
    """The shapes of one table; :meth:`check` refuses an operation the matrix refuses on any of them."""

    where: str
    features: tuple[ShapeFeature, ...] = ()
    not_bucket_witness: FileGroupId | None = field(default=None, compare=False, repr=False)
    """A latest file group whose id lacks the bucket form: while it stays (not replaced, nothing
    rolled back or restored since) the table is no bucket table, without listing it again."""
    last_undo: str | None = field(default=None, compare=False, repr=False)
    bucket: BucketVerdict | None = field(default=None, compare=False, repr=False)
    """For a bucket table: the verdict and the writes it covers (re-checked from newer writes only)."""
    operation_probe: OperationFieldProbe | None = field(default=None, compare=False, repr=False)
    """The files the operation meta field was looked for in (looked at again when newer commits wrote)."""

    def feature(self, shape: Shape) -> ShapeFeature | None:
        return next((f for f in self.features if f.shape is shape), None)

    def has(self, shape: Shape) -> bool:
        return self.feature(shape) is not None

    def refusal(self, operation: str, write_operation: str | None = None) -> UnsupportedShapeError | None:
        """The error refusing ``operation`` (and, for writes, ``write_operation``); None if handled."""
        for f in self.features:
            reason = cell(f.shape, operation, write_operation)
            if reason is not None:
                what = (
                    f"{operation} ({write_operation})"
                    if write_operation and operation == WRITE
                    else operation
                )
                return UnsupportedShapeError(self.where, f.shape.value, f.evidence, what, reason)
        return None

    def check(self, operation: str, write_operation: str | None = None) -> None:
        """Raise :class:`~hoodie.errors.UnsupportedShapeError` when ``operation`` is refused."""
        error = self.refusal(operation, write_operation)
        if error is not None:
            raise error

    def refused(self, operations: Iterable[str] = SERVICE_OPERATIONS) -> dict[str, str]:
        """Operation -> the refusal message, for every refused one of ``operations``."""
        out: dict[str, str] = {}
        for op in operations:
            error = self.refusal(op)
            if error is not None:
                out[op] = str(error)
        return out

    @classmethod
    def declared(cls, where: str, options: Mapping[str, str]) -> TableShape:
        """The shapes ``options`` declare alone (e.g. before ``--create`` makes the table)."""
        features = [*_declared_index(options), *_declared_operation_field(options)]
        if (options.get(TableKeys.CDC_ENABLED.key) or "").strip().lower() == "true":
            features.insert(0, ShapeFeature(Shape.CDC, f"{TableKeys.CDC_ENABLED.key}=true"))
        if (options.get(TableKeys.POPULATE_META_FIELDS.key) or "").strip().lower() == "false":
            key = TableKeys.POPULATE_META_FIELDS.key
            features.append(ShapeFeature(Shape.VIRTUAL_KEYS, f"{key}=false"))
        return cls(where, tuple(features))


@dataclass(frozen=True)
class ShapeAllows:
    """A commit requirement (``hoodie.transaction.commit``): the table's shape, read again under the
    lock, still allows ``operation`` (checked before the operation wrote anything; another writer
    may have changed the table since, e.g. Hudi's ``CREATE INDEX`` or a property update)."""

    operation: str
    options: Mapping[str, str] = field(default_factory=dict)
    write_operation: str | None = None

    def check(self, table: HoodieTable, timeline: object, instant: object) -> None:
        table.reload_config()  # properties and index definitions as they are now
        table.shape(self.options).check(self.operation, self.write_operation)


def _declared_operation_field(options: Mapping[str, str]) -> list[ShapeFeature]:
    """A writer told to add ``_hoodie_operation`` (hts's writer does not: refused as the shape)."""
    if (options.get(ALLOW_OPERATION_FIELD_KEY) or "").strip().lower() == "true":
        return [ShapeFeature(Shape.OPERATION_FIELD, f"{ALLOW_OPERATION_FIELD_KEY}=true (declared)")]
    return []


def _declared_index(options: Mapping[str, str]) -> list[ShapeFeature]:
    if (options.get(EXPRESSION_INDEX_ENABLE_KEY) or "").strip().lower() == "true":
        evidence = f"{EXPRESSION_INDEX_ENABLE_KEY}=true (declared)"
        return [ShapeFeature(Shape.EXPRESSION_INDEX, evidence), *_declared_index_type(options)]
    return _declared_index_type(options)


def _declared_index_type(options: Mapping[str, str]) -> list[ShapeFeature]:
    for key in INDEX_TYPE_KEYS:
        value = (options.get(key) or "").strip().upper()
        if not value:
            continue
        if value == "FLINK_STATE":
            return [ShapeFeature(Shape.FLINK_STATE, f"{key}={value} (declared)")]
        if value == "BUCKET":
            engine = (options.get(BUCKET_ENGINE_KEY) or "SIMPLE").strip().upper()
            if engine == "CONSISTENT_HASHING":
                return [
                    ShapeFeature(
                        Shape.CONSISTENT_HASHING, f"{key}=BUCKET, {BUCKET_ENGINE_KEY}={engine} (declared)"
                    )
                ]
            return [
                ShapeFeature(Shape.SIMPLE_BUCKET, f"{key}=BUCKET, {BUCKET_ENGINE_KEY}={engine} (declared)")
            ]
        return []
    return []


def _first_file(table: HoodieTable, folder: str, suffix: str) -> str | None:
    """The first file under ``folder`` (recursively) whose name ends with ``suffix``."""
    if not table.fileio.exists(folder):
        return None
    found = sorted(f.path for f in table.fileio.list_files_recursive(folder) if f.name.endswith(suffix))
    return found[0] if found else None


def _bucket_features(table: HoodieTable) -> list[ShapeFeature]:
    folder = join(table.base_path, ".hoodie", BUCKET_INDEX_FOLDER)
    if not table.fileio.exists(folder):
        return []
    out = []
    # A consistent-hashing writer creates the folder before its first .hashing_meta
    # (ConsistentBucketIndexUtils.loadOrCreateMetadata): the folder alone is the shape.
    hashing_folder = join(folder, CONSISTENT_HASHING_FOLDER)
    if table.fileio.exists(hashing_folder):
        meta = _first_file(table, hashing_folder, HASHING_META_SUFFIX)
        evidence = meta or f"{hashing_folder} exists, with no {HASHING_META_SUFFIX} file yet"
        out.append(ShapeFeature(Shape.CONSISTENT_HASHING, evidence))
    partition_folder = join(folder, PARTITION_BUCKET_FOLDER)
    # PartitionBucketIndexUtils.isPartitionSimpleBucketIndex: the folder exists.
    if table.fileio.exists(partition_folder):
        config = _first_file(table, partition_folder, HASHING_CONFIG_SUFFIX)
        evidence = config or f"{partition_folder} exists, with no {HASHING_CONFIG_SUFFIX} file yet"
        out.append(ShapeFeature(Shape.PARTITION_BUCKET, evidence))
    return out


@dataclass(frozen=True, slots=True)
class BucketVerdict:
    """A table whose every latest file group id has the bucket form, and the completed writes whose
    file ids that was checked against: a later check reads only the write stats of newer writes
    (a file group is added only by a write, and replacing or cleaning one keeps the rest)."""

    example: str
    top: int
    nbcc: bool
    covered: frozenset[str]

    def features(self) -> list[ShapeFeature]:
        form = (
            f"every latest file group id has the bucket form (up to bucket {self.top}), e.g. {self.example}"
        )
        out = [ShapeFeature(Shape.SIMPLE_BUCKET, form)]
        if self.nbcc:  # named first: the more specific shape
            fixed = f"every latest file group id has the fixed NBCC form, e.g. {self.example}"
            out.insert(0, ShapeFeature(Shape.NBCC, fixed))
        return out


def _listed_verdict(
    table: HoodieTable, view: FileSystemView | None, covered: frozenset[str]
) -> tuple[FileGroupId | None, BucketVerdict | None]:
    """Simple bucket (and NBCC) tables, from the ids of the latest file groups: all must have the
    form. Otherwise a file group without it (the witness that the table is no bucket table).
    ``view`` is the caller's view of the current timeline (its listings are reused)."""
    slices = (view or table.file_system_view(timeline=table.timeline)).latest_file_slices()
    ids = sorted({(s.partition_path, s.file_id) for s in slices})
    witness = next((FileGroupId(p, f) for p, f in ids if not is_bucket_file_id(f)), None)
    if not ids or witness is not None:
        return witness, None
    partition, fid = ids[0]
    example = f"{partition}/{fid}" if partition else fid
    top = max(bucket_id_from_file_id(f) for _, f in ids)
    return None, BucketVerdict(example, top, all(is_nbcc_bucket_file_id(f) for _, f in ids), covered)


def _extended_verdict(
    table: HoodieTable, verdict: BucketVerdict, covered: frozenset[str]
) -> tuple[FileGroupId | None, BucketVerdict | None]:
    """``verdict`` carried over the writes completed since: only their write stats are read."""
    top, nbcc = verdict.top, verdict.nbcc
    for instant in table.timeline.completed().writes():
        if instant.requested_time in verdict.covered:
            continue
        metadata = table.commit_metadata(instant)
        for partition, stats in (metadata.partition_to_write_stats or {}).items():
            for stat in stats or ():
                fid = stat.file_id or ""
                if not is_bucket_file_id(fid):
                    return FileGroupId(partition, fid), None
                top = max(top, bucket_id_from_file_id(fid))
                nbcc = nbcc and is_nbcc_bucket_file_id(fid)
    return None, BucketVerdict(verdict.example, top, nbcc, covered)


def _bucket_verdict(
    table: HoodieTable, previous: TableShape | None, last_undo: str | None, view: FileSystemView | None
) -> tuple[FileGroupId | None, BucketVerdict | None]:
    """The bucket verdict (or the witness against it), from ``previous`` where it still holds: a
    rollback or restore since (which removes file groups' files) makes the file groups be listed."""
    covered = frozenset(i.requested_time for i in table.timeline.completed().writes())
    if previous is not None and previous.last_undo == last_undo:
        witness = previous.not_bucket_witness
        if witness is not None and witness not in table.replaced_file_groups(table.timeline):
            return witness, None
        if previous.bucket is not None:
            return _extended_verdict(table, previous.bucket, covered)
    return _listed_verdict(table, view, covered)


def _last_undo(table: HoodieTable) -> str | None:
    undo = table.timeline.completed().actions(Action.ROLLBACK, Action.RESTORE).last()
    return undo.requested_time if undo is not None else None


def _schema_on_read(table: HoodieTable) -> ShapeFeature | None:
    commit = _first_file(table, join(table.base_path, ".hoodie", SCHEMA_FOLDER), SCHEMA_COMMIT_SUFFIX)
    if commit is not None:
        return ShapeFeature(Shape.SCHEMA_ON_READ, commit)
    last = table.timeline.completed().writes().last()
    if last is not None and LATEST_SCHEMA_KEY in (table.commit_metadata(last).extra_metadata or {}):
        return ShapeFeature(
            Shape.SCHEMA_ON_READ, f"{LATEST_SCHEMA_KEY} in the extra metadata of {last.requested_time}"
        )
    return None


def _expression_index(table: HoodieTable) -> ShapeFeature | None:
    config = table.config
    for key, partitions in (
        (TableKeys.METADATA_PARTITIONS.key, config.metadata_partitions),
        (TableKeys.METADATA_PARTITIONS_INFLIGHT.key, config.metadata_partitions_inflight),
    ):
        if any(p.startswith(EXPRESSION_INDEX_PREFIXES) for p in partitions):
            return ShapeFeature(Shape.EXPRESSION_INDEX, f"{key}={','.join(partitions)}")
    for name, definition in table.index_definitions().items():
        kind = str(definition.get("indexType") or "") if isinstance(definition, dict) else ""
        if name.startswith(EXPRESSION_INDEX_PREFIXES) or kind in ("expr_index", "func_index"):
            return ShapeFeature(
                Shape.EXPRESSION_INDEX, f"{config.get(TableKeys.INDEX_DEFS_PATH)}: index {name!r}"
            )
    return None


def metadata_features(table: HoodieTable, *, expression: bool = False) -> list[ShapeFeature]:
    """The metadata table's partitions hts cannot keep current on a commit (the commit of a service
    or a write re-checks these, :func:`hoodie.metadata.sync.sync_metadata_table`); expression-index
    partitions too if ``expression`` (the shape names those with the index definitions)."""
    from hoodie.metadata.partitions import enabled_partitions, unmaintained_partitions

    if not table.has_metadata_table:
        return []
    partitions = enabled_partitions(table)
    if not partitions:
        return []
    config = table.config
    if table.table_version < 8:
        listed = f"{TableKeys.METADATA_PARTITIONS.key}={','.join(partitions)}"
        version = f"{TableKeys.VERSION.key}={int(table.table_version)}"
        return [ShapeFeature(Shape.METADATA_TABLE_VERSION, f"{version}, {listed}")]
    out = []
    for partition, why in unmaintained_partitions(table, partitions):
        key = TableKeys.METADATA_PARTITIONS
        if partition not in config.metadata_partitions:
            key = TableKeys.METADATA_PARTITIONS_INFLIGHT
        evidence = f"{partition} in {key.key}={config.get(key)}"
        if partition.startswith(EXPRESSION_INDEX_PREFIXES):
            if expression:
                out.append(ShapeFeature(Shape.EXPRESSION_INDEX, evidence))
        elif why is not None:
            out.append(ShapeFeature(Shape.SECONDARY_INDEX, f"{evidence}: {why}"))
        else:
            out.append(ShapeFeature(Shape.METADATA_PARTITION, evidence))
    return out


def _secondary_indexed(table: HoodieTable) -> ShapeFeature | None:
    """A secondary index, built or being built (whether hts maintains it or not: Hudi refuses
    overwrites and delete_partition on the table either way)."""
    from hoodie.metadata.partitions import secondary_index_partitions

    if not table.has_metadata_table:
        return None
    found = secondary_index_partitions(table)
    if not found:
        return None
    key = TableKeys.METADATA_PARTITIONS
    if found[0] not in table.config.metadata_partitions:
        key = TableKeys.METADATA_PARTITIONS_INFLIGHT
    return ShapeFeature(Shape.SECONDARY_INDEXED, f"{', '.join(found)} in {key.key}={table.config.get(key)}")


def _merge_and_keys(table: HoodieTable, options: Mapping[str, str]) -> list[ShapeFeature]:
    """How the table merges records and generates keys, where hts does not (or not everywhere). The
    key generator is the writer's: the table's properties with the declared options over them (a
    version-6 CUSTOM table records its partition fields without their types, which Hudi's writers
    take from ``hoodie.datasource.write.partitionpath.field``)."""
    from hoodie.keygen import key_generator_from_properties
    from hoodie.merge.resolve import resolve_merge_config

    config = table.config
    out = []
    try:
        key_generator_from_properties({**config.props, **options})
    except (UnsupportedTableError, InvalidTableConfigError) as e:
        named = [
            f"{k.key}={config.get(k)}"
            for k in (TableKeys.KEYGEN_CLASS, TableKeys.KEYGEN_TYPE)
            if config.get(k)
        ]
        out.append(ShapeFeature(Shape.KEY_GENERATOR, f"{', '.join(named) or 'key generator'}: {e}"))
    stored = [
        f"{k.key}={config.get(k)}"
        for k in (
            TableKeys.MERGE_MODE,
            TableKeys.PAYLOAD_CLASS,
            TableKeys.LEGACY_PAYLOAD_CLASS,
            TableKeys.MERGE_STRATEGY_ID,
        )
        if config.get(k)
    ]
    try:
        merge = resolve_merge_config(config)
    except UnsupportedTableError as e:
        why = str(e).split(" (supported", 1)[0]
        return [*out, ShapeFeature(Shape.UNSUPPORTED_MERGE, f"{', '.join(stored)}: {why}")]
    if merge.mode is RecordMergeMode.CUSTOM:
        out.append(ShapeFeature(Shape.CUSTOM_MERGE, f"{', '.join(stored)} (merge mode CUSTOM)"))
    elif merge.mode is RecordMergeMode.EVENT_TIME_ORDERING and len(merge.ordering_fields) > 1:
        names = (TableKeys.ORDERING_FIELDS.key, *TableKeys.ORDERING_FIELDS.alternatives)
        key = next((k for k in names if k in config.props), names[0])
        fields = ",".join(merge.ordering_fields)
        out.append(ShapeFeature(Shape.MULTI_FIELD_ORDERING, f"{key}={fields}"))
    return out


def _unreadable_schema(table: HoodieTable) -> ShapeFeature | None:
    from hoodie.read.reader import unreadable_schemas

    problems, source = unreadable_schemas(table, table.timeline)
    if not problems:
        return None
    listed = "; ".join(problems[:10]) + ("; ..." if len(problems) > 10 else "")
    return ShapeFeature(Shape.UNREADABLE_SCHEMA, f"{source}: {listed}")


def detect(
    table: HoodieTable,
    options: Mapping[str, str],
    previous: TableShape | None = None,
    view: FileSystemView | None = None,
) -> TableShape:
    """Compute ``table``'s shape from storage and the declared ``options``; ``previous`` (the shape
    before the timeline changed) spares listing the file groups of a table known to be no bucket table."""
    config = table.config
    if table.is_metadata_table:
        return TableShape(table.base_path)
    features: list[ShapeFeature] = []
    unknown = unknown_property(config.props)
    if unknown is not None:  # named first: every operation but reading is refused on it
        features.append(ShapeFeature(Shape.UNKNOWN_PROPERTY, unknown))
    if (config.get(TableKeys.CDC_ENABLED) or "").strip().lower() == "true":
        mode = config.props.get(TableKeys.CDC_LOGGING_MODE.key)
        extra = f", {TableKeys.CDC_LOGGING_MODE.key}={mode}" if mode else ""
        features.append(ShapeFeature(Shape.CDC, f"{TableKeys.CDC_ENABLED.key}=true{extra}"))
    stored = _bucket_features(table)
    features += stored
    last_undo = _last_undo(table)
    witness, bucket = _bucket_verdict(table, previous, last_undo, view)
    declared = _declared_index(options)
    if bucket is not None and not any(f.shape is Shape.CONSISTENT_HASHING for f in stored):
        by_file_id = bucket.features()
        if not any(f.shape in (Shape.SIMPLE_BUCKET, Shape.NBCC) for f in declared):
            # Named first: whatever is written, the settings are what is missing.
            told = [f"{k}={options[k]}" for k in (*INDEX_TYPE_KEYS, BUCKET_ENGINE_KEY) if options.get(k)]
            given = f"given {', '.join(told)}" if told else f"{INDEX_TYPE_KEYS[0]} not given"
            evidence = f"{by_file_id[-1].evidence}; {given}"
            by_file_id.insert(0, ShapeFeature(Shape.BUCKET_SETTINGS_MISSING, evidence))
        features += by_file_id
    known = {f.shape for f in features}
    features += [f for f in declared if f.shape not in known]
    for found in (_schema_on_read(table), _expression_index(table), _unreadable_schema(table)):
        if found is not None:
            features.append(found)
    probe = operation_field(table, previous.operation_probe if previous is not None else None)
    if probe.evidence is not None:
        features.append(ShapeFeature(Shape.OPERATION_FIELD, probe.evidence))
    else:
        features += _declared_operation_field(options)
    features += metadata_features(table)
    indexed = _secondary_indexed(table)
    if indexed is not None:
        features.append(indexed)
    if config.partial_update_mode:
        features.append(
            ShapeFeature(
                Shape.PARTIAL_UPDATES, f"{TableKeys.PARTIAL_UPDATE_MODE.key}={config.partial_update_mode}"
            )
        )
    features += _merge_and_keys(table, options)
    if not config.populate_meta_fields:
        features.append(ShapeFeature(Shape.VIRTUAL_KEYS, f"{TableKeys.POPULATE_META_FIELDS.key}=false"))
    if table.has_metadata_table:
        features.append(
            ShapeFeature(
                Shape.METADATA_TABLE,
                f"{TableKeys.METADATA_PARTITIONS.key}={','.join(config.metadata_partitions)}",
            )
        )
    savepoints = table.timeline.completed().actions(Action.SAVEPOINT)
    if savepoints:
        features.append(
            ShapeFeature(Shape.SAVEPOINTS, f"{', '.join(i.requested_time for i in savepoints)}.savepoint")
        )
    if TableKeys.TIMELINE_TIMEZONE.key in config.props:
        features.append(
            ShapeFeature(
                Shape.TIMELINE_TIMEZONE, f"{TableKeys.TIMELINE_TIMEZONE.key}={config.timezone.value}"
            )
        )
    log_compactions = table.timeline.actions(Action.LOG_COMPACTION)
    if log_compactions:
        first = log_compactions.instants[0].requested_time
        features.append(ShapeFeature(Shape.LOG_COMPACTED, f"{first}.logcompaction"))
    if table.table_version < 8:  # named last: every other shape's refusal of indexing comes first
        features.append(ShapeFeature(Shape.VERSION_6, f"{TableKeys.VERSION.key}={int(table.table_version)}"))
    return TableShape(table.base_path, tuple(features), witness, last_undo, bucket, probe)
