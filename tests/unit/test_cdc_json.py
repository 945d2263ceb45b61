"""The JSON text of CDC images: Avro's ``GenericData.toString`` and Spark's Jackson printer."""

from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie.cdc.json_text import Float32, avro_text, image_values, jackson_text
from hoodie.schema.java_text import java_float_text


@pytest.mark.parametrize(
    ("value", "text"),
    [  # Java's Float.toString (JDK 19+, shortest digits)
        (1.1, "1.1"),
        (0.1, "0.1"),
        (100.0, "100.0"),
        (1e7, "1.0E7"),
        (1e-4, "1.0E-4"),
        (0.001, "0.001"),
        (-2.5, "-2.5"),
        (3.4028235e38, "3.4028235E38"),
        (0.0, "0.0"),
        (float("nan"), "NaN"),
    ],
)
def test_java_float_text(value: float, text: str) -> None:
    assert java_float_text(value) == text


def test_avro_text_is_generic_data_to_string() -> None:
    record = {"a": 1, "b": 'x"y\n\u0001', "c": Float32(1.1), "d": 1e7, "e": None, "f": [1, 2], "g": b"ab"}
    assert avro_text(record) == (
        '{"a": 1, "b": "x\\"y\\n\\u0001", "c": 1.1, "d": 1.0E7, "e": null, "f": [1, 2], "g": {"bytes": "ab"}}'
    )
    assert avro_text(None) == "null"
    assert avro_text({"n": float("nan")}) == '{"n": "NaN"}'


def test_jackson_text_is_compact() -> None:
    row = {"a": 1, "b": 'x"y\n', "c": Float32(1.1), "d": 2.0, "e": None, "f": [1, 2], "g": b"ab", "h": True}
    assert (
        jackson_text(row) == '{"a":1,"b":"x\\"y\\n","c":1.1,"d":2.0,"e":null,"f":[1,2],"g":"YWI=","h":true}'
    )


def test_image_values_are_raw_avro_values() -> None:
    table = pa.table(
        {
            "ts": pa.array([1_700_000_000_000_000], pa.timestamp("us", tz="UTC")),
            "day": pa.array([19_000], pa.date32()),
            "f": pa.array([1.1], pa.float32()),
            "s": pa.array([{"x": 1}], pa.struct([("x", pa.int32())])),
        }
    )
    (row,) = image_values(table, ["ts", "day", "f", "s"])
    assert jackson_text(row) == '{"ts":1700000000000000,"day":19000,"f":1.1,"s":{"x":1}}'
