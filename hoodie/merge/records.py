"""The per-record (reference) merge engine: Hudi 1.1's file-group reader, one record at a time.

Rows are plain dicts with the Python values ``pyarrow``'s ``to_pylist`` produces. A
:class:`BufferedRecord` is one version of a record: its key, its row (``None`` for a delete-block
entry), its ordering value and whether it is a delete. :func:`hoodie.merge.buffer.merge_file_group`
merges a file slice exactly as ``HoodieFileGroupReader`` does:

1. every log entry, in processing order, is delta-merged into a key -> record buffer;
2. the base file is streamed in order, each row final-merged with its key's buffered record;
3. the remaining (log-only) records are emitted unless they are deletes.

Because logs are folded first and the base last, EVENT_TIME ordering is *not* "the greatest
ordering value wins": a commit-time delete (a delete whose ordering value is the default Integer 0,
as SQL DELETE writes) resets a key so that a later, lower-ordered update lands in the buffer and
then loses to the base row, which is emitted again.
"""

from __future__ import annotations

import datetime as dt
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from hoodie.errors import SchemaError
from hoodie.merge.config import (
    MergeConfig,
    OrderingClass,
    PartialUpdateMode,
)
from hoodie.schema.meta_fields import HOODIE_IS_DELETED_FIELD, OPERATION_METADATA_FIELD

Row = dict[str, Any]
OrderingClasses = OrderingClass | tuple[OrderingClass, ...]

#: ``HoodieOperation`` names, and whether each marks a delete.
_OPERATIONS = {"I": False, "U": False, "-U": True, "D": True}
#: Hudi's default ordering value (``HoodieRecord.DEFAULT_ORDERING_VALUE``): the Java Integer 0.
DEFAULT_ORDERING_VALUE = 0


# -- ordering values ---------------------------------------------------------------------------


def ordering_class_of_value(value: Any) -> OrderingClass:
    """The Java class Hudi would see for a Python value when no column type is known (int -> Long)."""
    if isinstance(value, bool):
        return OrderingClass.BOOLEAN
    if isinstance(value, int):
        return OrderingClass.LONG
    if isinstance(value, float):
        return OrderingClass.DOUBLE
    if isinstance(value, str):
        return OrderingClass.STRING
    if isinstance(value, bytes | bytearray | memoryview):
        return OrderingClass.BYTES
    if isinstance(value, Decimal):
        return OrderingClass.DECIMAL
    if isinstance(value, dt.datetime):
        return OrderingClass.TIMESTAMP
    if isinstance(value, dt.date):
        return OrderingClass.DATE
    if isinstance(value, dt.time):
        return OrderingClass.TIME
    raise SchemaError(f"ordering value {value!r} of type {type(value).__name__} is not comparable")


def ordering_value(values: Mapping[str, Any] | None, ordering_fields: Sequence[str]) -> Any:
    """A record's ordering value: the default ``0`` without fields, the field's value (null -> 0)
    for one field, a tuple of values (each null -> 0) for several (``OrderingValues.create``)."""
    if not ordering_fields or values is None:
        return DEFAULT_ORDERING_VALUE
    if len(ordering_fields) == 1:
        value = values.get(ordering_fields[0])
        return DEFAULT_ORDERING_VALUE if value is None else value
    return tuple(DEFAULT_ORDERING_VALUE if values.get(f) is None else values.get(f) for f in ordering_fields)


def ordering_value_class(
    values: Mapping[str, Any] | None,
    ordering_fields: Sequence[str],
    ordering_types: Mapping[str, OrderingClass] | None = None,
) -> OrderingClasses:
    """The Java class(es) of :func:`ordering_value`: Integer for a null-defaulted value, else the
    column's class from ``ordering_types``, else one guessed from the Python value."""

    def one(name: str) -> OrderingClass:
        value = values.get(name) if values is not None else None
        if value is None:
            return OrderingClass.INTEGER
        known = ordering_types.get(name) if ordering_types else None
        return known if known is not None else ordering_class_of_value(value)

    if not ordering_fields or values is None:
        return OrderingClass.INTEGER
    if len(ordering_fields) == 1:
        return one(ordering_fields[0])
    return tuple(one(f) for f in ordering_fields)


def is_default_ordering(value: Any, ordering_class: OrderingClasses = OrderingClass.INTEGER) -> bool:
    """``OrderingValues.isDefault``: true only for an Integer 0 (not a Long 0, a 0.0, or a tuple)."""
    return ordering_class is OrderingClass.INTEGER and type(value) is int and value == 0


#: The class hts compares a wrapped Java time value as. Hudi's engines hold timestamps and dates as
#: Long/Integer, so the TimestampMicrosWrapper/DateWrapper deletes hts wrote before it wrote
#: LongWrapper/IntWrapper are another class to Hudi (which then fails comparing them with a base
#: record); hts keeps comparing them by value, as it wrote them to be read.
_AS_ENGINE_CLASS = {OrderingClass.TIMESTAMP: OrderingClass.LONG, OrderingClass.DATE: OrderingClass.INTEGER}


def same_ordering_class(a: OrderingClasses, b: OrderingClasses) -> bool:
    """``OrderingValues.isSameClass``: equal classes, element-wise for multi-field values."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)):
            return False
        return all(same_ordering_class(x, y) for x, y in zip(a, b, strict=True))
    return _AS_ENGINE_CLASS.get(a, a) is _AS_ENGINE_CLASS.get(b, b)


_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=dt.UTC)


def engine_number(value: Any) -> Any:
    """A timestamp as its microseconds and a date as its days since the epoch (how Spark's rows
    hold them, and how the deletes Spark writes carry them); anything else unchanged."""
    if isinstance(value, dt.datetime):
        delta = value - (_EPOCH_UTC if value.tzinfo is not None else _EPOCH)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def _compare_scalar(a: Any, b: Any) -> int:
    if isinstance(a, dt.date) != isinstance(b, dt.date):  # a timestamp/date against a number
        a, b = engine_number(a), engine_number(b)
    if isinstance(a, bool) != isinstance(b, bool):
        raise SchemaError(f"ordering values {a!r} and {b!r} have incomparable types")
    try:
        return int(a > b) - int(a < b)
    except TypeError as e:
        raise SchemaError(
            f"ordering values {a!r} ({type(a).__name__}) and {b!r} ({type(b).__name__}) are not comparable"
        ) from e


def compare_ordering(a: Any, b: Any) -> int:
    """Compare two ordering values: -1, 0 or 1.

    Numbers compare by value whatever their width (Integer vs Long, Float vs Double), where Java
    would throw ``ClassCastException``; other mixed types raise :class:`SchemaError`. Tuples (several
    ordering fields) compare lexicographically and must have the same length.
    """
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            raise SchemaError(f"ordering values {a!r} and {b!r} have different numbers of fields")
        for x, y in zip(a, b, strict=True):
            c = _compare_scalar(x, y)
            if c:
                return c
        return 0
    return _compare_scalar(a, b)


# -- records -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BufferedRecord:
    """One version of a record during a merge.

    ``values`` is ``None`` for a delete-block entry (it has no row). ``columns`` is the set of
    columns present in a partial (``IS_PARTIAL``) log row; ``None`` means the row is complete.
    Identity of ``values`` matters: mergers signal "keep the older record" by returning it.
    """

    key: str
    values: Row | None
    ordering: Any = DEFAULT_ORDERING_VALUE
    ordering_class: OrderingClasses = OrderingClass.INTEGER
    is_delete: bool = False
    columns: frozenset[str] | None = None

    @property
    def is_default_ordering(self) -> bool:
        return is_default_ordering(self.ordering, self.ordering_class)

    @property
    def is_commit_time_delete(self) -> bool:
        """A delete with the default ordering value: it applies whatever the ordering values."""
        return self.is_delete and self.is_default_ordering

    @property
    def present_columns(self) -> frozenset[str]:
        if self.columns is not None:
            return self.columns
        return frozenset(self.values) if self.values is not None else frozenset()

    @classmethod
    def from_row(
        cls,
        key: str,
        row: Row,
        ctx: MergeConfig,
        *,
        columns: frozenset[str] | None = None,
        is_delete: bool | None = None,
    ) -> BufferedRecord:
        """A record for a data row; ``is_delete`` defaults to :func:`is_delete_row`."""
        fields = ctx.ordering_fields
        return cls(
            key,
            row,
            ordering_value(row, fields),
            ordering_value_class(row, fields, ctx.ordering_types),
            is_delete_row(row, ctx) if is_delete is None else is_delete,
            columns,
        )

    @classmethod
    def delete(
        cls,
        key: str,
        ordering: Any = None,
        ordering_class: str | OrderingClass | Sequence[str | OrderingClass] | None = None,
    ) -> BufferedRecord:
        """A delete without a row. A null ordering value, or an Integer (``IntWrapper``) 0, is the
        default; ``ordering_class`` may name the Avro wrapper (``LongWrapper``) or Java class.
        Without a class, a Python int counts as an Integer."""
        value, klass = _delete_ordering(ordering, ordering_class)
        return cls(key, None, value, klass, True, None)


def _delete_value_class(value: Any) -> OrderingClass:
    """A delete value without a known wrapper: a Python int is an Integer (as Java boxes an int)."""
    if value is None or (type(value) is int):
        return OrderingClass.INTEGER
    return ordering_class_of_value(value)


def _delete_ordering(
    ordering: Any, ordering_class: str | OrderingClass | Sequence[str | OrderingClass] | None
) -> tuple[Any, OrderingClasses]:
    if ordering is None:
        return DEFAULT_ORDERING_VALUE, OrderingClass.INTEGER
    if isinstance(ordering, list | tuple):
        names: Sequence[str | OrderingClass | None]
        if ordering_class is None or ordering_class == "ArrayWrapper":
            names = [None] * len(ordering)
        elif isinstance(ordering_class, str):
            names = [ordering_class] * len(ordering)
        else:
            names = list(ordering_class)
        if len(names) != len(ordering):
            raise SchemaError(f"ordering value {ordering!r} and classes {ordering_class!r} differ in length")
        values = tuple(DEFAULT_ORDERING_VALUE if v is None else v for v in ordering)
        classes = tuple(
            _delete_value_class(v) if n is None else OrderingClass.of(n)
            for v, n in zip(ordering, names, strict=True)
        )
        return values, classes
    if ordering_class is None:
        return ordering, _delete_value_class(ordering)
    if not isinstance(ordering_class, str):
        raise SchemaError(f"a scalar ordering value {ordering!r} with classes {ordering_class!r}")
    return ordering, OrderingClass.of(ordering_class)


# -- delete detection ----------------------------------------------------------------------------


def java_string(value: Any) -> str:
    """``String.valueOf`` of a value as Hudi sees it (booleans lower-case, doubles in Java form)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    return str(value)


def _java_double(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "Infinity" if v > 0 else "-Infinity"
    if v == 0.0:
        return "-0.0" if str(v).startswith("-") else "0.0"
    if 1e-3 <= abs(v) < 1e7:
        text = repr(v)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(v)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    mantissa = text[0] + "." + (text[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{len(text) - 1 + exponent}"


def is_delete_row(values: Mapping[str, Any], ctx: MergeConfig) -> bool:
    """Whether a log data row is a delete (``RecordContext.isDeleteRecord``): ``_hoodie_is_deleted``
    is true, ``_hoodie_operation`` is ``D`` or ``-U``, or the custom delete marker matches exactly.
    Base-file rows are never deletes; the engine does not call this for them."""
    if values.get(HOODIE_IS_DELETED_FIELD) is True:
        return True
    op = values.get(OPERATION_METADATA_FIELD)
    if op is not None:
        name = str(op)
        if name not in _OPERATIONS:
            raise SchemaError(f"{OPERATION_METADATA_FIELD}={name!r} is not a Hudi operation (I, U, -U, D)")
        if _OPERATIONS[name]:
            return True
    if ctx.delete_field is not None:
        marker = values.get(ctx.delete_field)
        if marker is not None and java_string(engine_number(marker)) == ctx.delete_marker:
            return True
    return False


# -- log entries ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DataEntry:
    """A row of a log data block. ``is_partial`` marks an ``IS_PARTIAL`` block; ``columns`` are
    the columns the block's schema has (default: the row's keys)."""

    row: Row
    is_partial: bool = False
    columns: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class DeleteEntry:
    """An entry of a log delete block: the key, its partition and its ordering value with the Avro
    wrapper (``IntWrapper``, ``LongWrapper``, ...) or Java class it was written with. A null value or
    an ``IntWrapper`` 0 is the default (commit-time) ordering value."""

    key: str
    partition_path: str | None = None
    ordering: Any = None
    ordering_class: str | OrderingClass | tuple[str | OrderingClass, ...] | None = None

    def to_record(self) -> BufferedRecord:
        return BufferedRecord.delete(self.key, self.ordering, self.ordering_class)


LogEntry = DataEntry | DeleteEntry


# -- buffered record mergers -----------------------------------------------------------------------


class BufferedRecordMerger(ABC):
    """Merges record versions (``BufferedRecordMerger``): delta merges fold log records into the
    buffer (``None`` = keep the existing record), the final merge combines base and log."""

    @abstractmethod
    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None: ...

    @abstractmethod
    def delta_merge_delete(
        self, delete: BufferedRecord, existing: BufferedRecord | None
    ) -> BufferedRecord | None:
        """Merge a delete-block entry; the delete itself when it applies, else ``None``."""

    @abstractmethod
    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord: ...


def should_keep_newer(old: BufferedRecord, new: BufferedRecord) -> bool:
    """EVENT_TIME: the newer record wins if either is a commit-time delete, or on ``>=`` ordering."""
    if new.is_commit_time_delete or old.is_commit_time_delete:
        return True
    return compare_ordering(new.ordering, old.ordering) >= 0


def delta_merge_delete_record(
    delete: BufferedRecord, existing: BufferedRecord | None
) -> BufferedRecord | None:
    """EVENT_TIME delete-block entry vs the buffered record: the delete is dropped only when the
    existing record is a commit-time delete already, or has a strictly greater ordering value of
    the same class as a non-default delete ordering value."""
    if existing is None:
        return delete
    if existing.is_commit_time_delete:
        return None
    keep_existing = (
        not delete.is_default_ordering
        and same_ordering_class(existing.ordering_class, delete.ordering_class)
        and compare_ordering(existing.ordering, delete.ordering) > 0
    )
    return None if keep_existing else delete


class CommitTimeMerger(BufferedRecordMerger):
    """COMMIT_TIME_ORDERING: the later record in processing order always wins."""

    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None:
        return new

    def delta_merge_delete(
        self, delete: BufferedRecord, existing: BufferedRecord | None
    ) -> BufferedRecord | None:
        return delete

    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
        return newer


class EventTimeMerger(BufferedRecordMerger):
    """EVENT_TIME_ORDERING: the greater ordering value wins, ties to the newer record."""

    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None:
        if existing is None or should_keep_newer(existing, new):
            return new
        return None

    def delta_merge_delete(
        self, delete: BufferedRecord, existing: BufferedRecord | None
    ) -> BufferedRecord | None:
        return delta_merge_delete_record(delete, existing)

    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
        return newer if should_keep_newer(older, newer) else older


def _java_same_reference(value: Any, default: Any) -> bool:
    """Emulates Java's ``default == value`` on boxed values: nulls, booleans and small integers
    (the boxing caches) can be identical; strings, floats, decimals and bytes never are."""
    if value is None or default is None:
        return value is None and default is None
    if isinstance(value, bool) or isinstance(default, bool):
        return isinstance(value, bool) and isinstance(default, bool) and value == default
    if type(value) is int and type(default) is int:
        return value == default and -128 <= value <= 127
    return False


def partial_update(high: BufferedRecord, low: BufferedRecord | None, ctx: MergeConfig) -> BufferedRecord:
    """Column-wise partial update of the winning record (``PartialUpdateHandler``).

    IGNORE_DEFAULTS takes ``low``'s value where ``high`` holds the field's default (in practice:
    null where the default is null); FILL_UNAVAILABLE takes it where a string or bytes value equals
    the unavailable marker. Skipped when either side is a delete. The result keeps ``high``'s key,
    ordering value and flags.
    """
    mode = ctx.partial_update_mode
    if (
        mode is None
        or low is None
        or high.is_delete
        or low.is_delete
        or high.values is None
        or low.values is None
    ):
        return high
    updates: Row = {}
    for name, value in high.values.items():
        if mode is PartialUpdateMode.IGNORE_DEFAULTS:
            replace = _java_same_reference(value, ctx.field_defaults.get(name))
        else:
            marker = ctx.unavailable_marker
            replace = marker is not None and isinstance(value, str | bytes) and java_string(value) == marker
        if replace:
            updates[name] = low.values.get(name)
    if not updates:
        return high
    merged = {**high.values, **updates}
    return BufferedRecord(high.key, merged, high.ordering, high.ordering_class, high.is_delete, high.columns)


class CommitTimePartialMerger(CommitTimeMerger):
    """COMMIT_TIME_ORDERING with a v9 partial-update mode: the newer record, filled from the older."""

    def __init__(self, ctx: MergeConfig) -> None:
        self.ctx = ctx

    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None:
        return partial_update(new, existing, self.ctx)

    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
        return partial_update(newer, older, self.ctx)


class EventTimePartialMerger(EventTimeMerger):
    """EVENT_TIME_ORDERING with a partial-update mode: the winner is filled from the loser, so a
    late, lower-ordered update can still fill the winner's default/unavailable columns."""

    def __init__(self, ctx: MergeConfig) -> None:
        self.ctx = ctx

    def delta_merge(self, new: BufferedRecord, existing: BufferedRecord | None) -> BufferedRecord | None:
        if existing is None:
            return new
        if should_keep_newer(existing, new):
            return partial_update(new, existing, self.ctx)
        return partial_update(existing, new, self.ctx)

    def final_merge(self, older: BufferedRecord, newer: BufferedRecord) -> BufferedRecord:
        if newer.is_commit_time_delete:
            return newer
        if not older.is_commit_time_delete and compare_ordering(older.ordering, newer.ordering) > 0:
            return partial_update(older, newer, self.ctx)
        return partial_update(newer, older, self.ctx)
