"""The merger registry with CUSTOM mergers, and the payloads (``preCombine``,
``combineAndGetUpdateValue``, ``getInsertValue``) of each payload class Hudi ships.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from hoodie.errors import InvalidInputError, InvalidTableConfigError, UnsupportedTableError
from hoodie.merge.buffer import dedupe_incoming, merge_file_group
from hoodie.merge.config import (
    AWS_DMS_PAYLOAD,
    DEFAULT_PAYLOAD,
    EVENT_TIME_STRATEGY_ID,
    OVERWRITE_WITH_LATEST_PAYLOAD,
    PARTIAL_UPDATE_PAYLOAD,
    PAYLOAD_BASED_STRATEGY_ID,
    POSTGRES_DEBEZIUM_PAYLOAD,
    MergeConfig,
)
from hoodie.merge.mergers import (
    RecordMerger,
    record_merger_for,
    register_record_merger,
    unregister_record_merger,
)
from hoodie.merge.payloads import is_current_seq_latest, payload_for
from hoodie.merge.records import BufferedRecord, DataEntry, DeleteEntry, LogEntry
from hoodie.merge.resolve import resolve_merge_config
from tests.unit.merge_support import (
    CUSTOM,
    MODE_KEY,
    PAYLOAD_KEY,
    STRATEGY_KEY,
    base,
    dele,
    key_of,
    merged_values,
    table_config,
    upd,
)

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


@pytest.mark.usefixtures("sum_merger")
def test_custom_merger_selected_by_strategy_id() -> None:
    cfg = table_config(9, **{MODE_KEY: "CUSTOM", STRATEGY_KEY: SUM_ID})
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
    v8 = table_config(8, **{STRATEGY_KEY: SUM_ID})
    assert resolve_merge_config(v8).mode is CUSTOM
    with pytest.raises(InvalidTableConfigError, match=SUM_ID):
        register_record_merger(EventMergerWithSumId())


class EventMergerWithSumId(SumMerger):
    pass


def test_unknown_strategy_id_is_unsupported() -> None:
    cfg = table_config(9, **{MODE_KEY: "CUSTOM", STRATEGY_KEY: "nope-id"})
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
    cfg = table_config(8, **{PAYLOAD_KEY: "com.example.MyPayload"})
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
