"""A table's shape, computed from storage (and the options an operator declares), and its checks.

Storage tells most shapes (census: ``docs/table-shapes.md``): ``hoodie.properties`` (already parsed
into :class:`~hoodie.config.table_config.TableConfig`), the file ids of the latest file groups,
``.hoodie/.bucket_index/...``, ``.hoodie/.schema/``, the latest commit's extra metadata, index
definitions and the timeline. Hudi does not persist the index type (``HoodieIndexConfig``: no table
property), so a table written with the Flink-state index, or a bucket index without file groups yet,
is known only from the options the operator passes (``--option`` on the CLI, a table's ``options``
in the daemon's settings), with Hudi's own keys. No data file is read and no log block is scanned.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hoodie.config.table_config import TableKeys
from hoodie.errors import UnsupportedShapeError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.index.bucket import is_bucket_file_id, is_nbcc_bucket_file_id
from hoodie.io.fileio import join
from hoodie.shape.matrix import SERVICE_OPERATIONS, WRITE, Shape, cell
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
DECLARED_KEYS = (*INDEX_TYPE_KEYS, BUCKET_ENGINE_KEY, EXPRESSION_INDEX_ENABLE_KEY)
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
        features = list(_declared_index(options))
        if (options.get(TableKeys.CDC_ENABLED.key) or "").strip().lower() == "true":
            features.insert(0, ShapeFeature(Shape.CDC, f"{TableKeys.CDC_ENABLED.key}=true"))
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
    meta = _first_file(table, join(folder, CONSISTENT_HASHING_FOLDER), HASHING_META_SUFFIX)
    if meta is not None:
        out.append(ShapeFeature(Shape.CONSISTENT_HASHING, meta))
    partition_folder = join(folder, PARTITION_BUCKET_FOLDER)
    # PartitionBucketIndexUtils.isPartitionSimpleBucketIndex: the folder exists.
    if table.fileio.exists(partition_folder):
        config = _first_file(table, partition_folder, HASHING_CONFIG_SUFFIX)
        out.append(ShapeFeature(Shape.PARTITION_BUCKET, config or partition_folder))
    return out


def _file_id_features(
    table: HoodieTable, view: FileSystemView | None
) -> tuple[list[ShapeFeature], FileGroupId | None]:
    """Simple bucket (and NBCC) tables, from the ids of the latest file groups: all must have the
    form. Also returns a file group without it (the witness that the table is no bucket table).
    ``view`` is the caller's view of the current timeline (its listings are reused)."""
    slices = (view or table.file_system_view(timeline=table.timeline)).latest_file_slices()
    ids = sorted({(s.partition_path, s.file_id) for s in slices})
    witness = next((FileGroupId(p, f) for p, f in ids if not is_bucket_file_id(f)), None)
    if not ids or witness is not None:
        return [], witness
    partition, fid = ids[0]
    example = f"{partition}/{fid}" if partition else fid
    out = [
        ShapeFeature(
            Shape.SIMPLE_BUCKET, f"all {len(ids)} file group ids have the bucket form, e.g. {example}"
        )
    ]
    if all(is_nbcc_bucket_file_id(f) for _, f in ids):  # named first: the more specific shape
        out.insert(
            0,
            ShapeFeature(
                Shape.NBCC, f"all {len(ids)} file group ids have the fixed NBCC form, e.g. {example}"
            ),
        )
    return out, None


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
    if (config.get(TableKeys.CDC_ENABLED) or "").strip().lower() == "true":
        mode = config.props.get(TableKeys.CDC_LOGGING_MODE.key)
        extra = f", {TableKeys.CDC_LOGGING_MODE.key}={mode}" if mode else ""
        features.append(ShapeFeature(Shape.CDC, f"{TableKeys.CDC_ENABLED.key}=true{extra}"))
    stored = _bucket_features(table)
    features += stored
    last_undo = _last_undo(table)
    witness = previous.not_bucket_witness if previous is not None else None
    if (
        witness is None
        or previous is None
        or previous.last_undo != last_undo
        or witness in table.replaced_file_groups(table.timeline)
    ):
        by_file_id, witness = _file_id_features(table, view)
        if not any(f.shape is Shape.CONSISTENT_HASHING for f in stored):
            features += by_file_id
    known = {f.shape for f in features}
    features += [f for f in _declared_index(options) if f.shape not in known]
    for found in (_schema_on_read(table), _expression_index(table)):
        if found is not None:
            features.append(found)
    if config.partial_update_mode:
        features.append(
            ShapeFeature(
                Shape.PARTIAL_UPDATES, f"{TableKeys.PARTIAL_UPDATE_MODE.key}={config.partial_update_mode}"
            )
        )
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
    return TableShape(table.base_path, tuple(features), witness, last_undo)
