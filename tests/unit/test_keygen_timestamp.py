"""Timestamp-based partitions and Joda date patterns.

Expected strings were printed by Hudi's algorithm running on Java 17 with Joda-Time 2.14
(JVM default zone UTC).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from hoodie.errors import InvalidInputError, InvalidTableConfigError
from hoodie.keygen import TimestampBasedKeyGenerator, TimestampOptions, TimestampType, TimeUnit, ValueFormat
from hoodie.keygen.joda import ZoneColumn, format_instants, tokenize
from hoodie.keygen.joda_parse import parse_instants
from hoodie.keygen.timestamp import timestamp_partition_values
from hoodie.keygen.zones import UTC, resolve_java_zone

PREFIX = "hoodie.keygen.timebased."


def _paths(
    options: TimestampOptions, values: pa.Array, *, hive: bool = False, encode: bool = False
) -> list[str]:
    gen = TimestampBasedKeyGenerator(
        record_key_fields=("id",),
        partition_fields=("ts",),
        hive_style=hive,
        url_encode=encode,
        timestamp=options,
    )
    table = pa.table({"id": list(range(len(values))), "ts": values})
    return [str(p) for p in gen.partition_paths(table).to_pylist()]


def test_epoch_millis_to_day_directories_in_utc() -> None:
    options = TimestampOptions(TimestampType.EPOCHMILLISECONDS, "yyyy/MM/dd", output_timezone="UTC")
    assert _paths(options, pa.array([1_700_000_000_000, None], pa.int64())) == ["2023/11/14", "1970/01/01"]
    assert _paths(options, pa.array([1_700_000_000_000], pa.int64()), hive=True, encode=True) == [
        "ts=2023%2F11%2F14"
    ]


_EPOCH_MS = TimestampType.EPOCHMILLISECONDS
_NUMERIC_CASES = [
    (_EPOCH_MS, None, pa.array([1_700_000_000_000]), "yyyy-MM-dd HH", "Asia/Shanghai", "2023-11-15 06"),
    (TimestampType.UNIX_TIMESTAMP, None, pa.array([1_700_000_000]), "yyyyMMddHH", "GMT+8", "2023111506"),
    (
        TimestampType.EPOCHMICROSECONDS,
        None,
        pa.array([1_710_054_000_123_456]),
        "yyyy-MM-dd'T'HH:mm:ss.SSSZZ",
        "America/New_York",
        "2024-03-10T03:00:00.123-04:00",
    ),
    (TimestampType.SCALAR, TimeUnit.DAYS, pa.array([dt.date(2024, 1, 1)]), "yyyy/MM/dd", "UTC", "2024/01/01"),
    # Hudi counts a date's epoch days in the configured unit: here as seconds
    (TimestampType.UNIX_TIMESTAMP, None, pa.array([dt.date(2024, 1, 1)]), "yyyy/MM/dd", "UTC", "1970/01/01"),
    (_EPOCH_MS, None, pa.array([1_700_000_000_123.9]), "yyyy/MM/dd HH:mm:ss.SSS", "UTC",
     "2023/11/14 22:13:20.123"),
    # after 2037 the zone's daylight-saving rule still applies
    (_EPOCH_MS, None, pa.array([2_512_506_928_908]), "yyyy-MM-dd HH:mm ZZ", "America/New_York",
     "2049-08-13 18:35 -04:00"),
    (
        _EPOCH_MS,
        None,
        pa.array([1_700_000_000_123]),
        "G C Y yy x w e E EEEE MMM MMMM D a h K k",
        "UTC",
        "AD 20 2023 23 2023 46 2 Tue Tuesday Nov November 318 PM 10 10 22",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("timestamp_type", "unit", "values", "output", "zone", "expected"), _NUMERIC_CASES)
def test_numeric_timestamp_types(
    timestamp_type: TimestampType,
    unit: TimeUnit | None,
    values: pa.Array,
    output: str,
    zone: str,
    expected: str,
) -> None:
    options = TimestampOptions(
        timestamp_type, output, output_timezone=zone, scalar_time_unit=unit or TimeUnit.SECONDS
    )
    assert _paths(options, values) == [expected]


def test_microsecond_timestamps_read_as_their_avro_number() -> None:
    ts = pa.array([dt.datetime(2024, 1, 31, 10, 0, tzinfo=dt.UTC)], pa.timestamp("us", tz="UTC"))
    micros = TimestampOptions(TimestampType.EPOCHMICROSECONDS, "yyyy-MM-dd HH", output_timezone="UTC")
    assert _paths(micros, ts) == ["2024-01-31 10"]
    consistent = ValueFormat(consistent_logical_timestamp=True)
    millis = TimestampOptions(TimestampType.EPOCHMILLISECONDS, "yyyy-MM-dd HH", output_timezone="UTC")
    assert timestamp_partition_values(ts, 1, field="ts", options=millis, fmt=consistent).to_pylist() == [
        "2024-01-31 10"
    ]


def test_date_strings_with_several_formats_and_zones() -> None:
    options = TimestampOptions(
        TimestampType.DATE_STRING,
        "yyyy/MM/dd/HH",
        input_date_formats=("yyyy-MM-dd'T'HH:mm:ssZ", "yyyy-MM-dd"),
        input_timezone="UTC",
        output_timezone="Asia/Tokyo",
    )
    values = pa.array(["2024-01-31T23:30:00+0100", "2024-01-31", None])
    assert _paths(options, values) == ["2024/02/01/07", "2024/01/31/09", "1970/01/01/09"]


def test_date_strings_without_output_zone_keep_the_parsed_zone() -> None:
    formats = ("yyyy-MM-dd'T'HH:mm:ssZ", "yyyy-MM-dd")
    from_offset = TimestampOptions(
        TimestampType.DATE_STRING, "yyyy-MM-dd HH:mm ZZ", input_date_formats=formats
    )
    assert _paths(from_offset, pa.array(["2024-01-31T23:30:00+0100"])) == ["2024-01-31 23:30 +01:00"]
    from_input = TimestampOptions(
        TimestampType.MIXED,
        "yyyy-MM-dd HH:mm ZZ",
        input_date_formats=formats,
        input_timezone="America/New_York",
    )
    assert _paths(from_input, pa.array(["2024-07-04"])) == ["2024-07-04 00:00 -04:00"]


def test_properties_with_delimiter_legacy_prefix_and_zone() -> None:
    options = TimestampOptions.from_properties(
        {
            "hoodie.deltastreamer.keygen.timebased.timestamp.type": "MIXED",
            f"{PREFIX}input.dateformat": "dd MMM yyyy|yyyyMMdd",
            f"{PREFIX}input.dateformat.list.delimiter.regex": "\\|",
            f"{PREFIX}output.dateformat": "yyyy-MM-dd",
            f"{PREFIX}timezone": "Asia/Kolkata",
        }
    )
    assert options.input_date_formats == ("dd MMM yyyy", "yyyyMMdd")
    assert (options.input_timezone, options.output_timezone) == ("Asia/Kolkata", "Asia/Kolkata")
    assert _paths(options, pa.array(["05 Mar 2024", "20240305"])) == ["2024-03-05", "2024-03-05"]
    written = options.to_properties()
    assert written[f"{PREFIX}input.dateformat"] == "dd MMM yyyy|yyyyMMdd"
    assert TimestampOptions.from_properties(written) == options


def test_java_patterns_print_like_joda() -> None:
    options = TimestampOptions(
        TimestampType.DATE_STRING,
        "EEE, d MMM yyyy HH:mm:ss Z",
        input_date_formats=("yyyy-MM-dd HH:mm:ss",),
        input_timezone="Asia/Kolkata",
        output_timezone="Asia/Kolkata",
    )
    assert _paths(options, pa.array(["2024-03-05 10:00:00"])) == ["Tue, 5 Mar 2024 10:00:00 +0530"]


def test_daylight_saving_overlap_takes_the_earlier_instant_and_gap_fails() -> None:
    options = TimestampOptions(
        TimestampType.DATE_STRING,
        "yyyy-MM-dd HH:mm",
        input_date_formats=("yyyy-MM-dd HH:mm:ss",),
        input_timezone="America/New_York",
        output_timezone="UTC",
    )
    assert _paths(options, pa.array(["2024-11-03 01:30:00"])) == ["2024-11-03 05:30"]
    with pytest.raises(InvalidInputError, match="does not exist in zone America/New_York"):
        _paths(options, pa.array(["2024-03-10 02:30:00"]))


def test_value_kind_mismatches_are_errors() -> None:
    numbers = TimestampOptions(TimestampType.EPOCHMILLISECONDS, "yyyy/MM/dd", output_timezone="UTC")
    with pytest.raises(InvalidInputError, match="'ts' holds strings"):
        _paths(numbers, pa.array(["2024-01-01"]))
    strings = TimestampOptions(TimestampType.DATE_STRING, "yyyy", input_date_formats=("yyyy-MM-dd",))
    with pytest.raises(InvalidInputError, match="only reads date strings"):
        _paths(strings, pa.array([5], pa.int64()))
    with pytest.raises(InvalidInputError, match="'31/01/2024' matches none"):
        _paths(strings, pa.array(["31/01/2024"]))
    with pytest.raises(InvalidInputError, match="day of month 30"):
        _paths(strings, pa.array(["2024-02-30"]))
    with pytest.raises(InvalidInputError, match="type bool"):
        _paths(numbers, pa.array([True]))


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({f"{PREFIX}output.dateformat": "yyyy"}, "timestamp.type is required"),
        ({f"{PREFIX}timestamp.type": "EPOCH", f"{PREFIX}output.dateformat": "yyyy"}, "'EPOCH'"),
        ({f"{PREFIX}timestamp.type": "SCALAR", f"{PREFIX}timestamp.scalar.time.unit": "WEEKS",
          f"{PREFIX}output.dateformat": "yyyy"}, "'WEEKS'"),
        ({f"{PREFIX}timestamp.type": "UNIX_TIMESTAMP"}, "empty date pattern"),
        ({f"{PREFIX}timestamp.type": "DATE_STRING", f"{PREFIX}output.dateformat": "yyyy"},
         "input.dateformat"),
        ({f"{PREFIX}timestamp.type": "UNIX_TIMESTAMP", f"{PREFIX}output.dateformat": "yyyy z"}, "'z'"),
        ({f"{PREFIX}timestamp.type": "UNIX_TIMESTAMP", f"{PREFIX}output.dateformat": "yyyy",
          "hoodie.keygen.datetime.parser.class": "com.example.Parser"}, "com.example.Parser"),
    ],
)  # fmt: skip
def test_bad_options_name_the_value(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidTableConfigError, match=message):
        TimestampOptions.from_properties(props)


def test_scalar_units_truncate_and_saturate_like_java() -> None:
    nanos = TimestampOptions(
        TimestampType.SCALAR,
        "yyyy-MM-dd HH:mm:ss.SSS",
        output_timezone="UTC",
        scalar_time_unit=TimeUnit.NANOSECONDS,
    )
    assert _paths(nanos, pa.array([-1_500_000], pa.int64())) == ["1969-12-31 23:59:59.999"]
    hours = TimestampOptions(
        TimestampType.SCALAR, "yyyy", output_timezone="UTC", scalar_time_unit=TimeUnit.HOURS
    )
    with pytest.raises(InvalidInputError, match="outside the supported years"):
        _paths(hours, pa.array([2**62], pa.int64()))


# --- Joda patterns and zones ------------------------------------------------------------------


def test_tokenize_quotes_and_letters() -> None:
    tokens = tokenize("yyyy-MM-dd'T'HH''mm")
    assert [(t.letter * t.count) or t.text for t in tokens] == [
        "yyyy",
        "-",
        "MM",
        "-",
        "dd",
        "T",
        "HH",
        "'",
        "mm",
    ]


@pytest.mark.parametrize(
    ("zone_id", "joda_id"),
    [("UTC", "UTC"), ("GMT", "UTC"), ("EST", "America/New_York"), ("GMT+8", "+08:00"), ("GMT-0530", "-05:30"),
     ("Asia/Calcutta", "Asia/Kolkata"), ("Etc/UTC", "Etc/UTC"), ("UTC+8", "UTC"), ("Nowhere/City", "UTC"),
     (" Asia/Tokyo", "UTC")],
)  # fmt: skip
def test_zone_names_resolve_like_java_and_joda(zone_id: str, joda_id: str) -> None:
    assert resolve_java_zone(zone_id).joda_id == joda_id


@pytest.mark.parametrize(
    ("pattern", "text", "iso"),
    [
        ("EEE", "Thu", "2000-12-28T00:00:00.000"),
        ("MM-dd", "03-15", "2000-03-15T00:00:00.000"),
        ("HH:mm", "10:30", "1970-01-01T10:30:00.000"),
        ("yyyy-MM-dd EEE", "2024-01-31 Mon", "2024-01-29T00:00:00.000"),
        ("yyyy-D", "2024-45", "2024-02-14T00:00:00.000"),
        ("MMM", "JANUARY", "2000-01-01T00:00:00.000"),
        ("yyyyMMdd", "2024015", "2024-01-05T00:00:00.000"),
        ("yy", "5", "0005-01-01T00:00:00.000"),
        ("yyMMdd", "240131", "2024-01-31T00:00:00.000"),
        ("s.SSS", "1.5", "1970-01-01T00:00:01.500"),
        ("hh a", "12 pm", "1970-01-01T12:00:00.000"),
        ("kk", "24", "1970-01-01T00:00:00.000"),
        ("yyyy-MM-dd Z", "2024-01-01 +05", "2023-12-31T19:00:00.000"),
        ("yyyy-MM-dd ZZZ", "2024-01-01 Asia/Calcutta", "2023-12-31T18:30:00.000"),
        ("yyyy-MM-dd'T'HH", "2024-01-31t10", "2024-01-31T10:00:00.000"),
    ],
)
def test_parsing_follows_joda(pattern: str, text: str, iso: str) -> None:
    parsed = parse_instants(pa.array([text]), (pattern,), input_zone=UTC, default_zone=UTC, field="f")
    printed = format_instants(parsed.millis, ZoneColumn(single=UTC), "yyyy-MM-dd'T'HH:mm:ss.SSS")
    assert printed.to_pylist() == [iso]


@pytest.mark.parametrize(("pattern", "text"), [("MMM", "jAn"), ("yyyy-MM-dd", "2024-01-31T"), ("kk", "25")])
def test_parsing_rejects_what_joda_rejects(pattern: str, text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_instants(pa.array([text]), (pattern,), input_zone=UTC, default_zone=UTC, field="f")
