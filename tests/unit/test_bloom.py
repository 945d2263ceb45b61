"""Bloom filters against the ones Apache Hudi wrote into the fixture tables' Parquet footers."""

from __future__ import annotations

import base64
import random
import string
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.bloom import (
    BLOOM_FILTER_FOOTER_KEY,
    BLOOM_TYPE_FOOTER_KEY,
    BloomFilterTypeCode,
    create_bloom_filter,
    deserialize_bloom_filter,
)
from hoodie.bloom_hash import hash_positions
from hoodie.errors import CorruptFileError, InvalidInputError
from tests.conftest import fixture_names, fixture_path

MASK = 0xFFFFFFFF


# ------------------------------------------------------------ scalar reference hashes
# Straight per-byte versions of the two hashes with Java's int semantics, to check the
# vectorized code on lengths, tails and non-ASCII bytes the fixtures do not cover.


def _signed_byte(b: int) -> int:
    return (b - 256 if b > 127 else b) & MASK


def ref_murmur(data: bytes, seed: int) -> int:
    m = 0x5BD1E995
    n = len(data)
    h = (seed ^ n) & MASK
    for i in range(n // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & MASK
        k ^= k >> 24
        k = (k * m) & MASK
        h = ((h * m) & MASK) ^ k
    left = n % 4
    if left:
        if left >= 3:
            h ^= (_signed_byte(data[n - 3]) << 16) & MASK
        if left >= 2:
            h ^= (_signed_byte(data[n - 2]) << 8) & MASK
        h ^= _signed_byte(data[n - 1])
        h = (h * m) & MASK
    h ^= h >> 13
    h = (h * m) & MASK
    h ^= h >> 15
    return h


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & MASK


def ref_jenkins(data: bytes, seed: int) -> int:
    n = len(data)
    a = b = c = (0xDEADBEEF + n + seed) & MASK
    off = 0
    while n - off > 12:
        a = (a + int.from_bytes(data[off : off + 4], "little")) & MASK
        b = (b + int.from_bytes(data[off + 4 : off + 8], "little")) & MASK
        c = (c + int.from_bytes(data[off + 8 : off + 12], "little")) & MASK
        a = (a - c) & MASK ^ _rot(c, 4)
        c = (c + b) & MASK
        b = (b - a) & MASK ^ _rot(a, 6)
        a = (a + c) & MASK
        c = (c - b) & MASK ^ _rot(b, 8)
        b = (b + a) & MASK
        a = (a - c) & MASK ^ _rot(c, 16)
        c = (c + b) & MASK
        b = (b - a) & MASK ^ _rot(a, 19)
        a = (a + c) & MASK
        c = (c - b) & MASK ^ _rot(b, 4)
        b = (b + a) & MASK
        off += 12
    if n - off == 0:
        return c
    tail = data[off:] + bytes(12 - (n - off))
    a = (a + int.from_bytes(tail[0:4], "little")) & MASK
    b = (b + int.from_bytes(tail[4:8], "little")) & MASK
    c = (c + int.from_bytes(tail[8:12], "little")) & MASK
    c = ((c ^ b) - _rot(b, 14)) & MASK
    a = ((a ^ c) - _rot(c, 11)) & MASK
    b = ((b ^ a) - _rot(a, 25)) & MASK
    c = ((c ^ b) - _rot(b, 16)) & MASK
    a = ((a ^ c) - _rot(c, 4)) & MASK
    b = ((b ^ a) - _rot(a, 14)) & MASK
    c = ((c ^ b) - _rot(b, 24)) & MASK
    return c


def ref_positions(key: str, num_hashes: int, size: int, hash_type: int) -> list[int]:
    data = key.encode("utf-8")
    fn = ref_murmur if hash_type == 1 else ref_jenkins
    seed, out = 0, []
    for _ in range(num_hashes):
        seed = fn(data, seed)
        signed = seed - (1 << 32) if seed & 0x80000000 else seed
        out.append(abs(signed) % size)  # == Math.abs(h % size) with Java's truncating remainder
    return out


def test_jenkins_reference_matches_lookup3_vectors() -> None:
    assert ref_jenkins(b"", 0) == 0xDEADBEEF
    assert ref_jenkins(b"Four score and seven years ago", 0) == 0x17770551
    assert ref_jenkins(b"Four score and seven years ago", 1) == 0xCD628161


def _random_keys(rng: random.Random, count: int) -> list[str]:
    alphabet = string.ascii_letters + string.digits + "-_/:é€ßñ中文𝄞\u0080\u07ff"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 41))) for _ in range(count)]


@pytest.mark.parametrize("hash_type", [0, 1])
def test_vectorized_positions_match_scalar_reference(hash_type: int) -> None:
    keys = _random_keys(random.Random(hash_type), 400)
    got = hash_positions(keys, 7, 1_000_003, hash_type)
    expected = np.array([ref_positions(k, 7, 1_000_003, hash_type) for k in keys])
    assert got.shape == (400, 7)
    assert np.array_equal(got, expected)


# ------------------------------------------------------------ the fixture footers


@dataclass(frozen=True)
class FooterFilter:
    path: Path
    text: str
    type_code: str
    keys: pa.ChunkedArray


@pytest.fixture(scope="module")
def footer_filters(fixture_root: Path) -> list[FooterFilter]:
    found = []
    for name in fixture_names():
        base = fixture_path(fixture_root, name)
        for path in sorted(base.rglob("*.parquet")):
            if ".hoodie" in path.parts:
                continue
            parquet = pq.ParquetFile(path)
            meta = parquet.metadata.metadata or {}
            text = meta.get(BLOOM_FILTER_FOOTER_KEY.encode())
            if text is None:
                continue
            keys = parquet.read(columns=["_hoodie_record_key"]).column(0)
            found.append(
                FooterFilter(path, text.decode(), meta[BLOOM_TYPE_FOOTER_KEY.encode()].decode(), keys)
            )
    return found


def test_fixture_footers_are_dynamic_v0_with_hudi_defaults(footer_filters: list[FooterFilter]) -> None:
    assert len(footer_filters) >= 70
    for ff in footer_filters:
        assert ff.type_code == "DYNAMIC_V0"
        raw = base64.b64decode(ff.text)
        # version, hashes, hash type (murmur), bits, row capacity, keys in row, rows
        assert struct.unpack(">iibiiii", raw[:25]) == (-1, 30, 1, 2587966, 60000, len(ff.keys), 1)


def test_fixture_filters_contain_every_record_key(footer_filters: list[FooterFilter]) -> None:
    assert footer_filters
    for ff in footer_filters:
        bloom = deserialize_bloom_filter(ff.text, ff.type_code)
        assert bloom.type_code is BloomFilterTypeCode.DYNAMIC_V0
        assert bloom.might_contain_many(ff.keys).all(), ff.path
        assert all(bloom.might_contain(k) for k in ff.keys.to_pylist()), ff.path
        assert bloom.serialize() == ff.text
        assert not bloom.might_contain_many(["no-such-key-" + str(i) for i in range(50)]).any()


def test_fresh_filter_serializes_byte_identical_to_hudi(footer_filters: list[FooterFilter]) -> None:
    assert footer_filters
    for ff in footer_filters:
        from_arrow = create_bloom_filter()
        from_arrow.add_all(ff.keys)
        assert from_arrow.serialize() == ff.text, ff.path
        one_by_one = create_bloom_filter(60000, 0.000000001, BloomFilterTypeCode.DYNAMIC_V0, 100000)
        for key in ff.keys.to_pylist():
            one_by_one.add(key)
        assert one_by_one.serialize() == ff.text, ff.path


# ------------------------------------------------------------ SIMPLE


def test_simple_round_trip_and_false_positive_rate() -> None:
    rng = random.Random(7)
    members = [f"{rng.getrandbits(128):032x}" for _ in range(1000)]
    others = [f"{rng.getrandbits(128):032x}" for _ in range(20000)]
    bloom = create_bloom_filter(num_entries=1000, fpp=0.01, type_code="SIMPLE")
    assert bloom.type_code is BloomFilterTypeCode.SIMPLE
    bloom.add_all(members)
    text = bloom.serialize()
    raw = base64.b64decode(text)
    # bits = ceil(1000 * -ln(0.01) / ln(2)^2) = 9586; hashes = ceil(ln 2 * 9586 / 1000) = 7
    assert struct.unpack(">iibi", raw[:13]) == (-1, 7, 1, 9586)
    assert len(raw) == 13 + (9586 + 7) // 8

    again = deserialize_bloom_filter(text, "simple")
    assert again.type_code is BloomFilterTypeCode.SIMPLE
    assert again.serialize() == text
    assert again.might_contain_many(members).all()
    positives = again.might_contain_many(others)
    assert np.array_equal(positives, bloom.might_contain_many(pa.array(others)))
    assert 0.002 < positives.mean() < 0.02
    assert again.might_contain(members[0])
    assert not again.might_contain("")


def test_unversioned_jenkins_header_is_read() -> None:
    keys = ["alpha", "beta", "a-much-longer-key-of-more-than-twelve-bytes"]
    size, hashes = 4099, 5
    bits = np.zeros(size, dtype=bool)
    for key in keys:
        bits[ref_positions(key, hashes, size, 0)] = True
    raw = struct.pack(">ii", hashes, size) + np.packbits(bits, bitorder="little").tobytes()
    bloom = deserialize_bloom_filter(base64.b64encode(raw), BloomFilterTypeCode.SIMPLE)
    assert bloom.might_contain_many(keys).all()
    assert bloom.might_contain_many(["gamma", "delta"]).sum() == 0
    rewritten = base64.b64decode(bloom.serialize())
    assert rewritten[:13] == struct.pack(">iibi", -1, hashes, 0, size)
    assert rewritten[13:] == raw[8:]


# ------------------------------------------------------------ DYNAMIC_V0 bounding


def _java_rows(count: int, capacity: int, max_entries: int) -> tuple[list[int], int, int]:
    """Row of each key, row count and keys-in-last-row, stepping the way Hudi's filter does."""
    rows, current, bounded, cursor, out = 1, 0, False, 0, []
    for _ in range(count):
        if bounded:
            out.append(cursor % rows)
            cursor += 1
        elif current >= capacity and rows * capacity < max_entries:
            rows += 1
            current = 0
            out.append(rows - 1)
        elif current >= capacity:
            bounded = True
            out.append(0)
        else:
            out.append(rows - 1)
        current += 1
    return out, rows, current


def _split_rows(text: str) -> tuple[tuple[int, int, int], list[bytes]]:
    raw = base64.b64decode(text)
    capacity, in_last, count = struct.unpack(">iii", raw[13:25])
    row_len = (len(raw) - 25) // count
    return (capacity, in_last, count), [raw[25 + i * row_len : 25 + (i + 1) * row_len] for i in range(count)]


@pytest.mark.parametrize("count", [50, 100, 101, 250, 300, 301, 777])
def test_dynamic_filter_grows_rows_then_bounds(count: int) -> None:
    keys = [f"key-{i:05d}" for i in range(count)]
    bloom = create_bloom_filter(num_entries=100, fpp=0.01, max_entries=250)
    bloom.add_all(keys[:37])
    chunks = [pa.array(keys[37:120], type=pa.string()), pa.array(keys[120:], type=pa.string())]
    bloom.add_all(pa.chunked_array(chunks))
    expected_rows, row_count, in_last = _java_rows(count, 100, 250)
    assert row_count == min(3, 1 + (count - 1) // 100)
    (capacity, got_in_last, got_rows), row_bytes = _split_rows(bloom.serialize())
    assert (capacity, got_in_last, got_rows) == (100, in_last, row_count)
    for row in range(row_count):
        # Each row must hold exactly the bits of a SIMPLE filter over the keys Hudi routes to it.
        simple = create_bloom_filter(num_entries=100, fpp=0.01, type_code="SIMPLE")
        simple.add_all([k for k, r in zip(keys, expected_rows, strict=True) if r == row])
        assert row_bytes[row] == base64.b64decode(simple.serialize())
    assert bloom.might_contain_many(keys).all()

    sequential = create_bloom_filter(num_entries=100, fpp=0.01, max_entries=250)
    for key in keys:
        sequential.add(key)
    assert sequential.serialize() == bloom.serialize()


def test_deserialized_dynamic_filter_never_adds_rows() -> None:
    bloom = create_bloom_filter(num_entries=10, fpp=0.05, max_entries=1000)
    bloom.add_all([f"k{i}" for i in range(15)])
    assert _split_rows(bloom.serialize())[0] == (10, 5, 2)
    again = deserialize_bloom_filter(bloom.serialize(), "DYNAMIC_V0")
    again.add_all([f"more{i}" for i in range(40)])
    # Hudi does not persist the growth bound: the last row fills to capacity, then rows are reused.
    assert _split_rows(again.serialize())[0] == (10, 45, 2)
    assert again.might_contain_many([f"k{i}" for i in range(15)] + [f"more{i}" for i in range(40)]).all()


# ------------------------------------------------------------ inputs and corrupt data


def test_key_inputs() -> None:
    bloom = create_bloom_filter(num_entries=100, fpp=0.01, type_code="SIMPLE")
    keys = pa.array(["x0", "x1", "x2", "x3", "x4"], type=pa.large_string())
    bloom.add_all(keys.slice(2))
    assert bloom.might_contain_many(keys).tolist() == [False, False, True, True, True]
    assert bloom.might_contain_many(pa.array(["x2", "", "x4"])).tolist() == [True, False, True]
    assert bloom.might_contain_many([]).shape == (0,)
    with pytest.raises(InvalidInputError, match="#1 is the empty string"):
        bloom.add_all(["ok", ""])
    with pytest.raises(InvalidInputError, match="#1 is null"):
        bloom.add_all(pa.array(["a", None]))
    with pytest.raises(InvalidInputError, match="unknown bloom filter type code 'BOGUS'"):
        create_bloom_filter(type_code="BOGUS")
    with pytest.raises(InvalidInputError, match="fpp"):
        create_bloom_filter(fpp=0.0)


def _dynamic_bytes() -> bytes:
    bloom = create_bloom_filter(num_entries=20, fpp=0.1)
    bloom.add_all(["a", "b", "c"])
    return base64.b64decode(bloom.serialize())


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    ("make", "code", "message"),
    [
        (lambda raw: "not base64!!", "DYNAMIC_V0", "not valid base64"),
        (lambda raw: _b64(raw[:-3]), "DYNAMIC_V0", "truncated"),
        (lambda raw: _b64(raw[:6]), "DYNAMIC_V0", "truncated: hash count"),
        (lambda raw: _b64(raw + b"\0"), "DYNAMIC_V0", "1 unexpected trailing bytes"),
        (lambda raw: _b64(struct.pack(">i", -2) + raw[4:]), "DYNAMIC_V0", "version -2"),
        (lambda raw: _b64(raw[:8] + b"\x07" + raw[9:]), "DYNAMIC_V0", "hash type 7"),
        (lambda raw: _b64(raw[:4] + struct.pack(">i", 0) + raw[8:]), "DYNAMIC_V0", "hash count 0"),
        (lambda raw: _b64(raw[:9] + struct.pack(">i", 0) + raw[13:]), "DYNAMIC_V0", "vector size 0"),
        (lambda raw: _b64(raw[:13] + struct.pack(">i", 0) + raw[17:]), "DYNAMIC_V0", "row capacity 0"),
        (lambda raw: _b64(raw[:17] + struct.pack(">i", -1) + raw[21:]), "DYNAMIC_V0", "key count -1"),
        (lambda raw: _b64(raw[:21] + struct.pack(">i", 9) + raw[25:]), "DYNAMIC_V0", "row count 9"),
        (lambda raw: _b64(raw[:21] + struct.pack(">i", 0) + raw[25:]), "DYNAMIC_V0", "row count 0"),
        (
            lambda raw: _b64(raw[:29] + struct.pack(">i", 9) + raw[33:]),
            "DYNAMIC_V0",
            r"row 0 has .* \(9, 1, 96\), expected \(4, 1, 96\)",
        ),
        (_b64, "SIMPLE", "trailing bytes"),
        (_b64, "BLOCKED_V9", "type code 'BLOCKED_V9'"),
    ],
)
def test_corrupt_input_raises(make: Callable[[bytes], str], code: str, message: str) -> None:
    text = make(_dynamic_bytes())
    with pytest.raises(CorruptFileError, match=message):
        deserialize_bloom_filter(text, code)


def test_truncated_fixture_footer_raises(footer_filters: list[FooterFilter]) -> None:
    text = footer_filters[0].text
    with pytest.raises(CorruptFileError, match="truncated: bit vector"):
        deserialize_bloom_filter(_b64(base64.b64decode(text)[:-1]), "DYNAMIC_V0")
    with pytest.raises(CorruptFileError, match="base64"):
        deserialize_bloom_filter(text[:-2], "DYNAMIC_V0")
