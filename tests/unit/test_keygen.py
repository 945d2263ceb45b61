"""Key generators: fixture tables written by Apache Hudi, key formats, errors, and table properties."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.properties import parse_properties
from hoodie.errors import InvalidInputError, InvalidTableConfigError, UnsupportedTableError
from hoodie.keygen import (
    ComplexKeyEncoding,
    ComplexKeyGenerator,
    CustomKeyGenerator,
    FloatDigits,
    KeyGeneratorType,
    NonpartitionedKeyGenerator,
    PartitionKeyType,
    SimpleKeyGenerator,
    TimestampBasedKeyGenerator,
    TimestampOptions,
    TimestampType,
    ValueFormat,
    key_generator_from_properties,
    key_generator_properties,
)
from hoodie.keygen.factory import complex_key_encoding
from hoodie.keygen.values import java_strings
from tests.conftest import fixture_names, fixture_path

# --- fixture tables ---------------------------------------------------------------------------


def _base_files(base: Path) -> list[Path]:
    return sorted(
        p
        for p in base.rglob("*.parquet")
        if ".hoodie" not in p.relative_to(base).parts
        and "__MACOSX" not in p.parts
        and not p.name.startswith("._")
    )


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_keys_regenerate_from_data(fixture_root: Path, name: str) -> None:
    base = fixture_path(fixture_root, name)
    props = parse_properties((base / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8"))
    generator = key_generator_from_properties(props)
    files = _base_files(base)
    rows = 0
    for path in files:
        table = pq.read_table(path)
        stored_keys = table.column("_hoodie_record_key").combine_chunks()
        stored_paths = table.column("_hoodie_partition_path").combine_chunks()
        assert generator.record_keys(table).to_pylist() == stored_keys.to_pylist(), path
        assert generator.partition_paths(table).to_pylist() == stored_paths.to_pylist(), path
        rows += table.num_rows
    if "empty" in name:
        assert files == []
    else:
        assert rows > 0, f"{name}: no base-file rows compared"


def test_fixtures_cover_hive_and_plain_partitions_and_non_partitioned(fixture_root: Path) -> None:
    seen = set()
    for name in fixture_names():
        props = parse_properties(
            (fixture_path(fixture_root, name) / ".hoodie" / "hoodie.properties").read_text(encoding="utf-8")
        )
        generator = key_generator_from_properties(props)
        seen.add((generator.kind, generator.hive_style and bool(generator.partition_fields)))
    assert {
        (KeyGeneratorType.SIMPLE, True),
        (KeyGeneratorType.SIMPLE, False),
        (KeyGeneratorType.NON_PARTITION, False),
    } <= seen


# --- record keys ------------------------------------------------------------------------------


def test_simple_key_generator_keys_and_hive_partitions() -> None:
    table = pa.table({"id": pa.array([1, 22], pa.int32()), "city": ["san_francisco", None]})
    gen = SimpleKeyGenerator(record_key_fields=("id",), partition_fields=("city",), hive_style=True)
    assert gen.record_keys(table).to_pylist() == ["1", "22"]
    assert gen.partition_paths(table).to_pylist() == ["city=san_francisco", "city=__HIVE_DEFAULT_PARTITION__"]


@pytest.mark.parametrize(("value", "what"), [(None, "null"), ("", "empty")])
def test_simple_record_key_rejects_null_and_empty(value: str | None, what: str) -> None:
    table = pa.table({"uuid": pa.array(["a", value], pa.string()), "p": ["x", "y"]})
    gen = SimpleKeyGenerator(record_key_fields=("uuid",), partition_fields=("p",))
    with pytest.raises(InvalidInputError, match=rf"'uuid' is {what} in row 1"):
        gen.record_keys(table)


def test_missing_record_key_column_is_named() -> None:
    gen = NonpartitionedKeyGenerator(record_key_fields=("id",))
    with pytest.raises(InvalidInputError, match="'id' is not in the data"):
        gen.record_keys(pa.table({"other": [1]}))


def test_complex_keys_mark_null_and_empty_parts() -> None:
    table = pa.table({"a": pa.array([1, None, 3], pa.int64()), "b": ["x", "y", ""]})
    gen = ComplexKeyGenerator(record_key_fields=("a", "b"))
    assert gen.record_keys(table).to_pylist() == ["a:1,b:x", "a:__null__,b:y", "a:3,b:__empty__"]


def test_complex_key_all_null_or_empty_is_an_error() -> None:
    table = pa.table({"a": pa.array([1, None], pa.int64()), "b": pa.array(["x", ""])})
    gen = ComplexKeyGenerator(record_key_fields=("a", "b"))
    with pytest.raises(InvalidInputError, match=r"\['a', 'b'\] are all null or empty in row 1"):
        gen.record_keys(table)


def test_complex_single_field_encodings() -> None:
    table = pa.table({"id": ["k1", "k2"]})
    prefixed = ComplexKeyGenerator(record_key_fields=("id",))
    value_only = ComplexKeyGenerator(
        record_key_fields=("id",), single_field_encoding=ComplexKeyEncoding.VALUE_ONLY
    )
    assert prefixed.record_keys(table).to_pylist() == ["id:k1", "id:k2"]
    assert value_only.record_keys(table).to_pylist() == ["k1", "k2"]


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({"hoodie.table.version": "9", "hoodie.write.complex.keygen.new.encoding": "true"}, "FIELD_PREFIXED"),
        ({"hoodie.table.version": "8", "hoodie.write.complex.keygen.new.encoding": "true"}, "VALUE_ONLY"),
        ({"hoodie.table.version": "6"}, "FIELD_PREFIXED"),
        ({"hoodie.table.version": "9", "hoodie.table.complex.keygen.encoding": "value_only"}, "VALUE_ONLY"),
        ({"hoodie.table.version": "8", "hoodie.table.complex.keygen.encoding": "FIELD_PREFIXED",
          "hoodie.write.complex.keygen.new.encoding": "true"}, "FIELD_PREFIXED"),
    ],
)  # fmt: skip
def test_complex_key_encoding_resolution(props: dict[str, str], expected: str) -> None:
    assert complex_key_encoding(props) is ComplexKeyEncoding(expected)


def test_complex_key_encoding_rejects_unknown_value() -> None:
    with pytest.raises(InvalidTableConfigError, match="'BARE'"):
        complex_key_encoding({"hoodie.table.complex.keygen.encoding": "BARE"})


def test_nonpartitioned_keys_by_field_count() -> None:
    table = pa.table({"a": [1, 2], "b": ["x", None]})
    assert NonpartitionedKeyGenerator(record_key_fields=("a",)).record_keys(table).to_pylist() == ["1", "2"]
    two = NonpartitionedKeyGenerator(record_key_fields=("a", "b"))
    assert two.record_keys(table).to_pylist() == ["a:1,b:x", "a:2,b:__null__"]
    assert two.partition_paths(table).to_pylist() == ["", ""]


def test_nested_fields_and_chunked_columns() -> None:
    chunks = pa.chunked_array([[{"id": 1, "r": "eu"}], [{"id": 2, "r": None}, None]])
    table = pa.table({"s": chunks})
    gen = ComplexKeyGenerator(record_key_fields=("s.id",), partition_fields=("s.r",))
    default = "__HIVE_DEFAULT_PARTITION__"
    assert gen.partition_paths(table).to_pylist() == ["eu", default, default]
    assert gen.record_keys(table.slice(0, 2)).to_pylist() == ["s.id:1", "s.id:2"]


def test_complex_partition_paths_escape_and_default() -> None:
    table = pa.table({"a": ["x/y", "", "p%q"], "b": pa.array([1, 2, None], pa.int8())})
    gen = ComplexKeyGenerator(
        record_key_fields=("b",), partition_fields=("a", "b"), hive_style=True, url_encode=True
    )
    assert gen.partition_paths(table).to_pylist() == [
        "a=x%2Fy/b=1",
        "a=__HIVE_DEFAULT_PARTITION__/b=2",
        "a=p%25q/b=__HIVE_DEFAULT_PARTITION__",
    ]
    plain = ComplexKeyGenerator(record_key_fields=("b",), partition_fields=("a", "b"))
    assert plain.partition_paths(table).to_pylist()[0] == "x/y/1"


def test_missing_partition_column_is_the_default_partition() -> None:
    gen = SimpleKeyGenerator(record_key_fields=("id",), partition_fields=("dt",))
    assert gen.partition_paths(pa.table({"id": [1]})).to_pylist() == ["__HIVE_DEFAULT_PARTITION__"]


def test_empty_table_gives_empty_arrays() -> None:
    table = pa.table({"id": pa.array([], pa.int32()), "p": pa.array([], pa.string())})
    for gen in (
        SimpleKeyGenerator(record_key_fields=("id",), partition_fields=("p",)),
        ComplexKeyGenerator(record_key_fields=("id", "p"), partition_fields=("p",)),
        NonpartitionedKeyGenerator(record_key_fields=("id",)),
    ):
        assert len(gen.record_keys(table)) == 0
        assert len(gen.partition_paths(table)) == 0


# --- value strings (golden values printed by Java 17, Joda-Time 2.14) -------------------------


def _strings(values: pa.Array, fmt: ValueFormat | None = None) -> list[str | None]:
    out: list[str | None] = java_strings(values, field="f", fmt=fmt or ValueFormat()).to_pylist()
    return out


def test_numbers_and_booleans_print_like_java() -> None:
    doubles = pa.array(
        [1.0, 0.001, 1e-4, 1e7, 12345678.9, -0.0, float("nan"), float("-inf"), 1.8332767197942893e17]
    )
    assert _strings(doubles) == [
        "1.0", "0.001", "1.0E-4", "1.0E7", "1.23456789E7", "-0.0", "NaN", "-Infinity",
        "1.83327671979428928E17",  # JDK 8-18 print every digit of an integer-valued double
    ]  # fmt: skip
    shortest = ValueFormat(float_digits=FloatDigits.SHORTEST)
    assert _strings(pa.array([1.8332767197942893e17]), shortest) == ["1.8332767197942893E17"]
    assert _strings(pa.array([214689024.0, 0.1], pa.float32())) == ["2.14689024E8", "0.1"]
    decimals = pa.array([decimal.Decimal("12345.67890"), decimal.Decimal("-0.00001")], pa.decimal128(10, 5))
    assert _strings(decimals) == ["12345.67890", "-0.00001"]
    assert _strings(pa.array([decimal.Decimal("1E-7")], pa.decimal128(10, 7))) == ["1E-7"]
    assert _strings(pa.array([True, False, None])) == ["true", "false", None]
    assert _strings(pa.array([-5, 7], pa.int16())) == ["-5", "7"]


def test_dates_timestamps_and_bytes_print_like_hudi() -> None:
    assert _strings(pa.array([dt.date(2023, 4, 1), dt.date(1969, 12, 31)])) == ["2023-04-01", "1969-12-31"]
    ts = pa.array([dt.datetime(2023, 4, 1, 12, 1, 0, 123000)], pa.timestamp("us", tz="UTC"))
    assert _strings(ts) == ["1680350460123000"]  # the raw Avro timestamp-micros value
    consistent = ValueFormat(consistent_logical_timestamp=True, timezone="Asia/Shanghai")
    assert _strings(ts, consistent) == ["2023-04-01 20:01:00.123"]  # java.sql.Timestamp.toString
    whole = pa.array([dt.datetime(2023, 4, 1, 12, 1)], pa.timestamp("ms", tz="UTC"))
    assert _strings(whole, ValueFormat(consistent_logical_timestamp=True)) == ["2023-04-01 12:01:00.0"]
    # local-timestamp-millis/-micros (no zone) are not converted to java.sql.Timestamp: the raw long
    local = pa.array([dt.datetime(2023, 4, 1, 12, 1)], pa.timestamp("ms"))
    assert _strings(local, ValueFormat(consistent_logical_timestamp=True)) == ["1680350460000"]
    local_us = pa.array([dt.datetime(2023, 4, 1, 12, 1)], pa.timestamp("us"))
    assert _strings(local_us, ValueFormat(consistent_logical_timestamp=True)) == ["1680350460000000"]
    assert _strings(pa.array([b"\x00\xab", b""])) == ["00ab", ""]


def test_unsupported_key_type_is_named() -> None:
    with pytest.raises(InvalidInputError, match="'f' has type list"):
        _strings(pa.array([[1]]))


# --- resolving generators from properties -----------------------------------------------------

_V6 = {"hoodie.table.version": "6", "hoodie.table.recordkey.fields": "id"}


@pytest.mark.parametrize(
    ("class_name", "expected"),
    [
        ("org.apache.hudi.keygen.SimpleKeyGenerator", SimpleKeyGenerator),
        ("org.apache.hudi.keygen.SimpleAvroKeyGenerator", SimpleKeyGenerator),
        ("org.apache.hudi.keygen.ComplexKeyGenerator", ComplexKeyGenerator),
        ("org.apache.hudi.keygen.ComplexAvroKeyGenerator", ComplexKeyGenerator),
        ("org.apache.hudi.keygen.NonpartitionedKeyGenerator", NonpartitionedKeyGenerator),
        ("org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator", NonpartitionedKeyGenerator),
        ("org.apache.spark.sql.hudi.command.SqlKeyGenerator", ComplexKeyGenerator),
    ],
)
def test_v6_key_generator_classes(class_name: str, expected: type) -> None:
    partitions = "" if "Nonpartitioned" in class_name else "dt"
    props = {
        **_V6,
        "hoodie.table.keygenerator.class": class_name,
        "hoodie.table.partition.fields": partitions,
    }
    assert type(key_generator_from_properties(props)) is expected


def test_v8_types_and_writer_fallbacks() -> None:
    props = {
        "hoodie.table.keygenerator.type": "COMPLEX_AVRO",
        "hoodie.datasource.write.recordkey.field": "a,b",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.hive_style_partitioning": "TRUE",
        "hoodie.datasource.write.partitionpath.urlencode": "true",
    }
    gen = key_generator_from_properties(props)
    assert isinstance(gen, ComplexKeyGenerator)
    assert (gen.record_key_fields, gen.partition_fields, gen.hive_style, gen.url_encode) == (
        ("a", "b"),
        ("p",),
        True,
        True,
    )


def test_spark_sql_wrapper_uses_the_original_generator() -> None:
    props = {
        **_V6,
        "hoodie.table.keygenerator.class": "org.apache.spark.sql.hudi.command.SqlKeyGenerator",
        "hoodie.sql.origin.keygen.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.table.partition.fields": "dt",
    }
    assert isinstance(key_generator_from_properties(props), SimpleKeyGenerator)


@pytest.mark.parametrize(
    ("record_keys", "partitions", "expected"),
    [
        ("id", "", NonpartitionedKeyGenerator),
        ("id", "dt", SimpleKeyGenerator),
        ("a,b", "dt", ComplexKeyGenerator),
        ("id", "dt,hh", ComplexKeyGenerator),
        ("id", "dt:SIMPLE", CustomKeyGenerator),
    ],
)
def test_inferred_generator_without_configuration(record_keys: str, partitions: str, expected: type) -> None:
    props = {"hoodie.table.recordkey.fields": record_keys, "hoodie.table.partition.fields": partitions}
    assert type(key_generator_from_properties(props)) is expected


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("hoodie.table.keygenerator.class", "com.example.MyKeyGen", InvalidTableConfigError),
        ("hoodie.table.keygenerator.type", "FANCY", InvalidTableConfigError),
        ("hoodie.table.keygenerator.type", "HOODIE_TABLE_METADATA", UnsupportedTableError),
        (
            "hoodie.table.keygenerator.class",
            "org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
            UnsupportedTableError,
        ),
    ],
)
def test_unknown_and_unsupported_generators_name_the_value(
    key: str, value: str, error: type[Exception]
) -> None:
    with pytest.raises(error, match=value):
        key_generator_from_properties({"hoodie.table.recordkey.fields": "id", key: value})


def test_custom_generator_from_v8_and_v6_properties() -> None:
    table = pa.table({"id": [1], "region": ["eu"], "ts": pa.array([1_700_000_000], pa.int64())})
    timestamp = {
        "hoodie.keygen.timebased.timestamp.type": "UNIX_TIMESTAMP",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.keygen.timebased.output.timezone": "UTC",
    }
    v8 = {
        "hoodie.table.version": "8",
        "hoodie.table.keygenerator.type": "CUSTOM",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "region:simple,ts:TIMESTAMP",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        **timestamp,
    }
    gen = key_generator_from_properties(v8)
    assert isinstance(gen, CustomKeyGenerator)
    assert gen.partition_specs == ("region:SIMPLE", "ts:TIMESTAMP")
    assert gen.record_keys(table).to_pylist() == ["1"]
    assert gen.partition_paths(table).to_pylist() == ["region=eu/ts=2023/11/14"]
    v6 = {
        **v8,
        "hoodie.table.version": "6",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomAvroKeyGenerator",
        "hoodie.table.partition.fields": "region,ts",
        "hoodie.datasource.write.partitionpath.field": "region:SIMPLE,ts:TIMESTAMP",
    }
    del v6["hoodie.table.keygenerator.type"]
    assert key_generator_from_properties(v6).partition_paths(table).to_pylist() == ["region=eu/ts=2023/11/14"]
    del v6["hoodie.datasource.write.partitionpath.field"]
    with pytest.raises(InvalidTableConfigError, match="'field:TYPE'"):
        key_generator_from_properties(v6)


def test_custom_partition_type_must_be_known() -> None:
    props = {"hoodie.table.recordkey.fields": "id", "hoodie.table.partition.fields": "dt:RANGE"}
    with pytest.raises(InvalidTableConfigError, match="'RANGE'"):
        key_generator_from_properties(props)


def test_keyless_tables_still_have_partition_paths() -> None:
    gen = key_generator_from_properties({"hoodie.table.partition.fields": "dt"})
    table = pa.table({"dt": ["2024-01-01"]})
    assert gen.partition_paths(table).to_pylist() == ["2024-01-01"]
    with pytest.raises(InvalidTableConfigError, match="no record key fields"):
        gen.record_keys(table)


def test_generator_shape_is_validated() -> None:
    with pytest.raises(InvalidTableConfigError, match="takes one record key field"):
        SimpleKeyGenerator(record_key_fields=("a", "b"), partition_fields=("p",))
    with pytest.raises(InvalidTableConfigError, match="exactly one partition field"):
        SimpleKeyGenerator(record_key_fields=("a",))
    with pytest.raises(InvalidTableConfigError, match="no partition fields"):
        NonpartitionedKeyGenerator(record_key_fields=("a",), partition_fields=("p",))


# --- properties for new tables ----------------------------------------------------------------


def test_properties_for_v6_and_v9_tables() -> None:
    v6 = key_generator_properties(KeyGeneratorType.SIMPLE, ["id"], ["dt"], True, False, 6)
    assert v6 == {
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "dt",
        "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.partitionpath.urlencode": "false",
    }
    v9 = key_generator_properties(KeyGeneratorType.NON_PARTITION, ["a", "b"], [], False, False, 9)
    assert v9 == {
        "hoodie.table.recordkey.fields": "a,b",
        "hoodie.table.keygenerator.type": "NON_PARTITION",
        "hoodie.datasource.write.hive_style_partitioning": "false",
        "hoodie.datasource.write.partitionpath.urlencode": "false",
    }


def test_custom_properties_keep_types_from_v8_and_round_trip() -> None:
    options = TimestampOptions(TimestampType.EPOCHMILLISECONDS, "yyyyMMdd", output_timezone="UTC")
    specs = ["region:simple", "ts:timestamp"]
    v8 = key_generator_properties(KeyGeneratorType.CUSTOM, ["id"], specs, False, True, 8, timestamp=options)
    assert v8["hoodie.table.partition.fields"] == "region:SIMPLE,ts:TIMESTAMP"
    assert v8["hoodie.keygen.timebased.timestamp.type"] == "EPOCHMILLISECONDS"
    gen = key_generator_from_properties(v8)
    assert isinstance(gen, CustomKeyGenerator)
    assert gen.partition_types == (PartitionKeyType.SIMPLE, PartitionKeyType.TIMESTAMP)
    assert gen.timestamp == options and gen.url_encode
    v6 = key_generator_properties(KeyGeneratorType.CUSTOM, ["id"], specs, False, True, 6, timestamp=options)
    assert v6["hoodie.table.partition.fields"] == "region,ts"
    assert v6["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.CustomKeyGenerator"


def test_timestamp_properties_round_trip() -> None:
    options = TimestampOptions(
        TimestampType.DATE_STRING,
        "yyyy/MM/dd",
        input_date_formats=("yyyy-MM-dd", "yyyyMMdd"),
        input_timezone="Asia/Shanghai",
    )
    props = key_generator_properties(
        KeyGeneratorType.TIMESTAMP, ["id"], ["dt"], False, False, 9, timestamp=options
    )
    gen = key_generator_from_properties(props)
    assert isinstance(gen, TimestampBasedKeyGenerator)
    assert gen.timestamp == options
    assert gen.partition_paths(pa.table({"id": [1], "dt": ["20240131"]})).to_pylist() == ["2024/01/31"]


def test_properties_reject_inconsistent_requests() -> None:
    with pytest.raises(InvalidTableConfigError, match="takes no partition fields"):
        key_generator_properties(KeyGeneratorType.NON_PARTITION, ["id"], ["dt"], False, False, 9)
    with pytest.raises(InvalidTableConfigError, match="needs timestamp options"):
        key_generator_properties(KeyGeneratorType.TIMESTAMP, ["id"], ["dt"], False, False, 9)
    with pytest.raises(InvalidTableConfigError, match="only CUSTOM"):
        key_generator_properties(KeyGeneratorType.SIMPLE, ["id"], ["dt:SIMPLE"], False, False, 9)
    with pytest.raises(InvalidTableConfigError, match="exactly one partition field"):
        key_generator_properties(KeyGeneratorType.SIMPLE, ["id"], ["dt", "hh"], False, False, 6)
