"""Audit (issue 14): the vectorized merge against the per-record engine on what Hudi's writers put
in log blocks: null ordering values, Integer vs Long ordering columns, ties, ``_hoodie_is_deleted``,
``_hoodie_operation``, custom delete markers, and delete blocks with and without ordering values
(v6 writes them without a wrapper, v8+ with ``IntWrapper``/``LongWrapper``/...).

The per-record engine follows ``HoodieFileGroupReader`` record by record; the vectorized one must
compute the same rows, or reads and compactions of a table would depend on which engine ran.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodie.config.table_config import RecordMergeMode
from hoodie.merge.buffer import merge_file_group
from hoodie.merge.config import MergeConfig
from hoodie.merge.log_entries import DeleteEntries, spec_for
from hoodie.merge.records import DataEntry, DeleteEntry, LogEntry
from hoodie.merge.vectorized import merge_slice

KEY = "_hoodie_record_key"
KEYS = st.sampled_from(["a", "b", "c"])


def schema_for(ordering_type: pa.DataType) -> pa.Schema:
    return pa.schema(
        [
            (KEY, pa.string()),
            ("ts", ordering_type),
            ("v", pa.string()),
            ("op", pa.string()),
            ("_hoodie_is_deleted", pa.bool_()),
            ("_hoodie_operation", pa.string()),
        ]
    )


@st.composite
def data_row(draw: st.DrawFn, i: int) -> dict[str, Any]:
    return {
        KEY: draw(KEYS),
        "ts": draw(st.one_of(st.none(), st.integers(0, 3))),
        "v": f"v{i}",
        "op": draw(st.sampled_from([None, "I", "D"])),
        "_hoodie_is_deleted": draw(st.sampled_from([None, False, True])),
        "_hoodie_operation": draw(st.sampled_from([None, "I", "U", "-U", "D"])),
    }


@st.composite
def delete_entry(draw: st.DrawFn, wrapper: str) -> DeleteEntry:
    """A delete-block entry as Hudi writes one for an ordering column whose values box to
    ``wrapper``: no ordering value, the default ``IntWrapper`` 0 (SQL DELETE), or a value of the
    column's class. (On disk a value always has its wrapper: ``HoodieDeleteRecordList.avsc``.)"""
    ordering, klass = draw(
        st.sampled_from(
            [(None, None), (0, "IntWrapper"), (0, wrapper), (1, wrapper), (3, wrapper), (2, "time")]
        )
    )
    return DeleteEntry(draw(KEYS), None, ordering, klass)


@st.composite
def log_blocks(draw: st.DrawFn, wrapper: str) -> list[list[LogEntry]]:
    """Blocks in processing order: each a list of data rows or of delete entries."""
    blocks: list[list[LogEntry]] = []
    n = 0
    for _ in range(draw(st.integers(0, 5))):
        if draw(st.booleans()):
            size = draw(st.integers(1, 4))
            rows = [draw(data_row(n + j)) for j in range(size)]
            n += size
            blocks.append([DataEntry(r) for r in rows])
        else:
            blocks.append(list(draw(st.lists(delete_entry(wrapper), min_size=1, max_size=3))))
    return blocks


BASES = st.lists(st.tuples(KEYS, st.one_of(st.none(), st.integers(0, 3))), unique_by=lambda t: t[0])


def _per_record(
    base: list[dict[str, Any]], blocks: list[list[LogEntry]], ctx: MergeConfig, schema: pa.Schema
) -> dict[str, dict[str, Any]]:
    entries = [e for block in blocks for e in block]
    rows = merge_file_group(base, entries, ctx.with_schema(schema), lambda r: str(r[KEY]))
    return {r[KEY]: r for r in rows}


def _vectorized(
    base: list[dict[str, Any]], blocks: list[list[LogEntry]], ctx: MergeConfig, schema: pa.Schema
) -> dict[str, dict[str, Any]]:
    batches: list[pa.Table | DeleteEntries] = []
    for block in blocks:
        if isinstance(block[0], DeleteEntry):
            deletes = [e for e in block if isinstance(e, DeleteEntry)]
            batches.append(
                DeleteEntries(
                    pa.array([d.key for d in deletes], pa.string()),
                    [d.ordering for d in deletes],
                    [d.ordering_class if isinstance(d.ordering_class, str | None) else None for d in deletes],
                )
            )
        else:
            batches.append(pa.Table.from_pylist([e.row for e in block if isinstance(e, DataEntry)], schema))
    out = merge_slice(pa.Table.from_pylist(base, schema), batches, spec_for(ctx, KEY))
    return {r[KEY]: r for r in out.to_pylist()}


def _typed(ts: Any, t: pa.DataType) -> Any:
    """An ordering value ``ts`` (small int) as a value of column type ``t``."""
    if ts is None or pa.types.is_integer(t):
        return ts
    if pa.types.is_timestamp(t):
        return pa.scalar(ts * 1_000_000, pa.timestamp("us", t.tz)).cast(t).as_py()
    return dt.date(1970, 1, 1) + dt.timedelta(days=ts)


def _typed_entry(entry: LogEntry, t: pa.DataType) -> LogEntry:
    if isinstance(entry, DataEntry):
        return DataEntry({**entry.row, "ts": _typed(entry.row["ts"], t)})
    if entry.ordering_class == "time":  # the Java-time wrappers hts wrote before (same values)
        if pa.types.is_timestamp(t):
            return DeleteEntry(entry.key, None, entry.ordering * 1_000_000, "TimestampMicrosWrapper")
        wrapper = (
            "DateWrapper" if pa.types.is_date(t) else ("IntWrapper" if t == pa.int32() else "LongWrapper")
        )
        return DeleteEntry(entry.key, None, entry.ordering, wrapper)
    if pa.types.is_timestamp(t) and entry.ordering_class == "LongWrapper" and entry.ordering is not None:
        return DeleteEntry(entry.key, None, entry.ordering * 1_000_000, "LongWrapper")  # micros
    return entry


def _check(
    bases: list[tuple[str, Any]],
    blocks: list[list[LogEntry]],
    mode: RecordMergeMode,
    marker: bool,
    ordering_type: pa.DataType,
) -> None:
    schema = schema_for(ordering_type)
    bases = [(k, _typed(ts, ordering_type)) for k, ts in bases]
    blocks = [[_typed_entry(e, ordering_type) for e in block] for block in blocks]
    base = [
        {
            KEY: k,
            "ts": ts,
            "v": f"base-{k}",
            "op": None,
            "_hoodie_is_deleted": None,
            "_hoodie_operation": None,
        }
        for k, ts in bases
    ]
    ctx = MergeConfig(
        mode,
        ("ts",),
        delete_field="op" if marker else None,
        delete_marker="D" if marker else None,
    )
    assert _vectorized(base, blocks, ctx, schema) == _per_record(base, blocks, ctx, schema)


@settings(max_examples=400, deadline=None)
@given(
    BASES,
    st.sampled_from(
        [
            (pa.int32(), "IntWrapper"),
            (pa.int64(), "LongWrapper"),
            (pa.timestamp("us"), "LongWrapper"),  # as Spark writes them: micros in a Long
            (pa.timestamp("ms", "UTC"), "LongWrapper"),
            (pa.date32(), "IntWrapper"),  # days in an Integer
        ]
    ).flatmap(lambda t: st.tuples(st.just(t[0]), log_blocks(t[1]))),
    st.sampled_from([RecordMergeMode.EVENT_TIME_ORDERING, RecordMergeMode.COMMIT_TIME_ORDERING]),
    st.booleans(),
)
def test_vectorized_merge_equals_the_per_record_engine(
    bases: list[tuple[str, int | None]],
    typed_blocks: tuple[pa.DataType, list[list[LogEntry]]],
    mode: RecordMergeMode,
    marker: bool,
) -> None:
    ordering_type, blocks = typed_blocks
    _check(bases, blocks, mode, marker, ordering_type)


def test_a_custom_delete_marker_matches_the_values_java_text() -> None:
    """``hoodie.payload.delete.marker`` is compared with the value's Java ``toString`` as the
    engine holds it (``RecordContext.isCustomDeleteRecord``): a double as ``Double.toString``
    (``1.0``, ``1.0E7``), a timestamp as its Long of micros, a date as its Integer of days."""
    at = dt.datetime(2024, 1, 1)
    micros = str((at - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1))
    cases = [
        (pa.float64(), [1.0, 2.0, 1e7], "1.0", ["k0"]),
        (pa.float64(), [1.0, 2.0, 1e7], "1.0E7", ["k2"]),
        (pa.timestamp("us"), [at, at + dt.timedelta(seconds=1), None], micros, ["k0"]),
        (pa.date32(), [dt.date(1970, 1, 3), dt.date(1970, 1, 2), None], "2", ["k0"]),
    ]
    for marker_type, values, marker, deleted in cases:
        schema = pa.schema([(KEY, pa.string()), ("ts", pa.int64()), ("m", marker_type)])
        base = [{KEY: f"k{i}", "ts": 1, "m": None} for i in range(3)]
        log = [DataEntry({KEY: f"k{i}", "ts": 2, "m": v}) for i, v in enumerate(values)]
        ctx = MergeConfig(
            RecordMergeMode.EVENT_TIME_ORDERING, ("ts",), delete_field="m", delete_marker=marker
        )
        expected = sorted(f"k{i}" for i in range(3) if f"k{i}" not in deleted)
        per_record = merge_file_group(base, log, ctx.with_schema(schema), lambda r: str(r[KEY]))
        assert sorted(r[KEY] for r in per_record) == expected, (marker_type, marker)
        data = pa.Table.from_pylist([e.row for e in log], schema)
        out = merge_slice(pa.Table.from_pylist(base, schema), [data], spec_for(ctx, KEY))
        assert sorted(out[KEY].to_pylist()) == expected, (marker_type, marker)
