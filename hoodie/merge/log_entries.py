"""A file slice's log entries as columns, for the vectorized merge (:mod:`hoodie.merge.vectorized`).

Log data blocks and delete blocks become one run of entries in processing order: keys, which are
deletes (``_hoodie_is_deleted``, the ``_hoodie_operation`` of a changelog, a custom delete marker),
which reset the key (a delete whose ordering value is Hudi's default), and the ordering values as
columns of the ordering fields' types. A delete-block entry whose ordering value is of another
Java class than the ordering field's always applies (Hudi's same-class rule) and is taken as a reset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config.table_config import RecordMergeMode
from hoodie.merge.config import MergeConfig
from hoodie.merge.records import engine_number, java_string
from hoodie.schema.meta_fields import (
    HOODIE_IS_DELETED_FIELD,
    OPERATION_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
)


@dataclass(frozen=True, slots=True)
class DeleteEntries:
    """The entries of one delete block: keys, and ordering values with their Java wrapper class."""

    keys: pa.Array
    ordering_values: Sequence[Any]
    ordering_classes: Sequence[str | None]

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True, slots=True)
class MergeSpec:
    """What the vectorized merge needs to know about the table's merge configuration."""

    mode: RecordMergeMode
    ordering_fields: tuple[str, ...] = ()
    key_field: str = RECORD_KEY_METADATA_FIELD
    delete_field: str | None = None
    delete_marker: str | None = None

    @property
    def event_time(self) -> bool:
        return self.mode is RecordMergeMode.EVENT_TIME_ORDERING and bool(self.ordering_fields)


def supports(merge: MergeConfig) -> bool:
    """Whether the vectorized merge computes this configuration (else use the per-record engine)."""
    return (
        merge.mode in (RecordMergeMode.COMMIT_TIME_ORDERING, RecordMergeMode.EVENT_TIME_ORDERING)
        and merge.partial_update_mode is None
    )


def spec_for(merge: MergeConfig, key_field: str = RECORD_KEY_METADATA_FIELD) -> MergeSpec:
    """The vectorized merge's view of a merge configuration."""
    event = merge.mode is RecordMergeMode.EVENT_TIME_ORDERING
    return MergeSpec(
        merge.mode, merge.ordering_fields if event else (), key_field, merge.delete_field, merge.delete_marker
    )


# Java wrapper class of a delete's ordering value -> the Java class Hudi compares it as.
_WRAPPER_FAMILY: dict[str, str] = {
    "IntWrapper": "int",
    "LongWrapper": "long",
    "FloatWrapper": "float",
    "DoubleWrapper": "double",
    "StringWrapper": "string",
    "BooleanWrapper": "bool",
    "BytesWrapper": "bytes",
    # Java time objects to Hudi (Instant, Date: another class than a record's Long/Integer, which
    # Hudi then fails to compare with a base record); hts wrote these before LongWrapper/IntWrapper
    # and keeps reading them by value (hoodie.merge.records.same_ordering_class).
    "DateWrapper": "int",
    "DecimalWrapper": "decimal",
    "TimeMicrosWrapper": "time",
    "TimestampMicrosWrapper": "long",
    "LocalDateWrapper": "int",
}
# Arrow type family -> the Java class the engine's record holds for it, where that differs: Spark's
# rows (and Avro's) hold a timestamp as a Long of microseconds and a date as an Integer of days, so
# a delete Spark wrote for them is a LongWrapper/IntWrapper of the same class.
_ENGINE_FAMILY = {"timestamp": "long", "date": "int"}


def arrow_family(t: pa.DataType) -> str:
    """The Java class family of values of Arrow type ``t`` (for Hudi's same-class rule)."""
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_decimal(t):
        return "decimal"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_time(t):
        return "time"
    return str(t)


def _true_where(values: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def data_delete_mask(table: pa.Table, spec: MergeSpec) -> npt.NDArray[np.bool_]:
    """Rows of a log data block that are deletes (``_hoodie_is_deleted``, operation, custom marker)."""
    mask = np.zeros(table.num_rows, dtype=bool)
    names = set(table.column_names)
    if HOODIE_IS_DELETED_FIELD in names and pa.types.is_boolean(table[HOODIE_IS_DELETED_FIELD].type):
        mask |= _true_where(table[HOODIE_IS_DELETED_FIELD])
    if OPERATION_METADATA_FIELD in names:
        mask |= _true_where(pc.is_in(table[OPERATION_METADATA_FIELD], value_set=pa.array(["D", "-U"])))
    if spec.delete_field and spec.delete_marker is not None and spec.delete_field in names:
        column = table[spec.delete_field]
        t = column.type
        if pa.types.is_floating(t) or pa.types.is_timestamp(t) or pa.types.is_date(t):
            # Hudi compares the value's Java toString: a double as Double.toString, a timestamp
            # as its Long of micros, a date as its Integer of days (Spark's rows); Arrow's cast differs.
            marked = [v for v in pc.unique(column).to_pylist() if _java_text(v) == spec.delete_marker]
            mask |= _true_where(pc.is_in(column, value_set=pa.array(marked, t)))
        else:
            as_text = pc.cast(column, pa.string())
            mask |= _true_where(pc.equal(as_text, spec.delete_marker))
    return mask


def _java_text(value: Any) -> str | None:
    return None if value is None else java_string(engine_number(value))


@dataclass(slots=True)
class LogEntries:
    keys: list[pa.Array] = field(default_factory=list)
    is_delete: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    is_reset: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    is_block_delete: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    data_pos: list[npt.NDArray[np.int64]] = field(default_factory=list)
    ordering: list[list[pa.Array]] = field(default_factory=list)  # per field, per batch


def _default_mask(values: pa.Array | pa.ChunkedArray, single_field: bool) -> npt.NDArray[np.bool_]:
    """Hudi's default ordering value: null, or an int (Java Integer) 0 when there is one field."""
    is_null = pc.is_null(values).to_numpy(zero_copy_only=False)
    if single_field and arrow_family(values.type) == "int":
        zero = pc.fill_null(pc.equal(values, 0), False).to_numpy(zero_copy_only=False)
        return np.asarray(is_null | zero, dtype=bool)
    if not single_field:
        return np.zeros(len(values), dtype=bool)
    return np.asarray(is_null, dtype=bool)


def ordering_types(data: Sequence[pa.Table], spec: MergeSpec, base: pa.Table | None) -> list[pa.DataType]:
    types: list[pa.DataType] = []
    for name in spec.ordering_fields:
        found: pa.DataType | None = None
        for t in ([base] if base is not None else []) + list(data):
            if name in t.column_names:
                found = t.schema.field(name).type
                break
        types.append(found if found is not None else pa.int32())
    return types


def collect_entries(
    batches: Sequence[pa.Table | DeleteEntries], spec: MergeSpec, ord_types: list[pa.DataType]
) -> tuple[LogEntries, list[pa.Table]]:
    out = LogEntries(ordering=[[] for _ in spec.ordering_fields])
    data_tables: list[pa.Table] = []
    data_rows = 0
    single = len(spec.ordering_fields) == 1
    for batch in batches:
        if isinstance(batch, DeleteEntries):
            n = len(batch)
            out.keys.append(batch.keys)
            out.is_delete.append(np.ones(n, dtype=bool))
            out.is_block_delete.append(np.ones(n, dtype=bool))
            out.data_pos.append(np.full(n, -1, dtype=np.int64))
            reset = np.zeros(n, dtype=bool)
            for i, (value, cls) in enumerate(zip(batch.ordering_values, batch.ordering_classes, strict=True)):
                if value is None or (cls in (None, "IntWrapper") and value == 0):
                    reset[i] = True
            for f_idx, t in enumerate(ord_types):
                family = arrow_family(t)
                vals: list[Any] = []
                for i, (value, cls) in enumerate(
                    zip(batch.ordering_values, batch.ordering_classes, strict=True)
                ):
                    if reset[i] or value is None:
                        vals.append(None)
                        continue
                    v = value[f_idx] if isinstance(value, (list, tuple)) and not single else value
                    engine = _ENGINE_FAMILY.get(family, family)
                    if single and cls is not None and _WRAPPER_FAMILY.get(cls, cls) != engine:
                        reset[i] = True  # a different class: the delete always applies
                        vals.append(None)
                        continue
                    vals.append(v)
                out.ordering[f_idx].append(_delete_values(vals, t))
            out.is_reset.append(reset)
            continue
        n = batch.num_rows
        if n == 0:
            continue
        data_tables.append(batch)
        out.keys.append(batch[spec.key_field].combine_chunks())
        deletes = data_delete_mask(batch, spec)
        out.is_delete.append(deletes)
        out.is_block_delete.append(np.zeros(n, dtype=bool))
        out.data_pos.append(np.arange(data_rows, data_rows + n, dtype=np.int64))
        data_rows += n
        if not spec.event_time:
            out.is_reset.append(deletes.copy())
            continue
        default = np.ones(n, dtype=bool)
        for f_idx, (name, t) in enumerate(zip(spec.ordering_fields, ord_types, strict=True)):
            if name in batch.column_names:
                col = pc.cast(batch[name].combine_chunks(), t)
            else:
                col = pa.nulls(n, t)
            out.ordering[f_idx].append(col)
            default &= _default_mask(col, single) if single else np.zeros(n, dtype=bool)
        out.is_reset.append(deletes & default)
    return out, data_tables


def _delete_values(values: list[Any], t: pa.DataType) -> pa.Array:
    """Delete ordering values as a column of type ``t``; a timestamp's are microseconds."""
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.timestamp("us", t.tz)).cast(t, safe=False)
    return pa.array(values, type=t)
