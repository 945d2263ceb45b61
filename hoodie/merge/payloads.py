"""Hudi's legacy record payloads, with the semantics of Hudi 1.x.

A payload decides how two versions of a record combine. Tables of version 6 and 8 that name a
payload other than ``DefaultHoodieRecordPayload``, ``EventTimeAvroPayload`` or
``OverwriteWithLatestAvroPayload`` merge in CUSTOM mode through these (the payload-based record
merger); v9 tables replace the eight built-in payloads by merge modes.

Each payload is a stateless object with three operations, where ``incoming``/``older``/``newer``
is a :class:`BufferedRecord` (or a plain row, or ``None`` for an empty payload, i.e. a delete):

* ``pre_combine(older, newer, ctx)``: which of two duplicates survives (writer dedup; 0.x readers
  also used it between log records). Returns ``older``, ``newer`` or a new record.
* ``combine_and_get_update_value(current, incoming, ctx)``: the stored row ``current`` updated by
  ``incoming``; ``None`` deletes the record. Returning ``current`` itself means "keep it".
* ``get_insert_value(incoming, ctx)``: the row to insert, or ``None`` for a delete.

The 0.x behaviour differs in places; each class says where.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from hoodie.errors import InvalidInputError, UnsupportedTableError
from hoodie.merge.config import (
    AWS_DMS_PAYLOAD,
    DEBEZIUM_UNAVAILABLE_VALUE,
    DEFAULT_PAYLOAD,
    DELETE_FIELD_KEY,
    DELETE_MARKER_KEY,
    EVENT_TIME_PAYLOAD,
    MYSQL_DEBEZIUM_PAYLOAD,
    OVERWRITE_NON_DEFAULTS_PAYLOAD,
    OVERWRITE_WITH_LATEST_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    PAYLOAD_ORDERING_FIELD_KEY,
    POSTGRES_DEBEZIUM_PAYLOAD,
    MergeConfig,
    canonical_payload_class,
)
from hoodie.merge.records import (
    BufferedRecord,
    Row,
    compare_ordering,
    java_string,
    ordering_class_of_value,
    ordering_value,
    same_ordering_class,
)
from hoodie.schema.meta_fields import (
    COMMIT_TIME_METADATA_FIELD,
    HOODIE_IS_DELETED_FIELD,
    HOODIE_META_COLUMNS,
    OPERATION_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
)

PayloadRecord = BufferedRecord | Mapping[str, Any] | None

_ORDERING_FIELD_KEYS = (
    PAYLOAD_ORDERING_FIELD_KEY,
    "hoodie.datasource.write.precombine.field",
    "hoodie.table.ordering.fields",
    "hoodie.table.precombine.field",
)


def as_payload_record(record: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
    """A payload input as a record: rows get their ordering value from ``ctx``; ``None`` is an
    empty (delete) payload with the default ordering value."""
    if isinstance(record, BufferedRecord):
        return record
    if record is None:
        return BufferedRecord("", None, is_delete=True)
    row = dict(record) if not isinstance(record, dict) else record
    return BufferedRecord.from_row(str(row.get(RECORD_KEY_METADATA_FIELD, "")), row, ctx, is_delete=False)


def is_builtin_delete(values: Mapping[str, Any]) -> bool:
    """``BaseAvroPayload.isDeleteRecord``: ``_hoodie_is_deleted`` is true when the row has that
    field (``_hoodie_operation`` is then ignored), else ``_hoodie_operation`` is ``D``."""
    if HOODIE_IS_DELETED_FIELD in values:
        return values[HOODIE_IS_DELETED_FIELD] is True
    if OPERATION_METADATA_FIELD in values:
        return values[OPERATION_METADATA_FIELD] is not None and str(values[OPERATION_METADATA_FIELD]) == "D"
    return False


def _ordering_pre_combine(older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
    """The ordering-based ``preCombine``: an empty older payload loses; otherwise the older
    duplicate survives only with a strictly greater ordering value."""
    if older.values is None:
        return newer
    return older if compare_ordering(older.ordering, newer.ordering) > 0 else newer


def _payload_ordering_fields(ctx: MergeConfig) -> tuple[str, ...]:
    if ctx.ordering_fields:
        return ctx.ordering_fields
    for key in _ORDERING_FIELD_KEYS:
        raw = ctx.props.get(key)
        if raw:
            return tuple(f.strip() for f in raw.split(",") if f.strip())
    return ()


class RecordPayload(ABC):
    """A payload class: how an incoming record combines with a stored one and with a duplicate."""

    class_name: ClassVar[str]

    def is_delete(self, values: Mapping[str, Any], ctx: MergeConfig) -> bool:
        """Whether a (non-empty) incoming row deletes the record."""
        return is_builtin_delete(values)

    @abstractmethod
    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        """The duplicate that survives: ``older``, ``newer`` or a new record."""

    def get_insert_value(self, incoming: PayloadRecord, ctx: MergeConfig) -> Row | None:
        """The row to write for ``incoming`` alone; ``None`` for an empty or deleted payload."""
        values = as_payload_record(incoming, ctx).values
        if values is None or self.is_delete(values, ctx):
            return None
        return values

    @abstractmethod
    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        """``current`` updated by ``incoming``: ``current`` itself to keep it, ``None`` to delete."""


class OverwriteWithLatestAvroPayload(RecordPayload):
    """The incoming record always replaces the stored one; an empty or deleted one deletes it.

    ``pre_combine`` returns the newer duplicate (Hudi 1.0+, HUDI-8521). In 0.x it kept the older
    duplicate when its ordering value was strictly greater (ties to the newer), and 0.x readers used
    that between log records, so 0.x ordered even this payload's log records by ordering value.
    """

    class_name = OVERWRITE_WITH_LATEST_PAYLOAD

    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        return as_payload_record(newer, ctx)

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        return self.get_insert_value(incoming, ctx)


class DefaultHoodieRecordPayload(OverwriteWithLatestAvroPayload):
    """Event-time ordering: the stored row survives an incoming row with a smaller ordering value.

    Ties go to the incoming row, and a stored row without an ordering value always loses. An empty
    incoming payload (a delete without a row) always deletes. Deletes are the custom marker
    (``hoodie.payload.delete.field``/``.marker``, exact string match) when one is configured,
    otherwise ``_hoodie_is_deleted``/``_hoodie_operation``. 0.x read the ordering field from
    ``hoodie.payload.ordering.field`` only and returned an empty payload before comparing; the
    results are the same. The event-time metadata (``hoodie.payload.event.time.field``) of 0.x/1.0
    does not affect merge results and is not modelled.
    """

    class_name = DEFAULT_PAYLOAD

    def is_delete(self, values: Mapping[str, Any], ctx: MergeConfig) -> bool:
        field = ctx.props.get(DELETE_FIELD_KEY) or ctx.delete_field
        if not field:
            return is_builtin_delete(values)
        marker = ctx.props.get(DELETE_MARKER_KEY) or ctx.delete_marker
        if not marker:
            raise InvalidInputError(f"{DELETE_MARKER_KEY} must be set with {DELETE_FIELD_KEY}={field}")
        value = values.get(field)
        return value is not None and java_string(value) == marker

    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        return _ordering_pre_combine(as_payload_record(older, ctx), as_payload_record(newer, ctx))

    def needs_update(self, current: Mapping[str, Any], incoming: BufferedRecord, ctx: MergeConfig) -> bool:
        """``needUpdatingPersistedRecord``: the incoming row replaces ``current`` unless
        ``current``'s ordering value is strictly greater."""
        fields = _payload_ordering_fields(ctx)
        if not fields or incoming.values is None:
            return True
        if len(fields) == 1 and current.get(fields[0]) is None:
            return True
        persisted = ordering_value(current, fields)
        return compare_ordering(persisted, ordering_value(incoming.values, fields)) <= 0

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        record = as_payload_record(incoming, ctx)
        if not self.needs_update(current, record, ctx):
            return current
        if record.values is None or self.is_delete(record.values, ctx):
            return None
        return record.values


class EventTimeAvroPayload(DefaultHoodieRecordPayload):
    """``DefaultHoodieRecordPayload`` without the custom delete marker: a deleted or empty incoming
    payload deletes whatever the ordering values; otherwise the stored row survives a smaller
    incoming ordering value."""

    class_name = EVENT_TIME_PAYLOAD

    def is_delete(self, values: Mapping[str, Any], ctx: MergeConfig) -> bool:
        return is_builtin_delete(values)

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        record = as_payload_record(incoming, ctx)
        if record.values is None or self.is_delete(record.values, ctx):
            return None
        return record.values if self.needs_update(current, record, ctx) else current


def _java_equals(value: Any, default: Any) -> bool:
    if isinstance(value, bool) != isinstance(default, bool):
        return False
    return bool(value == default)


class OverwriteNonDefaultsWithLatestAvroPayload(OverwriteWithLatestAvroPayload):
    """The incoming row overwrites only the fields where it does not hold the field's default.

    A field whose schema default is null (or that has none) keeps the stored value when the
    incoming value is null; other fields keep it when the incoming value equals the default
    (``Objects.equals``; defaults come from ``MergeConfig.field_defaults``). The result has the
    incoming row's fields. ``pre_combine`` is inherited: the newer duplicate in 1.x, ordering-based
    in 0.x. v9 replaces this payload by COMMIT_TIME + IGNORE_DEFAULTS, which compares by reference.
    """

    class_name = OVERWRITE_NON_DEFAULTS_PAYLOAD

    def keeps_other(self, value: Any, field: str, ctx: MergeConfig) -> bool:
        """``overwriteField``: whether ``value`` counts as "not set" for ``field``."""
        default = ctx.field_defaults.get(field)
        return value is None if default is None else _java_equals(value, default)

    def merge_rows(self, base: Mapping[str, Any], other: Mapping[str, Any], ctx: MergeConfig) -> Row | None:
        """``base``'s set values, ``other``'s where ``base`` has none; ``None`` if ``base`` is a delete."""
        if self.is_delete(base, ctx):
            return None
        return {f: other.get(f) if self.keeps_other(v, f, ctx) else v for f, v in base.items()}

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        insert = self.get_insert_value(incoming, ctx)
        return None if insert is None else self.merge_rows(insert, current, ctx)


class PartialUpdateAvroPayload(OverwriteNonDefaultsWithLatestAvroPayload):
    """Null fields never overwrite: the record with the greater ordering value wins field by field,
    and the other record fills its nulls.

    ``pre_combine``: the strictly greater ordering value wins (ties to the newer), the merged row
    carries the winner's ordering value; an empty older payload, or an incoming delete, yields the
    newer record. ``combine_and_get_update_value``: the stored row counts as newer only when
    ``hoodie.payload.ordering.field`` (here falling back to the table's first ordering field) holds
    a value of the same class that is strictly greater than the incoming ordering value; then its
    data fields win but the meta fields (``_hoodie_commit_time``, ...) come from the incoming row.
    v9 replaces this payload by EVENT_TIME + IGNORE_DEFAULTS.
    """

    class_name = PARTIAL_UPDATE_PAYLOAD

    def keeps_other(self, value: Any, field: str, ctx: MergeConfig) -> bool:
        return value is None

    def _merge_old(
        self, old: Row, incoming: BufferedRecord, old_is_newer: bool, ctx: MergeConfig
    ) -> Row | None:
        insert = self.get_insert_value(incoming, ctx)
        if insert is None:
            return None
        if not old_is_newer:
            return self.merge_rows(insert, old, ctx)
        if COMMIT_TIME_METADATA_FIELD not in insert:
            return self.merge_rows(old, insert, ctx)
        if self.is_delete(old, ctx):
            return None
        merged: Row = {}
        for f in insert:
            first, second = (insert, old) if f in HOODIE_META_COLUMNS else (old, insert)
            value = first.get(f)
            merged[f] = second.get(f) if value is None else value
        return merged

    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        old = as_payload_record(older, ctx)
        new = as_payload_record(newer, ctx)
        if old.values is None:
            return new
        pick_old = compare_ordering(old.ordering, new.ordering) > 0
        merged = self._merge_old(old.values, new, pick_old, ctx)
        if merged is None:
            return new
        winner = old if pick_old else new
        return BufferedRecord(new.key, merged, winner.ordering, winner.ordering_class, False, None)

    def _stored_is_newer(
        self, current: Mapping[str, Any], incoming: BufferedRecord, ctx: MergeConfig
    ) -> bool:
        field = ctx.props.get(PAYLOAD_ORDERING_FIELD_KEY) or next(iter(_payload_ordering_fields(ctx)), None)
        if not field:
            return False
        stored = current.get(field)
        if stored is None:
            return False
        klass = ctx.ordering_types.get(field) or ordering_class_of_value(stored)
        return (
            same_ordering_class(klass, incoming.ordering_class)
            and compare_ordering(stored, incoming.ordering) > 0
        )

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        record = as_payload_record(incoming, ctx)
        return self._merge_old(current, record, self._stored_is_newer(current, record, ctx), ctx)


class _DebeziumPayload(OverwriteWithLatestAvroPayload):
    """Common part of the Debezium payloads (``AbstractDebeziumAvroPayload``).

    A row is a delete when ``_change_operation_type`` is ``d`` (any case) or by the built-in flags.
    The stored row wins when the source position says it is later (``should_pick_current``).
    ``pre_combine`` is ordering-based (in 0.x too).
    """

    OP_FIELD: ClassVar[str] = "_change_operation_type"

    def is_delete(self, values: Mapping[str, Any], ctx: MergeConfig) -> bool:
        op = values.get(self.OP_FIELD)
        return (op is not None and java_string(op).lower() == "d") or is_builtin_delete(values)

    @abstractmethod
    def should_pick_current(self, current: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
        """Whether the stored row is later than the incoming one at the source."""

    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        return _ordering_pre_combine(as_payload_record(older, ctx), as_payload_record(newer, ctx))

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        record = as_payload_record(incoming, ctx)
        if record.values is None:
            return None
        if self.should_pick_current(current, record.values):
            return current
        return self.get_insert_value(record, ctx)


def _binlog_position(seq: str) -> tuple[int, int]:
    parts = seq.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError) as e:
        raise InvalidInputError(f"MySQL Debezium sequence {seq!r} is not '<file>.<position>'") from e


def is_current_seq_latest(current_seq: str, new_seq: str) -> bool:
    """Whether the binlog position ``current_seq`` (``file.pos``) is strictly after ``new_seq``;
    file numbers compare first, then positions, both as numbers. Equal -> False (new wins)."""
    return _binlog_position(new_seq) < _binlog_position(current_seq)


class MySqlDebeziumAvroPayload(_DebeziumPayload):
    """MySQL CDC: the row with the later binlog position (``_event_seq`` = ``file.pos``) wins.

    A stored row without ``_event_seq`` (bootstrapped) loses; an incoming row without it is an
    error. ``pre_combine`` compares the duplicates' ordering values as ``file.pos`` strings
    (a two-field ordering value is joined with ``.``). v9 replaces this payload by EVENT_TIME over
    ``_event_bin_file,_event_pos``.
    """

    class_name = MYSQL_DEBEZIUM_PAYLOAD
    SEQ_FIELD: ClassVar[str] = "_event_seq"

    def should_pick_current(self, current: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
        new_seq = incoming.get(self.SEQ_FIELD)
        if new_seq is None:
            raise InvalidInputError(f"{self.SEQ_FIELD} cannot be null in an incoming MySQL Debezium record")
        current_seq = current.get(self.SEQ_FIELD)
        if current_seq is None:
            return False
        return is_current_seq_latest(str(current_seq), str(new_seq))

    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        old = as_payload_record(older, ctx)
        new = as_payload_record(newer, ctx)
        if old.values is None:
            return new

        def seq(value: Any) -> str:
            return ".".join(map(str, value)) if isinstance(value, tuple) else java_string(value)

        return old if is_current_seq_latest(seq(old.ordering), seq(new.ordering)) else new


class PostgresDebeziumAvroPayload(_DebeziumPayload):
    """Postgres CDC: the row with the greater ``_event_lsn`` wins (ties to the incoming row); an
    incoming string or bytes value equal to ``__debezium_unavailable_value`` (a TOASTed column the
    source did not send) keeps the stored value. v9 replaces this payload by EVENT_TIME +
    FILL_UNAVAILABLE."""

    class_name = POSTGRES_DEBEZIUM_PAYLOAD
    LSN_FIELD: ClassVar[str] = "_event_lsn"

    def should_pick_current(self, current: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
        new_lsn = incoming.get(self.LSN_FIELD)
        if new_lsn is None:
            raise InvalidInputError(
                f"{self.LSN_FIELD} cannot be null in an incoming Postgres Debezium record"
            )
        current_lsn = current.get(self.LSN_FIELD)
        return current_lsn is not None and new_lsn < current_lsn

    def combine_and_get_update_value(
        self, current: Row, incoming: PayloadRecord, ctx: MergeConfig
    ) -> Row | None:
        result = super().combine_and_get_update_value(current, incoming, ctx)
        if result is None:
            return None
        toasted = [
            f
            for f, v in result.items()
            if isinstance(v, str | bytes) and java_string(v) == DEBEZIUM_UNAVAILABLE_VALUE
        ]
        if not toasted:
            return result
        return {**result, **{f: current.get(f) for f in toasted}}


class AWSDmsAvroPayload(OverwriteWithLatestAvroPayload):
    """AWS DMS: the incoming row always wins, unless ``Op`` is ``D`` (any case), which deletes.

    There is no ordering check against the stored row. ``pre_combine`` is ordering-based. v9
    replaces this payload by COMMIT_TIME with delete marker ``Op``/``D``, which is case-sensitive.
    """

    class_name = AWS_DMS_PAYLOAD
    OP_FIELD: ClassVar[str] = "Op"

    def is_delete(self, values: Mapping[str, Any], ctx: MergeConfig) -> bool:
        op = values.get(self.OP_FIELD)
        return (op is not None and java_string(op).upper() == "D") or is_builtin_delete(values)

    def pre_combine(self, older: PayloadRecord, newer: PayloadRecord, ctx: MergeConfig) -> BufferedRecord:
        return _ordering_pre_combine(as_payload_record(older, ctx), as_payload_record(newer, ctx))


_PAYLOADS: dict[str, RecordPayload] = {}
for _payload in (
    OverwriteWithLatestAvroPayload(),
    DefaultHoodieRecordPayload(),
    EventTimeAvroPayload(),
    OverwriteNonDefaultsWithLatestAvroPayload(),
    PartialUpdateAvroPayload(),
    MySqlDebeziumAvroPayload(),
    PostgresDebeziumAvroPayload(),
    AWSDmsAvroPayload(),
):
    _PAYLOADS[_payload.class_name] = _payload
    _PAYLOADS[_payload.class_name.rsplit(".", 1)[1]] = _payload


def payload_for(class_name: str) -> RecordPayload:
    """The payload for a Java class name (fully qualified, short, or ``com.uber.hoodie``)."""
    canonical = canonical_payload_class(class_name)
    payload = _PAYLOADS.get(canonical) if canonical is not None else None
    if payload is None:
        raise UnsupportedTableError(
            f"unsupported payload class {class_name!r} (supported: "
            + ", ".join(sorted(n for n in _PAYLOADS if "." in n))
            + ")"
        )
    return payload


def payload_class_names() -> frozenset[str]:
    """The fully qualified names of the supported payload classes."""
    return frozenset(n for n in _PAYLOADS if "." in n)
