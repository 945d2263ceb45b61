"""The per-record merge engine: EVENT_TIME and COMMIT_TIME merges, ordering values, delete markers,
partial-update modes, and the writer-side dedup.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from hoodie.errors import InvalidTableConfigError, SchemaError, UnsupportedTableError
from hoodie.merge.buffer import dedupe_incoming, merge_file_group
from hoodie.merge.config import (
    AWS_DMS_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    PAYLOAD_BASED_STRATEGY_ID,
    MergeConfig,
    OrderingClass,
    PartialUpdateMode,
    ordering_class_of_arrow,
)
from hoodie.merge.records import (
    BufferedRecord,
    DataEntry,
    DeleteEntry,
    LogEntry,
    compare_ordering,
    is_default_ordering,
    is_delete_row,
    java_string,
    ordering_value,
)
from tests.unit.merge_support import COMMIT, CT, CUSTOM, EV, EVENT, base, dele, key_of, merged_values, upd

D0 = DeleteEntry("a", "p", 0, "IntWrapper")
DNULL = DeleteEntry("a", "p", None, None)


# -- spec §1.7: the worked EVENT_TIME cases -------------------------------------------------------

WORKED_CASES = [
    ("B(10); U(5)", [base(10)], [upd(5)], ["base"]),
    ("B(10); U(10)", [base(10)], [upd(10)], ["u10"]),
    ("B(10); D(5)", [base(10)], [dele(5)], ["base"]),
    ("B(10); D(10)", [base(10)], [dele(10)], []),
    ("B(10); D0", [base(10)], [D0], []),
    ("B(10); D0, then U(3): base resurrected", [base(10)], [D0, upd(3)], ["base"]),
    ("B(10); D(15), then U(12)", [base(10)], [dele(15), upd(12)], []),
    ("B(10); D(15), then U(20)", [base(10)], [dele(15), upd(20)], ["u20"]),
    ("B(10); D(5), then U(3)", [base(10)], [dele(5), upd(3)], ["base"]),
    ("U(5), then D(3), log-only", [], [upd(5), dele(3)], ["u5"]),
    ("U(5L), then D(3 as Integer): class mismatch", [], [upd(5), dele(3, "IntWrapper")], []),
    ("U(5), then D0", [], [upd(5), D0], []),
    ("D(7), then D0", [], [dele(7), D0], []),
    ("D0, then D(7)", [], [D0, dele(7)], []),
    ("B(10); _hoodie_is_deleted row ts=5", [base(10)], [upd(5, _hoodie_is_deleted=True)], ["base"]),
    ("B(10); _hoodie_is_deleted row ts=null", [base(10)], [upd(None, _hoodie_is_deleted=True)], []),
    ("D0, D(9), U(3): the update wins", [], [D0, dele(9), upd(3)], ["u3"]),
    ("null-ordered delete entry is D0", [base(10)], [DNULL], []),
    ("data then delete, equal ordering: delete", [], [upd(4), dele(4)], []),
    ("delete then data, equal ordering: data", [], [dele(4), upd(4)], ["u4"]),
    ("data vs data tie: later wins", [], [upd(4), DataEntry({"k": "a", "ts": 4, "v": "later"})], ["later"]),
    ("LongWrapper 0 is not default", [base(10)], [dele(0), upd(3)], ["base"]),
]


@pytest.mark.parametrize(("case", "rows", "logs", "expected"), WORKED_CASES, ids=[c[0] for c in WORKED_CASES])
def test_event_time_worked_cases(
    case: str, rows: list[dict[str, Any]], logs: list[LogEntry], expected: list[str]
) -> None:
    assert merged_values(rows, logs) == expected


def test_int_column_zero_is_a_commit_time_delete() -> None:
    ctx = MergeConfig(EVENT, ("ts",), ordering_types={"ts": OrderingClass.INTEGER})
    assert merged_values([base(10)], [upd(0, _hoodie_is_deleted=True)], ctx) == []
    # a long column holding 0 is an ordinary (stale) delete
    assert merged_values([base(10)], [upd(0, _hoodie_is_deleted=True)]) == ["base"]


def test_base_row_flagged_deleted_is_emitted() -> None:
    row = base(10, _hoodie_is_deleted=True)
    assert merge_file_group([row], [], EV, key_of) == [row]


def test_output_order_is_base_then_first_log_appearance() -> None:
    logs: list[LogEntry] = [upd(1, k="z"), upd(1, k="b"), upd(2, k="z"), upd(5, k="a")]
    out = merge_file_group([base(1, k="a"), base(1, k="c")], logs, EV, key_of)
    assert [(r["k"], r["v"]) for r in out] == [("a", "u5"), ("c", "base"), ("z", "u2"), ("b", "u1")]


def test_base_row_wins_unchanged_object() -> None:
    row = base(10)
    assert merge_file_group([row], [upd(3)], EV, key_of)[0] is row


# -- COMMIT_TIME -----------------------------------------------------------------------------------

COMMIT_CASES = [
    ("log replaces base whatever the ordering", [base(10)], [upd(3)], ["u3"]),
    ("last log record wins", [base(1)], [upd(9), upd(2)], ["u2"]),
    ("a delete entry always applies", [base(1)], [dele(0, "LongWrapper")], []),
    ("a stale delete still applies", [base(100)], [upd(7), dele(5)], []),
    ("insert after delete revives", [base(10)], [D0, upd(3)], ["u3"]),
    ("data-row delete", [base(1)], [upd(5, _hoodie_is_deleted=True)], []),
    ("log-only delete emits nothing", [], [upd(5), D0], []),
]


@pytest.mark.parametrize(("case", "rows", "logs", "expected"), COMMIT_CASES, ids=[c[0] for c in COMMIT_CASES])
def test_commit_time_cases(
    case: str, rows: list[dict[str, Any]], logs: list[LogEntry], expected: list[str]
) -> None:
    assert merged_values(rows, logs, CT) == expected


def test_commit_time_ignores_ordering_fields() -> None:
    assert MergeConfig(COMMIT, ("ts",)).ordering_fields == ()
    # string vs int orderings would not even compare; commit time never compares them
    logs: list[LogEntry] = [DataEntry({"k": "a", "ts": "x", "v": "s"}), upd(1)]
    assert merged_values([base(10)], logs, CT) == ["u1"]


# -- ordering values -------------------------------------------------------------------------------


def test_multiple_ordering_fields_compare_lexicographically() -> None:
    ctx = MergeConfig(EVENT, ("a", "b"))
    b = {"k": "x", "a": 2, "b": 5, "v": "base"}
    lower = DataEntry({"k": "x", "a": 2, "b": 4, "v": "lower"})
    higher = DataEntry({"k": "x", "a": 3, "b": 0, "v": "higher"})
    assert [r["v"] for r in merge_file_group([b], [lower], ctx, key_of)] == ["base"]
    assert [r["v"] for r in merge_file_group([b], [higher], ctx, key_of)] == ["higher"]
    tie = DataEntry({"k": "x", "a": 2, "b": 5, "v": "tie"})
    assert [r["v"] for r in merge_file_group([b], [tie], ctx, key_of)] == ["tie"]
    # a multi-field delete entry: same classes, strictly greater existing value keeps the row
    stale = DeleteEntry("x", None, (2, 1), ("LongWrapper", "LongWrapper"))
    assert [r["v"] for r in merge_file_group([], [higher, stale], ctx, key_of)] == ["higher"]
    newer = DeleteEntry("x", None, (3, 0), "LongWrapper")
    assert merge_file_group([], [higher, newer], ctx, key_of) == []


def test_ordering_value_defaults() -> None:
    assert ordering_value({"ts": None}, ["ts"]) == 0
    assert ordering_value({"ts": 5}, []) == 0
    assert ordering_value({"a": 1, "b": None}, ["a", "b"]) == (1, 0)
    assert ordering_value(None, ["ts"]) == 0
    assert is_default_ordering(0)
    assert not is_default_ordering(0, OrderingClass.LONG)
    assert not is_default_ordering(0.0, OrderingClass.DOUBLE)
    assert not is_default_ordering((0, 0), (OrderingClass.INTEGER, OrderingClass.INTEGER))
    assert not is_default_ordering(False, OrderingClass.INTEGER)


def test_null_ordering_values() -> None:
    # a null ordering value is Integer 0; it compares (widened) with long values
    assert merged_values([base(10)], [upd(None)]) == ["base"]
    assert merged_values([base(None)], [upd(None)]) == ["uNone"]
    assert merged_values([base(-3)], [upd(None)]) == ["uNone"]
    # a null-ordered data row in an event-time table with a string ordering column cannot compare
    ctx = MergeConfig(EVENT, ("ts",))
    with pytest.raises(SchemaError, match="not comparable"):
        merge_file_group([{"k": "a", "ts": "2024"}], [upd(None)], ctx, key_of)


def test_compare_ordering_widens_numbers_and_rejects_mixed_types() -> None:
    assert compare_ordering(1, 2.5) == -1
    assert compare_ordering(Decimal("2.5"), 2.5) == 0
    assert compare_ordering((1, "b"), (1, "a")) == 1
    with pytest.raises(SchemaError):
        compare_ordering("1", 1)
    with pytest.raises(SchemaError):
        compare_ordering(True, 1)
    with pytest.raises(SchemaError):
        compare_ordering((1, 2), (1,))


def test_ordering_classes() -> None:
    assert OrderingClass.of("IntWrapper") is OrderingClass.INTEGER
    assert OrderingClass.of("LongWrapper") is OrderingClass.LONG
    assert OrderingClass.of("TimestampMicrosWrapper") is OrderingClass.TIMESTAMP
    assert OrderingClass.of("java.lang.Long") is OrderingClass.LONG
    assert OrderingClass.of("double") is OrderingClass.DOUBLE
    with pytest.raises(SchemaError, match="FooWrapper"):
        OrderingClass.of("FooWrapper")
    assert ordering_class_of_arrow(pa.int32()) is OrderingClass.INTEGER
    assert ordering_class_of_arrow(pa.int64()) is OrderingClass.LONG
    assert ordering_class_of_arrow(pa.float32()) is OrderingClass.FLOAT
    assert ordering_class_of_arrow(pa.float64()) is OrderingClass.DOUBLE
    assert ordering_class_of_arrow(pa.string()) is OrderingClass.STRING
    # Spark's rows (and Avro's) hold a timestamp as a Long of micros and a date as an Integer of days
    assert ordering_class_of_arrow(pa.timestamp("us")) is OrderingClass.LONG
    assert ordering_class_of_arrow(pa.date32()) is OrderingClass.INTEGER
    with pytest.raises(SchemaError):
        ordering_class_of_arrow(pa.struct([("x", pa.int32())]))
    schema = pa.schema([("k", pa.string()), ("ts", pa.int32())])
    assert MergeConfig(EVENT, ("ts",)).with_schema(schema).ordering_types == {"ts": OrderingClass.INTEGER}


def test_delete_record_ordering() -> None:
    assert BufferedRecord.delete("k").is_commit_time_delete
    assert BufferedRecord.delete("k", 0, "IntWrapper").is_commit_time_delete
    assert not BufferedRecord.delete("k", 0, "LongWrapper").is_commit_time_delete
    assert BufferedRecord.delete("k", 0).is_commit_time_delete  # an int without a wrapper is an Integer
    assert BufferedRecord.delete("k", 7).ordering_class is OrderingClass.INTEGER
    multi = BufferedRecord.delete("k", [1, None, "x"], "ArrayWrapper")
    assert multi.ordering == (1, 0, "x")
    assert multi.ordering_class == (OrderingClass.INTEGER, OrderingClass.INTEGER, OrderingClass.STRING)
    typed = BufferedRecord.delete("k", (1, 2), ("LongWrapper", "IntWrapper"))
    assert typed.ordering_class == (OrderingClass.LONG, OrderingClass.INTEGER)
    assert not typed.is_commit_time_delete


# -- delete markers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "deleted"),
    [
        ({"_hoodie_is_deleted": True}, True),
        ({"_hoodie_is_deleted": False}, False),
        ({"_hoodie_is_deleted": None}, False),
        ({"_hoodie_operation": "D"}, True),
        ({"_hoodie_operation": "-U"}, True),
        ({"_hoodie_operation": "U"}, False),
        ({"_hoodie_operation": "I"}, False),
        ({"_hoodie_operation": None}, False),
        ({"op": "d"}, False),
    ],
)
def test_builtin_delete_markers(row: dict[str, Any], deleted: bool) -> None:
    assert is_delete_row(row, EV) is deleted


def test_unknown_operation_is_rejected() -> None:
    with pytest.raises(SchemaError, match="'X'"):
        is_delete_row({"_hoodie_operation": "X"}, EV)


def test_custom_delete_marker_is_exact() -> None:
    ctx = MergeConfig(COMMIT, delete_field="op", delete_marker="D")
    assert is_delete_row({"op": "D"}, ctx)
    assert not is_delete_row({"op": "d"}, ctx)
    assert not is_delete_row({"op": None}, ctx)
    flag = MergeConfig(COMMIT, delete_field="gone", delete_marker="true")
    assert is_delete_row({"gone": True}, flag)
    assert merged_values([base(1)], [upd(2, op="D")], ctx) == []
    with pytest.raises(InvalidTableConfigError, match="op"):
        MergeConfig(COMMIT, delete_field="op")


def test_java_string() -> None:
    assert java_string(True) == "true"
    assert java_string(1.0) == "1.0"
    assert java_string(1e10) == "1.0E10"
    assert java_string(1.5e-5) == "1.5E-5"
    assert java_string(b"D") == "D"
    assert java_string(12) == "12"


# -- partial-update modes --------------------------------------------------------------------------


def test_ignore_defaults_fills_nulls_from_the_older_record() -> None:
    ctx = MergeConfig(EVENT, ("ts",), partial_update_mode=PartialUpdateMode.IGNORE_DEFAULTS)
    b = {"k": "a", "ts": 1, "name": "n1", "price": 10}
    out = merge_file_group([b], [DataEntry({"k": "a", "ts": 2, "name": None, "price": 20})], ctx, key_of)
    assert out == [{"k": "a", "ts": 2, "name": "n1", "price": 20}]
    # the losing, older-ordered update still fills the winner's nulls
    b2 = {"k": "a", "ts": 5, "name": "n1", "price": None}
    out = merge_file_group([b2], [DataEntry({"k": "a", "ts": 2, "name": "late", "price": 7})], ctx, key_of)
    assert out == [{"k": "a", "ts": 5, "name": "n1", "price": 7}]
    # log vs log, then a delete skips partial merging
    logs: list[LogEntry] = [DataEntry({"k": "a", "ts": 2, "name": "x", "price": None}), dele(9)]
    assert merge_file_group([b], logs, ctx, key_of) == []


def test_ignore_defaults_uses_java_reference_semantics() -> None:
    ctx = MergeConfig(
        COMMIT,
        partial_update_mode=PartialUpdateMode.IGNORE_DEFAULTS,
        field_defaults={"n": 0, "s": "", "big": 1000},
    )
    b = {"k": "a", "n": 5, "s": "old", "big": 1, "x": "keep"}
    new = DataEntry({"k": "a", "n": 0, "s": "", "big": 1000, "x": None})
    # small boxed ints and nulls match their default by reference; strings and large ints do not
    assert merge_file_group([b], [new], ctx, key_of) == [
        {"k": "a", "n": 5, "s": "", "big": 1000, "x": "keep"}
    ]


def test_fill_unavailable_replaces_marker_values() -> None:
    marker = "__debezium_unavailable_value"
    ctx = MergeConfig(
        EVENT, ("ts",), partial_update_mode=PartialUpdateMode.FILL_UNAVAILABLE, unavailable_marker=marker
    )
    b = {"k": "a", "ts": 1, "doc": "big text", "blob": b"old", "n": 1}
    new = DataEntry({"k": "a", "ts": 2, "doc": marker, "blob": marker.encode(), "n": 2})
    assert merge_file_group([b], [new], ctx, key_of) == [
        {"k": "a", "ts": 2, "doc": "big text", "blob": b"old", "n": 2}
    ]
    assert PartialUpdateMode.parse("IGNORE_MARKERS") is PartialUpdateMode.FILL_UNAVAILABLE
    assert PartialUpdateMode.parse("NONE") is None
    with pytest.raises(UnsupportedTableError, match="KEEP_VALUES"):
        PartialUpdateMode.parse("KEEP_VALUES")


def test_is_partial_blocks_keep_values() -> None:
    b = {"k": "a", "ts": 1, "name": "n1", "price": 10}
    partial = DataEntry({"k": "a", "ts": 3, "price": 30}, is_partial=True)
    assert merge_file_group([b], [partial], EV, key_of) == [{"k": "a", "ts": 3, "name": "n1", "price": 30}]
    assert merge_file_group([b], [partial], CT, key_of) == [{"k": "a", "ts": 3, "name": "n1", "price": 30}]
    # a lower-ordered partial update loses; the full base row wins unchanged
    stale = DataEntry({"k": "a", "ts": 0, "price": 0}, is_partial=True)
    assert merge_file_group([b], [stale], EV, key_of) == [b]
    # two partial rows combine, then the base fills the rest; later full rows still merge
    logs: list[LogEntry] = [
        DataEntry({"k": "a", "ts": 2, "name": "n2"}, is_partial=True),
        DataEntry({"k": "a", "ts": 4, "price": 40}, is_partial=True),
    ]
    assert merge_file_group([b], logs, EV, key_of) == [{"k": "a", "ts": 4, "name": "n2", "price": 40}]
    # the partial merger stays in force; a delete entry keeps the ordinary rules
    assert merge_file_group([b], [partial, dele(2)], EV, key_of) == [
        {"k": "a", "ts": 3, "name": "n1", "price": 30}
    ]
    assert merge_file_group([b], [partial, dele(3)], EV, key_of) == []
    # a log-only partial row keeps only its columns
    assert merge_file_group([], [partial], EV, key_of) == [{"k": "a", "ts": 3, "price": 30}]


def test_is_partial_block_with_payload_merger_is_unsupported() -> None:
    ctx = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, PARTIAL_UPDATE_PAYLOAD)
    partial = DataEntry({"k": "a", "ts": 3, "price": 30}, is_partial=True)
    with pytest.raises(UnsupportedTableError, match=PAYLOAD_BASED_STRATEGY_ID):
        merge_file_group([{"k": "a", "ts": 1, "price": 1}], [partial], ctx, key_of)


# -- writer-side dedup -----------------------------------------------------------------------------


def test_dedupe_incoming() -> None:
    rows = [
        {"k": "a", "ts": 5, "v": 1},
        {"k": "b", "ts": 1, "v": 2},
        {"k": "a", "ts": 3, "v": 3},
        {"k": "a", "ts": 5, "v": 4},
    ]
    assert dedupe_incoming(rows, EV, key_of) == [{"k": "a", "ts": 5, "v": 4}, {"k": "b", "ts": 1, "v": 2}]
    assert dedupe_incoming(rows[:3], CT, key_of) == [{"k": "a", "ts": 3, "v": 3}, {"k": "b", "ts": 1, "v": 2}]
    # a commit-time delete wins whatever its position
    deleted = {"k": "a", "ts": None, "v": 9, "_hoodie_is_deleted": True}
    assert dedupe_incoming([rows[0], deleted], EV, key_of) == [deleted]
    # payload tables use preCombine: OverwriteNonDefaults keeps the newer; DMS the greater ordering
    non_defaults = MergeConfig(
        CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, "OverwriteNonDefaultsWithLatestAvroPayload"
    )
    assert dedupe_incoming(rows[:3], non_defaults, key_of)[0] == {"k": "a", "ts": 3, "v": 3}
    dms = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, AWS_DMS_PAYLOAD)
    assert dedupe_incoming(rows[:3], dms, key_of)[0] == {"k": "a", "ts": 5, "v": 1}
    partial = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, PARTIAL_UPDATE_PAYLOAD)
    both = [{"k": "a", "ts": 5, "x": None, "y": 1}, {"k": "a", "ts": 3, "x": 2, "y": 3}]
    assert dedupe_incoming(both, partial, key_of) == [{"k": "a", "ts": 5, "x": 2, "y": 1}]
