"""``hoodie.properties``: Hudi's table config, parsed once into a frozen, typed object.

Keys carry Hudi's own names and alternatives (e.g. table version 9 renames
``hoodie.table.precombine.field`` to ``hoodie.table.ordering.fields``). Opening a table
validates the config and fails fast, naming any unsupported value.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, IntEnum, StrEnum
from types import MappingProxyType
from typing import TypeVar

from hoodie.config.properties import format_properties, parse_properties
from hoodie.errors import InvalidTableConfigError, UnsupportedTableError
from hoodie.io.fileio import FileIO, join
from hoodie.shape.matrix import Shape, refuse_on_open

PROPERTIES_FILE = "hoodie.properties"
PROPERTIES_BACKUP_FILE = "hoodie.properties.backup"
METAFOLDER = ".hoodie"

E = TypeVar("E", bound=Enum)


class TableType(StrEnum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class TableVersion(IntEnum):
    """Table versions this implementation reads and writes."""

    SIX = 6
    EIGHT = 8
    NINE = 9

    @property
    def timeline_layout(self) -> int:
        return 1 if self < TableVersion.EIGHT else 2

    @property
    def release(self) -> str:
        return {6: "0.14.0", 8: "1.0.0", 9: "1.1.0"}[int(self)]


class RecordMergeMode(StrEnum):
    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    CUSTOM = "CUSTOM"


class BaseFileFormat(StrEnum):
    PARQUET = "PARQUET"
    ORC = "ORC"
    HFILE = "HFILE"
    LANCE = "LANCE"


class TimelineTimezone(StrEnum):
    LOCAL = "LOCAL"
    UTC = "UTC"


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One Hudi config key: its name, default and the older names it replaced."""

    key: str
    default: str | None = None
    alternatives: tuple[str, ...] = ()

    def lookup(self, props: Mapping[str, str]) -> str | None:
        for name in (self.key, *self.alternatives):
            value = props.get(name)
            if value is not None:
                return value
        return self.default


class TableKeys:
    """The ``hoodie.properties`` keys, with Hudi's names, defaults and aliases."""

    NAME = ConfigKey("hoodie.table.name")
    DATABASE_NAME = ConfigKey("hoodie.database.name")
    TYPE = ConfigKey("hoodie.table.type", "COPY_ON_WRITE")
    VERSION = ConfigKey("hoodie.table.version")
    INITIAL_VERSION = ConfigKey("hoodie.table.initial.version")
    TIMELINE_LAYOUT_VERSION = ConfigKey("hoodie.timeline.layout.version")
    TIMELINE_PATH = ConfigKey("hoodie.timeline.path", "timeline")
    TIMELINE_HISTORY_PATH = ConfigKey("hoodie.timeline.history.path", "history")
    ARCHIVELOG_FOLDER = ConfigKey("hoodie.archivelog.folder", "archived")
    RECORDKEY_FIELDS = ConfigKey("hoodie.table.recordkey.fields")
    PARTITION_FIELDS = ConfigKey("hoodie.table.partition.fields")
    ORDERING_FIELDS = ConfigKey("hoodie.table.ordering.fields", None, ("hoodie.table.precombine.field",))
    KEYGEN_TYPE = ConfigKey("hoodie.table.keygenerator.type")
    KEYGEN_CLASS = ConfigKey("hoodie.table.keygenerator.class")
    HIVE_STYLE_PARTITIONING = ConfigKey("hoodie.datasource.write.hive_style_partitioning", "false")
    URL_ENCODE_PARTITIONING = ConfigKey("hoodie.datasource.write.partitionpath.urlencode", "false")
    DROP_PARTITION_COLUMNS = ConfigKey("hoodie.datasource.write.drop.partition.columns", "false")
    BASE_FILE_FORMAT = ConfigKey("hoodie.table.base.file.format", "PARQUET", ("hoodie.table.ro.file.format",))
    LOG_FILE_FORMAT = ConfigKey(
        "hoodie.table.log.file.format", "HOODIE_LOG", ("hoodie.table.rt.file.format",)
    )
    POPULATE_META_FIELDS = ConfigKey("hoodie.populate.meta.fields", "true")
    TIMELINE_TIMEZONE = ConfigKey("hoodie.table.timeline.timezone", "LOCAL")
    CREATE_SCHEMA = ConfigKey("hoodie.table.create.schema")
    PAYLOAD_CLASS = ConfigKey("hoodie.compaction.payload.class")
    LEGACY_PAYLOAD_CLASS = ConfigKey("hoodie.table.legacy.payload.class")
    MERGE_MODE = ConfigKey("hoodie.record.merge.mode")
    MERGE_STRATEGY_ID = ConfigKey(
        "hoodie.record.merge.strategy.id", None, ("hoodie.compaction.record.merger.strategy",)
    )
    PARTIAL_UPDATE_MODE = ConfigKey("hoodie.table.partial.update.mode")
    MERGE_PROPERTY_PREFIX = "hoodie.record.merge.property."
    METADATA_PARTITIONS = ConfigKey("hoodie.table.metadata.partitions", "")
    METADATA_PARTITIONS_INFLIGHT = ConfigKey("hoodie.table.metadata.partitions.inflight", "")
    INDEX_DEFS_PATH = ConfigKey("hoodie.table.index.defs.path")
    CDC_ENABLED = ConfigKey("hoodie.table.cdc.enabled", "false")
    CDC_LOGGING_MODE = ConfigKey("hoodie.table.cdc.supplemental.logging.mode")
    TABLE_FORMAT = ConfigKey("hoodie.table.format", "native")
    BOOTSTRAP_BASE_PATH = ConfigKey("hoodie.bootstrap.base.path")
    MULTIPLE_BASE_FILE_FORMATS = ConfigKey("hoodie.table.multiple.base.file.formats.enable", "false")
    CHECKSUM = ConfigKey("hoodie.table.checksum")
    # Bootstrap index settings: they matter only with hoodie.bootstrap.base.path (refused).
    BOOTSTRAP_INDEX_ENABLE = ConfigKey("hoodie.bootstrap.index.enable", "true")
    BOOTSTRAP_INDEX_CLASS = ConfigKey("hoodie.bootstrap.index.class")
    BOOTSTRAP_INDEX_TYPE = ConfigKey("hoodie.bootstrap.index.type")
    # Known, and refused when set (hts does not implement them): see _UNIMPLEMENTED.
    PARTITION_METAFILE_USE_BASE_FORMAT = ConfigKey("hoodie.partition.metafile.use.base.format", "false")
    SECONDARY_INDEXES_METADATA = ConfigKey("hoodie.table.secondary.indexes.metadata")
    TABLE_MERGE_PROPERTIES = ConfigKey("hoodie.table.merge.properties")


def _known_keys() -> frozenset[str]:
    """Every key Hudi persists in ``hoodie.properties`` for table versions 6, 8 and 9 that hts knows:
    ``HoodieTableConfig``'s config properties (with their alternatives) and ``PERSISTED_CONFIG_LIST``
    (the timestamp key generator's settings, under their current and DeltaStreamer names). The merge
    properties (``RECORD_MERGE_PROPERTY_PREFIX``) are known by their prefix."""
    from hoodie.keygen import timestamp as ts

    keys = {
        name
        for value in vars(TableKeys).values()
        if isinstance(value, ConfigKey)
        for name in (value.key, *value.alternatives)
    }
    suffixes = (
        ts.TIMESTAMP_TYPE,
        ts.SCALAR_TIME_UNIT,
        ts.INPUT_DATE_FORMAT,
        ts.INPUT_DATE_FORMAT_DELIMITER,
        ts.INPUT_TIMEZONE,
        ts.OUTPUT_DATE_FORMAT,
        ts.OUTPUT_TIMEZONE,
        ts.TIMEZONE,
    )
    keys |= {prefix + suffix for prefix in (ts.PREFIX, ts.LEGACY_PREFIX) for suffix in suffixes}
    keys |= {ts.DATE_TIME_PARSER_KEY, ts.DATE_TIME_PARSER_KEY.replace("hoodie.", "hoodie.deltastreamer.", 1)}
    return frozenset(keys)


_KNOWN_KEYS = _known_keys()


def _unimplemented(config: TableConfig) -> str | None:
    """``key=value`` of a known key whose value makes Hudi's writers write what hts does not."""
    if _bool(config.get(TableKeys.PARTITION_METAFILE_USE_BASE_FORMAT)):
        # HoodiePartitionMetadata writes .hoodie_partition_metadata.parquet (or .orc) then; hts
        # writes the properties-file form only.
        return f"{TableKeys.PARTITION_METAFILE_USE_BASE_FORMAT.key}=true"
    for key in (TableKeys.SECONDARY_INDEXES_METADATA, TableKeys.TABLE_MERGE_PROPERTIES):
        # The 0.13 secondary-index metadata (RFC-52), kept current by its own index writer; and the
        # merge properties as one key (1.1 development builds; released 1.1 persists them under
        # hoodie.record.merge.property.*, which hts reads).
        value = config.get(key)
        if value:
            return f"{key.key}={value}"
    return None


def unknown_property(props: Mapping[str, str]) -> str | None:
    """``key=value`` of the first key (in sorted order) that hts does not know. Not refused on open:
    the shape matrix refuses what writes with it (``Shape.UNKNOWN_PROPERTY``) and reads go on."""
    for key in sorted(props):
        if key not in _KNOWN_KEYS and not key.startswith(TableKeys.MERGE_PROPERTY_PREFIX):
            return f"{key}={props[key]}"
    return None


def _split_fields(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(f.strip() for f in value.split(",") if f.strip())


def _bool(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def table_checksum(props: Mapping[str, str]) -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``<database name or ''>.<table name>`` (UTF-8)."""
    name = props.get(TableKeys.NAME.key)
    if not name:
        raise InvalidTableConfigError(f"{TableKeys.NAME.key} is missing; cannot compute the table checksum")
    db = props.get(TableKeys.DATABASE_NAME.key) or ""
    return zlib.crc32(f"{db}.{name}".encode())


# BaseHoodieWriteClient.validateAgainstTableProperties: without meta fields only these key generators
# (by class; a persisted key generator type maps to them through KeyGeneratorType).
_VIRTUAL_KEY_GENERATORS = frozenset(
    {
        "org.apache.hudi.keygen.SimpleKeyGenerator",
        "org.apache.hudi.keygen.ComplexKeyGenerator",
        "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    }
)
_VIRTUAL_KEY_GENERATOR_TYPES = frozenset({"SIMPLE", "COMPLEX", "NON_PARTITION"})


def _virtual_key_generator(props: Mapping[str, str]) -> str | None:
    """``key=value`` of a key generator that cannot rebuild keys without meta fields; None if it can
    (no key generator at all defaults to ``SimpleKeyGenerator``)."""
    cls = (TableKeys.KEYGEN_CLASS.lookup(props) or "").strip()
    if cls:
        return None if cls in _VIRTUAL_KEY_GENERATORS else f"{TableKeys.KEYGEN_CLASS.key}={cls}"
    kind = (TableKeys.KEYGEN_TYPE.lookup(props) or "").strip()
    if kind and kind.upper() not in _VIRTUAL_KEY_GENERATOR_TYPES:
        return f"{TableKeys.KEYGEN_TYPE.key}={kind}"
    return None


def _enum_value(enum: type[E], key: ConfigKey, props: Mapping[str, str], *, required: bool) -> E | None:
    raw = key.lookup(props)
    if raw is None or raw == "":
        if required:
            raise InvalidTableConfigError(f"{key.key} is missing from {PROPERTIES_FILE}")
        return None
    try:
        return enum(raw.strip().upper() if issubclass(enum, StrEnum) else raw.strip())
    except ValueError as e:
        allowed = ", ".join(str(m.value) for m in enum)
        raise UnsupportedTableError(f"unsupported {key.key}={raw!r} (supported: {allowed})") from e


@dataclass(frozen=True)
class TableConfig:
    """A parsed, validated ``hoodie.properties``."""

    props: Mapping[str, str] = field(repr=False)
    table_type: TableType
    table_version: TableVersion
    table_name: str
    database_name: str | None
    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    ordering_fields: tuple[str, ...]
    base_file_format: BaseFileFormat
    populate_meta_fields: bool
    timezone: TimelineTimezone
    hive_style_partitioning: bool
    url_encode_partitioning: bool
    merge_mode: RecordMergeMode | None
    merge_strategy_id: str | None
    payload_class: str | None

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], *, source: str = PROPERTIES_FILE, metadata_table: bool = False
    ) -> TableConfig:
        """Build and validate a config; raises naming the first unsupported or invalid value.

        ``metadata_table`` accepts the metadata table's own config (HFile base files).
        """
        frozen = MappingProxyType(dict(props))
        raw_version = TableKeys.VERSION.lookup(props)
        try:
            version_number = int(raw_version) if raw_version is not None else 0
        except ValueError as e:
            raise InvalidTableConfigError(
                f"{source}: {TableKeys.VERSION.key}={raw_version!r} is not a number"
            ) from e
        if raw_version is None:
            raise InvalidTableConfigError(f"{source}: {TableKeys.VERSION.key} is missing")
        try:
            version = TableVersion(version_number)
        except ValueError as e:
            raise refuse_on_open(
                source, Shape.TABLE_VERSION, f"{TableKeys.VERSION.key}={version_number}"
            ) from e
        table_type = _enum_value(TableType, TableKeys.TYPE, props, required=True)
        base_format = _enum_value(BaseFileFormat, TableKeys.BASE_FILE_FORMAT, props, required=True)
        timezone = _enum_value(TimelineTimezone, TableKeys.TIMELINE_TIMEZONE, props, required=True)
        merge_mode = _enum_value(RecordMergeMode, TableKeys.MERGE_MODE, props, required=False)
        name = TableKeys.NAME.lookup(props)
        if not name:
            raise InvalidTableConfigError(f"{source}: {TableKeys.NAME.key} is missing")
        assert table_type is not None and base_format is not None and timezone is not None
        payload = TableKeys.LEGACY_PAYLOAD_CLASS.lookup(props) or TableKeys.PAYLOAD_CLASS.lookup(props)
        config = cls(
            props=frozen,
            table_type=table_type,
            table_version=version,
            table_name=name,
            database_name=TableKeys.DATABASE_NAME.lookup(props) or None,
            record_key_fields=_split_fields(TableKeys.RECORDKEY_FIELDS.lookup(props)),
            partition_fields=_split_fields(TableKeys.PARTITION_FIELDS.lookup(props)),
            ordering_fields=_split_fields(TableKeys.ORDERING_FIELDS.lookup(props)),
            base_file_format=base_format,
            populate_meta_fields=_bool(TableKeys.POPULATE_META_FIELDS.lookup(props)),
            timezone=timezone,
            hive_style_partitioning=_bool(TableKeys.HIVE_STYLE_PARTITIONING.lookup(props)),
            url_encode_partitioning=_bool(TableKeys.URL_ENCODE_PARTITIONING.lookup(props)),
            merge_mode=merge_mode,
            merge_strategy_id=TableKeys.MERGE_STRATEGY_ID.lookup(props),
            payload_class=payload,
        )
        config._validate(source, metadata_table=metadata_table)
        return config

    def _validate(self, source: str, *, metadata_table: bool = False) -> None:
        layout = self.get(TableKeys.TIMELINE_LAYOUT_VERSION)
        expected = self.table_version.timeline_layout
        if layout is not None and layout.strip() != str(expected):
            raise UnsupportedTableError(
                f"{source}: {TableKeys.TIMELINE_LAYOUT_VERSION.key}={layout} does not match "
                f"table version {int(self.table_version)} (expected layout {expected})"
            )
        if metadata_table:
            if self.base_file_format is not BaseFileFormat.HFILE:
                raise UnsupportedTableError(
                    f"{source}: {TableKeys.BASE_FILE_FORMAT.key}={self.base_file_format.value} is not "
                    "supported (only HFILE base files in a metadata table)"
                )
        elif self.base_file_format is not BaseFileFormat.PARQUET:
            raise refuse_on_open(
                source,
                Shape.BASE_FILE_FORMAT,
                f"{TableKeys.BASE_FILE_FORMAT.key}={self.base_file_format.value}",
            )
        log_format = (self.get(TableKeys.LOG_FILE_FORMAT) or "").upper()
        if log_format != "HOODIE_LOG":
            raise refuse_on_open(
                source, Shape.LOG_FILE_FORMAT, f"{TableKeys.LOG_FILE_FORMAT.key}={log_format}"
            )
        if _bool(self.get(TableKeys.MULTIPLE_BASE_FILE_FORMATS)):
            raise refuse_on_open(
                source, Shape.MULTIPLE_BASE_FILE_FORMATS, f"{TableKeys.MULTIPLE_BASE_FILE_FORMATS.key}=true"
            )
        if _bool(self.get(TableKeys.DROP_PARTITION_COLUMNS)):
            raise refuse_on_open(
                source, Shape.DROP_PARTITION_COLUMNS, f"{TableKeys.DROP_PARTITION_COLUMNS.key}=true"
            )
        bootstrap = self.get(TableKeys.BOOTSTRAP_BASE_PATH)
        if bootstrap:
            raise refuse_on_open(source, Shape.BOOTSTRAP, f"{TableKeys.BOOTSTRAP_BASE_PATH.key}={bootstrap}")
        table_format = self.get(TableKeys.TABLE_FORMAT) or "native"
        if table_format.lower() != "native":
            raise refuse_on_open(source, Shape.TABLE_FORMAT, f"{TableKeys.TABLE_FORMAT.key}={table_format}")
        if not self.record_key_fields and self.populate_meta_fields is False:
            raise UnsupportedTableError(f"{source}: a table without meta fields needs record key fields")
        if not self.populate_meta_fields and not metadata_table:
            keygen = _virtual_key_generator(self.props)
            if keygen is not None:
                raise refuse_on_open(
                    source, Shape.VIRTUAL_KEYS_KEYGEN, f"{TableKeys.POPULATE_META_FIELDS.key}=false, {keygen}"
                )
        if metadata_table:
            return
        unimplemented = _unimplemented(self)
        if unimplemented is not None:
            raise refuse_on_open(source, Shape.UNIMPLEMENTED_PROPERTY, unimplemented)

    # -- accessors ----------------------------------------------------------------------------
    def get(self, key: ConfigKey) -> str | None:
        return key.lookup(self.props)

    @property
    def is_mor(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @property
    def timeline_layout(self) -> int:
        return self.table_version.timeline_layout

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_fields)

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        return _split_fields(self.get(TableKeys.METADATA_PARTITIONS))

    @property
    def metadata_partitions_inflight(self) -> tuple[str, ...]:
        return _split_fields(self.get(TableKeys.METADATA_PARTITIONS_INFLIGHT))

    @property
    def create_schema(self) -> str | None:
        return self.get(TableKeys.CREATE_SCHEMA)

    @property
    def partial_update_mode(self) -> str | None:
        return self.get(TableKeys.PARTIAL_UPDATE_MODE)

    @property
    def merge_properties(self) -> dict[str, str]:
        prefix = TableKeys.MERGE_PROPERTY_PREFIX
        return {k[len(prefix) :]: v for k, v in self.props.items() if k.startswith(prefix)}

    def with_updates(self, updates: Mapping[str, str | None]) -> TableConfig:
        """A new config with keys set (or removed where the value is None)."""
        props = dict(self.props)
        for k, v in updates.items():
            if v is None:
                props.pop(k, None)
            else:
                props[k] = v
        return TableConfig.from_properties(props)


# -- storage ----------------------------------------------------------------------------------


def _read_one(fileio: FileIO, path: str) -> dict[str, str]:
    text = fileio.read_bytes(path).decode("latin-1")
    props = parse_properties(text)
    checksum = props.get(TableKeys.CHECKSUM.key)
    if checksum is not None:
        expected = table_checksum(props)
        if checksum.strip() != str(expected):
            raise InvalidTableConfigError(
                f"{path}: {TableKeys.CHECKSUM.key}={checksum} does not match the checksum of "
                f"'{props.get(TableKeys.DATABASE_NAME.key) or ''}.{props.get(TableKeys.NAME.key)}' "
                f"({expected}); the file is corrupt or was edited by hand"
            )
    return props


def read_table_properties(fileio: FileIO, meta_path: str) -> dict[str, str]:
    """Read ``hoodie.properties`` (falling back to the backup an interrupted update left behind)."""
    primary = join(meta_path, PROPERTIES_FILE)
    backup = join(meta_path, PROPERTIES_BACKUP_FILE)
    try:
        return _read_one(fileio, primary)
    except (FileNotFoundError, InvalidTableConfigError) as primary_error:
        if fileio.exists(backup):
            try:
                return _read_one(fileio, backup)
            except (FileNotFoundError, InvalidTableConfigError):
                pass
        raise primary_error


def _render(props: Mapping[str, str], comment: str) -> bytes:
    full = dict(props)
    full[TableKeys.CHECKSUM.key] = str(table_checksum(full))
    now = dt.datetime.now(dt.UTC)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return format_properties(full, f"{comment} {stamp}", now).encode("latin-1")


def create_table_properties(fileio: FileIO, meta_path: str, props: Mapping[str, str]) -> None:
    """Write a new table's ``hoodie.properties`` (with checksum); fails if one exists."""
    fileio.create_new(join(meta_path, PROPERTIES_FILE), _render(props, "Properties saved on"))


def update_table_properties(
    fileio: FileIO, meta_path: str, updates: Mapping[str, str | None]
) -> dict[str, str]:
    """Update keys with Hudi's protocol: backup, delete, write, verify, drop the backup."""
    primary = join(meta_path, PROPERTIES_FILE)
    backup = join(meta_path, PROPERTIES_BACKUP_FILE)
    current = read_table_properties(fileio, meta_path)
    fileio.write_bytes(backup, fileio.read_bytes(primary))
    props = dict(current)
    for k, v in updates.items():
        if v is None:
            props.pop(k, None)
        else:
            props[k] = v
    fileio.delete(primary)
    fileio.write_bytes(primary, _render(props, "Updated at"))
    written = _read_one(fileio, primary)
    fileio.delete(backup)
    return written
