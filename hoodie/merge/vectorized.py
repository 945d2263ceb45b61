"""The vectorized merge of one file slice for COMMIT_TIME_ORDERING and EVENT_TIME_ORDERING.

It computes exactly what Hudi 1.1's file group reader computes record by record:

1. Log entries (data rows and delete-block entries, in processing order) are merged per key.
   COMMIT_TIME: the last entry wins. EVENT_TIME: a *commit-time delete* (a delete whose ordering
   value is the default, as SQL DELETE writes) resets the key; after the last reset, delete-block
   entries are dropped until the next data row, which always replaces the reset; from there on the
   entry with the greatest ordering value wins, ties going to the later entry.
2. Each base row is merged with its key's log result: COMMIT_TIME, the log wins; EVENT_TIME, the
   log wins unless it is an ordinary record or delete with a strictly smaller ordering value
   (so a base row can survive a delete-then-reinsert with a lower ordering value, as in Hudi).
3. Keys whose result is a delete disappear; log-only keys are emitted unless deleted.

A delete-block entry whose ordering value is of a different type than the ordering field always
applies (Hudi's same-class rule), and is treated here as a reset.
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

IS_DELETED_FIELD = "_hoodie_is_deleted"
OPERATION_FIELD = "_hoodie_operation"


@dataclass(frozen=True, slots=True)
class DeleteEntries:
    """The entries of one delete block: keys, and ordering values with their Java wrapper class."""

    keys: pa.Array
    ordering_values: Sequence[Any]
    ordering_classes: Sequence[str | None]

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(slots=True)
class MergeCounts:
    """What one merge did, for write stats (compaction counts updates and deletes like Hudi)."""

    base_rows: int = 0
    base_replaced: int = 0
    base_deleted: int = 0
    log_entries: int = 0
    log_keys: int = 0
    log_inserts: int = 0


@dataclass(frozen=True, slots=True)
class MergeSpec:
    """What the vectorized merge needs to know about the table's merge configuration."""

    mode: RecordMergeMode
    ordering_fields: tuple[str, ...] = ()
    key_field: str = "_hoodie_record_key"
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


def spec_for(merge: MergeConfig, key_field: str = "_hoodie_record_key") -> MergeSpec:
    """The vectorized merge's view of a merge configuration."""
    event = merge.mode is RecordMergeMode.EVENT_TIME_ORDERING
    return MergeSpec(
        merge.mode, merge.ordering_fields if event else (), key_field, merge.delete_field, merge.delete_marker
    )


# Java wrapper class of a delete's ordering value -> Arrow type families it has the same class as.
_WRAPPER_FAMILY: dict[str, str] = {
    "IntWrapper": "int",
    "LongWrapper": "long",
    "FloatWrapper": "float",
    "DoubleWrapper": "double",
    "StringWrapper": "string",
    "BooleanWrapper": "bool",
    "BytesWrapper": "bytes",
    "DateWrapper": "date",
    "DecimalWrapper": "decimal",
    "TimeMicrosWrapper": "time",
    "TimestampMicrosWrapper": "timestamp",
    "LocalDateWrapper": "date",
}


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
    if IS_DELETED_FIELD in names and pa.types.is_boolean(table[IS_DELETED_FIELD].type):
        mask |= _true_where(table[IS_DELETED_FIELD])
    if OPERATION_FIELD in names:
        mask |= _true_where(pc.is_in(table[OPERATION_FIELD], value_set=pa.array(["D", "-U"])))
    if spec.delete_field and spec.delete_marker is not None and spec.delete_field in names:
        as_text = pc.cast(table[spec.delete_field], pa.string())
        mask |= _true_where(pc.equal(as_text, spec.delete_marker))
    return mask


@dataclass(slots=True)
class _LogEntries:
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


def _ordering_types(data: Sequence[pa.Table], spec: MergeSpec, base: pa.Table | None) -> list[pa.DataType]:
    types: list[pa.DataType] = []
    for name in spec.ordering_fields:
        found: pa.DataType | None = None
        for t in ([base] if base is not None else []) + list(data):
            if name in t.column_names:
                found = t.schema.field(name).type
                break
        types.append(found if found is not None else pa.int32())
    return types


def _collect(
    batches: Sequence[pa.Table | DeleteEntries], spec: MergeSpec, ord_types: list[pa.DataType]
) -> tuple[_LogEntries, list[pa.Table]]:
    out = _LogEntries(ordering=[[] for _ in spec.ordering_fields])
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
                    if single and cls is not None and _WRAPPER_FAMILY.get(cls, cls) != family:
                        reset[i] = True  # a different class: the delete always applies
                        vals.append(None)
                        continue
                    vals.append(v)
                out.ordering[f_idx].append(pa.array(vals, type=t))
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


def _dense_ranks(arrays: list[pa.Array], t: pa.DataType) -> npt.NDArray[np.int64]:
    """Dense ranks of the concatenation of ``arrays`` (nulls rank as Hudi's default 0)."""
    combined = pa.concat_arrays([a.cast(t) for a in arrays]) if arrays else pa.array([], type=t)
    if pa.types.is_signed_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t):
        # The values order themselves; no ranking needed.
        as_int = pc.fill_null(combined.cast(pa.int64()), 0)
        return np.asarray(as_int.to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        combined = pc.fill_null(
            combined, pa.scalar(0, type=t) if not pa.types.is_decimal(t) else pa.scalar(0).cast(t)
        )
    ranks = pc.rank(combined, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
    return np.asarray(ranks.to_numpy(), dtype=np.int64)


def merge_slice(
    base: pa.Table | None,
    batches: Sequence[pa.Table | DeleteEntries],
    spec: MergeSpec,
    counts: MergeCounts | None = None,
) -> pa.Table:
    """Merge a base file's rows with a slice's log entries (``batches`` in processing order).

    Data tables in ``batches`` and ``base`` must share one schema (the reader schema); the result
    has that schema: surviving base rows in file order, then log-only and winning log rows.
    """
    ord_types = _ordering_types([b for b in batches if isinstance(b, pa.Table)], spec, base)
    entries, data_tables = _collect(batches, spec, ord_types)
    if not entries.keys:
        if counts is not None and base is not None:
            counts.base_rows = base.num_rows
        return base if base is not None else _empty_like(data_tables)
    keys = pa.concat_arrays([k.cast(pa.string()) for k in entries.keys])
    encoded = pc.dictionary_encode(keys)
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    dictionary = encoded.dictionary
    n_codes = len(dictionary)
    n = len(codes)
    seq = np.arange(n, dtype=np.int64)
    is_delete = np.concatenate(entries.is_delete)
    is_reset = np.concatenate(entries.is_reset)
    is_block_delete = np.concatenate(entries.is_block_delete)
    data_pos = np.concatenate(entries.data_pos)

    base_codes: npt.NDArray[np.int64] | None = None
    if base is not None and base.num_rows:
        idx = pc.index_in(base[spec.key_field].cast(pa.string()), value_set=dictionary)
        base_codes = np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

    if not spec.event_time:
        winner = np.full(n_codes, -1, dtype=np.int64)
        np.maximum.at(winner, codes, seq)
        base_wins = np.zeros(0 if base_codes is None else len(base_codes), dtype=bool)
    else:
        ranks_all = []
        base_rank_cols = []
        matched = base_codes >= 0 if base_codes is not None else None
        for f_idx, t in enumerate(ord_types):
            arrays = list(entries.ordering[f_idx])
            base_part: pa.Array | None = None
            if base is not None and base_codes is not None and matched is not None:
                name = spec.ordering_fields[f_idx]
                col = base[name].combine_chunks() if name in base.column_names else pa.nulls(base.num_rows, t)
                base_part = pc.filter(col.cast(t), pa.array(matched))
                arrays.append(base_part)
            ranks = _dense_ranks(arrays, t)
            ranks_all.append(ranks[:n])
            base_rank_cols.append(ranks[n:])
        winner = _event_time_winners(codes, seq, is_reset, is_block_delete, ranks_all, n_codes)
        base_wins = np.zeros(0 if base_codes is None else len(base_codes), dtype=bool)
        if base_codes is not None and matched is not None and matched.any():
            w = winner[base_codes[matched]]
            greater = np.zeros(len(w), dtype=bool)
            equal = np.ones(len(w), dtype=bool)
            for log_ranks, b_ranks in zip(ranks_all, base_rank_cols, strict=True):
                lr = log_ranks[w]
                greater |= equal & (b_ranks > lr)
                equal &= b_ranks == lr
            sub = greater & ~is_reset[w]
            base_wins[np.nonzero(matched)[0]] = sub
    if counts is not None:
        counts.log_entries = n
        counts.log_keys = n_codes
    return _assemble(base, base_codes, base_wins, winner, is_delete, data_pos, data_tables, counts)


def _event_time_winners(
    codes: npt.NDArray[np.int64],
    seq: npt.NDArray[np.int64],
    is_reset: npt.NDArray[np.bool_],
    is_block_delete: npt.NDArray[np.bool_],
    ranks: list[npt.NDArray[np.int64]],
    n_codes: int,
) -> npt.NDArray[np.int64]:
    if len(codes) == n_codes:
        # One entry per key: it is the result, whatever it is.
        only = np.empty(n_codes, dtype=np.int64)
        only[codes] = seq
        return only
    last_reset = np.full(n_codes, -1, dtype=np.int64)
    if is_reset.any():
        np.maximum.at(last_reset, codes[is_reset], seq[is_reset])
    after = seq > last_reset[codes]
    has_reset = last_reset[codes] >= 0
    # After a reset, delete-block entries are dropped until the next data row replaces it.
    first_data = np.full(n_codes, np.iinfo(np.int64).max, dtype=np.int64)
    data_after = after & ~is_block_delete
    if data_after.any():
        np.minimum.at(first_data, codes[data_after], seq[data_after])
    candidate = after & (~has_reset | (seq >= first_data[codes]))
    winner = last_reset.copy()  # keys whose last reset is never followed by data: the reset wins
    if candidate.any():
        cand = np.nonzero(candidate)[0]
        sort_keys = [seq[cand], *[r[cand] for r in reversed(ranks)], codes[cand]]
        order = cand[np.lexsort(sort_keys)]
        ordered_codes = codes[order]
        last_of_code = np.ones(len(order), dtype=bool)
        last_of_code[:-1] = ordered_codes[1:] != ordered_codes[:-1]
        winner[ordered_codes[last_of_code]] = order[last_of_code]
    return winner


def _empty_like(data_tables: list[pa.Table]) -> pa.Table:
    if data_tables:
        return data_tables[0].slice(0, 0)
    return pa.table({})


def _assemble(
    base: pa.Table | None,
    base_codes: npt.NDArray[np.int64] | None,
    base_wins: npt.NDArray[np.bool_],
    winner: npt.NDArray[np.int64],
    is_delete: npt.NDArray[np.bool_],
    data_pos: npt.NDArray[np.int64],
    data_tables: list[pa.Table],
    counts: MergeCounts | None = None,
) -> pa.Table:
    parts: list[pa.Table] = []
    base_has = np.zeros(len(winner), dtype=bool)
    base_won_code = np.zeros(len(winner), dtype=bool)
    if base is not None:
        if base_codes is None:
            parts.append(base)
        else:
            keep = (base_codes < 0) | base_wins
            matched = base_codes >= 0
            base_has[base_codes[matched]] = True
            base_won_code[base_codes[matched & base_wins]] = True
            parts.append(base.filter(pa.array(keep)) if not keep.all() else base)
    valid = winner >= 0
    emit = valid.copy()
    emit[valid] = ~is_delete[winner[valid]]
    emit &= ~base_won_code
    if counts is not None:
        counts.base_rows = 0 if base is None else base.num_rows
        if base_codes is not None:
            lost = (base_codes >= 0) & ~base_wins
            lost_codes = base_codes[lost]
            counts.base_deleted = int(np.count_nonzero(~emit[lost_codes]))
            counts.base_replaced = len(lost_codes) - counts.base_deleted
        counts.log_inserts = int(np.count_nonzero(emit & ~base_has))
    if emit.any() and data_tables:
        log_data = pa.concat_tables(data_tables) if len(data_tables) > 1 else data_tables[0]
        rows = data_pos[winner[emit]]
        if len(rows) == log_data.num_rows and bool((rows == np.arange(len(rows))).all()):
            parts.append(log_data)  # every log row wins, in order: nothing to gather
        else:
            parts.append(log_data.take(pa.array(rows)))
    if not parts:
        return _empty_like(data_tables)
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts)


@dataclass(frozen=True, slots=True)
class LogMerge:
    """What survives when a slice's log entries are merged among themselves, without the base file.

    Each key has exactly one surviving entry: a data row (``rows``), a data row flagged as a delete
    (``deleted_rows``: ``_hoodie_is_deleted``, a delete operation or the custom marker), or a
    delete-block entry (``deletes``, with its ordering value and wrapper class). Replaying these
    entries in place of the logs they came from leaves every later merge (with newer logs, then
    with the base file) exactly as it was: the merge state of a key is its surviving entry.
    """

    rows: pa.Table
    deleted_rows: pa.Table
    deletes: DeleteEntries


def merge_logs_only(batches: Sequence[pa.Table | DeleteEntries], spec: MergeSpec) -> LogMerge:
    """Merge log entries (``batches`` in processing order) among themselves: the delta merge only.

    Surviving entries keep their processing order within each of the three groups.
    """
    data = [b for b in batches if isinstance(b, pa.Table)]
    ord_types = _ordering_types(data, spec, None)
    entries, data_tables = _collect(batches, spec, ord_types)
    empty = _empty_like(data_tables)
    if not entries.keys:
        return LogMerge(empty, empty, DeleteEntries(pa.array([], pa.string()), [], []))
    keys = pa.concat_arrays([k.cast(pa.string()) for k in entries.keys])
    encoded = pc.dictionary_encode(keys)
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    n_codes = len(encoded.dictionary)
    seq = np.arange(len(codes), dtype=np.int64)
    is_delete = np.concatenate(entries.is_delete)
    is_reset = np.concatenate(entries.is_reset)
    is_block_delete = np.concatenate(entries.is_block_delete)
    data_pos = np.concatenate(entries.data_pos)
    if spec.event_time:
        ranks = [_dense_ranks(list(entries.ordering[i]), t) for i, t in enumerate(ord_types)]
        winner = _event_time_winners(codes, seq, is_reset, is_block_delete, ranks, n_codes)
    else:
        winner = np.full(n_codes, -1, dtype=np.int64)
        np.maximum.at(winner, codes, seq)
    won = np.sort(winner[winner >= 0])
    from_data = won[~is_block_delete[won]]
    from_blocks = won[is_block_delete[won]]
    rows = deleted = empty
    if len(from_data):
        log_data = pa.concat_tables(data_tables) if len(data_tables) > 1 else data_tables[0]
        flagged = is_delete[from_data]
        rows = log_data.take(pa.array(data_pos[from_data[~flagged]]))
        deleted = log_data.take(pa.array(data_pos[from_data[flagged]]))
    # Ordering values of delete-block entries, indexed like ``seq``.
    values: list[Any] = []
    classes: list[str | None] = []
    for batch in batches:
        if isinstance(batch, DeleteEntries):
            values.extend(batch.ordering_values)
            classes.extend(batch.ordering_classes)
        else:
            values.extend([None] * batch.num_rows)
            classes.extend([None] * batch.num_rows)
    deletes = DeleteEntries(
        keys.take(pa.array(from_blocks, pa.int64())),
        [values[i] for i in from_blocks],
        [classes[i] for i in from_blocks],
    )
    return LogMerge(rows, deleted, deletes)
