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

The entries come as columns from :mod:`hoodie.merge.log_entries`, where a delete-block entry whose
ordering value is of another Java class than the ordering field's is taken as a reset (it always
applies: Hudi's same-class rule).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.merge.log_entries import DeleteEntries, MergeSpec, collect_entries, ordering_types
from hoodie.merge.trace import MergeTrace


@dataclass(slots=True)
class MergeCounts:
    """What one merge did, for write stats (compaction counts updates and deletes like Hudi)."""

    base_rows: int = 0
    base_replaced: int = 0
    base_deleted: int = 0
    log_entries: int = 0
    log_keys: int = 0
    log_inserts: int = 0


def _dense_ranks(arrays: list[pa.Array], t: pa.DataType) -> npt.NDArray[np.int64]:
    """Dense ranks of the concatenation of ``arrays`` (nulls rank as Hudi's default 0)."""
    combined = pa.concat_arrays([a.cast(t) for a in arrays]) if arrays else pa.array([], type=t)
    if pa.types.is_signed_integer(t) or pa.types.is_timestamp(t) or pa.types.is_date(t):
        # The values order themselves; no ranking needed.
        if pa.types.is_date(t):  # Arrow casts a date to the integer of its own width only
            combined = combined.cast(pa.int32() if pa.types.is_date32(t) else pa.int64())
        as_int = pc.fill_null(combined.cast(pa.int64()), 0)
        return np.asarray(as_int.to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        combined = pc.fill_null(
            combined, pa.scalar(0, type=t) if not pa.types.is_decimal(t) else pa.scalar(0).cast(t)
        )
    ranks = pc.rank(combined, sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
    return np.asarray(ranks.to_numpy(), dtype=np.int64)


def merge_logs(
    batches: Sequence[pa.Table | DeleteEntries], spec: MergeSpec, ord_types: list[pa.DataType]
) -> LogMerge | None:
    """Merge a slice's log entries among themselves: the winning entry of every key (or None)."""
    entries, data_tables = collect_entries(batches, spec, ord_types)
    if not entries.keys:
        return None
    keys = pa.concat_arrays([k.cast(pa.string()) for k in entries.keys])
    encoded = pc.dictionary_encode(keys)
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    n_codes = len(encoded.dictionary)
    n = len(codes)
    seq = np.arange(n, dtype=np.int64)
    is_reset = np.concatenate(entries.is_reset)
    ordering = [
        pa.concat_arrays([a.cast(t) for a in arrays]) if arrays else pa.nulls(n, t)
        for arrays, t in zip(entries.ordering, ord_types, strict=True)
    ]
    if not spec.event_time:
        winner = np.full(n_codes, -1, dtype=np.int64)
        np.maximum.at(winner, codes, seq)
    else:
        ranks = [_dense_ranks([values], t) for values, t in zip(ordering, ord_types, strict=True)]
        winner = _event_time_winners(
            codes, seq, is_reset, np.concatenate(entries.is_block_delete), ranks, n_codes
        )
    log_data = None
    if data_tables:
        log_data = pa.concat_tables(data_tables) if len(data_tables) > 1 else data_tables[0]
    winner_ordering = [values.take(pa.array(winner)) for values in ordering] if spec.event_time else []
    return LogMerge(
        dictionary=encoded.dictionary,
        winner=winner,
        is_delete=np.concatenate(entries.is_delete),
        is_reset=is_reset,
        data_pos=np.concatenate(entries.data_pos),
        log_data=log_data,
        winner_ordering=winner_ordering,
        entries=n,
        entry_codes=codes,
    )


@dataclass
class LogMerge:
    """The result of merging a slice's log entries: per distinct key, the winning entry."""

    dictionary: pa.Array  # the distinct record keys; a key's code is its position here
    winner: npt.NDArray[np.int64]  # per code: the winning entry
    is_delete: npt.NDArray[np.bool_]  # per entry
    is_reset: npt.NDArray[np.bool_]  # per entry: a commit-time delete (or a delete that always applies)
    data_pos: npt.NDArray[np.int64]  # per entry: its row in log_data, -1 for delete-block entries
    log_data: pa.Table | None
    winner_ordering: list[pa.Array]  # per ordering field: the winner's value, per code
    entries: int
    entry_codes: npt.NDArray[np.int64] | None = None  # per entry: its key's code

    @property
    def keys(self) -> int:
        return len(self.dictionary)


def _mask(values: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _compare(base: pa.Array, log: pa.Array) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """(base > log, base == log), row-wise; nulls are Hudi's default 0 for numbers (timestamps and
    dates are numbers of micros and days to Hudi's engines), else smallest."""
    t = base.type
    other = log.cast(t)
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    if numeric or pa.types.is_timestamp(t) or pa.types.is_date(t):  # a null is 0, as in the ranks
        zero = pa.scalar(0).cast(t) if pa.types.is_decimal(t) else pa.scalar(0, type=t)
        left, right = pc.fill_null(base, zero), pc.fill_null(other, zero)
        return _mask(pc.greater(left, right)), _mask(pc.equal(left, right))
    b_null = _mask(pc.is_null(base))
    l_null = _mask(pc.is_null(other))
    both = ~b_null & ~l_null
    greater = (~b_null & l_null) | (both & _mask(pc.greater(base, other)))
    equal = (b_null & l_null) | (both & _mask(pc.equal(base, other)))
    return greater, equal


def _base_greater(base: list[pa.Array], log: list[pa.Array]) -> npt.NDArray[np.bool_]:
    """Row-wise: is the base ordering value strictly greater than the log's (lexicographic)?"""
    n = len(base[0]) if base else 0
    greater = np.zeros(n, dtype=bool)
    equal = np.ones(n, dtype=bool)
    for b, lg in zip(base, log, strict=True):
        gt, eq = _compare(b, lg)
        greater |= equal & gt
        equal &= eq
    return greater


class BaseMerger:
    """Merges base rows, batch by batch in file order, with a slice's merged log entries.

    ``merge_batch`` returns the base rows to keep (those without a log entry, and those whose
    ordering value beats the log's under EVENT_TIME_ORDERING); ``remaining`` then returns the
    log rows that win or have no base row. Processing the base in batches keeps memory at one
    batch plus the logs.
    """

    def __init__(
        self,
        logs: LogMerge,
        spec: MergeSpec,
        counts: MergeCounts | None = None,
        codes_of: Callable[[pa.Array], npt.NDArray[np.int64]] | None = None,
        trace: MergeTrace | None = None,
    ) -> None:
        self.trace = trace  # records where each base row went (a CDC table's compaction)
        self.logs = logs
        self.codes_of = codes_of  # record keys -> codes (-1: no log entry); default: the dictionary
        self.spec = spec
        self.counts = counts
        self.base_has = np.zeros(logs.keys, dtype=bool)
        self.base_won = np.zeros(logs.keys, dtype=bool)
        if counts is not None:
            counts.log_entries = logs.entries
            counts.log_keys = logs.keys

    def merge_batch(self, batch: pa.Table) -> pa.Table:
        if batch.num_rows == 0:
            return batch
        logs, spec = self.logs, self.spec
        keys = batch[spec.key_field].combine_chunks().cast(pa.string())
        if self.codes_of is not None:
            codes = self.codes_of(keys)
        else:
            idx = pc.index_in(keys, value_set=logs.dictionary)
            codes = np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
        matched = codes >= 0
        wins = np.zeros(batch.num_rows, dtype=bool)
        if spec.event_time and matched.any():
            rows = np.nonzero(matched)[0]
            mcodes = codes[rows]
            base_vals = []
            for name, values in zip(spec.ordering_fields, logs.winner_ordering, strict=True):
                col = (
                    batch[name].combine_chunks()
                    if name in batch.column_names
                    else pa.nulls(batch.num_rows, values.type)
                )
                base_vals.append(col.take(pa.array(rows)).cast(values.type))
            log_vals = [values.take(pa.array(mcodes)) for values in logs.winner_ordering]
            greater = _base_greater(base_vals, log_vals)
            wins[rows] = greater & ~logs.is_reset[logs.winner[mcodes]]
        self.base_has[codes[matched]] = True
        self.base_won[codes[matched & wins]] = True
        keep = ~matched | wins
        if self.trace is not None:
            self.trace.base_batch(batch, codes, keep)
        if self.counts is not None:
            self.counts.base_rows += batch.num_rows
            lost_codes = codes[matched & ~wins]
            deleted = int(np.count_nonzero(logs.is_delete[logs.winner[lost_codes]]))
            self.counts.base_deleted += deleted
            self.counts.base_replaced += len(lost_codes) - deleted
        return batch if keep.all() else batch.filter(pa.array(keep))

    def remaining(self) -> pa.Table | None:
        """The log rows to emit: winning data entries of keys the base did not keep."""
        logs = self.logs
        valid = logs.winner >= 0
        emit = valid.copy()
        emit[valid] = ~logs.is_delete[logs.winner[valid]]
        emit &= ~self.base_won
        if self.trace is not None:
            self.trace.finish(np.flatnonzero(emit).astype(np.int64), self.base_has)
        if self.counts is not None:
            self.counts.log_inserts = int(np.count_nonzero(emit & ~self.base_has))
        if not emit.any() or logs.log_data is None:
            return None
        rows = logs.data_pos[logs.winner[emit]]
        if len(rows) == logs.log_data.num_rows and bool((rows == np.arange(len(rows))).all()):
            return logs.log_data  # every log row wins, in order: nothing to gather
        return logs.log_data.take(pa.array(rows))


def iter_merge_slice(
    base_batches: Iterable[pa.Table],
    batches: Sequence[pa.Table | DeleteEntries],
    spec: MergeSpec,
    counts: MergeCounts | None = None,
    base_schema: pa.Schema | None = None,
    trace: MergeTrace | None = None,
    base_codes: Callable[[pa.Array], Callable[[pa.Array], npt.NDArray[np.int64]]] | None = None,
) -> Iterator[pa.Table]:
    """:func:`merge_slice` over a base file read in batches; yields the merged rows in parts
    (``trace``, when given, records where each base row went; ``base_codes``, given the merged
    log keys, is how base keys get their codes, see :class:`BaseMerger`)."""
    data = [b for b in batches if isinstance(b, pa.Table)]
    ord_types = ordering_types(data, spec, None if base_schema is None else base_schema.empty_table())
    logs = merge_logs(batches, spec, ord_types)
    if logs is None:
        for batch in base_batches:
            if counts is not None:
                counts.base_rows += batch.num_rows
            if trace is not None:
                trace.base_batch(batch, None, np.ones(batch.num_rows, dtype=bool))
            yield batch
        if trace is not None:
            trace.finish(np.zeros(0, np.int64), np.zeros(0, dtype=bool))
        return
    codes_of = base_codes(logs.dictionary) if base_codes is not None else None
    merger = BaseMerger(logs, spec, counts, codes_of, trace)
    for batch in base_batches:
        kept = merger.merge_batch(batch)
        if kept.num_rows:
            yield kept
    rest = merger.remaining()
    if rest is not None and rest.num_rows:
        yield rest


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
    parts = list(
        iter_merge_slice(
            [base] if base is not None else [], batches, spec, counts, None if base is None else base.schema
        )
    )
    if parts:
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    if base is not None:
        return base.slice(0, 0)
    data = [b for b in batches if isinstance(b, pa.Table)]
    return _empty_like(data)


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


@dataclass(frozen=True, slots=True)
class LogSurvivors:
    """What survives when a slice's log entries are merged among themselves, without the base file.

    Each key keeps exactly one entry: a data row (``rows``), a data row flagged as a delete
    (``deleted_rows``: ``_hoodie_is_deleted``, a delete operation or the custom marker), or a
    delete-block entry (``deletes``, with its ordering value and wrapper class). Replaying these
    in place of the logs they came from leaves every later merge (with newer logs, then with the
    base file) as it was: a key's merge state is its surviving entry. Log compaction writes them.
    """

    rows: pa.Table
    deleted_rows: pa.Table
    deletes: DeleteEntries


def merge_logs_only(
    batches: Sequence[pa.Table | DeleteEntries], spec: MergeSpec, schema: pa.Schema | None = None
) -> LogSurvivors:
    """Merge log entries (``batches`` in processing order) among themselves: the delta merge only.

    ``schema`` is the data tables' schema; give it so that the ordering field's type is known
    when the logs hold only deletes. Survivors keep their processing order within each group.
    """
    data = [b for b in batches if isinstance(b, pa.Table)]
    typed = schema.empty_table() if schema is not None else None
    logs = merge_logs(batches, spec, ordering_types(data, spec, typed))
    empty = typed if typed is not None else _empty_like(data)
    if logs is None:
        return LogSurvivors(empty, empty, DeleteEntries(pa.array([], pa.string()), [], []))
    codes = np.nonzero(logs.winner >= 0)[0]
    codes = codes[np.argsort(logs.winner[codes], kind="stable")]
    won = logs.winner[codes]
    pos = logs.data_pos[won]
    from_data = pos >= 0
    flagged = from_data & logs.is_delete[won]

    def rows_at(mask: npt.NDArray[np.bool_]) -> pa.Table:
        if logs.log_data is None:
            return empty
        return logs.log_data.take(pa.array(pos[mask], pa.int64()))

    # Ordering values and wrapper classes of delete-block entries, indexed like the entries.
    values: list[Any] = []
    classes: list[str | None] = []
    for batch in batches:
        n = len(batch) if isinstance(batch, DeleteEntries) else batch.num_rows
        values.extend(batch.ordering_values if isinstance(batch, DeleteEntries) else [None] * n)
        classes.extend(batch.ordering_classes if isinstance(batch, DeleteEntries) else [None] * n)
    entries = won[~from_data]
    deletes = DeleteEntries(
        logs.dictionary.take(pa.array(codes[~from_data], pa.int64())).cast(pa.string()),
        [values[i] for i in entries],
        [classes[i] for i in entries],
    )
    return LogSurvivors(rows_at(from_data & ~flagged), rows_at(flagged), deletes)
