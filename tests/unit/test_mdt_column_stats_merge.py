"""Merging column stats (min/max and counts, tight and non-tight bounds, values ordered as Java orders
them, V1 wrappers of decimals), tombstones, and partition stats aggregated from file stats.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import pytest

from hoodie.metadata.column_ranges import ValueType, merge_column_stats, partition_stats
from hoodie.metadata.column_stats import tombstone
from tests.unit.column_stats_support import NS, round_trip

# -- merging and tombstones -----------------------------------------------------------------------


def _stats(
    lo: Any,
    hi: Any,
    *,
    wrapper: str = "LongWrapper",
    ordinal: int | None = 4,
    counts: tuple[int, int, int, int] = (1, 10, 100, 200),
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "fileName": "f.parquet",
        "columnName": "c",
        "minValue": None if lo is None else (NS + wrapper, {"value": lo}),
        "maxValue": None if hi is None else (NS + wrapper, {"value": hi}),
        "valueCount": counts[1],
        "nullCount": counts[0],
        "totalSize": counts[2],
        "totalUncompressedSize": counts[3],
        "isDeleted": False,
        "isTightBound": False,
    }
    if ordinal is not None:
        out["valueType"] = {"typeOrdinal": ordinal, "additionalInfo": None}
    return out | extra


def test_merge_takes_min_max_and_sums_counts() -> None:
    older, newer = _stats(5, 9), _stats(3, 7, counts=(2, 20, 300, 400), fileName="g.parquet")
    merged = merge_column_stats(older, newer)
    assert merged["minValue"][1]["value"] == 3 and merged["maxValue"][1]["value"] == 9
    assert (
        merged["nullCount"],
        merged["valueCount"],
        merged["totalSize"],
        merged["totalUncompressedSize"],
    ) == (3, 30, 400, 600)
    assert (
        merged["fileName"] == "g.parquet" and merged["isDeleted"] is False and merged["isTightBound"] is False
    )
    # null bounds are ignored; an empty (NULL-typed) side adopts the other's type
    empty = _stats(None, None, ordinal=ValueType.NULL, counts=(0, 0, 0, 0))
    assert merge_column_stats(older, empty)["valueType"] == older["valueType"]
    assert merge_column_stats(empty, older)["minValue"] == older["minValue"]
    with pytest.raises(ValueError, match="cannot merge"):
        merge_column_stats(older, newer | {"columnName": "other"})


def test_merge_tombstones_and_tight_bounds_replace() -> None:
    live, dead = _stats(5, 9), tombstone("p", "f.parquet", "c")
    assert merge_column_stats(live, dead) == dead
    assert merge_column_stats(dead, live) == live
    tight = _stats(6, 6, isTightBound=True)
    assert merge_column_stats(_stats(1, 100), tight) == tight
    loose = merge_column_stats(tight, _stats(1, 2))  # a loose newer record widens a tight one
    assert (loose["minValue"][1]["value"], loose["maxValue"][1]["value"], loose["isTightBound"]) == (
        1,
        6,
        False,
    )


def test_merge_orders_values_as_java() -> None:
    # Decimals (table version 9) are unscaled two's complement: b"\xff" (-1) < b"\x01" (1)
    dec: dict[str, Any] = {"ordinal": ValueType.DECIMAL, "wrapper": "BytesWrapper"}
    merged = merge_column_stats(_stats(b"\x01", b"\x01", **dec), _stats(b"\xff", b"\xff", **dec))
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == (b"\xff", b"\x01")
    # Plain bytes compare as signed bytes (ByteBuffer.compareTo)
    raw: dict[str, Any] = {"ordinal": ValueType.BYTES, "wrapper": "BytesWrapper"}
    merged = merge_column_stats(_stats(b"\x7f", b"\x7f", **raw), _stats(b"\x80", b"\x80", **raw))
    assert merged["minValue"][1]["value"] == b"\x80"
    # Strings compare as String.compareTo: UTF-16 code units, so U+FF61 sorts after U+1F600
    text: dict[str, Any] = {"ordinal": ValueType.STRING, "wrapper": "StringWrapper"}
    merged = merge_column_stats(
        _stats("\uff61", "\uff61", **text), _stats("\U0001f600", "\U0001f600", **text)
    )
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == ("\U0001f600", "\uff61")
    # Doubles compare as Double.compare: -0.0 < 0.0, NaN above everything
    dbl: dict[str, Any] = {"ordinal": ValueType.DOUBLE, "wrapper": "DoubleWrapper"}
    merged = merge_column_stats(_stats(0.0, 1.0, **dbl), _stats(-0.0, math.nan, **dbl))
    assert math.copysign(1, merged["minValue"][1]["value"]) == -1 and math.isnan(
        merged["maxValue"][1]["value"]
    )
    # Version 8 wrappers: DecimalWrapper values are decimals at scale 15
    v1: dict[str, Any] = {"ordinal": None, "wrapper": "DecimalWrapper"}
    merged = merge_column_stats(
        _stats(Decimal("2.5"), Decimal("2.5"), **v1), _stats(Decimal("-1"), Decimal("10"), **v1)
    )
    assert "valueType" not in merged
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == (Decimal("-1"), Decimal("10"))


def test_tombstone_is_hudis_stub() -> None:
    for version in (8, 9):
        stats = tombstone("region=us", "f.parquet", "amount", table_version=version)
        assert stats["isDeleted"] is True and stats["isTightBound"] is False
        assert (stats["minValue"], stats["maxValue"]) == (None, None)
        assert (
            stats["valueCount"],
            stats["nullCount"],
            stats["totalSize"],
            stats["totalUncompressedSize"],
        ) == (-1,) * 4
        assert ("valueType" in stats) is (version == 9)
        assert round_trip(stats, version) == stats
    assert tombstone("p", "f.parquet", "c")["valueType"] == {
        "typeOrdinal": ValueType.NULL,
        "additionalInfo": None,
    }
    with pytest.raises(ValueError, match="not a file name"):
        tombstone("p", "p/f.parquet", "c")


def test_partition_stats_aggregate_files() -> None:
    files = [
        _stats(5, 9, counts=(1, 10, 100, 200)),
        _stats(None, None, ordinal=ValueType.NULL, counts=(0, 0, 0, 0)),  # a delete-only log
        _stats(2, 3, wrapper="IntWrapper", ordinal=ValueType.INT, counts=(0, 5, 0, 0)),  # before int -> long
        tombstone("p", "gone.parquet", "c"),  # deleted files do not count
        _stats(7, 12, counts=(0, 1, 0, 0)) | {"columnName": "d"},
    ]
    out = {s["columnName"]: s for s in partition_stats("region=us", files, tight_bound=True)}
    c = out["c"]
    assert c["fileName"] == "region=us" and c["isTightBound"] is True and c["isDeleted"] is False
    assert c["valueType"]["typeOrdinal"] == ValueType.LONG
    assert c["minValue"] == (NS + "LongWrapper", {"value": 2}) and c["maxValue"] == (
        NS + "LongWrapper",
        {"value": 9},
    )
    assert (c["nullCount"], c["valueCount"], c["totalSize"], c["totalUncompressedSize"]) == (1, 15, 100, 200)
    assert out["d"]["minValue"][1]["value"] == 7
    assert partition_stats("p", [files[0]], tight_bound=False)[0]["isTightBound"] is False
    for s in out.values():
        assert round_trip(s, 9) == s
