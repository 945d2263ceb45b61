"""Hudi's type promotions on read: exactly the set ``HoodieAvroUtils.rewritePrimaryTypeWithDiffSchemaType``
and Avro's resolution allow, numbers read as strings in Java's text, and everything else refused
naming the column, the file and both types."""

from __future__ import annotations

import itertools
import math
import struct
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import SchemaError
from hoodie.io.fileio import LocalFileIO
from hoodie.read.slice_reader import read_parquet
from hoodie.schema.avro_arrow import (
    arrow_to_avro_schema,
    conform,
    decode_avro_block_content,
    encode_avro_block_content,
    promotion,
)
from hoodie.schema.java_text import java_float_text

TYPES = {
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "decimal(5,2)": pa.decimal128(5, 2),
    "decimal(8,3)": pa.decimal128(8, 3),
    "decimal(5,3)": pa.decimal128(5, 3),
}
# Hudi's set, written out from HoodieAvroUtils.rewritePrimaryTypeWithDiffSchemaType and Avro's
# own promotions (int -> long -> float -> double, bytes <-> string), plus decimal widening.
ALLOWED = {
    ("int", "long"),
    ("int", "float"),
    ("int", "double"),
    ("int", "string"),
    ("long", "float"),
    ("long", "double"),
    ("long", "string"),
    ("float", "double"),
    ("float", "string"),
    ("double", "string"),
    ("bytes", "string"),
    ("string", "bytes"),
    ("decimal(5,2)", "decimal(8,3)"),
    ("decimal(5,3)", "decimal(8,3)"),
}


@pytest.mark.parametrize(("source", "target"), list(itertools.permutations(TYPES, 2)))
def test_exactly_hudis_promotions_are_allowed(source: str, target: str) -> None:
    assert (promotion(TYPES[source], TYPES[target]) is not None) == ((source, target) in ALLOWED)


# Java's Float.toString (Java 19+, JDK-4511638: the shortest digits that read back, as for doubles
# in java_double_text; Java 17 printed Float.MIN_NORMAL with two more digits, 1.17549435E-38).
FLOAT_TEXTS = [
    (1.1, "1.1"),
    (3.0, "3.0"),
    (100.0, "100.0"),
    (0.001, "0.001"),
    (1e-4, "1.0E-4"),
    (9999999.0, "9999999.0"),
    (1e7, "1.0E7"),
    (16777216.0, "1.6777216E7"),
    (1e10, "1.0E10"),
    (3.4028235e38, "3.4028235E38"),  # Float.MAX_VALUE
    (1.17549435e-38, "1.1754944E-38"),  # Float.MIN_NORMAL
    (1.4e-45, "1.4E-45"),  # Float.MIN_VALUE
    (-2.5, "-2.5"),
    (-0.0, "-0.0"),
    (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
    (math.nan, "NaN"),
]


@pytest.mark.parametrize(("value", "text"), FLOAT_TEXTS)
def test_java_float_text(value: float, text: str) -> None:
    assert java_float_text(value) == text


def test_numbers_read_as_strings_in_javas_text_and_floats_widen_through_it() -> None:
    floats = pa.array([1.1, 1e10, None, 1.4e-45], pa.float32())
    assert conform(floats, pa.string(), "c").to_pylist() == ["1.1", "1.0E10", None, "1.4E-45"]
    assert conform(floats, pa.float64(), "c").to_pylist() == [1.1, 1e10, None, 1.4e-45]
    doubles = pa.array([0.1, 1e-5, 12345678.9, None], pa.float64())
    assert conform(doubles, pa.string(), "c").to_pylist() == ["0.1", "1.0E-5", "1.23456789E7", None]
    longs = pa.array([2**53 + 1, -7, None], pa.int64())
    assert conform(longs, pa.string(), "c").to_pylist() == [str(2**53 + 1), "-7", None]
    assert conform(longs, pa.float64(), "c").to_pylist() == [float(2**53), -7.0, None]  # (double) rounds
    ints = pa.array([16777217, None], pa.int32())
    assert conform(ints, pa.float32(), "c").to_pylist() == [16777216.0, None]  # (float) rounds
    assert conform(pa.array([b"\xc3\xa9t\xc3\xa9"]), pa.string(), "c").to_pylist() == ["été"]
    assert conform(pa.array(["été"]), pa.binary(), "c").to_pylist() == ["été".encode()]
    decimals = pa.array([Decimal("123.45")], pa.decimal128(5, 2))
    assert conform(decimals, pa.decimal128(8, 3), "c").to_pylist() == [Decimal("123.450")]


def test_a_base_file_column_outside_the_promotions_is_refused_naming_column_file_and_types(
    tmp_path: Path,
) -> None:
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"id": ["a"], "v": ["not a number"]}), path)
    schema = pa.schema([("id", pa.string()), ("v", pa.int64())])
    with pytest.raises(SchemaError) as err:
        read_parquet(LocalFileIO(), str(path), schema)
    message = str(err.value)
    assert str(path) in message and ": v:" in message
    assert "string cannot be read as int64" in message
    narrowing = pa.schema([("id", pa.string()), ("v", pa.string())])
    pq.write_table(pa.table({"id": ["a"], "v": [1.5]}), path)
    assert read_parquet(LocalFileIO(), str(path), narrowing).column("v").to_pylist() == ["1.5"]
    nested = pa.schema([("n", pa.struct([("x", pa.int32())]))])
    pq.write_table(pa.table({"n": [{"x": 2**40}]}), path)
    with pytest.raises(SchemaError, match=r"f\.parquet: n\.x: data of type int64 cannot be read as int32"):
        read_parquet(LocalFileIO(), str(path), nested)


@pytest.mark.parametrize("vectorized", [True, False])
def test_an_avro_block_column_outside_the_promotions_is_refused_naming_the_block(vectorized: bool) -> None:
    written = pa.schema([("v", pa.float64()), ("f", pa.float32())])
    avro = arrow_to_avro_schema(written, "t_record", "hoodie.t")
    content = encode_avro_block_content(pa.table({"v": [2.5], "f": [1.1]}, schema=written), avro)
    read = decode_avro_block_content(
        content, avro, pa.schema([("v", pa.string()), ("f", pa.float64())]), vectorized=vectorized
    )
    assert read.to_pylist() == [{"v": "2.5", "f": 1.1}]
    with pytest.raises(SchemaError, match=r"log\.1@12: v: data of type double cannot be read as float"):
        decode_avro_block_content(
            content, avro, pa.schema([("v", pa.float32())]), vectorized=vectorized, source="log.1@12"
        )
    assert struct.unpack_from(">i", content)[0] == 3
