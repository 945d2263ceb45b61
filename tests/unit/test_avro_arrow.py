"""Avro <-> Arrow schemas checked against tables Apache Hudi wrote, with their Avro data blocks decoded
and re-encoded, and the details of the schema conversion.

The fixture checks parse log files with a minimal block reader of their own (format digest
§4.1), so they do not depend on the log-file module.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.errors import SchemaError
from hoodie.schema.avro_arrow import (
    META_FIELDS,
    NullOrder,
    add_meta_fields,
    arrow_to_avro_schema,
    avro_to_arrow_schema,
    decimal_fixed_size,
    decode_avro_block_content,
    encode_avro_block_content,
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
