"""Column values as the strings Hudi's key generators put into record keys and partition paths.

Hudi reads a key field from the Avro record and calls ``toString()`` on it after converting a few
logical types (``HoodieAvroUtils.getNestedFieldValAsString``). Column by column that gives:

============================  ===============================================================
Arrow type                    string
============================  ===============================================================
string                        the value itself
bool                          ``true`` / ``false``
int8 ... int64, uint*         decimal digits
float64 / float32             Java ``Double.toString`` / ``Float.toString``: shortest digits,
                              ``1.0``, ``0.001``, ``1.0E7``, ``1.0E-4``, ``NaN``, ``Infinity``
decimal                       Java ``BigDecimal.toString`` (``12.50``; ``1E-7`` below 10^-6)
date32 / date64               ISO ``LocalDate.toString`` (``2024-01-31``)
timestamp                     the raw epoch number Avro stores (micros for ``us``, millis for
                              ``ms``), or with ``consistent_logical_timestamp`` Java
                              ``java.sql.Timestamp.toString`` in ``timezone``
                              (``2024-01-31 10:00:00.0``), which is also what Spark's
                              row-writer path produces; timestamps without a zone
                              (``local-timestamp-*``) always print the raw number
time32 / time64               the raw number (millis / micros since midnight)
binary                        lower-case hex of the bytes
============================  ===============================================================

Double and float digits are the shortest that round-trip, except that by default integer-valued
numbers below 2^63 print the way JDK 8-18 print them (every digit of the integer, so the float
``2.14689024E8`` rather than JDK 19's ``2.1468902E8``); see :class:`FloatDigits`. The remaining
JDK 8-18 quirks (``4.9E-324``, ``1.9999999999999998E23``) are not reproduced. ``java.sql.Timestamp``
renders dates before 1582-10-15 in the Julian calendar; here they stay proleptic Gregorian.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError
from hoodie.keygen.joda import pad
from hoodie.keygen.zones import local_wall_clock

_HEX = np.frombuffer(b"".join(f"{b:02x}".encode() for b in range(256)), dtype=np.uint8).reshape(256, 2)
_NUMBER_RE = r"^(?P<sign>-?)(?P<int>\d+)(?:\.(?P<frac>\d+))?(?:e(?P<exp>[+-]?\d+))?$"


class FloatDigits(StrEnum):
    """Which JDK's ``Double.toString`` digits to reproduce."""

    JDK_LEGACY = "jdk-legacy"
    """Java 8-18 (Spark 3 and Hudi 0.x/1.x deployments): integer-valued numbers print exactly."""
    SHORTEST = "shortest"
    """Java 19+: always the shortest digits that round-trip."""


@dataclass(frozen=True)
class ValueFormat:
    """The writer settings and environment that decide how timestamps and floats print.

    ``consistent_logical_timestamp`` is
    ``hoodie.datasource.write.keygenerator.consistent.logical.timestamp.enabled``.
    ``timezone`` stands in for the writer JVM's default time zone, which Java uses whenever no
    zone is configured (``java.sql.Timestamp.toString`` and timestamp-based partitions).
    ``float_digits`` picks the writer JDK's ``Double.toString`` digits.
    """

    consistent_logical_timestamp: bool = False
    timezone: str = "UTC"
    float_digits: FloatDigits = FloatDigits.JDK_LEGACY


def column(table: pa.Table, name: str) -> pa.Array | None:
    """A top-level column, or a nested one by dotted path (``a.b.c``); ``None`` if absent.

    A null struct anywhere on the path gives null. A top-level column whose name contains dots
    wins over a nested path of the same spelling.
    """
    if name in table.column_names:
        return _combine(table.column(name))
    parts = name.split(".")
    if len(parts) == 1 or parts[0] not in table.column_names:
        return None
    current = _combine(table.column(parts[0]))
    for part in parts[1:]:
        if not pa.types.is_struct(current.type) or current.type.get_field_index(part) < 0:
            return None
        current = pc.struct_field(current, [part])
    return current


def java_strings(values: pa.Array, *, field: str, fmt: ValueFormat) -> pa.Array:
    """The ``toString()`` of every value, as a string array (nulls stay null)."""
    t = values.type
    if pa.types.is_dictionary(t):
        return java_strings(values.cast(t.value_type), field=field, fmt=fmt)
    if pa.types.is_null(t):
        return pa.nulls(len(values), pa.string())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return values.cast(pa.string())
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        # Arrow prints decimals exactly as BigDecimal.toString does, E-notation included.
        return values.cast(pa.string())
    if pa.types.is_floating(t):
        return java_floating_strings(values, fmt.float_digits)
    if pa.types.is_date(t):
        return _local_date_strings(values)
    if pa.types.is_timestamp(t):
        if fmt.consistent_logical_timestamp and t.tz is not None:
            # Only timestamp-millis/-micros become java.sql.Timestamp; local-timestamp-* (Arrow
            # timestamps without a zone) stay the raw long (HoodieAvroUtils.convertValueForAvroLogicalTypes).
            return sql_timestamp_strings(values, fmt.timezone)
        return avro_timestamp_numbers(values).cast(pa.string())
    if pa.types.is_time(t):
        return _avro_time_numbers(values).cast(pa.string())
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _hex_strings(values)
    raise InvalidInputError(
        f"key field {field!r} has type {t}, which cannot be used in a record key or partition path"
    )


def avro_timestamp_numbers(values: pa.Array) -> pa.Array:
    """The epoch number Avro stores for a timestamp: millis for ``ms`` columns, micros otherwise
    (``s`` columns widened to micros, ``ns`` kept as nanos)."""
    unit = values.type.unit
    raw = values.cast(pa.timestamp(unit)).cast(pa.int64())
    if unit == "s":
        return pc.multiply_checked(raw, 1_000_000)
    return raw


def epoch_millis_of_timestamps(values: pa.Array) -> pa.Array:
    """``java.sql.Timestamp.getTime()`` of the timestamp Hudi builds (the epoch number divided down
    to millis, truncating toward zero as Java's ``/`` does)."""
    unit = values.type.unit
    raw = values.cast(pa.timestamp(unit)).cast(pa.int64())
    if unit == "s":
        return pc.multiply_checked(raw, 1000)
    divisor = {"ms": 1, "us": 1000, "ns": 1_000_000}[unit]
    return raw if divisor == 1 else pc.divide(raw, divisor)


def sql_timestamp_strings(values: pa.Array, timezone: str) -> pa.Array:
    """``java.sql.Timestamp.toString()`` (``yyyy-MM-dd HH:mm:ss.f``) of the values, in ``timezone``."""
    millis = epoch_millis_of_timestamps(values)
    wall = local_wall_clock(millis, timezone)
    year = pc.year(wall)
    date_part = pc.binary_join_element_wise(pad(year, 4), pad(pc.month(wall), 2), pad(pc.day(wall), 2), "-")
    time_part = pc.binary_join_element_wise(
        pad(pc.hour(wall), 2), pad(pc.minute(wall), 2), pad(pc.second(wall), 2), ":"
    )
    ms = pc.millisecond(wall)
    frac = pc.utf8_rtrim(pad(ms, 3), characters="0")
    frac = pc.if_else(pc.equal(frac, ""), pa.scalar("0"), frac)
    return pc.binary_join_element_wise(date_part, " ", time_part, ".", frac, "")


def java_floating_strings(values: pa.Array, digits_style: FloatDigits = FloatDigits.JDK_LEGACY) -> pa.Array:
    """Java ``Double.toString`` (``Float.toString`` for float32) of every value."""
    if pa.types.is_float16(values.type):
        values = values.cast(pa.float32())
    text = values.cast(pa.string())  # shortest round-trip digits, e.g. '1e+20', '0.001', '-0'
    parts = pc.extract_regex(text, _NUMBER_RE)
    sign = pc.struct_field(parts, [0])
    all_digits = pc.binary_join_element_wise(pc.struct_field(parts, [1]), pc.struct_field(parts, [2]), "")
    exp = _to_int(pc.struct_field(parts, [3]))
    # value = 0.<digits> * 10^point
    stripped = pc.utf8_ltrim(all_digits, characters="0")
    leading = pc.subtract(pc.utf8_length(all_digits), pc.utf8_length(stripped))
    point = pc.subtract(pc.add(pc.utf8_length(pc.struct_field(parts, [1])), exp), leading)
    digits = pc.utf8_rtrim(stripped, characters="0")
    if digits_style is FloatDigits.JDK_LEGACY:
        digits, point = _legacy_integer_digits(values, digits, point)
    out = _java_layout(sign, digits, point)
    # NaN and infinities do not match the number pattern
    special = pc.if_else(
        pc.is_nan(values),
        pa.scalar("NaN"),
        pc.if_else(pc.less(values, 0), pa.scalar("-Infinity"), pa.scalar("Infinity")),
    )
    return pc.if_else(
        pc.is_valid(parts), out, pc.if_else(pc.is_valid(values), special, pa.scalar(None, pa.string()))
    )


def _java_layout(sign: pa.Array, digits: pa.Array, point: pa.Array) -> pa.Array:
    """Java's layout of ``0.<digits> * 10^point``: plain for 10^-3 <= |x| < 10^7, else ``d.dddE<n>``."""
    is_zero = pc.equal(digits, "")
    sci_exp = pc.subtract(point, 1)
    head = pc.utf8_slice_codeunits(digits, 0, 1)
    tail = pc.utf8_slice_codeunits(digits, 1)
    tail = pc.if_else(pc.equal(tail, ""), pa.scalar("0"), tail)
    out = pc.binary_join_element_wise(sign, head, ".", tail, "E", sci_exp.cast(pa.string()), "")
    present = set(pc.unique(pc.filter(sci_exp, pc.invert(pc.fill_null(is_zero, True)))).to_pylist())
    for k in range(-3, 7):
        if k not in present:
            continue
        if k >= 0:
            whole = pc.utf8_rpad(pc.utf8_slice_codeunits(digits, 0, k + 1), width=k + 1, padding="0")
            frac = pc.utf8_slice_codeunits(digits, k + 1)
            frac = pc.if_else(pc.equal(frac, ""), pa.scalar("0"), frac)
            plain = pc.binary_join_element_wise(sign, whole, ".", frac, "")
        else:
            plain = pc.binary_join_element_wise(sign, "0." + "0" * (-k - 1), digits, "")
        out = pc.if_else(pc.equal(sci_exp, k), plain, out)
    return pc.if_else(is_zero, pc.binary_join_element_wise(sign, "0.0", ""), out)


# How many low decimal digits JDK 8-18 drops from an integer-valued number whose binary exponent
# exceeds the significand width by p + 1 (the fast path of its FloatingDecimal).
_INSIGNIFICANT_DIGITS = np.array(
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 8, 8, 8, 9, 9, 9, 9,
     10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14, 15, 15, 15, 15, 16, 16, 16, 17, 17, 17,
     18, 18, 18, 19],
    dtype=np.int64,
)  # fmt: skip


def _legacy_integer_digits(values: pa.Array, digits: pa.Array, point: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Replace the digits of integer-valued |x| < 2^63 by what JDK 8-18 prints for them: the exact
    integer, rounded only below the precision the binary exponent allows (``2.14689024E8`` for a
    float that JDK 19+ prints as ``2.1468902E8``)."""
    x = np.abs(np.asarray(pc.fill_null(values.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False)))
    with np.errstate(invalid="ignore"):
        mask = np.isfinite(x) & (x >= 1) & (x < 2.0**63) & (x == np.trunc(x))
    if not mask.any():
        return digits, point
    whole = x[mask].astype(np.int64)
    bin_exp = np.frexp(x[mask])[1].astype(np.int64) - 1
    significant = 24 if pa.types.is_float32(values.type) else 53
    p2 = bin_exp - significant - 1
    insignificant = np.where(
        (bin_exp > significant) & (p2 > 1) & (p2 < 64), _INSIGNIFICANT_DIGITS[np.clip(p2, 0, 63)], 0
    )
    pow10 = np.power(10, insignificant, dtype=np.int64)
    residue = whole % pow10
    rounded = whole // pow10 + ((insignificant > 0) & (residue >= pow10 // 2))
    text = pa.array(rounded, pa.int64()).cast(pa.string())
    new_point = pc.add(pc.utf8_length(text), pa.array(insignificant, pa.int64()))
    sel = pa.array(mask)
    return (
        pc.replace_with_mask(digits, sel, pc.utf8_rtrim(text, characters="0")),
        pc.replace_with_mask(point.cast(pa.int64()), sel, new_point.cast(pa.int64())),
    )


def _local_date_strings(values: pa.Array) -> pa.Array:
    """ISO ``LocalDate.toString``: 4-digit years, a sign for years outside 0000-9999."""
    days = values.cast(pa.date32())
    ts = days.cast(pa.timestamp("s"))
    year = pc.year(ts)
    year_text = pad(year, 4)
    year_text = pc.if_else(pc.greater(year, 9999), pc.binary_join_element_wise("+", year_text, ""), year_text)
    return pc.binary_join_element_wise(year_text, pad(pc.month(ts), 2), pad(pc.day(ts), 2), "-")


def _avro_time_numbers(values: pa.Array) -> pa.Array:
    unit = values.type.unit
    raw = values.cast(pa.int64())
    if unit == "s":
        return pc.multiply(raw, 1000)
    if unit == "ns":
        return pc.divide(raw, 1000)
    return raw


def _hex_strings(values: pa.Array) -> pa.Array:
    """Lower-case hex of every binary value (what Hudi prints for an Avro ``bytes`` value)."""
    arr = values.cast(pa.large_binary())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data_buf = arr.buffers()[2]
    data = (
        np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]
        if data_buf is not None and n
        else np.empty(0, np.uint8)
    )
    hex_bytes = _HEX[data].reshape(-1)
    new_offsets = (offsets - offsets[0]) * 2
    out = pa.Array.from_buffers(
        pa.large_string(), n, [None, pa.py_buffer(new_offsets.tobytes()), pa.py_buffer(hex_bytes.tobytes())]
    )
    return pc.if_else(pc.is_valid(arr), out, pa.scalar(None, pa.large_string())).cast(pa.string())


def _to_int(text: pa.Array) -> pa.Array:
    """Optionally signed decimal strings as int64; the empty string is 0."""
    cleaned = pc.utf8_ltrim(text, characters="+")
    return pc.cast(pc.if_else(pc.equal(cleaned, ""), pa.scalar("0"), cleaned), pa.int64())


def _combine(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col
