"""Merge configuration: which merge mode, ordering fields, merger and markers a table merges with.

Hudi 1.1 reads three table versions through one reader, but they persist their merge settings
differently:

* **v9** stores ``hoodie.record.merge.mode`` (plus a strategy id for CUSTOM, a partial-update
  mode and ``hoodie.record.merge.property.*`` merge properties). The mode is read as it is.
* **v8** (Hudi 1.0) stores mode, strategy id and payload class; **v6** (Hudi 0.x) stores only a
  payload class and the 0.x strategy key. For both, Hudi 1.x *infers* the mode from mode, payload
  class and strategy id: v8 lets the strategy id decide, v6 the payload class, and the inputs must
  agree. :func:`hoodie.merge.resolve.resolve_merge_config` reproduces that inference, including
  its checks.

The reverse direction, what to persist for a new table, is :func:`merge_properties_for_new_table`
and :func:`v9_merge_properties_for_payload`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Any

import pyarrow as pa

from hoodie.config.table_config import RecordMergeMode, TableKeys, TableVersion
from hoodie.errors import InvalidTableConfigError, SchemaError, UnsupportedTableError

# -- strategy ids (HoodieRecordMerger constants) -------------------------------------------------

EVENT_TIME_STRATEGY_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"
COMMIT_TIME_STRATEGY_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
CUSTOM_STRATEGY_ID = "1897ef5f-18bc-4557-939c-9d6a8afd1519"
PAYLOAD_BASED_STRATEGY_ID = "00000000-0000-0000-0000-000000000000"
BUILTIN_STRATEGY_IDS = frozenset(
    {EVENT_TIME_STRATEGY_ID, COMMIT_TIME_STRATEGY_ID, CUSTOM_STRATEGY_ID, PAYLOAD_BASED_STRATEGY_ID}
)

# -- payload class names -------------------------------------------------------------------------

_MODEL = "org.apache.hudi.common.model."
OVERWRITE_WITH_LATEST_PAYLOAD = _MODEL + "OverwriteWithLatestAvroPayload"
DEFAULT_PAYLOAD = _MODEL + "DefaultHoodieRecordPayload"
EVENT_TIME_PAYLOAD = _MODEL + "EventTimeAvroPayload"
OVERWRITE_NON_DEFAULTS_PAYLOAD = _MODEL + "OverwriteNonDefaultsWithLatestAvroPayload"
PARTIAL_UPDATE_PAYLOAD = _MODEL + "PartialUpdateAvroPayload"
AWS_DMS_PAYLOAD = _MODEL + "AWSDmsAvroPayload"
MYSQL_DEBEZIUM_PAYLOAD = _MODEL + "debezium.MySqlDebeziumAvroPayload"
POSTGRES_DEBEZIUM_PAYLOAD = _MODEL + "debezium.PostgresDebeziumAvroPayload"

#: The payloads Hudi 1.1 replaces by a merge mode (RFC-97); v9 keeps them only as
#: ``hoodie.table.legacy.payload.class``.
DEPRECATED_PAYLOADS = frozenset(
    {
        OVERWRITE_WITH_LATEST_PAYLOAD,
        DEFAULT_PAYLOAD,
        EVENT_TIME_PAYLOAD,
        OVERWRITE_NON_DEFAULTS_PAYLOAD,
        PARTIAL_UPDATE_PAYLOAD,
        AWS_DMS_PAYLOAD,
        MYSQL_DEBEZIUM_PAYLOAD,
        POSTGRES_DEBEZIUM_PAYLOAD,
    }
)
_SHORT_PAYLOAD_NAMES = {name.rsplit(".", 1)[1]: name for name in DEPRECATED_PAYLOADS}

# -- property keys -------------------------------------------------------------------------------

MERGE_PROPERTY_PREFIX = TableKeys.MERGE_PROPERTY_PREFIX
DELETE_FIELD_KEY = "hoodie.payload.delete.field"
DELETE_MARKER_KEY = "hoodie.payload.delete.marker"
PAYLOAD_ORDERING_FIELD_KEY = "hoodie.payload.ordering.field"
WRITE_PAYLOAD_CLASS_KEY = "hoodie.datasource.write.payload.class"
V6_STRATEGY_KEY = "hoodie.compaction.record.merger.strategy"
#: Merge-property key of the FILL_UNAVAILABLE marker. The 1.1 enum documentation names this key;
#: development builds used the ``custom.marker`` spelling, and hudi-rs reads the short one. All are
#: accepted on read (see :data:`UNAVAILABLE_MARKER_KEYS`).
UNAVAILABLE_MARKER_KEY = "hoodie.write.partial.update.unavailable.value"
UNAVAILABLE_MARKER_KEYS = (
    UNAVAILABLE_MARKER_KEY,
    "hoodie.write.partial.update.custom.marker",
    "partial.update.unavailable.value",
)
DEBEZIUM_UNAVAILABLE_VALUE = "__debezium_unavailable_value"
MYSQL_DEBEZIUM_ORDERING_FIELDS = ("_event_bin_file", "_event_pos")


class PartialUpdateMode(StrEnum):
    """``hoodie.table.partial.update.mode`` (v9 only)."""

    IGNORE_DEFAULTS = "IGNORE_DEFAULTS"
    FILL_UNAVAILABLE = "FILL_UNAVAILABLE"

    @classmethod
    def parse(cls, raw: str | None) -> PartialUpdateMode | None:
        """The mode for a property value; ``None`` for absent/``NONE``. ``IGNORE_MARKERS`` is the
        pre-release name of FILL_UNAVAILABLE."""
        if raw is None or not raw.strip() or raw.strip().upper() == "NONE":
            return None
        value = raw.strip().upper()
        if value == "IGNORE_MARKERS":
            return cls.FILL_UNAVAILABLE
        try:
            return cls(value)
        except ValueError as e:
            raise UnsupportedTableError(
                f"unsupported {TableKeys.PARTIAL_UPDATE_MODE.key}={raw!r} "
                "(supported: IGNORE_DEFAULTS, FILL_UNAVAILABLE, IGNORE_MARKERS)"
            ) from e


class OrderingClass(StrEnum):
    """The Java class of an ordering value, as far as Hudi's merge rules care.

    Hudi compares ordering values with ``Comparable.compareTo`` and asks whether two values have the
    same class (a delete only loses to a record whose ordering value has the *same* class and is
    greater). Python ints cannot tell Integer from Long, so the class is tracked beside the value.
    Only ``Integer`` 0 is Hudi's "default" (commit-time) ordering value.
    """

    BOOLEAN = "Boolean"
    INTEGER = "Integer"
    LONG = "Long"
    FLOAT = "Float"
    DOUBLE = "Double"
    BYTES = "ByteBuffer"
    STRING = "String"
    DATE = "Date"
    DECIMAL = "BigDecimal"
    TIME = "Time"
    TIMESTAMP = "Timestamp"

    @classmethod
    def of(cls, name: str | OrderingClass) -> OrderingClass:
        """The class for a Java class name, a member name, or a delete record's Avro wrapper
        name (``IntWrapper``, ``LongWrapper``, ...)."""
        if isinstance(name, OrderingClass):
            return name
        found = _WRAPPER_CLASSES.get(name) or _WRAPPER_CLASSES.get(name.rsplit(".", 1)[-1])
        if found is None:
            found = cls.__members__.get(name.upper())
        if found is None:
            raise SchemaError(f"unknown ordering value class {name!r}")
        return found


_WRAPPER_CLASSES: dict[str, OrderingClass] = {
    **{member.value: member for member in OrderingClass},
    "BooleanWrapper": OrderingClass.BOOLEAN,
    "IntWrapper": OrderingClass.INTEGER,
    "LongWrapper": OrderingClass.LONG,
    "FloatWrapper": OrderingClass.FLOAT,
    "DoubleWrapper": OrderingClass.DOUBLE,
    "BytesWrapper": OrderingClass.BYTES,
    "StringWrapper": OrderingClass.STRING,
    "DateWrapper": OrderingClass.DATE,
    "LocalDateWrapper": OrderingClass.DATE,
    "DecimalWrapper": OrderingClass.DECIMAL,
    "TimeMicrosWrapper": OrderingClass.TIME,
    "TimestampMicrosWrapper": OrderingClass.TIMESTAMP,
}


def ordering_class_of_arrow(data_type: pa.DataType) -> OrderingClass:
    """The Java class Hudi sees for values of an Arrow column (int32 -> Integer, int64 -> Long, ...).

    A timestamp is a Long (of microseconds) and a date an Integer (of days): the engine's record
    holds them so (Spark's ``InternalRow``, Avro's raw values), and the deletes Spark writes for
    them carry a ``LongWrapper``/``IntWrapper`` (``HoodieAvroUtils.wrapValueIntoAvro``)."""
    t = data_type
    if pa.types.is_timestamp(t):
        return OrderingClass.LONG
    if pa.types.is_date(t):
        return OrderingClass.INTEGER
    if pa.types.is_boolean(t):
        return OrderingClass.BOOLEAN
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return OrderingClass.INTEGER
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return OrderingClass.INTEGER
    if pa.types.is_integer(t):
        return OrderingClass.LONG
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return OrderingClass.FLOAT
    if pa.types.is_float64(t):
        return OrderingClass.DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return OrderingClass.STRING
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return OrderingClass.BYTES
    if pa.types.is_binary_view(t):
        return OrderingClass.BYTES
    if pa.types.is_date(t):
        return OrderingClass.DATE
    if pa.types.is_decimal(t):
        return OrderingClass.DECIMAL
    if pa.types.is_timestamp(t):
        return OrderingClass.TIMESTAMP
    if pa.types.is_time(t):
        return OrderingClass.TIME
    raise SchemaError(f"a column of type {t} cannot be an ordering field")


def canonical_payload_class(name: str | None) -> str | None:
    """The fully qualified payload class for ``name``: short names of Hudi's payloads are expanded,
    and ``com.uber.hoodie`` (pre-Apache tables) is renamed as Hudi does."""
    if name is None or not name.strip():
        return None
    name = name.strip().replace("com.uber.hoodie", "org.apache.hudi")
    return _SHORT_PAYLOAD_NAMES.get(name, name)


@dataclass(frozen=True)
class MergeConfig:
    """Everything the merge engine needs to know about how a table merges records.

    ``ordering_fields`` is empty for COMMIT_TIME_ORDERING. ``props`` holds the merged properties
    (table properties, then write properties, then the un-prefixed
    ``hoodie.record.merge.property.*`` entries). ``field_defaults`` maps top-level field names to
    their schema default (the Java value ``toJavaDefaultValue`` gives); fields not listed default to
    null. Only IGNORE_DEFAULTS and OverwriteNonDefaultsWithLatestAvroPayload read it.
    ``ordering_types`` gives the Java class of each ordering field (from the table schema, see
    :meth:`with_schema`); without it the class is guessed from the Python value (int -> Long).
    """

    mode: RecordMergeMode
    ordering_fields: tuple[str, ...] = ()
    strategy_id: str | None = None
    payload_class: str | None = None
    partial_update_mode: PartialUpdateMode | None = None
    delete_field: str | None = None
    delete_marker: str | None = None
    unavailable_marker: str | None = None
    props: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False, repr=False)
    table_version: TableVersion = TableVersion.NINE
    field_defaults: Mapping[str, Any] = field(
        default_factory=lambda: MappingProxyType({}), hash=False, repr=False
    )
    ordering_types: Mapping[str, OrderingClass] = field(
        default_factory=lambda: MappingProxyType({}), hash=False, repr=False
    )

    def with_schema(self, schema: pa.Schema, field_defaults: Mapping[str, Any] | None = None) -> MergeConfig:
        """This config with the ordering-field classes taken from ``schema`` (and, if given, the
        schema's top-level field defaults)."""
        types = {
            f: ordering_class_of_arrow(schema.field(f).type)
            for f in self.ordering_fields
            if f in schema.names
        }
        defaults = self.field_defaults if field_defaults is None else field_defaults
        return replace(self, ordering_types=types, field_defaults=defaults)

    def __post_init__(self) -> None:
        if (self.delete_field is None) != (self.delete_marker is None):
            raise InvalidTableConfigError(
                f"{DELETE_FIELD_KEY}={self.delete_field!r} and {DELETE_MARKER_KEY}={self.delete_marker!r} "
                "must be set together"
            )
        if self.mode is RecordMergeMode.COMMIT_TIME_ORDERING and self.ordering_fields:
            object.__setattr__(self, "ordering_fields", ())
        if not isinstance(self.props, MappingProxyType):
            object.__setattr__(self, "props", MappingProxyType(dict(self.props)))
        if not isinstance(self.field_defaults, MappingProxyType):
            object.__setattr__(self, "field_defaults", MappingProxyType(dict(self.field_defaults)))
        types = {k: OrderingClass.of(v) for k, v in self.ordering_types.items()}
        object.__setattr__(self, "ordering_types", MappingProxyType(types))


# -- inference -------------------------------------------------------------------------------------


def mode_for_payload(payload_class: str | None) -> RecordMergeMode | None:
    """The merge mode a payload class implies (``inferRecordMergeModeFromPayloadClass``)."""
    payload = canonical_payload_class(payload_class)
    if payload is None:
        return None
    if payload in (DEFAULT_PAYLOAD, EVENT_TIME_PAYLOAD):
        return RecordMergeMode.EVENT_TIME_ORDERING
    if payload == OVERWRITE_WITH_LATEST_PAYLOAD:
        return RecordMergeMode.COMMIT_TIME_ORDERING
    return RecordMergeMode.CUSTOM


def mode_for_strategy_id(strategy_id: str | None) -> RecordMergeMode | None:
    """The merge mode a strategy id implies (``inferRecordMergeModeFromMergeStrategyId``)."""
    if not strategy_id:
        return None
    if strategy_id == EVENT_TIME_STRATEGY_ID:
        return RecordMergeMode.EVENT_TIME_ORDERING
    if strategy_id == COMMIT_TIME_STRATEGY_ID:
        return RecordMergeMode.COMMIT_TIME_ORDERING
    return RecordMergeMode.CUSTOM


def strategy_id_for_mode(
    mode: RecordMergeMode, payload_class: str | None, strategy_id: str | None, version: TableVersion
) -> str | None:
    """The strategy id stored for a mode (``HoodieRecordMerger.getRecordMergeStrategyId``)."""
    if mode is RecordMergeMode.COMMIT_TIME_ORDERING:
        return COMMIT_TIME_STRATEGY_ID
    if mode is RecordMergeMode.EVENT_TIME_ORDERING:
        return EVENT_TIME_STRATEGY_ID
    if version >= TableVersion.EIGHT:
        if strategy_id:
            return strategy_id
        return PAYLOAD_BASED_STRATEGY_ID if payload_class else None
    return PAYLOAD_BASED_STRATEGY_ID if payload_class else strategy_id


def _payload_for_mode(mode: RecordMergeMode, payload_class: str | None) -> str | None:
    if mode is RecordMergeMode.EVENT_TIME_ORDERING:
        return EVENT_TIME_PAYLOAD if payload_class == EVENT_TIME_PAYLOAD else DEFAULT_PAYLOAD
    if mode is RecordMergeMode.COMMIT_TIME_ORDERING:
        return OVERWRITE_WITH_LATEST_PAYLOAD
    return payload_class


def infer_pre_v9_merge_configs(
    mode: RecordMergeMode | None,
    payload_class: str | None,
    strategy_id: str | None,
    ordering_fields: Sequence[str],
    version: TableVersion,
) -> tuple[RecordMergeMode, str | None, str | None]:
    """Hudi 1.x's inference of (mode, payload class, strategy id) for tables below v9, with its
    agreement checks (``HoodieTableConfig.inferMergingConfigsForPreV9Table``).

    Raises :class:`InvalidTableConfigError` naming the values when the inputs contradict each other.
    """
    payload = canonical_payload_class(payload_class)
    strategy = strategy_id or None
    if payload is None and strategy is None:
        if mode is not None:
            inferred = mode
        elif ordering_fields:
            inferred = RecordMergeMode.EVENT_TIME_ORDERING
        else:
            inferred = RecordMergeMode.COMMIT_TIME_ORDERING
    else:
        by_payload = mode_for_payload(payload)
        by_strategy = mode_for_strategy_id(strategy)
        if (
            version >= TableVersion.EIGHT
            and by_strategy is not None
            and by_strategy is not RecordMergeMode.CUSTOM
            and by_payload is not None
            and by_payload is not by_strategy
        ):
            raise InvalidTableConfigError(
                f"payload class {payload} implies {by_payload.value} but merge strategy id {strategy} "
                f"implies {by_strategy.value}; set only one of them"
            )
        if version >= TableVersion.EIGHT:
            chosen = by_strategy if by_strategy is not None else by_payload
        else:
            chosen = by_payload if by_payload is not None else by_strategy
        assert chosen is not None
        inferred = chosen
    if mode is not None and mode is not inferred:
        raise InvalidTableConfigError(
            f"{TableKeys.MERGE_MODE.key}={mode.value} is inconsistent with payload class {payload} "
            f"and merge strategy id {strategy} (they imply {inferred.value})"
        )
    inferred_payload = _payload_for_mode(inferred, payload)
    inferred_strategy = strategy_id_for_mode(inferred, inferred_payload, strategy, version)
    if inferred is RecordMergeMode.CUSTOM:
        if not inferred_payload and not inferred_strategy:
            raise InvalidTableConfigError("CUSTOM merge mode needs a payload class or a merge strategy id")
        if inferred_strategy == PAYLOAD_BASED_STRATEGY_ID and not inferred_payload:
            raise InvalidTableConfigError(
                f"merge strategy id {PAYLOAD_BASED_STRATEGY_ID} (payload based) needs a payload class"
            )
        if not inferred_payload:
            inferred_payload = DEFAULT_PAYLOAD
    return inferred, inferred_payload, inferred_strategy


# -- what to persist -------------------------------------------------------------------------------


def v9_merge_properties_for_payload(payload_class: str) -> dict[str, str]:
    """The table properties Hudi 1.1 persists for a v9 table created or upgraded with a payload.

    The eight deprecated payloads become a merge mode: the class moves to
    ``hoodie.table.legacy.payload.class`` and the mode, its strategy id, a partial-update mode and
    merge properties replace it (RFC-97; ``EightToNineUpgradeHandler``). Any other payload keeps
    ``hoodie.compaction.payload.class`` under CUSTOM mode with the payload-based strategy id.
    """
    payload = canonical_payload_class(payload_class)
    if payload is None:
        raise InvalidTableConfigError("an empty payload class name")
    if payload not in DEPRECATED_PAYLOADS:
        return {
            TableKeys.MERGE_MODE.key: RecordMergeMode.CUSTOM.value,
            TableKeys.PAYLOAD_CLASS.key: payload,
            TableKeys.MERGE_STRATEGY_ID.key: PAYLOAD_BASED_STRATEGY_ID,
        }
    commit_time = payload in (OVERWRITE_WITH_LATEST_PAYLOAD, OVERWRITE_NON_DEFAULTS_PAYLOAD, AWS_DMS_PAYLOAD)
    mode = RecordMergeMode.COMMIT_TIME_ORDERING if commit_time else RecordMergeMode.EVENT_TIME_ORDERING
    out = {
        TableKeys.MERGE_MODE.key: mode.value,
        TableKeys.MERGE_STRATEGY_ID.key: COMMIT_TIME_STRATEGY_ID if commit_time else EVENT_TIME_STRATEGY_ID,
        TableKeys.LEGACY_PAYLOAD_CLASS.key: payload,
    }
    if payload in (PARTIAL_UPDATE_PAYLOAD, OVERWRITE_NON_DEFAULTS_PAYLOAD):
        out[TableKeys.PARTIAL_UPDATE_MODE.key] = PartialUpdateMode.IGNORE_DEFAULTS.value
    elif payload == POSTGRES_DEBEZIUM_PAYLOAD:
        out[TableKeys.PARTIAL_UPDATE_MODE.key] = PartialUpdateMode.FILL_UNAVAILABLE.value
        out[MERGE_PROPERTY_PREFIX + UNAVAILABLE_MARKER_KEY] = DEBEZIUM_UNAVAILABLE_VALUE
    if payload == AWS_DMS_PAYLOAD:
        out[MERGE_PROPERTY_PREFIX + DELETE_FIELD_KEY] = "Op"
        out[MERGE_PROPERTY_PREFIX + DELETE_MARKER_KEY] = "D"
    if payload == MYSQL_DEBEZIUM_PAYLOAD:
        out[TableKeys.ORDERING_FIELDS.key] = ",".join(MYSQL_DEBEZIUM_ORDERING_FIELDS)
    return out


def merge_properties_for_new_table(
    mode: RecordMergeMode,
    ordering_fields: Sequence[str],
    table_version: TableVersion,
    payload_class: str | None = None,
    strategy_id: str | None = None,
) -> dict[str, str]:
    """The merge-related ``hoodie.properties`` entries of a new table of ``table_version``.

    * v6 (as 0.14/0.15 write): ``hoodie.compaction.payload.class`` and
      ``hoodie.compaction.record.merger.strategy`` (the 0.x default is the event-time id, whatever
      the payload), plus ``hoodie.table.precombine.field``. No mode key: 1.x infers it from the
      payload, so the payload must imply ``mode``.
    * v8 (as 1.0 writes): mode, strategy id and payload class, all three, plus the precombine field.
    * v9 (as 1.1 writes): the mode, a strategy id only for CUSTOM, and
      ``hoodie.table.ordering.fields``; a payload class goes through
      :func:`v9_merge_properties_for_payload`. (Hudi's table builder also stores the built-in id
      for EVENT/COMMIT_TIME; the v9 tables Hudi 1.1 wrote in the fixtures carry only the mode.)

    Raises :class:`InvalidTableConfigError` when the arguments contradict each other, or when a
    v6/v8 table is given more than one ordering field (multiple fields arrived with 1.1).
    """
    fields = tuple(f for f in ordering_fields if f)
    payload = canonical_payload_class(payload_class)
    strategy = strategy_id or None
    out: dict[str, str] = {}
    if table_version < TableVersion.NINE:
        if len(fields) > 1:
            raise InvalidTableConfigError(
                f"table version {int(table_version)} supports one ordering field, got {','.join(fields)}"
            )
        if fields:
            out[TableKeys.ORDERING_FIELDS.alternatives[0]] = fields[0]
    elif fields:
        out[TableKeys.ORDERING_FIELDS.key] = ",".join(fields)

    if table_version is TableVersion.SIX:
        if payload is None:
            payload = _payload_for_mode(mode, None)
            if payload is None:
                payload = DEFAULT_PAYLOAD
        v6_strategy = (
            strategy if strategy not in (None, PAYLOAD_BASED_STRATEGY_ID) else EVENT_TIME_STRATEGY_ID
        )
        inferred, _, _ = infer_pre_v9_merge_configs(None, payload, v6_strategy, fields, table_version)
        if inferred is not mode:
            raise InvalidTableConfigError(
                f"a v6 table with payload class {payload} merges with {inferred.value}, not {mode.value}"
            )
        out[TableKeys.PAYLOAD_CLASS.key] = payload
        out[V6_STRATEGY_KEY] = v6_strategy
        return out

    if table_version is TableVersion.EIGHT:
        inferred, inferred_payload, inferred_strategy = infer_pre_v9_merge_configs(
            mode, payload, strategy, fields, table_version
        )
        out[TableKeys.MERGE_MODE.key] = inferred.value
        if inferred_payload is not None:
            out[TableKeys.PAYLOAD_CLASS.key] = inferred_payload
        if inferred_strategy is not None:
            out[TableKeys.MERGE_STRATEGY_ID.key] = inferred_strategy
        return out

    if payload is not None and (strategy is None or strategy in BUILTIN_STRATEGY_IDS):
        by_payload = v9_merge_properties_for_payload(payload)
        if by_payload[TableKeys.MERGE_MODE.key] != mode.value:
            raise InvalidTableConfigError(
                f"payload class {payload} maps to {by_payload[TableKeys.MERGE_MODE.key]} on a v9 table, "
                f"not {mode.value}"
            )
        if TableKeys.ORDERING_FIELDS.key in by_payload:
            out.pop(TableKeys.ORDERING_FIELDS.key, None)
        out.update(by_payload)
        return out
    out[TableKeys.MERGE_MODE.key] = mode.value
    if mode is RecordMergeMode.CUSTOM:
        if strategy is None:
            raise InvalidTableConfigError("a CUSTOM v9 table needs a merge strategy id or a payload class")
        out[TableKeys.MERGE_STRATEGY_ID.key] = strategy
    elif strategy is not None and mode_for_strategy_id(strategy) is not mode:
        raise InvalidTableConfigError(f"merge strategy id {strategy} contradicts {mode.value}")
    return out
