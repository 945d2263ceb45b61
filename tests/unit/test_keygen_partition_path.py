"""Partition-path escaping, Hive-style segments and parsing paths back into values."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoodie.errors import InvalidInputError
from hoodie.keygen.partition_path import (
    DEFAULT_PARTITION_PATH,
    ESCAPED_CHARS,
    escape_path_name,
    escape_path_names,
    format_partition_path,
    is_default_partition_value,
    parse_partition_path,
    partition_segments,
    unescape_path_name,
)


def test_escaped_set_is_hives() -> None:
    hive_set = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
    assert hive_set == ESCAPED_CHARS


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("2024/01/31", "2024%2F01%2F31"),
        ("a:b=c", "a%3Ab%3Dc"),
        ("100%", "100%25"),
        ("tab\there", "tab%09here"),
        ("{x}[y]^", "%7Bx}%5By%5D%5E"),
        ("café & ü-ß_ok", "café & ü-ß_ok"),
        ("\x7f\x00", "%7F%00"),
        ("", DEFAULT_PARTITION_PATH),
    ],
)
def test_escape_uses_upper_case_hex(raw: str, escaped: str) -> None:
    assert escape_path_name(raw) == escaped


@given(st.text(min_size=1))
def test_escape_round_trips(value: str) -> None:
    escaped = escape_path_name(value)
    assert not any(c in ESCAPED_CHARS for c in escaped.replace("%", ""))
    assert unescape_path_name(escaped) == value


@given(st.lists(st.one_of(st.none(), st.text()), max_size=20))
def test_vectorized_escape_matches_scalar(values: list[str | None]) -> None:
    expected = [None if v is None else (escape_path_name(v) if v else "") for v in values]
    assert escape_path_names(pa.array(values, pa.string())).to_pylist() == expected


def test_unescape_leaves_malformed_escapes() -> None:
    assert unescape_path_name("50%") == "50%"
    assert unescape_path_name("%zz%4") == "%zz%4"
    assert unescape_path_name("%2f%2F") == "//"
    # Java's Integer.parseInt(s, 16) accepts a leading '+', so Hudi decodes "%+A" too
    assert unescape_path_name("%+A") == "\n"


def test_segments_default_escape_and_hive_prefix() -> None:
    values = pa.array(["a/b", "", None, "plain"])
    assert partition_segments("f", values, hive_style=True, url_encode=True).to_pylist() == [
        "f=a%2Fb",
        "f=__HIVE_DEFAULT_PARTITION__",
        "f=__HIVE_DEFAULT_PARTITION__",
        "f=plain",
    ]
    assert partition_segments("f", values, hive_style=False, url_encode=False).to_pylist()[0] == "a/b"


def test_format_and_parse_round_trip() -> None:
    fields = ["region", "dt"]
    path = format_partition_path(fields, ["eu/west", None], hive_style=True, url_encode=True)
    assert path == "region=eu%2Fwest/dt=__HIVE_DEFAULT_PARTITION__"
    assert parse_partition_path(path, fields, hive_style=True, url_encoded=True) == {
        "region": "eu/west",
        "dt": None,
    }


def test_parse_partition_path_variants() -> None:
    assert parse_partition_path("30", ["byteField"], hive_style=False, url_encoded=False) == {
        "byteField": "30"
    }
    assert parse_partition_path("2024/01/31", ["dt"], hive_style=False, url_encoded=False) == {
        "dt": "2024/01/31"
    }
    assert parse_partition_path("a/default", ["x", "y"], hive_style=False, url_encoded=False) == {
        "x": "a",
        "y": None,
    }
    # Hive-style tables may still hold segments written without the prefix
    assert parse_partition_path("city=sf", ["city"], hive_style=True, url_encoded=False) == {"city": "sf"}
    assert parse_partition_path("", [], hive_style=False, url_encoded=False) == {}


def test_parse_partition_path_errors_name_the_path() -> None:
    with pytest.raises(InvalidInputError, match="'a/b/c' has 3 segments"):
        parse_partition_path("a/b/c", ["x", "y"], hive_style=False, url_encoded=False)
    with pytest.raises(InvalidInputError, match="non-partitioned"):
        parse_partition_path("x", [], hive_style=False, url_encoded=False)


def test_default_partition_markers() -> None:
    assert is_default_partition_value("__HIVE_DEFAULT_PARTITION__")
    assert is_default_partition_value("dt=default")
    assert not is_default_partition_value("dt=2024")
