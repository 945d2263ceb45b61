"""The Avro record codec: every mapped type in both null orders, record offsets, empty and all-null
columns, schema evolution, data that does not fit, Java's multi-block arrays and maps, corrupt
content, and random schemas and data round-tripping identically on both paths.
"""

from __future__ import annotations

import datetime as dt
import decimal
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoodie.errors import CorruptFileError, SchemaError
from hoodie.schema import avro_decoder
from hoodie.schema.avro_arrow import (
    NullOrder,
    arrow_to_avro_schema,
    avro_to_arrow_schema,
    decode_avro_block_content,
    decode_avro_records,
    encode_avro_block_content,
    encode_avro_records,
)

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
