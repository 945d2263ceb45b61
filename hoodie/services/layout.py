"""Record layout for clustering: linear order by the sort columns, or a Z-order / Hilbert curve.

Clustering sorts each group's records before writing them (``hoodie.layout.optimize.strategy``):

* ``linear``: ascending by the sort columns, compared column after column, nulls first;
* ``z-order`` and ``hilbert``: ascending by the position on a space-filling curve over the sort
  columns. With one column the curve is the column's own order, so that case sorts linearly.

Curve coordinates come from one of two methods (``hoodie.layout.optimize.curve.build.method``):

* ``direct`` maps each value to a 64-bit key the way Apache Hudi's direct method does. For the Z
  curve the key is the value's 8 "sortable" bytes (sign bit flipped for integers, IEEE bits folded
  for doubles, the first 8 UTF-8 bytes of strings right-aligned, ...); the Z value interleaves the
  keys bit by bit, most significant bits first. For the Hilbert curve the coordinate is the value
  as a Java ``long`` (doubles as their bit pattern, strings as their first 8 bytes), and the index
  is Skilling's transposition on 63 bits per dimension; Java's quirks (bit 63 of a coordinate is
  ignored, ``0.0`` sorts below negative doubles, ...) are kept so both engines agree.
* ``sample`` replaces each value by its rank among sampled boundary values of its column, so every
  dimension gets the same resolution whatever its value range; it is a deterministic version of
  Hudi's boundary-based method (no random jitter between boundaries).

Curve dimensions are taken in the order Java's ``HashMap`` iterates the columns' schema positions,
which is the order Hudi interleaves them in. Everything is vectorised with numpy over ``uint64``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import TableServiceError
from hoodie.services.options import int_option

__all__ = [
    "CurveBuildMethod",
    "LayoutOptions",
    "LayoutStrategy",
    "curve_keys",
    "dimension_order",
    "layout_order",
    "parse_sort_columns",
    "sort_for_layout",
]

U64 = npt.NDArray[np.uint64]

_STRATEGY_KEY = "hoodie.layout.optimize.strategy"
_METHOD_KEY = "hoodie.layout.optimize.curve.build.method"
_SAMPLE_SIZE_KEY = "hoodie.layout.optimize.build.curve.sample.size"

_SIGN64 = np.uint64(1 << 63)
_ALL64 = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_LONG_MAX = np.uint64(0x7FFF_FFFF_FFFF_FFFF)
_INT_MAX = 0x7FFF_FFFF
_HILBERT_BITS = 63


class LayoutStrategy(StrEnum):
    """``hoodie.layout.optimize.strategy``."""

    LINEAR = "LINEAR"
    ZORDER = "ZORDER"
    HILBERT = "HILBERT"

    @classmethod
    def parse(cls, value: str) -> LayoutStrategy:
        name = value.strip().upper()
        if name == "Z-ORDER":
            name = "ZORDER"
        try:
            return cls(name)
        except ValueError as e:
            raise TableServiceError(
                f"unsupported {_STRATEGY_KEY}={value!r} (supported: linear, z-order, hilbert)"
            ) from e


class CurveBuildMethod(StrEnum):
    """``hoodie.layout.optimize.curve.build.method``."""

    DIRECT = "DIRECT"
    SAMPLE = "SAMPLE"

    @classmethod
    def parse(cls, value: str) -> CurveBuildMethod:
        try:
            return cls(value.strip().upper())
        except ValueError as e:
            raise TableServiceError(f"unsupported {_METHOD_KEY}={value!r} (supported: direct, sample)") from e


@dataclass(frozen=True)
class LayoutOptions:
    """How clustering orders records (Hudi reads these from the writer's config at execution)."""

    strategy: LayoutStrategy = LayoutStrategy.LINEAR
    build_method: CurveBuildMethod = CurveBuildMethod.DIRECT
    sample_size: int = 200_000

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> LayoutOptions:
        sample_size = int_option(options, _SAMPLE_SIZE_KEY, 200_000, 1)
        return cls(
            strategy=LayoutStrategy.parse(options.get(_STRATEGY_KEY, "linear")),
            build_method=CurveBuildMethod.parse(options.get(_METHOD_KEY, "direct")),
            sample_size=sample_size,
        )

    def to_options(self) -> dict[str, str]:
        return {
            _STRATEGY_KEY: self.strategy.value,
            _METHOD_KEY: self.build_method.value,
            _SAMPLE_SIZE_KEY: str(self.sample_size),
        }


def parse_sort_columns(value: str | None) -> tuple[str, ...]:
    """The columns of ``hoodie.clustering.plan.strategy.sort.columns`` (comma separated)."""
    if not value:
        return ()
    return tuple(c.strip() for c in value.split(",") if c.strip())


def _check_columns(schema: pa.Schema, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise TableServiceError(
            f"sort column(s) {missing} are not in the table schema (columns: {', '.join(schema.names)})"
        )


def dimension_order(schema: pa.Schema, columns: Sequence[str]) -> list[str]:
    """``columns`` in the order Java's ``HashMap<Integer, ...>`` of their schema positions iterates.

    A ``HashMap`` with integer keys iterates its buckets in ascending ``key & (capacity - 1)``
    order and a bucket in insertion order; the capacity starts at 16 and doubles while the map is
    more than three quarters full.
    """
    _check_columns(schema, columns)
    unique = list(dict.fromkeys(columns))
    capacity = 16
    while len(unique) > capacity * 3 // 4:
        capacity *= 2
    positions = {c: schema.get_field_index(c) for c in unique}
    return sorted(unique, key=lambda c: positions[c] & (capacity - 1))  # sorted() is stable


# -- per-column keys -------------------------------------------------------------------------


def _numpy(column: pa.Array, dtype: str, fill: int | float) -> npt.NDArray[np.generic]:
    filled = pc.fill_null(column, pa.scalar(fill, column.type)) if column.null_count else column
    return np.asarray(filled.to_numpy(zero_copy_only=False), dtype=dtype)


def _prefix_bytes(column: pa.Array) -> U64:
    """Big-endian value of each entry's first (up to) 8 bytes: Java's left-padded 8-byte form."""
    data = column.cast(pa.large_binary())
    n = len(data)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out
    offsets_buf, data_buf = data.buffers()[1], data.buffers()[2]
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[data.offset : data.offset + n + 1]
    raw = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = np.minimum(offsets[1:] - starts, 8)
    valid = np.asarray(data.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    lengths = np.where(valid, lengths, 0)
    for k in range(8):
        has = lengths > k
        if not has.any():
            break
        idx = np.where(has, starts + k, 0)
        byte = raw[idx].astype(np.uint64) if len(raw) else np.zeros(n, np.uint64)
        out = np.where(has, (out << np.uint64(8)) | byte, out)
    return out


def _double_bits(values: npt.NDArray[np.float64], canonical_nan: bool) -> U64:
    bits = values.astype(np.float64).view(np.uint64).copy()
    if canonical_nan:
        bits[np.isnan(values)] = np.uint64(0x7FF8_0000_0000_0000)
    return bits


def _epoch_millis(column: pa.Array) -> npt.NDArray[np.int64]:
    """Epoch milliseconds of dates and timestamps (``java.util.Date#getTime``).

    Java turns a date into the millisecond of its midnight in the JVM's time zone; we take UTC
    midnight, so date keys agree with Hudi's when its JVM runs in UTC.
    """
    t = column.type
    if pa.types.is_date32(t):
        days = np.asarray(column.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
        return days * 86_400_000
    if pa.types.is_date64(t):
        return np.asarray(column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    assert isinstance(t, pa.TimestampType)
    per_ms = {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}[t.unit]
    raw = np.asarray(column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    return raw * 1000 if t.unit == "s" else np.floor_divide(raw, per_ms)


def _valid(column: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _as_u64(values: npt.NDArray[np.generic]) -> U64:
    return values.astype(np.int64).view(np.uint64) if values.dtype.kind == "i" else values.astype(np.uint64)


def zorder_key(column: pa.Array, name: str = "") -> U64:
    """Hudi's 8 sortable bytes of each value (the direct Z-order method), as a ``uint64``."""
    t = column.type
    valid = _valid(column)
    if pa.types.is_int64(t):
        return _as_u64(_numpy(column, "int64", np.iinfo(np.int64).max)) ^ _SIGN64
    if pa.types.is_int32(t) or pa.types.is_int16(t):
        fill = _INT_MAX if pa.types.is_int32(t) else 0x7FFF
        ints = _numpy(column, "int64", fill).astype(np.int64)
        return ((ints ^ (1 << 31)) & 0xFFFF_FFFF).astype(np.uint64)
    if pa.types.is_int8(t):
        return (_numpy(column, "int64", 127).astype(np.int64) & 0xFF).astype(np.uint64)
    if pa.types.is_floating(t):
        largest = float(np.finfo(np.float64 if pa.types.is_float64(t) else np.float32).max)
        values = _numpy(column, "float64", largest).astype(np.float64)
        bits = _double_bits(values, canonical_nan=False)
        bits = np.where(values > 0, bits ^ _SIGN64, bits)
        return np.where(values < 0, ~bits, bits)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _prefix_bytes(column)  # a null maps to "", eight zero bytes
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return _prefix_bytes(column)  # a null maps to one zero byte, also zero
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        millis = _as_u64(_epoch_millis(column))
        return np.where(valid, millis ^ _SIGN64, _ALL64)
    if pa.types.is_decimal(t):
        longs = _as_u64(_decimal_longs(column))
        return np.where(valid, longs ^ _SIGN64, _ALL64)
    if pa.types.is_boolean(t):
        flags = _numpy(column, "bool", False).astype(bool)
        return np.where(flags, np.uint64(0x8000_0001), np.uint64(0x8000_0000))
    raise TableServiceError(f"sort column {name!r} has type {t}, which a Z-order curve cannot map")


def hilbert_coordinate(column: pa.Array, name: str = "") -> U64:
    """Hudi's ``long`` coordinate of each value (the direct Hilbert method), as a ``uint64``."""
    t = column.type
    valid = _valid(column)
    if pa.types.is_integer(t) and not pa.types.is_int8(t):
        return np.where(valid, _as_u64(_numpy(column, "int64", 0)), _LONG_MAX)
    if pa.types.is_int8(t):
        unsigned = (_numpy(column, "int64", 0).astype(np.int64) & 0xFF).astype(np.uint64)
        return np.where(valid, unsigned, _LONG_MAX)
    if pa.types.is_floating(t):
        bits = _double_bits(_numpy(column, "float64", 0.0).astype(np.float64), canonical_nan=True)
        return np.where(valid, bits, _LONG_MAX)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        return np.where(valid, _prefix_bytes(column), _LONG_MAX)
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return np.where(valid, _prefix_bytes(column), _LONG_MAX)
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return np.where(valid, _as_u64(_epoch_millis(column)), _LONG_MAX)
    if pa.types.is_decimal(t):
        return np.where(valid, _as_u64(_decimal_longs(column)), _LONG_MAX)
    if pa.types.is_boolean(t):
        flags = _numpy(column, "bool", False).astype(bool)
        return np.where(flags, _LONG_MAX, np.uint64(0))
    raise TableServiceError(f"sort column {name!r} has type {t}, which a Hilbert curve cannot map")


def _decimal_longs(column: pa.Array) -> npt.NDArray[np.int64]:
    """``BigDecimal.longValue()``: the integer part, truncated toward zero."""
    return np.asarray(column.cast(pa.int64(), safe=False).fill_null(0).to_numpy(), dtype=np.int64)


def _dense_rank(column: pa.Array, nulls_first: bool) -> npt.NDArray[np.int64]:
    """0-based dense rank of each value in ascending order (all nulls share one rank)."""
    n = len(column)
    placement = "at_start" if nulls_first else "at_end"
    order = np.asarray(
        pc.array_sort_indices(column, order="ascending", null_placement=placement).to_numpy(), np.int64
    )
    ranks = np.zeros(n, dtype=np.int64)
    if n < 2:
        return ranks
    ordered = column.take(pa.array(order))
    differs = pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1))
    valid = np.asarray(ordered.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    step = np.asarray(differs.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    step |= valid[1:] != valid[:-1]
    ranks[order] = np.concatenate([[0], np.cumsum(step)])
    return ranks


def sample_ranks(column: pa.Array, sample_size: int) -> U64:
    """Each value's rank among boundary values sampled from its column (the ``sample`` method).

    The boundaries are the distinct values of an evenly spaced sample of at most ``sample_size``
    sorted values (all of them for a small group); a value's rank is the number of boundaries
    below it. Nulls rank first for strings and binary (Hudi maps them to empty) and last otherwise.
    """
    n = len(column)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    t = column.type
    nulls_first = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t)
    dense = _dense_rank(column, nulls_first)
    ordered = np.sort(dense)
    if n > sample_size:
        picks = np.linspace(0, n - 1, sample_size).round().astype(np.int64)
        ordered = ordered[picks]
    bounds = np.unique(ordered)[: max(len(ordered) - 1, 0)]
    return np.searchsorted(bounds, dense, side="left").astype(np.uint64)


# -- curves ----------------------------------------------------------------------------------


def interleave(keys: Sequence[U64]) -> U64:
    """The Z value of 64-bit keys: bit ``b`` of every key in turn, most significant bits first.

    Returns a ``(rows, len(keys))`` array of words; rows compare as the words left to right.
    """
    dims = len(keys)
    rows = len(keys[0]) if dims else 0
    words = np.zeros((rows, dims), dtype=np.uint64)
    one = np.uint64(1)
    for step in range(64):
        for i, key in enumerate(keys):
            k = step * dims + i
            bit = (key >> np.uint64(63 - step)) & one
            words[:, k // 64] |= bit << np.uint64(63 - k % 64)
    return words


def hilbert_index(coords: Sequence[U64], bits: int = _HILBERT_BITS) -> U64:
    """Hilbert curve index of points (one array per dimension), ``bits`` bits per dimension.

    Skilling's "axes to transpose" followed by reading the transposed bits plane by plane, as the
    ``org.davidmoten.hilbert`` library Hudi uses does. Returns ``(rows, words)`` big-endian words.
    """
    dims = len(coords)
    x = [c.astype(np.uint64).copy() for c in coords]
    top = 1 << (bits - 1)
    q = top
    while q > 1:
        p = np.uint64(q - 1)
        qq = np.uint64(q)
        for i in range(dims):
            has = (x[i] & qq) != 0
            if i == 0:
                x[0] = np.where(has, x[0] ^ p, x[0])
                continue
            t = (x[0] ^ x[i]) & p
            x[0] = np.where(has, x[0] ^ p, x[0] ^ t)
            x[i] = np.where(has, x[i], x[i] ^ t)
        q >>= 1
    for i in range(1, dims):
        x[i] = x[i] ^ x[i - 1]
    rows = len(x[0]) if dims else 0
    t_mask = np.zeros(rows, dtype=np.uint64)
    q = top
    while q > 1:
        t_mask = np.where((x[dims - 1] & np.uint64(q)) != 0, t_mask ^ np.uint64(q - 1), t_mask)
        q >>= 1
    x = [xi ^ t_mask for xi in x]
    total = bits * dims
    n_words = math.ceil(total / 64)
    words = np.zeros((rows, n_words), dtype=np.uint64)
    one = np.uint64(1)
    for plane in range(bits - 1, -1, -1):
        for j in range(dims):
            k = (bits - 1 - plane) * dims + j  # position from the most significant bit
            lsb = total - 1 - k
            bit = (x[j] >> np.uint64(plane)) & one
            words[:, n_words - 1 - lsb // 64] |= bit << np.uint64(lsb % 64)
    return words


def curve_keys(table: pa.Table, columns: Sequence[str], options: LayoutOptions) -> U64:
    """The curve position of every row as ``(rows, words)`` ``uint64`` words (compare left to right)."""
    if options.strategy is LayoutStrategy.LINEAR:
        raise TableServiceError("a linear layout has no curve keys; sort by the columns instead")
    ordered = dimension_order(table.schema, columns)
    arrays = [table[c].combine_chunks() for c in ordered]
    if options.build_method is CurveBuildMethod.SAMPLE:
        ranks = [sample_ranks(a, options.sample_size) for a in arrays]
        if options.strategy is LayoutStrategy.ZORDER:
            return interleave([r ^ np.uint64(1 << 31) for r in ranks])  # intTo8Byte of the rank
        return hilbert_index(ranks)
    if options.strategy is LayoutStrategy.ZORDER:
        return interleave([zorder_key(a, c) for a, c in zip(arrays, ordered, strict=True)])
    return hilbert_index([hilbert_coordinate(a, c) for a, c in zip(arrays, ordered, strict=True)])


def layout_order(table: pa.Table, columns: Sequence[str], options: LayoutOptions) -> pa.Array:
    """Row indices of ``table`` in layout order (stable: equal keys keep their input order)."""
    if not columns or table.num_rows == 0:
        return pa.array(np.arange(table.num_rows, dtype=np.int64))
    if options.strategy is LayoutStrategy.LINEAR or len(set(columns)) == 1:
        _check_columns(table.schema, columns)
        unique = list(dict.fromkeys(columns))
        keys = [(c, "ascending", "at_start") for c in unique]
        return pc.sort_indices(table.select(unique), options=pc.SortOptions(sort_keys=keys))
    words = curve_keys(table, columns, options)
    order = np.lexsort([words[:, i] for i in range(words.shape[1] - 1, -1, -1)])
    return pa.array(order.astype(np.int64))


def sort_for_layout(table: pa.Table, columns: Sequence[str], options: LayoutOptions) -> pa.Table:
    """``table`` ordered as clustering lays it out (unchanged when there are no sort columns)."""
    if not columns:
        return table
    return table.take(layout_order(table, columns, options))
