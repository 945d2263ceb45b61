"""Column ranges (Hudi's ``HoodieColumnRangeMetadata``): the value types and wrappers of
column-stats bounds, their Java order, and how ranges combine, as Apache Hudi 1.x does it: a
file's row groups (``HoodieColumnRangeMetadata.merge``), two payloads of one ``column_stats`` key
(``HoodieTableMetadataUtil.mergeColumnStatsRecords``), a partition's files into its
``partition_stats`` (``FileFormatUtils.getColumnRangeInPartition``).

Bounds compare by the Java natural order of the unwrapped values (doubles with NaN above all and
-0.0 below 0.0, strings by UTF-16 code units, UUIDs by their signed halves, decimals by value);
a column widened between files (int -> long -> float -> double) compares in the wider type.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any, Final

from hoodie.errors import SchemaError

__all__ = [
    "NUMERIC_WRAPPERS",
    "V2_WRAPPERS",
    "WRAPPER_NAMESPACE",
    "ValueType",
    "merge_column_stats",
    "partition_stats",
    "range_merge",
    "signed_bytes_key",
]

WRAPPER_NAMESPACE: Final = "org.apache.hudi.avro.model."


class ValueType(IntEnum):
    """``org.apache.hudi.stats.ValueType``: the ordinal is ``valueType.typeOrdinal`` (table version 9)."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


_V = ValueType
V2_WRAPPERS: Final[dict[ValueType, str]] = {
    vtype: wrapper
    for wrapper, vtypes in {
        "BooleanWrapper": (_V.BOOLEAN,),
        "IntWrapper": (_V.INT, _V.DATE, _V.TIME_MILLIS),
        "LongWrapper": (_V.LONG, _V.TIME_MICROS, *(_V(i) for i in range(15, 21))),  # the timestamps
        "FloatWrapper": (_V.FLOAT,),
        "DoubleWrapper": (_V.DOUBLE,),
        "StringWrapper": (_V.STRING, _V.UUID),
        "BytesWrapper": (_V.BYTES, _V.FIXED, _V.DECIMAL),
    }.items()
    for vtype in vtypes
}
NUMERIC_WRAPPERS: Final = ("IntWrapper", "LongWrapper", "FloatWrapper", "DoubleWrapper")


def signed_bytes_key(value: bytes) -> bytes:
    """``ByteBuffer.compareTo`` order (signed bytes) as an unsigned byte string."""
    return bytes(b ^ 0x80 for b in value)


def _java_double_key(value: float) -> tuple[int, float, int]:
    if math.isnan(value):
        return (1, 0.0, 0)
    return (0, value, 1 if math.copysign(1.0, value) > 0 else 0)


def _uuid_key(value: str) -> tuple[int, int]:
    """``java.util.UUID.compareTo``: signed most-significant, then least-significant halves."""
    n = int(value.replace("-", ""), 16)
    hi, lo = n >> 64, n & (2**64 - 1)
    return (hi - 2**64 if hi >> 63 else hi, lo - 2**64 if lo >> 63 else lo)


def _value_type(stats: Mapping[str, Any]) -> ValueType | None:
    info = stats.get("valueType")
    return None if info is None else ValueType(info["typeOrdinal"])


def _sort_key(wrapped: tuple[str, Mapping[str, Any]], vtype: ValueType | None) -> Any:
    """The Java natural order of a wrapped value (``Comparable.compareTo`` of its unwrapped form)."""
    name, value = wrapped[0].rsplit(".", 1)[-1], wrapped[1]["value"]
    if name in ("FloatWrapper", "DoubleWrapper"):
        return _java_double_key(value)
    if name == "StringWrapper":
        return _uuid_key(value) if vtype is ValueType.UUID else value.encode("utf-16-be")
    if name == "BytesWrapper":
        if vtype is ValueType.DECIMAL:
            return int.from_bytes(value, "big", signed=True)
        return signed_bytes_key(value)
    if name == "ArrayWrapper":
        raise ValueError("ArrayWrapper values are not column statistics")
    return value


def _promote(wrapped: tuple[str, Mapping[str, Any]], wrapper: str) -> tuple[str, dict[str, Any]]:
    """A numeric value widened to ``wrapper`` (Java's castToLong/castToFloat/castToDouble)."""
    name, value = wrapped[0].rsplit(".", 1)[-1], wrapped[1]["value"]
    if name == wrapper:
        return wrapped[0], dict(wrapped[1])
    if name not in NUMERIC_WRAPPERS or wrapper not in NUMERIC_WRAPPERS:
        raise SchemaError(f"cannot merge column statistics of {name} with {wrapper}")
    value = float(value) if wrapper in ("FloatWrapper", "DoubleWrapper") else int(value)
    return WRAPPER_NAMESPACE + wrapper, {"value": value}


def _bound(
    a: tuple[str, Mapping[str, Any]] | None,
    b: tuple[str, Mapping[str, Any]] | None,
    vtype: ValueType | None,
    *,
    lowest: bool,
    tie_first: bool,
) -> tuple[str, dict[str, Any]] | None:
    if a is None or b is None:
        chosen = a if b is None else b
        return None if chosen is None else (chosen[0], dict(chosen[1]))
    if a[0] != b[0]:  # a widened column (int -> long -> float -> double)
        names = [w[0].rsplit(".", 1)[-1] for w in (a, b)]
        wider = max(names, key=lambda n: NUMERIC_WRAPPERS.index(n) if n in NUMERIC_WRAPPERS else -1)
        a, b = _promote(a, wider), _promote(b, wider)
    ka, kb = _sort_key(a, vtype), _sort_key(b, vtype)
    if ka == kb:
        chosen = a if tie_first else b
    else:
        chosen = a if (ka < kb) == lowest else b
    return chosen[0], dict(chosen[1])


def _add(x: int | None, y: int | None) -> int | None:
    return None if x is None and y is None else (x or 0) + (y or 0)


def _combined(
    older: Mapping[str, Any], newer: Mapping[str, Any], base: Mapping[str, Any], *, tie_first: bool
) -> dict[str, Any]:
    """``base`` with the bounds of both and their counts summed."""
    vtype = _value_type(base)
    out = dict(base)
    out["minValue"] = _bound(older["minValue"], newer["minValue"], vtype, lowest=True, tie_first=tie_first)
    out["maxValue"] = _bound(older["maxValue"], newer["maxValue"], vtype, lowest=False, tie_first=tie_first)
    for field in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        out[field] = _add(older.get(field), newer.get(field))
    return out


def range_merge(left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    """``HoodieColumnRangeMetadata.merge``: left's name and type, ties go to the right."""
    return _combined(left, right, left, tie_first=False)


def merge_column_stats(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Hudi's merge of two column-stats (or partition-stats) payloads of one key.

    A tombstone on either side, or a tight-bound ``newer``, replaces ``older``; otherwise the result
    is ``newer`` with the min of both minimums, the max of both maximums and summed counts and sizes.
    """
    if older["columnName"] != newer["columnName"]:
        raise ValueError(f"cannot merge stats of {older['columnName']!r} into {newer['columnName']!r}")
    if newer["isDeleted"] or older["isDeleted"] or newer.get("isTightBound"):
        return dict(newer)
    base = dict(newer)
    if _value_type(newer) in (None, ValueType.NULL) and _value_type(older) not in (None, ValueType.NULL):
        base["valueType"] = dict(older["valueType"])
    return _combined(older, newer, base, tie_first=True)


def _retype(stats: Mapping[str, Any], target: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``stats`` brought to the partition's value type (``ValueMetadata.standardizeJavaTypeAndPromote``)."""
    if target is None or stats.get("valueType") == target:
        return stats
    out = dict(stats)
    out["valueType"] = dict(target)
    wrapper = V2_WRAPPERS.get(ValueType(target["typeOrdinal"]))
    for bound in ("minValue", "maxValue"):
        if out[bound] is not None and wrapper is not None:
            out[bound] = _promote(out[bound], wrapper)
    return out


_WIDENING: Final = (ValueType.INT, ValueType.LONG, ValueType.FLOAT, ValueType.DOUBLE)


def _widening_rank(info: Mapping[str, Any]) -> int:
    vtype = ValueType(info["typeOrdinal"])
    return _WIDENING.index(vtype) if vtype in _WIDENING else -1


def partition_stats(
    partition_path: str, file_stats: Iterable[Mapping[str, Any]], *, tight_bound: bool
) -> list[dict[str, Any]]:
    """Aggregate the column stats of a partition's files into ``partition_stats`` payloads.

    One payload per column (in order of first appearance) with ``fileName`` = ``partition_path``.
    Tombstones are skipped. In table version 9 every file's stats are brought to one value type
    (Hudi takes the table schema's): the widest numeric type seen, else the last file's type.
    """
    by_column: dict[str, list[Mapping[str, Any]]] = {}
    for stats in file_stats:
        if not stats["isDeleted"]:
            by_column.setdefault(stats["columnName"], []).append(stats)
    out: list[dict[str, Any]] = []
    for items in by_column.values():
        typed = [s["valueType"] for s in items if _value_type(s) not in (None, ValueType.NULL)]
        target = max(reversed(typed), key=_widening_rank) if typed else None  # ties: the last
        merged: dict[str, Any] | None = None
        for stats in items:
            current = dict(_retype(stats, target))
            current["fileName"] = partition_path
            merged = current if merged is None else range_merge(merged, current)
        assert merged is not None
        merged["isDeleted"] = False
        merged["isTightBound"] = tight_bound
        out.append(merged)
    return out
