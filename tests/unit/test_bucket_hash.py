"""Bucket placement as Hudi's ``BucketIdentifier`` computes it: ``String.hashCode`` and
``List.hashCode`` checked against the JVM Spark runs on (through py4j), the hash keys taken
apart as ``KeyGenUtils.extractRecordKeysByFields`` does (the vectors of Hudi's own tests), and
the bucket ``(hash & Integer.MAX_VALUE) % n`` of the JVM's list hash."""

from __future__ import annotations

import random
from typing import Any

import pytest

from hoodie.index.bucket import (
    BucketHashError,
    bucket_ids,
    hash_keys,
    java_split,
    legacy_hash_keys,
)
from hoodie.index.java_hash import java_list_hash, java_string_hash

STRING_KEYS = [
    "a",
    "k1",
    "uuid-3f1c47b3-b7f6-7069caca9670",
    "hello world",
    "héllo",  # Latin-1 supplement
    "日本語のキー",  # BMP, 3 UTF-8 bytes each
    "😀",  # outside the BMP: two UTF-16 code units
    "x😀y𝄞z",
    "\u0000nul",
    "a" * 300,  # long enough for the multiplier powers to wrap many times
]
INTEGER_KEYS = ["0", "1", "-1", "42", "2147483647", "-2147483648", "9223372036854775807", "123456789012"]


def _java_list(spark: Any, items: list[str | None]) -> Any:
    jlist = spark.sparkContext._jvm.java.util.ArrayList()
    for item in items:
        jlist.add(item)
    return jlist


def _java_bucket(spark: Any, items: list[str | None], n: int) -> int:
    return int((_java_list(spark, items).hashCode() & 0x7FFFFFFF) % n)


@pytest.mark.parametrize("text", [*STRING_KEYS, *INTEGER_KEYS, ""])
def test_string_hash_equals_javas(spark: Any, text: str) -> None:
    assert java_string_hash(text) == spark.sparkContext._jvm.java.util.Objects.hashCode(text)


def test_list_hash_equals_javas_with_nulls(spark: Any) -> None:
    for items in (["a"], ["a", "b"], [None], ["x", None, ""], ["😀", "日本", "42"], []):
        assert java_list_hash(items) == _java_list(spark, items).hashCode(), items


@pytest.mark.parametrize("num_buckets", [1, 4, 7, 256, 1000])
def test_single_field_keys_land_in_javas_bucket(spark: Any, num_buckets: int) -> None:
    rnd = random.Random(num_buckets)
    randoms = [
        "".join(
            chr(
                rnd.choice([rnd.randint(32, 126), rnd.randint(0x4E00, 0x9FFF), rnd.randint(0x1F300, 0x1FAFF)])
            )
            for _ in range(rnd.randint(1, 12))
        )
        for _ in range(60)
    ]
    keys = [*STRING_KEYS, *INTEGER_KEYS, *randoms]
    got = bucket_ids(keys, ["id"], num_buckets).tolist()
    want = [_java_bucket(spark, [k], num_buckets) for k in keys]
    assert got == want


@pytest.mark.parametrize(
    ("record_key", "fields", "expected"),
    [
        # TestBucketIdentifier / TestKeyGenUtils in apache/hudi (1.0+)
        ("abc", [""], ["abc"]),
        ("f1:abc", ["f1"], ["f1:abc"]),  # no ',': the whole key
        ("f1:abc,f2:bcd", ["f2"], ["bcd"]),
        ("f1:abc,f2:bcd", ["f1", "f2"], ["abc", "bcd"]),
        ("f1:abc,f2:bcd,efg", ["f1", "f2"], ["abc", "bcd,efg"]),
        ("id1:1,id2:2,id3:3", ["id2"], ["2"]),
        ("id1:1,id2:2,2,id3:3", ["id2"], ["2,2"]),
        ("id1:1,1,1,id2:,2,2,,id3:3", ["id2"], [",2,2,"]),
        ("col1:val1,col2:2014-10-22 13:50:42,col3:val3", ["col2"], ["2014-10-22 13:50:42"]),
        (
            "col1:val1,col2:2014-10-22 13:50:42,col3:val3",
            ["col1", "col2", "col3"],
            ["val1", "2014-10-22 13:50:42", "val3"],
        ),
        ("a:__null__,b:x", ["a", "b"], [None, "x"]),
        ("a:__empty__,b:x", ["a", "b"], ["", "x"]),
        ("a:1,b:2", ["c"], ["a:1,b:2"]),  # nothing kept: the whole key
        ("a,b", ["a"], ["a,b"]),  # no ':': the whole key
        ("2024-10-24 10:11:11.234", ["ts"], ["2024-10-24 10:11:11.234"]),
    ],
)
def test_hash_keys_as_key_gen_utils(record_key: str, fields: list[str], expected: list[str | None]) -> None:
    assert hash_keys(record_key, fields) == expected


def test_complex_keys_land_in_javas_bucket(spark: Any) -> None:
    cases = [
        ("id:1,name:ann", ["id", "name"], ["1", "ann"]),
        ("id:1,name:ann", ["name"], ["ann"]),
        ("id:42,ts:2024-01-01 10:00:00", ["id", "ts"], ["42", "2024-01-01 10:00:00"]),
        ("id:日本,name:😀", ["id", "name"], ["日本", "😀"]),
        ("id:__null__,name:bob", ["id", "name"], [None, "bob"]),
        ("id:7,name:a,b", ["id", "name"], ["7", "a,b"]),
    ]
    for key, fields, values in cases:
        assert hash_keys(key, fields) == values
        for n in (3, 4, 256):
            assert bucket_ids([key], fields, n).tolist() == [_java_bucket(spark, list(values), n)], (key, n)


def test_bucket_ids_mixes_simple_and_complex_keys() -> None:
    keys = ["k1", "id:1,name:ann", "😀", "id:2,name:bob"]
    got = bucket_ids(keys, ["id", "name"], 16).tolist()
    one_by_one = [bucket_ids([k], ["id", "name"], 16)[0] for k in keys]
    assert got == one_by_one


def test_non_terminating_keys_are_refused() -> None:
    with pytest.raises(BucketHashError, match="does not terminate"):
        hash_keys("x,a:1:2", ["b"])


def test_legacy_readings_of_hudi_0_14() -> None:
    # split at every ',' and each part at its first ':' (before HUDI-8403)
    assert legacy_hash_keys("f1:abc,f2:bcd,efg", ["f1", "f2"]) == [["abc", "bcd", "efg"]]
    assert legacy_hash_keys("f1:abc", ["f1"]) == [["abc"]]
    assert legacy_hash_keys("a:1,b:2", ["b"]) == [["2"]]
    assert legacy_hash_keys("x,y", ["id"]) == [["x", "y"], ["x,y"]]
    assert legacy_hash_keys("plain", ["id"]) == [["plain"]]


def test_java_split_drops_trailing_empty_parts() -> None:
    assert java_split("a,b,,") == ["a", "b"]
    assert java_split(",a") == ["", "a"]
    assert java_split("a") == ["a"]


def test_bucket_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        bucket_ids(["a"], ["id"], 0)


def test_many_keys_at_once_hash_as_one_by_one() -> None:
    """The vectorized path (keys grouped by UTF-16 length) equals ``String.hashCode`` key by key."""
    rnd = random.Random(7)
    planes = [(32, 126), (0xA0, 0x7FF), (0x4E00, 0x9FFF), (0x10000, 0x10FFFF)]
    keys = [
        "".join(chr(rnd.randint(*rnd.choice(planes))) for _ in range(rnd.randint(1, 40))) for _ in range(2000)
    ]
    keys = [k.replace(",", ";") for k in keys]  # keys hashed whole (no ',' and ':' together)
    ascii_only = [f"key-{i}" for i in range(500)]
    for batch in (keys, ascii_only):
        got = bucket_ids(batch, ["id"], 1 << 20).tolist()
        assert got == [((java_list_hash([k]) & 0x7FFFFFFF) % (1 << 20)) for k in batch]
