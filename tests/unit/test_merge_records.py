"""The per-record merge engine, merge-config resolution, the merger registry and the payloads."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hoodie.config.table_config import RecordMergeMode, TableConfig, TableVersion, read_table_properties
from hoodie.errors import InvalidInputError, InvalidTableConfigError, SchemaError, UnsupportedTableError
from hoodie.io.fileio import LocalFileIO
from hoodie.merge.buffer import dedupe_incoming, merge_file_group
from hoodie.merge.config import (
    AWS_DMS_PAYLOAD,
    COMMIT_TIME_STRATEGY_ID,
    CUSTOM_STRATEGY_ID,
    DEFAULT_PAYLOAD,
    EVENT_TIME_STRATEGY_ID,
    OVERWRITE_WITH_LATEST_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    PAYLOAD_BASED_STRATEGY_ID,
    POSTGRES_DEBEZIUM_PAYLOAD,
    MergeConfig,
    OrderingClass,
    PartialUpdateMode,
    merge_properties_for_new_table,
    ordering_class_of_arrow,
    v9_merge_properties_for_payload,
)
from hoodie.merge.mergers import (
    RecordMerger,
    record_merger_for,
    register_record_merger,
    unregister_record_merger,
)
from hoodie.merge.payloads import is_current_seq_latest, payload_for
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
from hoodie.merge.resolve import resolve_merge_config
from tests.conftest import fixture_names, fixture_path

EVENT = RecordMergeMode.EVENT_TIME_ORDERING
COMMIT = RecordMergeMode.COMMIT_TIME_ORDERING
CUSTOM = RecordMergeMode.CUSTOM

# An EVENT_TIME table ordered by a long column ``ts``.
EV = MergeConfig(EVENT, ("ts",), ordering_types={"ts": OrderingClass.LONG})
MODE_KEY = "hoodie.record.merge.mode"
STRATEGY_KEY = "hoodie.record.merge.strategy.id"
PAYLOAD_KEY = "hoodie.compaction.payload.class"
PROP = "hoodie.record.merge.property."
UNAVAILABLE_PROP = PROP + "hoodie.write.partial.update.unavailable.value"
CT = MergeConfig(COMMIT)


def key_of(row: dict[str, Any]) -> str:
    return str(row["k"])


def base(ts: int | None, k: str = "a", **extra: Any) -> dict[str, Any]:
    return {"k": k, "ts": ts, "v": "base", **extra}


def upd(ts: int | None, k: str = "a", **extra: Any) -> DataEntry:
    return DataEntry({"k": k, "ts": ts, "v": f"u{ts}", **extra})


def dele(ts: Any, wrapper: str | None = "LongWrapper", k: str = "a") -> DeleteEntry:
    return DeleteEntry(k, "p", ts, wrapper)


D0 = DeleteEntry("a", "p", 0, "IntWrapper")
DNULL = DeleteEntry("a", "p", None, None)


def merged_values(rows: list[dict[str, Any]], logs: list[LogEntry], ctx: MergeConfig = EV) -> list[str]:
    return [r["v"] for r in merge_file_group(rows, logs, ctx, key_of)]


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


# -- CUSTOM mergers --------------------------------------------------------------------------------

SUM_ID = "5b1e5e2a-0000-4000-8000-00000000beef"


class SumMerger(RecordMerger):
    """Adds up ``amount``; a delete wins."""

    strategy_id = SUM_ID

    def merge(self, older: BufferedRecord, newer: BufferedRecord, ctx: MergeConfig) -> BufferedRecord:
        if newer.is_delete or older.values is None:
            return newer
        assert newer.values is not None
        total = older.values["amount"] + newer.values["amount"]
        return BufferedRecord(
            newer.key, {**newer.values, "amount": total}, newer.ordering, newer.ordering_class
        )


@pytest.fixture()
def sum_merger() -> Iterator[None]:
    register_record_merger(SumMerger)
    yield
    unregister_record_merger(SUM_ID)


def _table(version: int, **props: str) -> TableConfig:
    return TableConfig.from_properties(
        {"hoodie.table.name": "t", "hoodie.table.version": str(version), **props}
    )


@pytest.mark.usefixtures("sum_merger")
def test_custom_merger_selected_by_strategy_id() -> None:
    cfg = _table(9, **{MODE_KEY: "CUSTOM", STRATEGY_KEY: SUM_ID})
    ctx = resolve_merge_config(cfg)
    assert (ctx.mode, ctx.strategy_id) == (CUSTOM, SUM_ID)
    assert isinstance(record_merger_for(SUM_ID), SumMerger)
    rows = [{"k": "a", "amount": 1}, {"k": "b", "amount": 5}]
    logs: list[LogEntry] = [
        DataEntry({"k": "a", "amount": 2}),
        DataEntry({"k": "a", "amount": 3}),
        DataEntry({"k": "c", "amount": 7}),
        DeleteEntry("b"),
    ]
    assert merge_file_group(rows, logs, ctx, key_of) == [{"k": "a", "amount": 6}, {"k": "c", "amount": 7}]
    assert dedupe_incoming([{"k": "a", "amount": 2}, {"k": "a", "amount": 3}], ctx, key_of) == [
        {"k": "a", "amount": 5}
    ]
    v8 = _table(8, **{STRATEGY_KEY: SUM_ID})
    assert resolve_merge_config(v8).mode is CUSTOM
    with pytest.raises(InvalidTableConfigError, match=SUM_ID):
        register_record_merger(EventMergerWithSumId())


class EventMergerWithSumId(SumMerger):
    pass


def test_unknown_strategy_id_is_unsupported() -> None:
    cfg = _table(9, **{MODE_KEY: "CUSTOM", STRATEGY_KEY: "nope-id"})
    with pytest.raises(UnsupportedTableError, match="nope-id"):
        resolve_merge_config(cfg)
    with pytest.raises(UnsupportedTableError, match="nope-id"):
        record_merger_for("nope-id")
    assert record_merger_for(EVENT_TIME_STRATEGY_ID).strategy_id == EVENT_TIME_STRATEGY_ID
    with pytest.raises(InvalidTableConfigError):
        unregister_record_merger(EVENT_TIME_STRATEGY_ID)


def test_payload_based_merging_in_file_group() -> None:
    ctx = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, PARTIAL_UPDATE_PAYLOAD)
    b = {"k": "a", "ts": 1, "name": "n1", "price": None}
    logs: list[LogEntry] = [
        DataEntry({"k": "a", "ts": 3, "name": None, "price": 30}),
        DataEntry({"k": "a", "ts": 2, "name": "late", "price": 20}),
    ]
    # log vs log uses combineAndGetUpdateValue; ts=2 loses to ts=3 but fills its null name
    assert merge_file_group([b], logs, ctx, key_of) == [{"k": "a", "ts": 3, "name": "late", "price": 30}]
    dms = MergeConfig(CUSTOM, (), PAYLOAD_BASED_STRATEGY_ID, AWS_DMS_PAYLOAD)
    assert merge_file_group([{"k": "a", "Op": "I"}], [DataEntry({"k": "a", "Op": "d"})], dms, key_of) == []
    assert (
        merge_file_group([{"k": "a", "Op": "I"}], [DeleteEntry("a", None, 5, "LongWrapper")], dms, key_of)
        == []
    )
    default = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, DEFAULT_PAYLOAD)
    assert merged_values([base(10)], [upd(3)], default) == ["base"]
    assert merged_values([base(10)], [dele(3)], default) == []  # an empty payload always deletes


# -- payloads --------------------------------------------------------------------------------------

PCTX = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, DEFAULT_PAYLOAD)


def rec(ts: Any, **values: Any) -> BufferedRecord:
    return BufferedRecord.from_row("k", {"ts": ts, **values}, PCTX, is_delete=False)


def test_payload_registry() -> None:
    assert payload_for("DefaultHoodieRecordPayload") is payload_for(DEFAULT_PAYLOAD)
    assert payload_for("com.uber.hoodie.common.model.DefaultHoodieRecordPayload") is payload_for(
        DEFAULT_PAYLOAD
    )
    with pytest.raises(UnsupportedTableError, match=r"com\.example\.MyPayload"):
        payload_for("com.example.MyPayload")
    cfg = _table(8, **{PAYLOAD_KEY: "com.example.MyPayload"})
    with pytest.raises(UnsupportedTableError, match=r"com\.example\.MyPayload"):
        resolve_merge_config(cfg)


def test_overwrite_with_latest_payload() -> None:
    p = payload_for(OVERWRITE_WITH_LATEST_PAYLOAD)
    older, newer = rec(9, v=1), rec(1, v=2)
    assert p.pre_combine(older, newer, PCTX) is newer  # 1.x: the newer duplicate, whatever the ordering
    assert p.combine_and_get_update_value({"ts": 9, "v": 1}, newer, PCTX) == {"ts": 1, "v": 2}
    assert p.combine_and_get_update_value({"ts": 9}, rec(1, _hoodie_is_deleted=True), PCTX) is None
    assert p.combine_and_get_update_value({"ts": 9}, None, PCTX) is None
    assert p.get_insert_value({"ts": 1, "_hoodie_operation": "D"}, PCTX) is None
    # _hoodie_is_deleted present decides alone; -U is not a payload delete
    assert (
        p.get_insert_value({"ts": 1, "_hoodie_is_deleted": False, "_hoodie_operation": "D"}, PCTX) is not None
    )
    assert p.get_insert_value({"ts": 1, "_hoodie_operation": "-U"}, PCTX) is not None


def test_default_payload() -> None:
    p = payload_for(DEFAULT_PAYLOAD)
    older, newer = rec(9), rec(1)
    assert p.pre_combine(older, newer, PCTX) is older
    assert p.pre_combine(rec(1), newer, PCTX) is newer  # ties: newer
    assert p.pre_combine(None, newer, PCTX) is newer
    current = {"ts": 5, "v": "stored"}
    assert p.combine_and_get_update_value(current, rec(4, v="in"), PCTX) is current
    assert p.combine_and_get_update_value(current, rec(5, v="in"), PCTX) == {"ts": 5, "v": "in"}
    assert p.combine_and_get_update_value(current, rec(6, _hoodie_is_deleted=True), PCTX) is None
    assert p.combine_and_get_update_value(current, rec(4, _hoodie_is_deleted=True), PCTX) is current
    assert p.combine_and_get_update_value(current, None, PCTX) is None
    assert p.combine_and_get_update_value({"ts": None}, rec(1, v="in"), PCTX) == {"ts": 1, "v": "in"}
    marker = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, DEFAULT_PAYLOAD, None, "op", "del")
    # with a custom marker the built-in flag is not consulted
    assert p.get_insert_value({"ts": 1, "op": "del"}, marker) is None
    assert p.get_insert_value({"ts": 1, "op": "x", "_hoodie_is_deleted": True}, marker) is not None


def test_event_time_payload() -> None:
    p = payload_for("EventTimeAvroPayload")
    current = {"ts": 5, "v": "stored"}
    assert p.combine_and_get_update_value(current, rec(4, v="in"), PCTX) is current
    assert p.combine_and_get_update_value(current, rec(6, v="in"), PCTX) == {"ts": 6, "v": "in"}
    # a delete always wins, even when older
    assert p.combine_and_get_update_value(current, rec(1, _hoodie_is_deleted=True), PCTX) is None
    assert p.pre_combine(rec(9), rec(1), PCTX).ordering == 9


def test_overwrite_non_defaults_payload() -> None:
    p = payload_for("OverwriteNonDefaultsWithLatestAvroPayload")
    ctx = MergeConfig(CUSTOM, ("ts",), PAYLOAD_BASED_STRATEGY_ID, field_defaults={"qty": 0})
    current = {"ts": 1, "name": "n1", "qty": 4}
    incoming = rec(2, name=None, qty=0)
    assert p.combine_and_get_update_value(current, incoming, ctx) == {"ts": 2, "name": "n1", "qty": 4}
    assert p.combine_and_get_update_value(current, rec(2, name="n2", qty=3), ctx) == {
        "ts": 2,
        "name": "n2",
        "qty": 3,
    }
    assert p.combine_and_get_update_value(current, rec(2, _hoodie_is_deleted=True), ctx) is None
    newer = rec(0)
    assert p.pre_combine(rec(9), newer, ctx) is newer


def test_partial_update_payload() -> None:
    p = payload_for(PARTIAL_UPDATE_PAYLOAD)
    # case 1 of the payload's documentation: the incoming record is newer
    current = {"id": 1, "ts": 1, "name": "name_1", "price": "price_1"}
    assert p.combine_and_get_update_value(current, rec(2, id=1, name=None, price="price_2"), PCTX) == {
        "ts": 2,
        "id": 1,
        "name": "name_1",
        "price": "price_2",
    }
    # case 2: the stored record is newer; its values win, the incoming fills its nulls
    current = {"id": 1, "ts": 2, "name": "name_1", "price": None}
    assert p.combine_and_get_update_value(current, rec(1, id=1, name=None, price="price_1"), PCTX) == {
        "ts": 2,
        "id": 1,
        "name": "name_1",
        "price": "price_1",
    }
    # with meta fields, an out-of-order update keeps the incoming meta fields
    stored = {"_hoodie_commit_time": "c1", "ts": 5, "name": "a", "price": None}
    late = rec(3, _hoodie_commit_time="c2", name="b", price="p")
    out = p.combine_and_get_update_value(stored, late, PCTX)
    assert out == {"ts": 5, "_hoodie_commit_time": "c2", "name": "a", "price": "p"}
    assert p.combine_and_get_update_value(stored, rec(9, _hoodie_is_deleted=True), PCTX) is None
    # preCombine: the greater ordering wins field-wise and carries its ordering value
    merged = p.pre_combine(rec(7, name="old", price=None), rec(3, name=None, price="new"), PCTX)
    assert (merged.values, merged.ordering) == ({"ts": 7, "name": "old", "price": "new"}, 7)
    newer = rec(3, _hoodie_is_deleted=True)
    assert p.pre_combine(rec(7, name="old"), newer, PCTX) is newer


def test_mysql_debezium_payload() -> None:
    p = payload_for("org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload")
    assert is_current_seq_latest("2.5", "1.900")
    assert not is_current_seq_latest("1.900", "2.5")
    assert is_current_seq_latest("1.10", "1.9")  # numeric, not string, comparison
    assert not is_current_seq_latest("1.10", "1.10")  # ties: the incoming record
    current = {"id": 1, "_event_seq": "3.100", "v": "stored"}
    assert p.combine_and_get_update_value(current, rec(0, _event_seq="3.99", v="in"), PCTX) is current
    assert p.combine_and_get_update_value(current, rec(0, _event_seq="3.100", v="in"), PCTX)["v"] == "in"
    assert (
        p.combine_and_get_update_value(current, rec(0, _event_seq="4.1", _change_operation_type="d"), PCTX)
        is None
    )
    assert p.combine_and_get_update_value({"id": 1}, rec(0, _event_seq="0.1", v="in"), PCTX)["v"] == "in"
    with pytest.raises(InvalidInputError, match="_event_seq"):
        p.combine_and_get_update_value(current, rec(0, v="no seq"), PCTX)
    seq_ctx = MergeConfig(CUSTOM, ("_event_seq",), PAYLOAD_BASED_STRATEGY_ID)
    older = BufferedRecord.from_row("k", {"_event_seq": "2.10"}, seq_ctx)
    newer = BufferedRecord.from_row("k", {"_event_seq": "2.9"}, seq_ctx)
    assert p.pre_combine(older, newer, seq_ctx) is older


def test_postgres_debezium_payload() -> None:
    p = payload_for(POSTGRES_DEBEZIUM_PAYLOAD)
    toast = "__debezium_unavailable_value"
    current = {"_event_lsn": 100, "doc": "long text", "blob": b"bytes", "n": 1}
    assert p.combine_and_get_update_value(current, rec(0, _event_lsn=99, doc="x"), PCTX) is current
    incoming = rec(0, _event_lsn=100, doc=toast, blob=toast.encode(), n=2)
    out = p.combine_and_get_update_value(current, incoming, PCTX)
    assert out == {"ts": 0, "_event_lsn": 100, "doc": "long text", "blob": b"bytes", "n": 2}
    assert (
        p.combine_and_get_update_value(current, rec(0, _event_lsn=101, _change_operation_type="D"), PCTX)
        is None
    )
    with pytest.raises(InvalidInputError, match="_event_lsn"):
        p.combine_and_get_update_value(current, rec(0), PCTX)


def test_aws_dms_payload() -> None:
    p = payload_for("AWSDmsAvroPayload")
    current = {"ts": 9, "Op": "I", "v": "stored"}
    # no ordering check against storage
    assert p.combine_and_get_update_value(current, rec(1, Op="U", v="in"), PCTX) == {
        "ts": 1,
        "Op": "U",
        "v": "in",
    }
    assert p.combine_and_get_update_value(current, rec(1, Op="D"), PCTX) is None
    assert p.combine_and_get_update_value(current, rec(1, Op="d"), PCTX) is None
    assert p.get_insert_value({"Op": "D"}, PCTX) is None
    assert p.get_insert_value({"Op": None, "v": 1}, PCTX) == {"Op": None, "v": 1}
    older = rec(9)
    assert p.pre_combine(older, rec(1), PCTX) is older


# -- merge-config resolution -------------------------------------------------------------------------

FIXTURE_MERGE = {
    "quickstart_trips_table/mor/avro/v6_trips_8i1u": (COMMIT, (), OVERWRITE_WITH_LATEST_PAYLOAD),
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d": (EVENT, ("ts",), DEFAULT_PAYLOAD),
    "sample_table/cow/v6_nonpartitioned": (EVENT, ("longField",), DEFAULT_PAYLOAD),
    "sample_table/cow/v8_empty": (COMMIT, (), OVERWRITE_WITH_LATEST_PAYLOAD),
    "sample_table/cow/v8_nonpartitioned": (EVENT, ("longField",), DEFAULT_PAYLOAD),
    "sample_table/cow/v8_simplekeygen_nonhivestyle": (EVENT, ("longField",), DEFAULT_PAYLOAD),
    "sample_table/cow/v9_txns_simple_nometa": (EVENT, ("txn_ts",), None),
    "sample_table/mor/avro/v9_nonpartitioned_rollback": (EVENT, ("txn_ts",), None),
    "sample_table/mor/avro/v9_txns_nonpart_nometa": (EVENT, ("txn_ts",), None),
    "sample_table/mor/avro/v9_txns_simple_meta": (EVENT, ("txn_ts",), None),
    "sample_table/mor/avro/v9_txns_simple_nometa": (EVENT, ("txn_ts",), None),
    "sample_table/mor/parquet/v6_empty": (COMMIT, (), OVERWRITE_WITH_LATEST_PAYLOAD),
    "sample_table/mor/parquet/v6_nonpartitioned": (COMMIT, (), OVERWRITE_WITH_LATEST_PAYLOAD),
    "sample_table/mor/parquet/v6_nonpartitioned_rollback": (COMMIT, (), OVERWRITE_WITH_LATEST_PAYLOAD),
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle": (COMMIT, (), OVERWRITE_WITH_LATEST_PAYLOAD),
}


def _fixture_props(fixture_root: Path, name: str) -> dict[str, str]:
    return read_table_properties(LocalFileIO(), str(fixture_path(fixture_root, name) / ".hoodie"))


def test_every_fixture_has_an_expectation() -> None:
    assert set(fixture_names()) == set(FIXTURE_MERGE)


@pytest.mark.parametrize("name", sorted(FIXTURE_MERGE))
def test_fixture_merge_config(fixture_root: Path, name: str) -> None:
    props = _fixture_props(fixture_root, name)
    ctx = resolve_merge_config(TableConfig.from_properties(props))
    mode, ordering, payload = FIXTURE_MERGE[name]
    assert (ctx.mode, ctx.ordering_fields, ctx.payload_class) == (mode, ordering, payload)
    expected_id = EVENT_TIME_STRATEGY_ID if mode is EVENT else COMMIT_TIME_STRATEGY_ID
    assert ctx.strategy_id == expected_id
    assert ctx.partial_update_mode is None
    assert ctx.delete_field is None


@pytest.mark.parametrize("name", sorted(n for n in FIXTURE_MERGE if "/v6_" not in n or "mor" in n))
def test_new_table_properties_match_fixtures(fixture_root: Path, name: str) -> None:
    props = _fixture_props(fixture_root, name)
    cfg = TableConfig.from_properties(props)
    ctx = resolve_merge_config(cfg)
    payload = props.get(PAYLOAD_KEY)
    written = merge_properties_for_new_table(ctx.mode, cfg.ordering_fields, cfg.table_version, payload)
    merge_keys = {k: v for k, v in props.items() if k in written or "merge" in k or "payload" in k}
    ordering_keys = {"hoodie.table.precombine.field", "hoodie.table.ordering.fields"}
    merge_keys.update({k: v for k, v in props.items() if k in ordering_keys})
    assert written == merge_keys


def test_pre_v9_inference_rules() -> None:
    # v6: the payload wins over the strategy id
    v6 = {
        PAYLOAD_KEY: OVERWRITE_WITH_LATEST_PAYLOAD,
        "hoodie.compaction.record.merger.strategy": EVENT_TIME_STRATEGY_ID,
    }
    assert resolve_merge_config(_table(6, **v6, **{"hoodie.table.precombine.field": "ts"})).mode is COMMIT
    # v8: the strategy id wins; a payload-based id makes any payload CUSTOM
    ctx = resolve_merge_config(
        _table(8, **{PAYLOAD_KEY: DEFAULT_PAYLOAD, STRATEGY_KEY: PAYLOAD_BASED_STRATEGY_ID})
    )
    assert (ctx.mode, ctx.payload_class) == (CUSTOM, DEFAULT_PAYLOAD)
    # v8 agreement check between payload and strategy id
    with pytest.raises(InvalidTableConfigError, match=COMMIT_TIME_STRATEGY_ID):
        resolve_merge_config(
            _table(8, **{PAYLOAD_KEY: DEFAULT_PAYLOAD, STRATEGY_KEY: COMMIT_TIME_STRATEGY_ID})
        )
    # a configured mode must equal the inferred one
    with pytest.raises(InvalidTableConfigError, match="COMMIT_TIME_ORDERING"):
        resolve_merge_config(_table(8, **{MODE_KEY: "COMMIT_TIME_ORDERING", PAYLOAD_KEY: DEFAULT_PAYLOAD}))
    # nothing set: 1.x readers default the payload to DefaultHoodieRecordPayload
    assert resolve_merge_config(_table(6)).mode is EVENT
    assert resolve_merge_config(_table(6, **{"hoodie.table.precombine.field": "ts"})).ordering_fields == (
        "ts",
    )
    assert resolve_merge_config(_table(8, **{MODE_KEY: "COMMIT_TIME_ORDERING"})).payload_class == (
        OVERWRITE_WITH_LATEST_PAYLOAD
    )
    # other payloads on v6/v8 are CUSTOM with the payload-based strategy id
    dms = resolve_merge_config(_table(8, **{PAYLOAD_KEY: AWS_DMS_PAYLOAD}))
    assert (dms.mode, dms.strategy_id) == (CUSTOM, PAYLOAD_BASED_STRATEGY_ID)
    with pytest.raises(InvalidTableConfigError, match="CUSTOM"):
        resolve_merge_config(_table(9, **{MODE_KEY: "CUSTOM"}))


def test_v9_merge_properties_and_markers() -> None:
    props = {
        MODE_KEY: "COMMIT_TIME_ORDERING",
        "hoodie.table.legacy.payload.class": AWS_DMS_PAYLOAD,
        PROP + "hoodie.payload.delete.field": "Op",
        PROP + "hoodie.payload.delete.marker": "D",
    }
    ctx = resolve_merge_config(_table(9, **props))
    assert (ctx.mode, ctx.delete_field, ctx.delete_marker, ctx.payload_class) == (
        COMMIT,
        "Op",
        "D",
        AWS_DMS_PAYLOAD,
    )
    assert merge_file_group([{"k": "a", "Op": "I"}], [DataEntry({"k": "a", "Op": "D"})], ctx, key_of) == []
    pg_props = v9_merge_properties_for_payload(POSTGRES_DEBEZIUM_PAYLOAD)
    pctx = resolve_merge_config(_table(9, **pg_props, **{"hoodie.table.ordering.fields": "_event_lsn"}))
    assert (pctx.mode, pctx.partial_update_mode) == (EVENT, PartialUpdateMode.FILL_UNAVAILABLE)
    assert pctx.unavailable_marker == "__debezium_unavailable_value"
    half = {MODE_KEY: "EVENT_TIME_ORDERING", PROP + "hoodie.payload.delete.field": "Op"}
    with pytest.raises(InvalidTableConfigError, match="Op"):
        resolve_merge_config(_table(9, **half))
    # plain write-time keys work too (v6/v8 tables get the marker from the writer)
    wctx = resolve_merge_config(
        _table(8), {"hoodie.payload.delete.field": "op", "hoodie.payload.delete.marker": "x"}
    )
    assert (wctx.delete_field, wctx.delete_marker) == ("op", "x")


def test_writer_payload_override() -> None:
    v8 = {MODE_KEY: "EVENT_TIME_ORDERING", PAYLOAD_KEY: DEFAULT_PAYLOAD, STRATEGY_KEY: EVENT_TIME_STRATEGY_ID}
    ctx = resolve_merge_config(
        _table(8, **v8), {"hoodie.datasource.write.payload.class": "PartialUpdateAvroPayload"}
    )
    assert (ctx.mode, ctx.strategy_id, ctx.payload_class) == (
        CUSTOM,
        PAYLOAD_BASED_STRATEGY_ID,
        PARTIAL_UPDATE_PAYLOAD,
    )
    v9 = _table(9, **{MODE_KEY: "EVENT_TIME_ORDERING"})
    ctx9 = resolve_merge_config(v9, {"hoodie.datasource.write.payload.class": AWS_DMS_PAYLOAD})
    assert (ctx9.mode, ctx9.strategy_id) == (COMMIT, COMMIT_TIME_STRATEGY_ID)


EXPECTED_V9 = {
    "DefaultHoodieRecordPayload": ("EVENT_TIME_ORDERING", None, {}),
    "EventTimeAvroPayload": ("EVENT_TIME_ORDERING", None, {}),
    "OverwriteWithLatestAvroPayload": ("COMMIT_TIME_ORDERING", None, {}),
    "OverwriteNonDefaultsWithLatestAvroPayload": ("COMMIT_TIME_ORDERING", "IGNORE_DEFAULTS", {}),
    "PartialUpdateAvroPayload": ("EVENT_TIME_ORDERING", "IGNORE_DEFAULTS", {}),
    "AWSDmsAvroPayload": (
        "COMMIT_TIME_ORDERING",
        None,
        {
            PROP + "hoodie.payload.delete.field": "Op",
            PROP + "hoodie.payload.delete.marker": "D",
        },
    ),
    "MySqlDebeziumAvroPayload": (
        "EVENT_TIME_ORDERING",
        None,
        {"hoodie.table.ordering.fields": "_event_bin_file,_event_pos"},
    ),
    "PostgresDebeziumAvroPayload": (
        "EVENT_TIME_ORDERING",
        "FILL_UNAVAILABLE",
        {UNAVAILABLE_PROP: "__debezium_unavailable_value"},
    ),
}


@pytest.mark.parametrize("short", sorted(EXPECTED_V9))
def test_v9_properties_for_deprecated_payloads(short: str) -> None:
    props = v9_merge_properties_for_payload(short)
    mode, partial, extra = EXPECTED_V9[short]
    expected = {
        MODE_KEY: mode,
        STRATEGY_KEY: EVENT_TIME_STRATEGY_ID if mode.startswith("EVENT") else COMMIT_TIME_STRATEGY_ID,
        "hoodie.table.legacy.payload.class": payload_for(short).class_name,
        **({"hoodie.table.partial.update.mode": partial} if partial else {}),
        **extra,
    }
    assert props == expected
    assert resolve_merge_config(_table(9, **props)).mode.value == mode


def test_v9_properties_for_a_custom_payload() -> None:
    assert v9_merge_properties_for_payload("com.example.P") == {
        MODE_KEY: "CUSTOM",
        PAYLOAD_KEY: "com.example.P",
        STRATEGY_KEY: PAYLOAD_BASED_STRATEGY_ID,
    }


def test_new_table_properties() -> None:
    assert merge_properties_for_new_table(
        CUSTOM, ["ts"], TableVersion.NINE, strategy_id=CUSTOM_STRATEGY_ID
    ) == {
        MODE_KEY: "CUSTOM",
        STRATEGY_KEY: CUSTOM_STRATEGY_ID,
        "hoodie.table.ordering.fields": "ts",
    }
    assert merge_properties_for_new_table(EVENT, ["a", "b"], TableVersion.NINE) == {
        MODE_KEY: "EVENT_TIME_ORDERING",
        "hoodie.table.ordering.fields": "a,b",
    }
    assert merge_properties_for_new_table(COMMIT, [], TableVersion.SIX) == {
        PAYLOAD_KEY: OVERWRITE_WITH_LATEST_PAYLOAD,
        "hoodie.compaction.record.merger.strategy": EVENT_TIME_STRATEGY_ID,
    }
    assert merge_properties_for_new_table(CUSTOM, ["ts"], TableVersion.EIGHT, "AWSDmsAvroPayload") == {
        MODE_KEY: "CUSTOM",
        PAYLOAD_KEY: AWS_DMS_PAYLOAD,
        STRATEGY_KEY: PAYLOAD_BASED_STRATEGY_ID,
        "hoodie.table.precombine.field": "ts",
    }
    v9 = merge_properties_for_new_table(EVENT, ["ts"], TableVersion.NINE, PARTIAL_UPDATE_PAYLOAD)
    assert v9["hoodie.table.partial.update.mode"] == "IGNORE_DEFAULTS"
    assert v9["hoodie.table.ordering.fields"] == "ts"
    with pytest.raises(InvalidTableConfigError, match="a,b"):
        merge_properties_for_new_table(EVENT, ["a", "b"], TableVersion.EIGHT)
    with pytest.raises(InvalidTableConfigError, match="COMMIT_TIME_ORDERING"):
        merge_properties_for_new_table(COMMIT, ["ts"], TableVersion.SIX, DEFAULT_PAYLOAD)
    with pytest.raises(InvalidTableConfigError):
        merge_properties_for_new_table(COMMIT, [], TableVersion.NINE, PARTIAL_UPDATE_PAYLOAD)


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


# -- properties ------------------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "c"])


@st.composite
def log_entries(draw: st.DrawFn, with_zero_deletes: bool = True) -> list[LogEntry]:
    out: list[LogEntry] = []
    for i in range(draw(st.integers(0, 12))):
        key = draw(KEYS)
        kind = draw(
            st.sampled_from(
                ["data", "data-delete", "delete", "zero"]
                if with_zero_deletes
                else ["data", "data-delete", "delete"]
            )
        )
        ts = draw(st.integers(1, 5))
        if kind == "data":
            out.append(DataEntry({"k": key, "ts": ts, "v": f"{key}{i}"}))
        elif kind == "data-delete":
            out.append(DataEntry({"k": key, "ts": ts, "v": f"{key}{i}", "_hoodie_is_deleted": True}))
        elif kind == "delete":
            out.append(DeleteEntry(key, None, ts, "LongWrapper"))
        else:
            out.append(DeleteEntry(key, None, 0, "IntWrapper"))
    return out


BASES = st.lists(st.tuples(KEYS, st.integers(1, 5)), unique_by=lambda t: t[0]).map(
    lambda bs: [{"k": k, "ts": ts, "v": f"base-{k}"} for k, ts in bs]
)


def _blocks(entries: list[LogEntry], cuts: list[int]) -> Iterator[LogEntry]:
    """The entries delivered block by block from a lazy generator."""
    points = sorted({c % (len(entries) + 1) for c in cuts} | {0, len(entries)})
    blocks = [entries[a:b] for a, b in itertools.pairwise(points)]
    for block in blocks:
        yield from block


@settings(max_examples=300, deadline=None)
@given(BASES, log_entries(), st.lists(st.integers(0, 20), max_size=5), st.sampled_from([EV, CT]))
def test_block_split_independence(
    rows: list[dict[str, Any]], entries: list[LogEntry], cuts: list[int], ctx: MergeConfig
) -> None:
    whole = merge_file_group(rows, list(entries), ctx, key_of)
    assert merge_file_group(iter(rows), _blocks(entries, cuts), ctx, key_of) == whole


@settings(max_examples=300, deadline=None)
@given(BASES, log_entries())
def test_commit_time_is_last_write_wins(rows: list[dict[str, Any]], entries: list[LogEntry]) -> None:
    last: dict[str, LogEntry] = {}
    for entry in entries:
        last[entry.key if isinstance(entry, DeleteEntry) else entry.row["k"]] = entry
    expected = {r["k"]: r for r in rows}
    for key, entry in last.items():
        if isinstance(entry, DeleteEntry) or entry.row.get("_hoodie_is_deleted"):
            expected.pop(key, None)
        else:
            expected[key] = entry.row
    out = merge_file_group(rows, entries, CT, key_of)
    assert {r["k"]: r for r in out} == expected
    assert len(out) == len(expected)


def _event_time_oracle(base_row: dict[str, Any] | None, entries: list[LogEntry]) -> dict[str, Any] | None:
    """Spec §8.6, stated independently of the fold: cut at the last commit-time delete, drop delete
    entries until the next data row, then the row with the greatest (ordering, position) wins."""
    state: tuple[int, bool, dict[str, Any] | None] | None = None  # (ordering, is_delete, row)
    cut = max(
        (i for i, e in enumerate(entries) if isinstance(e, DeleteEntry) and e.ordering == 0), default=None
    )
    tail = entries if cut is None else entries[cut + 1 :]
    if cut is not None:
        first_data = next((i for i, e in enumerate(tail) if isinstance(e, DataEntry)), None)
        if first_data is None:
            return None
        tail = tail[first_data:]
    best: tuple[int, int] | None = None
    for pos, e in enumerate(tail):
        ts = e.ordering if isinstance(e, DeleteEntry) else e.row["ts"]
        if best is None or (ts, pos) >= best:
            best = (ts, pos)
            state = (
                ts,
                isinstance(e, DeleteEntry) or bool(e.row.get("_hoodie_is_deleted")),
                getattr(e, "row", None),
            )
    if state is None:
        return base_row
    ts, is_delete, row = state
    if base_row is not None and ts < base_row["ts"]:
        return base_row
    return None if is_delete else row


@settings(max_examples=400, deadline=None)
@given(BASES, log_entries())
def test_event_time_matches_the_vectorisable_rule(
    rows: list[dict[str, Any]], entries: list[LogEntry]
) -> None:
    out = {r["k"]: r for r in merge_file_group(rows, entries, EV, key_of)}
    by_key = {r["k"]: r for r in rows}
    for key in ("a", "b", "c"):
        mine = [e for e in entries if (e.key if isinstance(e, DeleteEntry) else e.row["k"]) == key]
        assert out.get(key) == _event_time_oracle(by_key.get(key), mine)
