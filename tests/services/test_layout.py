"""Record layout for clustering: Hudi's sortable bytes and long coordinates of values, the Z and
Hilbert curves over them (against scalar references), and the order of curve dimensions."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import random

import numpy as np
import pyarrow as pa
import pytest

from hoodie.errors import TableServiceError
from hoodie.services.layout import (
    CurveBuildMethod,
    LayoutOptions,
    LayoutStrategy,
    dimension_order,
    hilbert_coordinate,
    hilbert_index,
    interleave,
    sample_ranks,
    sort_for_layout,
    zorder_key,
)


def test_direct_keys_are_hudis_sortable_bytes() -> None:
    longs = pa.array([0, -1, 1, None, -(2**63)], pa.int64())
    assert zorder_key(longs).tolist() == [1 << 63, (1 << 63) - 1, (1 << 63) + 1, 2**64 - 1, 0]
    ints = pa.array([0, -1, 5, None], pa.int32())
    assert zorder_key(ints).tolist() == [0x8000_0000, 0x7FFF_FFFF, 0x8000_0005, 0xFFFF_FFFF]
    doubles = pa.array([1.0, -1.0, 0.0, 2.5], pa.float64())
    # Positive: sign bit set; negative: every bit inverted; zero keeps its raw bits.
    assert zorder_key(doubles).tolist() == [0xBFF0 << 48, 0x400F_FFFF_FFFF_FFFF, 0, 0xC004 << 48]
    strings = pa.array(["ab", "abcdefghij", "", None, "é"])
    assert zorder_key(strings).tolist() == [0x6162, int.from_bytes(b"abcdefgh", "big"), 0, 0, 0xC3A9]
    assert zorder_key(pa.array([True, False, None])).tolist() == [0x8000_0001, 0x8000_0000, 0x8000_0000]
    dates = pa.array([dt.date(1970, 1, 2), None], pa.date32())
    assert zorder_key(dates).tolist() == [(1 << 63) + 86_400_000, 2**64 - 1]
    stamps = pa.array([dt.datetime(1970, 1, 1, 0, 0, 1, 500)], pa.timestamp("us"))
    assert zorder_key(stamps).tolist() == [(1 << 63) + 1000]
    decimals = pa.array([decimal.Decimal("-12.99")], pa.decimal128(10, 2))
    assert zorder_key(decimals).tolist() == [(1 << 63) - 12]
    # Hilbert coordinates are the values as Java longs.
    assert hilbert_coordinate(longs).tolist() == [0, 2**64 - 1, 1, 2**63 - 1, 1 << 63]
    assert hilbert_coordinate(pa.array([True, False])).tolist() == [2**63 - 1, 0]
    assert hilbert_coordinate(pa.array([1.0])).tolist() == [0x3FF0 << 48]
    assert hilbert_coordinate(strings).tolist()[:2] == [0x6162, int.from_bytes(b"abcdefgh", "big")]


def _skilling_index(point: list[int], bits: int) -> int:
    """A scalar reference: Skilling's axes-to-transpose, then the transposed bits plane by plane."""
    x = [p & ((1 << 64) - 1) for p in point]
    n = len(x)
    q = 1 << (bits - 1)
    while q > 1:
        low = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= low
            else:
                swap = (x[0] ^ x[i]) & low
                x[0] ^= swap
                x[i] ^= swap
        q >>= 1
    for i in range(1, n):
        x[i] ^= x[i - 1]
    flip = 0
    q = 1 << (bits - 1)
    while q > 1:
        if x[-1] & q:
            flip ^= q - 1
        q >>= 1
    index = 0
    for plane in range(bits - 1, -1, -1):
        for i in range(n):
            index = (index << 1) | (((x[i] ^ flip) >> plane) & 1)
    return index


def _as_int(words: np.ndarray) -> int:
    value = 0
    for w in words:
        value = (value << 64) | int(w)
    return value


def test_curves_match_scalar_references() -> None:
    rnd = random.Random(5)
    for dims in (2, 3, 4):
        points = [
            [rnd.choice([rnd.getrandbits(64), rnd.getrandbits(7), 0, 2**63 - 1]) for _ in range(dims)]
            for _ in range(200)
        ]
        coords = [np.array([p[d] for p in points], dtype=np.uint64) for d in range(dims)]
        hil = hilbert_index(coords)
        zed = interleave(coords)
        for row, point in enumerate(points):
            assert _as_int(hil[row]) == _skilling_index(point, 63)
            bits = "".join(format(point[d], "064b")[b] for b in range(64) for d in range(dims))
            assert _as_int(zed[row]) == int(bits, 2)
    # A 2-D Hilbert curve visits the 4x4 grid cell by cell.
    grid = [(x, y) for x in range(4) for y in range(4)]
    order = np.argsort(
        [
            _as_int(w)
            for w in hilbert_index([np.array(c, dtype=np.uint64) for c in zip(*grid, strict=True)], bits=2)
        ]
    )
    path = [grid[i] for i in order]
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in itertools.pairwise(path))


def test_curve_dimensions_follow_javas_hashmap_order() -> None:
    fields = [(f"c{i}", pa.int64()) for i in range(40)]
    schema = pa.schema(fields)
    assert dimension_order(schema, ["c9", "c3"]) == ["c3", "c9"]  # buckets 3 and 9
    assert dimension_order(schema, ["c17", "c3"]) == ["c17", "c3"]  # 17 & 15 == 1
    assert dimension_order(schema, ["c3", "c19"]) == ["c3", "c19"]  # both in bucket 3: insertion order
    with pytest.raises(TableServiceError, match="nope"):
        dimension_order(schema, ["nope"])
    data = pa.table({"a": [3, 1, 2, 1], "b": [0, 1, 0, 0]})
    ordered = sort_for_layout(data, ["a"], LayoutOptions(LayoutStrategy.ZORDER, CurveBuildMethod.DIRECT))
    assert ordered["a"].to_pylist() == [1, 1, 2, 3]  # one column: its own order
    assert ordered["b"].to_pylist() == [1, 0, 0, 0]  # stable


def test_sample_ranks_count_the_boundaries_below_each_value() -> None:
    # Every value is a boundary in a small column: ranks are dense ranks; nulls rank last...
    assert sample_ranks(pa.array([5, 3, None, 3, 9]), 100).tolist() == [1, 0, 3, 0, 2]
    # ...except for strings, which Hudi maps to "" when null.
    assert sample_ranks(pa.array(["b", None, "a"]), 100).tolist() == [2, 0, 1]
    # A big column is sampled: at most ``sample_size`` distinct ranks, still in value order.
    ranks = sample_ranks(pa.array(list(range(1000, 0, -1))), 10)
    assert len(set(ranks.tolist())) <= 10
    assert ranks.tolist() == sorted(ranks.tolist(), reverse=True)


def test_layout_options_take_hudis_keys_and_values() -> None:
    options = LayoutOptions.from_options(
        {
            "hoodie.layout.optimize.strategy": "z-order",
            "hoodie.layout.optimize.curve.build.method": "sample",
            "hoodie.layout.optimize.build.curve.sample.size": "500",
        }
    )
    assert options == LayoutOptions(LayoutStrategy.ZORDER, CurveBuildMethod.SAMPLE, 500)
    assert LayoutOptions.from_options(options.to_options()) == options
    assert LayoutOptions.from_options({}).strategy is LayoutStrategy.LINEAR
    assert LayoutStrategy.parse("Hilbert") is LayoutStrategy.HILBERT
    with pytest.raises(TableServiceError, match="peano"):
        LayoutOptions.from_options({"hoodie.layout.optimize.strategy": "peano"})
