"""Merge-config resolution: the mode, ordering fields, payload and markers of every fixture table and of
each table version's properties, and the merge properties written for a new table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie.config.table_config import TableConfig, TableVersion, read_table_properties
from hoodie.errors import InvalidTableConfigError
from hoodie.io.fileio import LocalFileIO
from hoodie.merge.buffer import merge_file_group
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
    PartialUpdateMode,
    merge_properties_for_new_table,
    v9_merge_properties_for_payload,
)
from hoodie.merge.payloads import payload_for
from hoodie.merge.records import DataEntry
from hoodie.merge.resolve import resolve_merge_config
from tests.conftest import fixture_names, fixture_path
from tests.unit.merge_support import (
    COMMIT,
    CUSTOM,
    EVENT,
    MODE_KEY,
    PAYLOAD_KEY,
    STRATEGY_KEY,
    key_of,
    table_config,
)

PROP = "hoodie.record.merge.property."
UNAVAILABLE_PROP = PROP + "hoodie.write.partial.update.unavailable.value"


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
    assert (
        resolve_merge_config(table_config(6, **v6, **{"hoodie.table.precombine.field": "ts"})).mode is COMMIT
    )
    # v8: the strategy id wins; a payload-based id makes any payload CUSTOM
    ctx = resolve_merge_config(
        table_config(8, **{PAYLOAD_KEY: DEFAULT_PAYLOAD, STRATEGY_KEY: PAYLOAD_BASED_STRATEGY_ID})
    )
    assert (ctx.mode, ctx.payload_class) == (CUSTOM, DEFAULT_PAYLOAD)
    # v8 agreement check between payload and strategy id
    with pytest.raises(InvalidTableConfigError, match=COMMIT_TIME_STRATEGY_ID):
        resolve_merge_config(
            table_config(8, **{PAYLOAD_KEY: DEFAULT_PAYLOAD, STRATEGY_KEY: COMMIT_TIME_STRATEGY_ID})
        )
    # a configured mode must equal the inferred one
    with pytest.raises(InvalidTableConfigError, match="COMMIT_TIME_ORDERING"):
        resolve_merge_config(
            table_config(8, **{MODE_KEY: "COMMIT_TIME_ORDERING", PAYLOAD_KEY: DEFAULT_PAYLOAD})
        )
    # nothing set: 1.x readers default the payload to DefaultHoodieRecordPayload
    assert resolve_merge_config(table_config(6)).mode is EVENT
    assert resolve_merge_config(
        table_config(6, **{"hoodie.table.precombine.field": "ts"})
    ).ordering_fields == ("ts",)
    assert resolve_merge_config(table_config(8, **{MODE_KEY: "COMMIT_TIME_ORDERING"})).payload_class == (
        OVERWRITE_WITH_LATEST_PAYLOAD
    )
    # other payloads on v6/v8 are CUSTOM with the payload-based strategy id
    dms = resolve_merge_config(table_config(8, **{PAYLOAD_KEY: AWS_DMS_PAYLOAD}))
    assert (dms.mode, dms.strategy_id) == (CUSTOM, PAYLOAD_BASED_STRATEGY_ID)
    with pytest.raises(InvalidTableConfigError, match="CUSTOM"):
        resolve_merge_config(table_config(9, **{MODE_KEY: "CUSTOM"}))


def test_v9_merge_properties_and_markers() -> None:
    props = {
        MODE_KEY: "COMMIT_TIME_ORDERING",
        "hoodie.table.legacy.payload.class": AWS_DMS_PAYLOAD,
        PROP + "hoodie.payload.delete.field": "Op",
        PROP + "hoodie.payload.delete.marker": "D",
    }
    ctx = resolve_merge_config(table_config(9, **props))
    assert (ctx.mode, ctx.delete_field, ctx.delete_marker, ctx.payload_class) == (
        COMMIT,
        "Op",
        "D",
        AWS_DMS_PAYLOAD,
    )
    assert merge_file_group([{"k": "a", "Op": "I"}], [DataEntry({"k": "a", "Op": "D"})], ctx, key_of) == []
    pg_props = v9_merge_properties_for_payload(POSTGRES_DEBEZIUM_PAYLOAD)
    pctx = resolve_merge_config(table_config(9, **pg_props, **{"hoodie.table.ordering.fields": "_event_lsn"}))
    assert (pctx.mode, pctx.partial_update_mode) == (EVENT, PartialUpdateMode.FILL_UNAVAILABLE)
    assert pctx.unavailable_marker == "__debezium_unavailable_value"
    half = {MODE_KEY: "EVENT_TIME_ORDERING", PROP + "hoodie.payload.delete.field": "Op"}
    with pytest.raises(InvalidTableConfigError, match="Op"):
        resolve_merge_config(table_config(9, **half))
    # plain write-time keys work too (v6/v8 tables get the marker from the writer)
    wctx = resolve_merge_config(
        table_config(8), {"hoodie.payload.delete.field": "op", "hoodie.payload.delete.marker": "x"}
    )
    assert (wctx.delete_field, wctx.delete_marker) == ("op", "x")


def test_writer_payload_override() -> None:
    v8 = {MODE_KEY: "EVENT_TIME_ORDERING", PAYLOAD_KEY: DEFAULT_PAYLOAD, STRATEGY_KEY: EVENT_TIME_STRATEGY_ID}
    ctx = resolve_merge_config(
        table_config(8, **v8), {"hoodie.datasource.write.payload.class": "PartialUpdateAvroPayload"}
    )
    assert (ctx.mode, ctx.strategy_id, ctx.payload_class) == (
        CUSTOM,
        PAYLOAD_BASED_STRATEGY_ID,
        PARTIAL_UPDATE_PAYLOAD,
    )
    v9 = table_config(9, **{MODE_KEY: "EVENT_TIME_ORDERING"})
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
    assert resolve_merge_config(table_config(9, **props)).mode.value == mode


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
