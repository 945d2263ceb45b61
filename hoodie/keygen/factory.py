"""Choosing a key generator from table properties, and the properties that record one.

Hudi names a table's key generator in ``hoodie.properties`` as a class
(``hoodie.table.keygenerator.class``, table version 6) or a type
(``hoodie.table.keygenerator.type``, version 8 and later). Writers also pass the
``hoodie.datasource.write.*`` options, used here as fallbacks. Without any of them Hudi infers
the generator from the fields: no partition field is NON_PARTITION, ``field:type`` partition
entries are CUSTOM, one partition field with at most one record key field is SIMPLE, anything
else COMPLEX.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hoodie.errors import InvalidTableConfigError, UnsupportedTableError
from hoodie.keygen.generators import (
    COLUMN_VALUE_SEPARATOR,
    ComplexKeyEncoding,
    ComplexKeyGenerator,
    CustomKeyGenerator,
    KeyGenerator,
    KeyGeneratorType,
    NonpartitionedKeyGenerator,
    PartitionKeyType,
    SimpleKeyGenerator,
    TimestampBasedKeyGenerator,
    parse_partition_specs,
)
from hoodie.keygen.timestamp import TimestampOptions
from hoodie.keygen.values import FloatDigits, ValueFormat

KEYGEN_TYPE = "hoodie.table.keygenerator.type"
KEYGEN_CLASS = "hoodie.table.keygenerator.class"
WRITE_KEYGEN_TYPE = "hoodie.datasource.write.keygenerator.type"
WRITE_KEYGEN_CLASS = "hoodie.datasource.write.keygenerator.class"
RECORD_KEY_FIELDS = "hoodie.table.recordkey.fields"
WRITE_RECORD_KEY_FIELD = "hoodie.datasource.write.recordkey.field"
PARTITION_FIELDS = "hoodie.table.partition.fields"
WRITE_PARTITION_FIELD = "hoodie.datasource.write.partitionpath.field"
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
CONSISTENT_LOGICAL_TIMESTAMP = "hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled"
TABLE_VERSION = "hoodie.table.version"
COMPLEX_KEYGEN_ENCODING = "hoodie.table.complex.keygen.encoding"
COMPLEX_KEYGEN_NEW_ENCODING = "hoodie.write.complex.keygen.new.encoding"
SQL_ORIGIN_KEYGEN_CLASS = "hoodie.sql.origin.keygen.class"

_SQL_KEYGEN_CLASS = "org.apache.spark.sql.hudi.command.SqlKeyGenerator"
_TYPE_BY_NAME: dict[str, KeyGeneratorType] = {
    **{t.value: t for t in KeyGeneratorType},
    **{f"{t.value}_AVRO": t for t in KeyGeneratorType},
}
_TYPE_BY_CLASS: dict[str, KeyGeneratorType] = {
    **{t.class_name: t for t in KeyGeneratorType},
    "org.apache.hudi.keygen.SimpleAvroKeyGenerator": KeyGeneratorType.SIMPLE,
    "org.apache.hudi.keygen.ComplexAvroKeyGenerator": KeyGeneratorType.COMPLEX,
    "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator": KeyGeneratorType.NON_PARTITION,
    "org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator": KeyGeneratorType.TIMESTAMP,
    "org.apache.hudi.keygen.CustomAvroKeyGenerator": KeyGeneratorType.CUSTOM,
}
# Known to Hudi, but their keys cannot be recomputed from the data alone.
_UNSUPPORTED_TYPES = frozenset(
    {"GLOBAL_DELETE", "GLOBAL_DELETE_AVRO", "AUTO_RECORD", "AUTO_RECORD_AVRO", "HOODIE_TABLE_METADATA",
     "SPARK_SQL_UUID", "SPARK_SQL_MERGE_INTO", "STREAMER_TEST", "USER_PROVIDED"}
)  # fmt: skip
_UNSUPPORTED_CLASSES = frozenset(
    {"org.apache.hudi.keygen.GlobalDeleteKeyGenerator", "org.apache.hudi.keygen.GlobalAvroDeleteKeyGenerator",
     "org.apache.hudi.keygen.AutoRecordGenWrapperKeyGenerator",
     "org.apache.hudi.keygen.AutoRecordGenWrapperAvroKeyGenerator",
     "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
     "org.apache.spark.sql.hudi.command.UuidKeyGenerator",
     "org.apache.spark.sql.hudi.command.MergeIntoKeyGenerator"}
)  # fmt: skip


def java_bool(value: str | None) -> bool:
    """``Boolean.parseBoolean``: ``true`` in any case is true, everything else false."""
    return value is not None and value.strip().lower() == "true"


def split_fields(value: str | None) -> tuple[str, ...]:
    """A comma-separated field list, trimmed, empty entries dropped."""
    if not value:
        return ()
    return tuple(f.strip() for f in value.split(",") if f.strip())


def key_generator_type_from_class(class_name: str) -> KeyGeneratorType:
    """The type of a key generator class name (Spark, Avro and Spark SQL variants)."""
    name = class_name.strip()
    if name in _TYPE_BY_CLASS:
        return _TYPE_BY_CLASS[name]
    if name in _UNSUPPORTED_CLASSES:
        raise UnsupportedTableError(f"key generator class {name!r} is not supported")
    raise InvalidTableConfigError(f"unknown key generator class {name!r}")


def key_generator_type_from_name(type_name: str) -> KeyGeneratorType:
    """The type of a ``hoodie.table.keygenerator.type`` value (``SIMPLE``, ``COMPLEX_AVRO``, ...)."""
    name = type_name.strip()
    if name in _TYPE_BY_NAME:
        return _TYPE_BY_NAME[name]
    if name in _UNSUPPORTED_TYPES:
        raise UnsupportedTableError(f"key generator type {name!r} is not supported")
    raise InvalidTableConfigError(f"unknown key generator type {name!r}")


def infer_key_generator_type(
    record_key_fields: Sequence[str], partition_entries: Sequence[str]
) -> KeyGeneratorType:
    """What Hudi picks when no key generator is configured."""
    if not partition_entries:
        return KeyGeneratorType.NON_PARTITION
    if COLUMN_VALUE_SEPARATOR in partition_entries[0]:
        return KeyGeneratorType.CUSTOM
    if len(partition_entries) == 1 and len(record_key_fields) <= 1:
        return KeyGeneratorType.SIMPLE
    return KeyGeneratorType.COMPLEX


def _resolve_type(
    props: Mapping[str, str], record_keys: Sequence[str], partitions: Sequence[str]
) -> KeyGeneratorType:
    for key, by_class in (
        (KEYGEN_CLASS, True),
        (KEYGEN_TYPE, False),
        (WRITE_KEYGEN_CLASS, True),
        (WRITE_KEYGEN_TYPE, False),
    ):
        value = (props.get(key) or "").strip()
        if not value:
            continue
        if value in (_SQL_KEYGEN_CLASS, "SPARK_SQL"):
            # Spark SQL's wrapper delegates to the generator it was created from, else the complex one.
            origin = (props.get(SQL_ORIGIN_KEYGEN_CLASS) or "").strip()
            return key_generator_type_from_class(origin) if origin else KeyGeneratorType.COMPLEX
        return key_generator_type_from_class(value) if by_class else key_generator_type_from_name(value)
    return infer_key_generator_type(record_keys, partitions)


def complex_key_encoding(props: Mapping[str, str]) -> ComplexKeyEncoding:
    """How a single-field complex key is written: the recorded encoding if any, else
    ``FIELD_PREFIXED`` from table version 9 on, else per ``hoodie.write.complex.keygen.new.encoding``."""
    recorded = props.get(COMPLEX_KEYGEN_ENCODING)
    if recorded is not None:
        try:
            return ComplexKeyEncoding(recorded.strip().upper())
        except ValueError:
            allowed = [e.value for e in ComplexKeyEncoding]
            raise InvalidTableConfigError(
                f"{COMPLEX_KEYGEN_ENCODING}={recorded!r} is not one of {allowed}"
            ) from None
    version_text = (props.get(TABLE_VERSION) or "").strip()
    try:
        version = int(version_text) if version_text else None
    except ValueError:
        raise InvalidTableConfigError(f"{TABLE_VERSION}={version_text!r} is not a number") from None
    if version is not None and version >= 9:
        return ComplexKeyEncoding.FIELD_PREFIXED
    if java_bool(props.get(COMPLEX_KEYGEN_NEW_ENCODING)):
        return ComplexKeyEncoding.VALUE_ONLY
    return ComplexKeyEncoding.FIELD_PREFIXED


def key_generator_from_properties(
    props: Mapping[str, str],
    *,
    jvm_timezone: str = "UTC",
    float_digits: FloatDigits = FloatDigits.JDK_LEGACY,
) -> KeyGenerator:
    """The key generator a table's (or writer's) properties describe.

    ``jvm_timezone`` stands in for the writing JVM's default zone (used only by timestamp
    stringification and by timestamp-based partitions without a configured zone).
    """
    record_keys = split_fields(props.get(RECORD_KEY_FIELDS) or props.get(WRITE_RECORD_KEY_FIELD))
    write_partitions = split_fields(props.get(WRITE_PARTITION_FIELD))
    partitions = split_fields(props.get(PARTITION_FIELDS)) if PARTITION_FIELDS in props else write_partitions
    kind = _resolve_type(props, record_keys, partitions)
    hive_style = java_bool(props.get(HIVE_STYLE_PARTITIONING))
    url_encode = java_bool(props.get(URL_ENCODE_PARTITIONING))
    fmt = ValueFormat(
        consistent_logical_timestamp=java_bool(props.get(CONSISTENT_LOGICAL_TIMESTAMP)),
        timezone=jvm_timezone,
        float_digits=float_digits,
    )
    if kind is KeyGeneratorType.CUSTOM:
        entries = partitions
        if entries and not all(COLUMN_VALUE_SEPARATOR in e for e in entries):
            # Tables below version 8 record only the names; the writer option carries the types.
            entries = write_partitions
            if not entries or not all(COLUMN_VALUE_SEPARATOR in e for e in entries):
                raise InvalidTableConfigError(
                    f"CUSTOM key generator needs 'field:TYPE' partition fields, got {list(partitions)} "
                    f"({PARTITION_FIELDS}) and {list(write_partitions)} ({WRITE_PARTITION_FIELD})"
                )
        names, types = parse_partition_specs(entries)
        return CustomKeyGenerator(
            record_key_fields=record_keys,
            partition_fields=names,
            partition_types=types,
            timestamp=TimestampOptions.from_properties(props)
            if PartitionKeyType.TIMESTAMP in types
            else None,
            hive_style=hive_style,
            url_encode=url_encode,
            value_format=fmt,
        )
    names = tuple(e.split(COLUMN_VALUE_SEPARATOR, 1)[0].strip() for e in partitions)
    if kind is KeyGeneratorType.SIMPLE:
        return SimpleKeyGenerator(
            record_key_fields=record_keys,
            partition_fields=names,
            hive_style=hive_style,
            url_encode=url_encode,
            value_format=fmt,
        )
    if kind is KeyGeneratorType.COMPLEX:
        return ComplexKeyGenerator(
            record_key_fields=record_keys,
            partition_fields=names,
            hive_style=hive_style,
            url_encode=url_encode,
            value_format=fmt,
            single_field_encoding=complex_key_encoding(props),
        )
    if kind is KeyGeneratorType.TIMESTAMP:
        return TimestampBasedKeyGenerator(
            record_key_fields=record_keys,
            partition_fields=names,
            hive_style=hive_style,
            url_encode=url_encode,
            value_format=fmt,
            timestamp=TimestampOptions.from_properties(props),
        )
    return NonpartitionedKeyGenerator(record_key_fields=record_keys, value_format=fmt)


def key_generator_properties(
    kind: KeyGeneratorType,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str],
    hive_style: bool,
    url_encode: bool,
    table_version: int,
    *,
    timestamp: TimestampOptions | None = None,
) -> dict[str, str]:
    """The ``hoodie.properties`` entries that record a key generator for a new table.

    Version 6 names the generator by class, versions 8 and later by type. For CUSTOM, give
    ``partition_fields`` as ``field:TYPE``; version 8+ keeps the types in
    ``hoodie.table.partition.fields``, version 6 only the names. Non-partitioned tables get no
    partition-fields entry. Timestamp options are recorded as ``hoodie.keygen.timebased.*``.
    """
    if kind is KeyGeneratorType.NON_PARTITION and partition_fields:
        raise InvalidTableConfigError(
            f"NON_PARTITION key generator takes no partition fields, got {list(partition_fields)}"
        )
    entries = list(partition_fields)
    if kind is KeyGeneratorType.CUSTOM:
        names, types = parse_partition_specs(entries)
        entries = (
            [f"{n}:{t}" for n, t in zip(names, types, strict=True)] if table_version >= 8 else list(names)
        )
        needs_timestamp = PartitionKeyType.TIMESTAMP in types
    else:
        if any(COLUMN_VALUE_SEPARATOR in e for e in entries):
            raise InvalidTableConfigError(
                f"partition fields {entries} carry types, which only CUSTOM accepts"
            )
        needs_timestamp = kind is KeyGeneratorType.TIMESTAMP
    if needs_timestamp and timestamp is None:
        raise InvalidTableConfigError(
            f"{kind} key generator with a timestamp partition needs timestamp options"
        )
    props: dict[str, str] = {}
    if record_key_fields:  # keyless tables (writer-generated keys) record none
        props[RECORD_KEY_FIELDS] = ",".join(record_key_fields)
    if entries:
        props[PARTITION_FIELDS] = ",".join(entries)
    if table_version >= 8:
        props[KEYGEN_TYPE] = kind.value
    else:
        props[KEYGEN_CLASS] = kind.class_name
    props[HIVE_STYLE_PARTITIONING] = "true" if hive_style else "false"
    props[URL_ENCODE_PARTITIONING] = "true" if url_encode else "false"
    if needs_timestamp and timestamp is not None:
        props.update(timestamp.to_properties())
    # Building the generator checks the field counts the kind allows.
    check = {**props, TABLE_VERSION: str(table_version)}
    if kind is KeyGeneratorType.CUSTOM:
        check[WRITE_PARTITION_FIELD] = ",".join(partition_fields)
    key_generator_from_properties(check)
    return props
