"""``java_double_text`` writes a double as Java's ``Double.toString`` does, the text Hudi puts in
a secondary-index key for a DOUBLE column: checked against the JVM Spark runs on (through py4j)
for ordinary and edge values, and against Java 19's specification where Java 17, the JVM here,
prints more digits than needed."""

from __future__ import annotations

import math
import random
import struct
from typing import Any

import pytest

from hoodie.schema.java_text import java_double_text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (-12.5, "-12.5"),
        (0.1, "0.1"),
        (0.001, "0.001"),  # the smallest plain magnitude
        (0.000999, "9.99E-4"),
        (9999999.999999998, "9999999.999999998"),  # the largest plain magnitude
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (1.25e-4, "1.25E-4"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (2.2250738585072014e-308, "2.2250738585072014E-308"),
        (5e-324, "4.9E-324"),  # two digits are nearer than "5.0E-324"
        # Java 19's rule; Java 17 prints "1.0E-323" and "1.9999999999999998E23" for these two.
        (1e-323, "9.9E-324"),
        (2e23, "2.0E23"),
    ],
)
def test_specified_texts(value: float, text: str) -> None:
    assert java_double_text(value) == text


def test_numpy_floats_are_written_as_their_value() -> None:
    import numpy as np

    assert java_double_text(np.float64(1.5)) == "1.5"
    assert java_double_text(np.float64(-2.5e-7)) == "-2.5E-7"


def _ordinary_doubles() -> list[float]:
    """Doubles of every kind a column holds, between 10^-300 and 10^16 (where Java 17 prints
    what Java 19 specifies), with their negatives and the values Java treats apart."""
    rnd = random.Random(20261121)
    values = [float(i) for i in range(-20, 21)]
    values += [round(rnd.uniform(0, 10_000), rnd.randint(0, 4)) for _ in range(400)]
    values += [rnd.uniform(1, 10) * 10.0 ** rnd.randint(-12, 15) for _ in range(400)]
    while len(values) < 1300:
        bits = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(63)))[0]
        if 1e-300 < bits < 1e16:
            values.append(bits)
    values += [-v for v in values[::7]]
    return [*values, 0.0, -0.0, math.nan, math.inf, -math.inf, 5e-324, 1e-3, 1e7, 9999999.999999998]


def test_the_jvm_prints_the_same(spark: Any) -> None:
    java_double = spark.sparkContext._jvm.java.lang.Double
    mismatches = [
        (v, java_double_text(v), java)
        for v in _ordinary_doubles()
        if java_double_text(v) != (java := java_double.toString(v))
    ]
    assert not mismatches
