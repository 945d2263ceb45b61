"""Avro <-> Arrow schemas and the Avro record codec, checked against tables Apache Hudi wrote.

The fixture checks parse log files with a minimal block reader of their own (format digest
§4.1), so they do not depend on the log-file module.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoodie.errors import CorruptFileError, SchemaError
from hoodie.schema import avro_decoder
from hoodie.schema.avro_arrow import (
    META_FIELDS,
    NullOrder,
    add_meta_fields,
    arrow_to_avro_schema,
    avro_to_arrow_schema,
    decimal_fixed_size,
    decode_avro_block_content,
    decode_avro_records,
    encode_avro_block_content,
    encode_avro_records,
    schema_to_json,
)
from tests.conftest import fixture_names, fixture_path

FIXTURES = fixture_names()
AVRO_DATA, PARQUET_DATA = 3, 5
INSTANT_TIME, SCHEMA = 0, 2


# -- reading the fixtures -------------------------------------------------------------------------


def _properties(table: Path) -> dict[str, str]:
    out = {}
    for line in (table / ".hoodie" / "hoodie.properties").read_text().splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key] = value.replace("\\:", ":").replace("\\=", "=").replace("\\\\", "\\")
    return out


def _blocks(path: Path) -> list[tuple[int, dict[int, str], bytes]]:
    """(block type, header, content) of every block of a log file."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 6] == b"#HUDI#"
        (length,) = struct.unpack_from(">q", data, pos + 6)
        _, kind, entries = struct.unpack_from(">iii", data, pos + 14)
        at, header = pos + 26, {}
        for _ in range(entries):
            key, size = struct.unpack_from(">ii", data, at)
            header[key] = data[at + 8 : at + 8 + size].decode()
            at += 8 + size
        (content_length,) = struct.unpack_from(">q", data, at)
        out.append((kind, header, data[at + 8 : at + 8 + content_length]))
        pos += length + 14
    return out


def _log_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob(".*.log.*") if ".hoodie" not in p.relative_to(table).parts)


def _data_blocks(table: Path, kind: int) -> list[tuple[Path, dict[int, str], bytes]]:
    return [(f, h, c) for f in _log_files(table) for k, h, c in _blocks(f) if k == kind]


def _commit_schemas(table: Path) -> set[str]:
    """``extraMetadata.schema`` of every completed commit/deltacommit (v6 JSON, v8+ Avro)."""
    out = set()
    for path in [*(table / ".hoodie").glob("*commit"), *(table / ".hoodie" / "timeline").glob("*commit")]:
        raw = path.read_bytes()
        if raw.startswith(b"Obj\x01"):
            with path.open("rb") as f:
                record: Any = next(iter(fastavro.reader(f)))
                extra = dict(record["extraMetadata"] or {})
        else:
            extra = json.loads(raw).get("extraMetadata") or {} if raw.strip() else {}
        if extra.get("schema"):
            out.add(extra["schema"])
    return out


def _table_avro(table: Path, order: NullOrder) -> dict[str, Any]:
    props = _properties(table)
    name = props["hoodie.table.name"]
    arrow = avro_to_arrow_schema(props["hoodie.table.create.schema"])
    return arrow_to_avro_schema(arrow, f"{name}_record", f"hoodie.{name}", null_order=order)


# -- schemas against the fixtures -----------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_create_schema_round_trips_to_the_same_json(fixture_root: Path, name: str) -> None:
    table = fixture_path(fixture_root, name)
    created = _properties(table)["hoodie.table.create.schema"]
    assert schema_to_json(_table_avro(table, NullOrder.LAST)) == created


@pytest.mark.parametrize("name", FIXTURES)
def test_commit_metadata_schema_is_the_null_first_form(fixture_root: Path, name: str) -> None:
    table = fixture_path(fixture_root, name)
    schemas = _commit_schemas(table)
    expected = schema_to_json(_table_avro(table, NullOrder.FIRST))
    assert schemas <= {expected}
    if not name.endswith("_empty"):
        assert schemas == {expected}


@pytest.mark.parametrize("name", FIXTURES)
def test_log_block_schema_header_is_meta_fields_plus_table_schema(fixture_root: Path, name: str) -> None:
    table = fixture_path(fixture_root, name)
    expected = schema_to_json(add_meta_fields(_table_avro(table, NullOrder.FIRST)))
    headers = {h[SCHEMA] for kind in (AVRO_DATA, PARQUET_DATA) for _, h, _ in _data_blocks(table, kind)}
    assert headers <= {expected}
    if _log_files(table) and "rollback" not in name:  # v8+ rollback deleted its only data log
        assert headers == {expected}


def _without_list_nullability(typ: pa.DataType) -> pa.DataType:
    """parquet-avro's legacy 2-level lists read as ``list<array: T not null>``; relax that."""
    if pa.types.is_list(typ):
        return pa.list_(pa.field("element", _without_list_nullability(typ.value_type)))
    if pa.types.is_struct(typ):
        return pa.struct([f.with_type(_without_list_nullability(f.type)) for f in typ])
    if pa.types.is_map(typ):
        return pa.map_(typ.key_field, typ.item_field.with_type(_without_list_nullability(typ.item_type)))
    return typ


@pytest.mark.parametrize("name", FIXTURES)
def test_arrow_schema_is_what_the_parquet_base_files_hold(fixture_root: Path, name: str) -> None:
    table = fixture_path(fixture_root, name)
    created = json.loads(_properties(table)["hoodie.table.create.schema"])
    expected = avro_to_arrow_schema(add_meta_fields(created))
    files = [p for p in table.rglob("*.parquet") if ".hoodie" not in p.relative_to(table).parts]
    for path in files:
        actual = pq.read_schema(path)
        metadata = actual.metadata or {}
        if b"parquet.avro.schema" in metadata:  # written by parquet-avro: legacy lists
            assert avro_to_arrow_schema(metadata[b"parquet.avro.schema"].decode()) == expected
            relaxed = pa.schema([f.with_type(_without_list_nullability(f.type)) for f in actual])
            assert relaxed == expected, path.name
        else:  # written by Spark
            assert actual.remove_metadata() == expected, path.name


@pytest.mark.parametrize("name", FIXTURES)
def test_arrow_schema_is_what_hudi_rs_reports(fixture_root: Path, name: str) -> None:
    table = fixture_path(fixture_root, name)
    created = _properties(table)["hoodie.table.create.schema"]
    reported = HudiTableBuilder.from_base_uri(str(table)).build().get_schema()
    assert reported.remove_metadata() == avro_to_arrow_schema(created)


@pytest.mark.parametrize("name", [n for n in FIXTURES if "/parquet/" in n and "empty" not in n])
def test_parquet_log_blocks_hold_the_arrow_schema_of_their_header(fixture_root: Path, name: str) -> None:
    blocks = _data_blocks(fixture_path(fixture_root, name), PARQUET_DATA)
    assert blocks
    for _, header, content in blocks:
        assert pq.read_schema(pa.BufferReader(content)).remove_metadata() == avro_to_arrow_schema(
            header[SCHEMA]
        )


# -- decoding the fixtures' Avro data blocks ------------------------------------------------------

AVRO_TABLES = [n for n in FIXTURES if "/avro/" in n and "rollback" not in n]


@pytest.mark.parametrize("name", AVRO_TABLES)
def test_every_avro_block_decodes_and_re_encodes_to_the_same_bytes(fixture_root: Path, name: str) -> None:
    blocks = _data_blocks(fixture_path(fixture_root, name), AVRO_DATA)
    assert blocks
    for path, header, content in blocks:
        writer = header[SCHEMA]
        schema = avro_to_arrow_schema(writer)
        fast = decode_avro_block_content(content, writer, schema)
        slow = decode_avro_block_content(content, writer, schema, vectorized=False)
        assert fast.equals(slow)
        assert fast.num_rows == struct.unpack_from(">i", content, 4)[0] > 0
        # the record's commit time is the block's instant; its file name is the file id
        assert set(fast["_hoodie_commit_time"].to_pylist()) == {header[INSTANT_TIME]}
        assert set(fast["_hoodie_file_name"].to_pylist()) == {path.name[1:].split("_")[0]}
        assert encode_avro_block_content(fast, writer) == content
        assert encode_avro_block_content(fast, writer, vectorized=False) == content


@pytest.mark.parametrize("name", AVRO_TABLES)
def test_decoded_log_records_equal_hudi_rs_rows(fixture_root: Path, name: str) -> None:
    table = fixture_path(fixture_root, name)
    batches = HudiTableBuilder.from_base_uri(str(table)).build().read()
    snapshot = {
        (r["_hoodie_record_key"], r["_hoodie_commit_seqno"]): r for b in batches for r in b.to_pylist()
    }
    matched = 0
    for _, header, content in _data_blocks(table, AVRO_DATA):
        decoded = decode_avro_block_content(content, header[SCHEMA], avro_to_arrow_schema(header[SCHEMA]))
        for row in decoded.to_pylist():
            seen = snapshot.get((row["_hoodie_record_key"], row["_hoodie_commit_seqno"]))
            if seen is None:  # superseded by a later write
                continue
            # compaction keeps seqno but renames the file; a log record names its file id
            assert {**seen, "_hoodie_file_name": None} == {**row, "_hoodie_file_name": None}
            matched += 1
    assert matched > 0


# -- schema conversion details --------------------------------------------------------------------


def test_meta_fields_are_prepended_exactly_as_hudi_writes_them() -> None:
    base = {
        "type": "record",
        "name": "t_record",
        "namespace": "hoodie.t",
        "fields": [{"name": "x", "type": "int"}],
    }
    added = add_meta_fields(base)
    assert [f["name"] for f in added["fields"]] == [*META_FIELDS, "x"]
    assert added["fields"][0] == {
        "name": "_hoodie_commit_time",
        "type": ["null", "string"],
        "doc": "",
        "default": None,
    }
    assert add_meta_fields(added) == added
    assert list(avro_to_arrow_schema(added).names[:5]) == list(META_FIELDS)


@pytest.mark.parametrize(
    ("precision", "size"), [(1, 1), (2, 1), (3, 2), (9, 4), (10, 5), (15, 7), (18, 8), (19, 9), (38, 16)]
)
def test_decimal_fixed_size_is_sparks_minimum(precision: int, size: int) -> None:
    assert decimal_fixed_size(precision) == size


def test_arrow_to_avro_maps_every_supported_type() -> None:
    schema = pa.schema(
        [
            pa.field("i8", pa.int8()),
            pa.field("u32", pa.uint32(), nullable=False),
            pa.field("f16", pa.float16()),
            pa.field("ls", pa.large_string()),
            pa.field("ts_s", pa.timestamp("s", tz="Asia/Tokyo")),
            pa.field("ts_ns", pa.timestamp("ns")),
            pa.field("t32", pa.time32("s")),
            pa.field("d64", pa.date64()),
            pa.field("dict", pa.dictionary(pa.int8(), pa.string())),
            pa.field("fx", pa.binary(4)),
            pa.field("n", pa.null()),
        ]
    )
    fields = {f["name"]: f for f in arrow_to_avro_schema(schema, "r", "ns")["fields"]}
    assert fields["i8"] == {"name": "i8", "type": ["null", "int"], "default": None}
    assert fields["u32"] == {"name": "u32", "type": "long"}
    assert fields["f16"]["type"] == ["null", "float"]
    assert fields["ls"]["type"] == ["null", "string"]
    assert fields["ts_s"]["type"][1] == {"type": "long", "logicalType": "timestamp-millis"}
    assert fields["ts_ns"]["type"][1] == {"type": "long", "logicalType": "local-timestamp-nanos"}
    assert fields["t32"]["type"][1] == {"type": "int", "logicalType": "time-millis"}
    assert fields["d64"]["type"][1] == {"type": "int", "logicalType": "date"}
    assert fields["dict"]["type"] == ["null", "string"]
    assert fields["fx"]["type"][1] == {"type": "fixed", "name": "fixed", "namespace": "ns.r.fx", "size": 4}
    assert fields["n"] == {"name": "n", "type": "null", "default": None}


@pytest.mark.parametrize(
    "typ",
    [pa.duration("s"), pa.map_(pa.int32(), pa.int32()), pa.month_day_nano_interval(), pa.dense_union([])],
)
def test_arrow_types_without_an_avro_form_are_schema_errors(typ: pa.DataType) -> None:
    with pytest.raises(SchemaError, match=r"r\.bad"):
        arrow_to_avro_schema(pa.schema([pa.field("bad", typ)]), "r", "")


def test_avro_to_arrow_maps_logical_types_enums_and_named_references() -> None:
    avro = {
        "type": "record",
        "name": "r",
        "namespace": "a.b",
        "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["X", "Y"]}},
            {"name": "e2", "type": ["null", "a.b.E"]},
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "bd", "type": {"type": "bytes", "logicalType": "decimal", "precision": 40, "scale": 3}},
            {"name": "bad", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 9}},
            {"name": "tm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "lt", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "weird", "type": {"type": "int", "logicalType": "timestamp-micros"}},
            {"name": "onlynull", "type": ["null"]},
        ],
    }
    schema = avro_to_arrow_schema(json.dumps(avro))
    assert schema.field("e").type == pa.string() and not schema.field("e").nullable
    assert schema.field("e2").type == pa.string() and schema.field("e2").nullable
    assert schema.field("u").type == pa.string()
    assert schema.field("bd").type == pa.decimal256(40, 3)
    assert schema.field("bad").type == pa.binary()  # invalid logical types are ignored
    assert schema.field("tm").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("lt").type == pa.timestamp("us")
    assert schema.field("weird").type == pa.int32()
    assert schema.field("onlynull").type == pa.null()


@pytest.mark.parametrize(
    ("avro", "message"),
    [
        ({"type": "record", "name": "r", "fields": [{"name": "u", "type": ["int", "string"]}]}, "union"),
        ({"type": "record", "name": "r", "fields": [{"name": "me", "type": ["null", "r"]}]}, "recursive"),
        ({"type": "record", "name": "r", "fields": [{"name": "x", "type": "nope"}]}, "'nope'"),
        ({"type": "array", "items": "int"}, "record"),
        ("{not json", "JSON"),
    ],
)
def test_invalid_or_unsupported_avro_schemas_are_schema_errors(avro: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        avro_to_arrow_schema(avro)


# -- codec behaviour ------------------------------------------------------------------------------

ALL_TYPES = pa.schema(
    [
        pa.field("id", pa.int32(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("dec", pa.decimal128(10, 5)),
        pa.field("big", pa.decimal128(38, 3)),
        pa.field("huge", pa.decimal256(50, 2)),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ntz", pa.timestamp("ms")),
        pa.field("ns", pa.timestamp("ns", tz="UTC")),
        pa.field("bin", pa.binary()),
        pa.field("arr", pa.list_(pa.field("element", pa.struct([("f1", pa.string()), ("f2", pa.int32())])))),
        pa.field("m", pa.map_(pa.string(), pa.struct([("x", pa.float64()), ("y", pa.bool_())]))),
        pa.field(
            "s", pa.struct([("a", pa.string()), ("c", pa.struct([("c1", pa.float32()), ("c2", pa.bool_())]))])
        ),
        pa.field("ints", pa.list_(pa.field("element", pa.int64(), nullable=False))),
        pa.field("fx", pa.binary(3)),
        pa.field("t", pa.time64("us")),
        pa.field("tm", pa.time32("ms")),
    ]
)

ROWS = [
    {
        "id": 1,
        "name": "ä",
        "dec": decimal.Decimal("12345.67891"),
        "big": decimal.Decimal("-12345678901234567890123456789012345.123"),
        "huge": decimal.Decimal("-" + "9" * 48 + ".99"),
        "d": dt.date(2020, 1, 1),
        "ts": dt.datetime(2021, 1, 1, tzinfo=dt.UTC),
        "ntz": dt.datetime(2021, 1, 1, 1, 1, 1, 1000),
        "ns": 1_700_000_000_123_456_789,
        "bin": b"\x00\xff",
        "arr": [{"f1": "x", "f2": 1}, None, {"f1": None, "f2": -3}],
        "m": [("k1", {"x": 1.5, "y": True}), ("k2", None)],
        "s": {"a": "q", "c": {"c1": 2.5, "c2": None}},
        "ints": list(range(-40, 40)),
        "fx": b"abc",
        "t": dt.time(1, 2, 3, 4),
        "tm": dt.time(23, 59, 59, 999000),
    },
    {"id": 2} | {f.name: None for f in ALL_TYPES if f.name != "id"},
    {
        "id": -(2**31),
        "name": "",
        "dec": decimal.Decimal("-0.00001"),
        "big": decimal.Decimal("0"),
        "huge": decimal.Decimal("1"),
        "d": dt.date(1, 1, 1),
        "ts": -(2**62),  # far outside Python's datetime range
        "ntz": 2**62,
        "ns": -1,
        "bin": b"",
        "arr": [],
        "m": [],
        "s": {"a": None, "c": None},
        "ints": [2**63 - 1, -(2**63)],
        "fx": b"\x00\x00\x00",
        "t": dt.time(0),
        "tm": dt.time(0),
    },
]


def _all_types_table(repeat: int = 1) -> pa.Table:
    return pa.Table.from_pylist(ROWS * repeat, schema=ALL_TYPES)


@pytest.mark.parametrize("order", list(NullOrder))
def test_round_trip_of_every_mapped_type_in_both_null_orders(order: NullOrder) -> None:
    table = _all_types_table(50)
    avro = arrow_to_avro_schema(ALL_TYPES, "t_record", "hoodie.t", null_order=order)
    assert avro_to_arrow_schema(avro) == ALL_TYPES
    content = encode_avro_block_content(table, avro)
    assert content == encode_avro_block_content(table, avro, vectorized=False)
    fast = decode_avro_block_content(content, avro, ALL_TYPES)
    assert fast.equals(table)
    assert decode_avro_block_content(content, avro, ALL_TYPES, vectorized=False).equals(table)
    # and the datums are what fastavro itself writes and reads
    datums = encode_avro_records(table, avro)
    parsed = fastavro.parse_schema(avro)
    assert fastavro.schemaless_reader(_stream(datums[1]), parsed, None) == {"id": 2} | {
        f.name: None for f in ALL_TYPES if f.name != "id"
    }


def _stream(data: bytes) -> Any:
    import io

    return io.BytesIO(data)


def test_records_are_split_at_the_given_offsets_or_their_length_prefixes() -> None:
    table = _all_types_table(3)
    avro = arrow_to_avro_schema(ALL_TYPES, "t_record", "hoodie.t")
    datums = encode_avro_records(table, avro)
    padding = b"\xee" * 3
    payload = padding.join(datums)
    offsets, at = [], 0
    for datum in datums:
        offsets.append((at, len(datum)))
        at += len(datum) + len(padding)
    assert decode_avro_records(payload, offsets, avro, ALL_TYPES).equals(table)
    assert decode_avro_records(payload, np.array(offsets), avro, ALL_TYPES).equals(table)
    reversed_offsets = offsets[::-1]  # unordered datums take the per-record path
    backwards = table.take(pa.array(range(table.num_rows - 1, -1, -1)))
    assert decode_avro_records(payload, reversed_offsets, avro, ALL_TYPES).equals(backwards)
    prefixed = b"".join(struct.pack(">i", len(d)) + d for d in datums)
    assert decode_avro_records(prefixed, None, avro, ALL_TYPES).equals(table)


def test_empty_tables_and_all_null_columns() -> None:
    avro = arrow_to_avro_schema(ALL_TYPES, "t_record", "hoodie.t")
    empty = ALL_TYPES.empty_table()
    content = encode_avro_block_content(empty, avro)
    assert content == struct.pack(">ii", 3, 0)
    assert decode_avro_block_content(content, avro, ALL_TYPES).num_rows == 0
    nulls = pa.Table.from_pylist([ROWS[1]] * 70_000, schema=ALL_TYPES)  # spans decoder chunks
    assert decode_avro_block_content(encode_avro_block_content(nulls, avro), avro, ALL_TYPES).equals(nulls)


def test_schema_evolution_fills_drops_and_promotes() -> None:
    writer = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "small", "type": ["null", "int"], "default": None},
            {"name": "f", "type": "float"},
            {"name": "gone", "type": ["null", {"type": "array", "items": "string"}], "default": None},
            {"name": "s", "type": {"type": "record", "name": "S", "fields": [{"name": "a", "type": "int"}]}},
        ],
    }
    rows = [
        {"small": 7, "f": 1.5, "gone": ["x"], "s": {"a": 1}},
        {"small": None, "f": -2.0, "gone": None, "s": {"a": 2}},
    ]
    content = encode_avro_block_content(pa.Table.from_pylist(rows, avro_to_arrow_schema(writer)), writer)
    target = pa.schema(
        [
            pa.field("added", pa.string()),
            pa.field("s", pa.struct([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.string())])),
            pa.field("small", pa.int64()),
            pa.field("f", pa.float64()),
        ]
    )
    for vectorized in (True, False):
        out = decode_avro_block_content(content, writer, target, vectorized=vectorized)
        assert out.schema == target
        assert out.to_pylist() == [
            {"added": None, "s": {"a": 1, "b": None}, "small": 7, "f": 1.5},
            {"added": None, "s": {"a": 2, "b": None}, "small": None, "f": -2.0},
        ]
    with pytest.raises(SchemaError, match="'needed'"):
        decode_avro_block_content(
            content, writer, pa.schema([pa.field("needed", pa.int32(), nullable=False)])
        )
    with pytest.raises(SchemaError, match="small"):
        decode_avro_block_content(content, writer, pa.schema([pa.field("small", pa.date32())]))


def test_encoding_rejects_data_that_does_not_fit_the_schema() -> None:
    avro = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "k", "type": "string"},
            {
                "name": "d",
                "type": [
                    "null",
                    {
                        "type": "fixed",
                        "name": "f",
                        "size": 2,
                        "logicalType": "decimal",
                        "precision": 4,
                        "scale": 0,
                    },
                ],
            },
            {"name": "e", "type": ["null", {"type": "enum", "name": "E", "symbols": ["A"]}]},
        ],
    }
    ok = pa.table({"k": ["x"], "d": pa.array([decimal.Decimal(9999)], pa.decimal128(4, 0)), "e": ["A"]})
    assert encode_avro_records(ok, avro) == [b"\x02x" + b"\x02\x27\x0f" + b"\x02\x00"]
    with pytest.raises(SchemaError, match="row 1"):
        encode_avro_records(pa.table({"k": ["x", None]}), avro)
    with pytest.raises(SchemaError, match=r"\['extra'\]"):
        encode_avro_records(ok.append_column("extra", pa.array([1])), avro)
    with pytest.raises(SchemaError, match="'B' is not a symbol"):
        encode_avro_records(pa.table({"k": ["x"], "e": ["B"]}), avro)
    too_big = pa.table({"k": ["x"], "d": pa.array([decimal.Decimal(99999)], pa.decimal128(5, 0))})
    with pytest.raises(SchemaError, match="d"):
        encode_avro_records(too_big, avro)


def test_long_collections_fall_back_to_the_record_path() -> None:
    schema = pa.schema([pa.field("xs", pa.list_(pa.field("element", pa.int32())))])
    avro = arrow_to_avro_schema(schema, "r", "n")
    table = pa.table({"xs": [list(range(avro_decoder.MAX_ROUNDS + 5)), [1], None]}, schema=schema)
    assert decode_avro_block_content(encode_avro_block_content(table, avro), avro, schema).equals(table)


def test_java_multi_block_arrays_and_maps_decode() -> None:
    # Avro allows a collection in several blocks, and negative counts followed by a byte size
    avro = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "xs", "type": {"type": "array", "items": "int"}},
            {"name": "m", "type": {"type": "map", "values": "long"}},
        ],
    }
    xs = bytes([4, 2, 4, 2, 6, 0])  # a block of 2 items (1, 2), a block of 1 (3), the end
    m = bytes([1, 6, 2, ord("k"), 10, 0])  # count -1 then its byte size 3: {"k": 5}, the end
    datum = xs + m
    schema = avro_to_arrow_schema(avro)
    for vectorized in (True, False):
        out = decode_avro_records(datum, [(0, len(datum))], avro, schema, vectorized=vectorized)
        assert out.to_pylist() == [{"xs": [1, 2, 3], "m": [("k", 5)]}]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (struct.pack(">ii", 2, 0), "version 2"),
        (struct.pack(">ii", 3, 5), "count 5"),
        (struct.pack(">iii", 3, 1, 50) + b"\x02", "run past"),
        (struct.pack(">iii", 3, 1, 2) + b"\x04\x00", "union branch"),
        (struct.pack(">iii", 3, 1, 3) + b"\x02\x02\xff", "undecodable"),
        (struct.pack(">iii", 3, 1, 2) + b"\x02\x08", "undecodable"),
        (struct.pack(">iii", 3, 1, 4) + b"\x02\x02aa", "does not end"),
    ],
)
@pytest.mark.parametrize("vectorized", [True, False])
def test_corrupt_block_content_is_a_corrupt_file_error(
    content: bytes, message: str, vectorized: bool
) -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "s", "type": ["null", "string"]}]}
    schema = avro_to_arrow_schema(avro)
    with pytest.raises(
        CorruptFileError, match=message if vectorized or "union" not in message else "undecodable"
    ):
        decode_avro_block_content(content, avro, schema, vectorized=vectorized)


def test_long_varints_and_tail_positions_decode() -> None:
    schema = pa.schema(
        [pa.field("x", pa.int64(), nullable=False), pa.field("f", pa.float64(), nullable=False)]
    )
    avro = arrow_to_avro_schema(schema, "r", "")
    values = [0, -1, 2**62, -(2**63), 2**63 - 1, 63, -64, 8191]
    table = pa.table({"x": values, "f": [float(v) for v in values]}, schema=schema)
    datums = encode_avro_records(table, avro)
    for datum, value in zip(datums, values, strict=True):  # each datum alone: the value sits at the tail
        out = decode_avro_records(datum, [(0, len(datum))], avro, schema)
        assert out.column("x").to_pylist() == [value]
    assert decode_avro_block_content(encode_avro_block_content(table, avro), avro, schema).equals(table)


# -- property: random schemas and data ------------------------------------------------------------

_LEAVES: list[tuple[pa.DataType, st.SearchStrategy[Any]]] = [
    (pa.bool_(), st.booleans()),
    (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    (pa.float32(), st.floats(width=32, allow_nan=False)),
    (pa.float64(), st.floats(allow_nan=False)),
    (pa.string(), st.text(max_size=20)),
    (pa.binary(), st.binary(max_size=20)),
    (pa.binary(5), st.binary(min_size=5, max_size=5)),
    (pa.date32(), st.integers(-(2**31), 2**31 - 1)),
    (pa.timestamp("us", tz="UTC"), st.integers(-(2**63) + 1, 2**63 - 1)),
    (pa.timestamp("ms"), st.integers(-(2**63) + 1, 2**63 - 1)),
    (pa.time64("us"), st.integers(0, 86_400_000_000 - 1)),
]


def _decimal_leaf(precision: int, scale: int) -> tuple[pa.DataType, st.SearchStrategy[Any]]:
    bound = 10**precision - 1

    def exact(unscaled: int) -> decimal.Decimal:  # no context rounding, unlike scaleb
        digits = tuple(int(c) for c in str(abs(unscaled)))
        return decimal.Decimal((int(unscaled < 0), digits, -scale))

    return pa.decimal128(precision, scale), st.integers(-bound, bound).map(exact)


@st.composite
def _typed(draw: st.DrawFn, depth: int = 0) -> tuple[pa.DataType, st.SearchStrategy[Any]]:
    options = ["leaf", "decimal"] + (["list", "map", "struct"] if depth < 2 else [])
    choice = draw(st.sampled_from(options))
    if choice == "leaf":
        leaf: tuple[pa.DataType, st.SearchStrategy[Any]] = draw(st.sampled_from(_LEAVES))
        return leaf
    if choice == "decimal":
        precision = draw(st.integers(1, 38))
        return _decimal_leaf(precision, draw(st.integers(0, precision)))
    inner_type, inner_values = draw(_typed(depth + 1))
    nullable = draw(st.booleans())
    inner = st.one_of(st.none(), inner_values) if nullable else inner_values
    if choice == "list":
        return pa.list_(pa.field("element", inner_type, nullable)), st.lists(inner, max_size=4)
    if choice == "map":
        entries = st.dictionaries(st.text(max_size=5), inner, max_size=3).map(lambda d: list(d.items()))
        return pa.map_(
            pa.field("key", pa.string(), nullable=False), pa.field("value", inner_type, nullable)
        ), entries
    second_type, second_values = draw(_typed(depth + 1))
    fields = [pa.field("a", inner_type, nullable), pa.field("b", second_type, nullable=False)]
    values = st.fixed_dictionaries({"a": inner, "b": second_values})
    return pa.struct(fields), values


@st.composite
def _tables(draw: st.DrawFn) -> pa.Table:
    columns = draw(st.lists(_typed(), min_size=1, max_size=5))
    nullable = [draw(st.booleans()) for _ in columns]
    schema = pa.schema(
        [
            pa.field(f"c{i}", t, nullable)
            for i, ((t, _), nullable) in enumerate(zip(columns, nullable, strict=True))
        ]
    )
    row = st.fixed_dictionaries(
        {
            f"c{i}": (st.one_of(st.none(), values) if null else values)
            for i, ((_, values), null) in enumerate(zip(columns, nullable, strict=True))
        }
    )
    return pa.Table.from_pylist(draw(st.lists(row, max_size=30)), schema=schema)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=_tables(), order=st.sampled_from(list(NullOrder)))
def test_random_tables_round_trip_identically_on_both_paths(table: pa.Table, order: NullOrder) -> None:
    avro = arrow_to_avro_schema(table.schema, "h_record", "hoodie.h", null_order=order)
    assert avro_to_arrow_schema(avro) == table.schema
    datums = encode_avro_records(table, avro)
    assert datums == encode_avro_records(table, avro, vectorized=False)
    content = encode_avro_block_content(table, avro)
    assert content == struct.pack(">ii", 3, table.num_rows) + b"".join(
        struct.pack(">i", len(d)) + d for d in datums
    )
    fast = decode_avro_block_content(content, avro, table.schema)
    assert fast.equals(table)
    assert decode_avro_block_content(content, avro, table.schema, vectorized=False).equals(fast)
