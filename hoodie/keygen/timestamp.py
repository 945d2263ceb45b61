"""Timestamp-based partition values (``TimestampBasedKeyGenerator``) and ``hoodie.keygen.timebased.*``.

The partition field's value is read as an instant and printed with the output date format:

* numbers (ints, longs, floats truncated toward zero, decimals) count ``timestamp.type`` units
  since the epoch: seconds for ``UNIX_TIMESTAMP``, millis for ``EPOCHMILLISECONDS``, micros for
  ``EPOCHMICROSECONDS``, ``timestamp.scalar.time.unit`` for ``SCALAR``;
* a date column counts its epoch days in that same unit (Hudi's quirk: only ``SCALAR`` with
  ``DAYS`` reads a date as the day it is);
* a timestamp column is its raw Avro number in that unit (micros, so ``EPOCHMICROSECONDS``
  fits Spark timestamps), or with ``consistent_logical_timestamp`` its epoch millis;
* strings are parsed with the input date formats (``DATE_STRING`` and ``MIXED`` only; numbers
  are then an error, as in Hudi);
* a null value is replaced by one unit after the epoch (for ``DATE_STRING``/``MIXED``: the
  epoch plus one millisecond printed with the first input format, then parsed), never by the
  default partition.

The output zone is ``output.timezone`` (or the legacy ``timezone``, which sets both). Without
one, numbers print in the JVM default zone and parsed strings in the zone they were read in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError, InvalidTableConfigError
from hoodie.keygen import joda, zones
from hoodie.keygen.joda_parse import parse_instants
from hoodie.keygen.values import ValueFormat, avro_timestamp_numbers, epoch_millis_of_timestamps

PREFIX = "hoodie.keygen.timebased."
LEGACY_PREFIX = "hoodie.deltastreamer.keygen.timebased."
TIMESTAMP_TYPE = "timestamp.type"
SCALAR_TIME_UNIT = "timestamp.scalar.time.unit"
INPUT_DATE_FORMAT = "input.dateformat"
INPUT_DATE_FORMAT_DELIMITER = "input.dateformat.list.delimiter.regex"
INPUT_TIMEZONE = "input.timezone"
OUTPUT_DATE_FORMAT = "output.dateformat"
OUTPUT_TIMEZONE = "output.timezone"
TIMEZONE = "timezone"
DATE_TIME_PARSER_KEY = "hoodie.keygen.datetime.parser.class"
DEFAULT_DATE_TIME_PARSER = "org.apache.hudi.keygen.parser.HoodieDateTimeParser"

_LONG_MAX = np.iinfo(np.int64).max
_LONG_MIN = np.iinfo(np.int64).min


class TimestampType(StrEnum):
    """``hoodie.keygen.timebased.timestamp.type``."""

    UNIX_TIMESTAMP = "UNIX_TIMESTAMP"
    DATE_STRING = "DATE_STRING"
    MIXED = "MIXED"
    EPOCHMILLISECONDS = "EPOCHMILLISECONDS"
    EPOCHMICROSECONDS = "EPOCHMICROSECONDS"
    SCALAR = "SCALAR"


class TimeUnit(StrEnum):
    """``java.util.concurrent.TimeUnit`` names, for ``timestamp.scalar.time.unit``."""

    NANOSECONDS = "NANOSECONDS"
    MICROSECONDS = "MICROSECONDS"
    MILLISECONDS = "MILLISECONDS"
    SECONDS = "SECONDS"
    MINUTES = "MINUTES"
    HOURS = "HOURS"
    DAYS = "DAYS"


# numerator / denominator taking a value in the unit to millis
_TO_MILLIS: dict[TimeUnit, tuple[int, int]] = {
    TimeUnit.NANOSECONDS: (1, 1_000_000),
    TimeUnit.MICROSECONDS: (1, 1000),
    TimeUnit.MILLISECONDS: (1, 1),
    TimeUnit.SECONDS: (1000, 1),
    TimeUnit.MINUTES: (60_000, 1),
    TimeUnit.HOURS: (3_600_000, 1),
    TimeUnit.DAYS: (86_400_000, 1),
}
_UNIT_OF_TYPE = {
    TimestampType.UNIX_TIMESTAMP: TimeUnit.SECONDS,
    TimestampType.EPOCHMILLISECONDS: TimeUnit.MILLISECONDS,
    TimestampType.EPOCHMICROSECONDS: TimeUnit.MICROSECONDS,
}


def _get(props: Mapping[str, str], suffix: str) -> str | None:
    for prefix in (PREFIX, LEGACY_PREFIX):
        if prefix + suffix in props:
            return props[prefix + suffix]
    return None


@dataclass(frozen=True)
class TimestampOptions:
    """The ``hoodie.keygen.timebased.*`` settings of a timestamp-based partition field.

    Time zones are Java zone names (``UTC``, ``Asia/Shanghai``, ``GMT+8``); ``None`` means not
    configured. ``input_date_formats`` are Joda patterns tried in order.
    """

    timestamp_type: TimestampType
    output_date_format: str
    input_date_formats: tuple[str, ...] = ()
    input_timezone: str | None = None
    output_timezone: str | None = None
    scalar_time_unit: TimeUnit = TimeUnit.SECONDS
    input_date_format_delimiter: str = ","

    def __post_init__(self) -> None:
        joda.validate_output_pattern(self.output_date_format)
        if self.timestamp_type in (TimestampType.DATE_STRING, TimestampType.MIXED):
            if not self.input_date_formats:
                raise InvalidTableConfigError(
                    f"{PREFIX}{INPUT_DATE_FORMAT} is required with timestamp type {self.timestamp_type}"
                )
            for pattern in self.input_date_formats:
                joda.validate_input_pattern(pattern)

    @property
    def time_unit(self) -> TimeUnit | None:
        """The unit numbers count in; ``None`` for the string types."""
        if self.timestamp_type is TimestampType.SCALAR:
            return self.scalar_time_unit
        return _UNIT_OF_TYPE.get(self.timestamp_type)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TimestampOptions:
        """Read the options (current or ``hoodie.deltastreamer.``-prefixed keys) from properties."""
        parser = props.get(
            DATE_TIME_PARSER_KEY, props.get("hoodie.deltastreamer.keygen.datetime.parser.class")
        )
        if parser and parser.strip() != DEFAULT_DATE_TIME_PARSER:
            raise InvalidTableConfigError(
                f"{DATE_TIME_PARSER_KEY}={parser!r}: only the default parser is supported"
            )
        raw_type = _get(props, TIMESTAMP_TYPE)
        if raw_type is None:
            raise InvalidTableConfigError(
                f"{PREFIX}{TIMESTAMP_TYPE} is required by the timestamp-based key generator"
            )
        try:
            timestamp_type = TimestampType(raw_type)
        except ValueError:
            raise InvalidTableConfigError(
                f"{PREFIX}{TIMESTAMP_TYPE}={raw_type!r} is not a timestamp type"
            ) from None
        raw_unit = _get(props, SCALAR_TIME_UNIT) or TimeUnit.SECONDS.value
        try:
            unit = TimeUnit(raw_unit.upper())
        except ValueError:
            raise InvalidTableConfigError(
                f"{PREFIX}{SCALAR_TIME_UNIT}={raw_unit!r} is not a time unit"
            ) from None
        delimiter = (_get(props, INPUT_DATE_FORMAT_DELIMITER) or "").strip() or ","
        formats_text = _get(props, INPUT_DATE_FORMAT) or ""
        if PREFIX + TIMEZONE in props or LEGACY_PREFIX + TIMEZONE in props:
            legacy = _get(props, TIMEZONE) or ""
            input_tz = output_tz = legacy if legacy.strip() else None
        else:
            input_tz = _get(props, INPUT_TIMEZONE) or None
            output_tz = _get(props, OUTPUT_TIMEZONE) or None
        return cls(
            timestamp_type=timestamp_type,
            output_date_format=_get(props, OUTPUT_DATE_FORMAT) or "",
            input_date_formats=split_formats(formats_text, delimiter),
            input_timezone=input_tz if input_tz and input_tz.strip() else None,
            output_timezone=output_tz if output_tz and output_tz.strip() else None,
            scalar_time_unit=unit,
            input_date_format_delimiter=delimiter,
        )

    def to_properties(self) -> dict[str, str]:
        """The ``hoodie.keygen.timebased.*`` properties that reproduce these options."""
        props = {
            PREFIX + TIMESTAMP_TYPE: self.timestamp_type.value,
            PREFIX + OUTPUT_DATE_FORMAT: self.output_date_format,
        }
        if self.input_date_formats:
            props[PREFIX + INPUT_DATE_FORMAT] = self._joined_input_formats()
            if self.input_date_format_delimiter != ",":
                props[PREFIX + INPUT_DATE_FORMAT_DELIMITER] = self.input_date_format_delimiter
        if self.timestamp_type is TimestampType.SCALAR:
            props[PREFIX + SCALAR_TIME_UNIT] = self.scalar_time_unit.value
        if self.input_timezone is not None:
            props[PREFIX + INPUT_TIMEZONE] = self.input_timezone
        if self.output_timezone is not None:
            props[PREFIX + OUTPUT_TIMEZONE] = self.output_timezone
        return props

    def _joined_input_formats(self) -> str:
        """The format list as one string that the delimiter regex splits back into the formats."""
        delimiter = self.input_date_format_delimiter
        literal = re.sub(r"\\(.)", r"\1", delimiter)
        joined = literal.join(self.input_date_formats)
        if split_formats(joined, delimiter) != self.input_date_formats:
            formats = list(self.input_date_formats)
            raise InvalidTableConfigError(
                f"input date formats {formats} cannot be joined by delimiter {delimiter!r}"
            )
        return joined


def split_formats(text: str, delimiter: str) -> tuple[str, ...]:
    """Split the input-format list on the delimiter regex, trimming each format, dropping empties."""
    if not text.strip():
        return ()
    try:
        pieces = re.split(delimiter, text)
    except re.error as exc:
        raise InvalidTableConfigError(
            f"{PREFIX}{INPUT_DATE_FORMAT_DELIMITER}={delimiter!r} is not a regex: {exc}"
        ) from exc
    return tuple(p.strip() for p in pieces if p.strip())


def timestamp_partition_values(
    values: pa.Array | None, length: int, *, field: str, options: TimestampOptions, fmt: ValueFormat
) -> pa.Array:
    """The formatted partition value of every row (before escaping and the Hive-style prefix)."""
    if values is None:
        values = pa.nulls(length)
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    unit = options.time_unit
    jvm_zone = zones.resolve_java_zone(fmt.timezone)
    in_zone = zones.resolve_java_zone(options.input_timezone) if options.input_timezone else None
    out_zone = zones.resolve_java_zone(options.output_timezone) if options.output_timezone else None
    is_text = (
        pa.types.is_string(values.type)
        or pa.types.is_large_string(values.type)
        or pa.types.is_string_view(values.type)
    )
    nulls = pc.is_null(values)
    default = (
        _default_value(options, in_zone, out_zone, jvm_zone, field, fmt) if pc.any(nulls).as_py() else None
    )
    if default is not None and pc.all(nulls).as_py():
        return pa.repeat(pa.scalar(default), len(values))
    if is_text:
        if unit is not None:
            raise InvalidInputError(
                f"partition field {field!r} holds strings, but timestamp type {options.timestamp_type} needs "
                f"{PREFIX}{INPUT_DATE_FORMAT} and type DATE_STRING or MIXED to parse them"
            )
        parsed = parse_instants(
            values.cast(pa.string()),
            options.input_date_formats,
            input_zone=in_zone,
            default_zone=jvm_zone,
            field=field,
        )
        row_zones = joda.ZoneColumn(single=out_zone) if out_zone else parsed.zones
        result = joda.format_instants(parsed.millis, row_zones, options.output_date_format)
    else:
        millis = _epoch_millis(values, unit, field=field, options=options, fmt=fmt)
        result = joda.format_instants(
            millis, joda.ZoneColumn(single=out_zone or jvm_zone), options.output_date_format
        )
    return pc.fill_null(result, default) if default is not None else result


def _default_text(
    options: TimestampOptions, in_zone: zones.JodaZone | None, out_zone: zones.JodaZone | None
) -> str:
    # One millisecond after the epoch, printed with the first input format in the input zone,
    # else the output zone, else GMT.
    zone = in_zone or out_zone or zones.UTC
    text = joda.format_instants(
        pa.array([1], pa.int64()), joda.ZoneColumn(single=zone), options.input_date_formats[0]
    )
    return str(text[0].as_py())


def _default_value(
    options: TimestampOptions,
    in_zone: zones.JodaZone | None,
    out_zone: zones.JodaZone | None,
    jvm: zones.JodaZone,
    field: str,
    fmt: ValueFormat,
) -> str:
    """The partition value Hudi writes for a null field value."""
    if options.time_unit is None:
        text = pa.array([_default_text(options, in_zone, out_zone)], pa.string())
        parsed = parse_instants(
            text, options.input_date_formats, input_zone=in_zone, default_zone=jvm, field=field
        )
        row_zones = joda.ZoneColumn(single=out_zone) if out_zone else parsed.zones
        return str(joda.format_instants(parsed.millis, row_zones, options.output_date_format)[0].as_py())
    millis = _epoch_millis(
        pa.array([1], pa.int64()), options.time_unit, field=field, options=options, fmt=fmt
    )
    return str(
        joda.format_instants(millis, joda.ZoneColumn(single=out_zone or jvm), options.output_date_format)[
            0
        ].as_py()
    )


def _epoch_millis(
    values: pa.Array, unit: TimeUnit | None, *, field: str, options: TimestampOptions, fmt: ValueFormat
) -> pa.Array:
    """Epoch millis of non-string values, converted the way Hudi converts each Java type."""
    t = values.type
    if pa.types.is_timestamp(t) and t.tz is not None and fmt.consistent_logical_timestamp:
        return epoch_millis_of_timestamps(values)  # a java.sql.Timestamp: timestamp-millis/-micros only
    if pa.types.is_timestamp(t):
        longs = avro_timestamp_numbers(values)
    elif pa.types.is_integer(t):
        longs = values.cast(pa.int64(), safe=False)
    elif pa.types.is_date(t):
        longs = values.cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
    elif pa.types.is_decimal(t):
        longs = values.cast(pa.int64(), safe=False)
    elif pa.types.is_floating(t):
        longs = _java_long_of_floats(values)
    else:
        raise InvalidInputError(
            f"partition field {field!r} has type {t}, which cannot be read as a timestamp"
        )
    if unit is None:
        raise InvalidInputError(
            f"partition field {field!r} holds numbers ({t}), but timestamp type {options.timestamp_type} "
            "only reads date strings"
        )
    return _to_millis(longs, unit)


def _java_long_of_floats(values: pa.Array) -> pa.Array:
    """Java's ``(long)`` of doubles: truncation toward zero, NaN is 0, out-of-range saturates."""
    x = np.asarray(pc.fill_null(values.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False))
    with np.errstate(invalid="ignore"):
        out = np.where(np.isnan(x), 0.0, np.trunc(x))
        big = out >= 2.0**63
        small = out <= -(2.0**63)
        safe = np.where(big | small, 0.0, out).astype(np.int64)
    result = np.where(big, _LONG_MAX, np.where(small, _LONG_MIN, safe))
    return pa.array(result, pa.int64(), mask=np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False)))


def _to_millis(longs: pa.Array, unit: TimeUnit) -> pa.Array:
    """``TimeUnit.MILLISECONDS.convert(v, unit)``: truncating division, saturating multiplication."""
    num, den = _TO_MILLIS[unit]
    if den > 1:
        return pc.divide(longs, den)
    if num == 1:
        return longs
    x = np.asarray(pc.fill_null(longs, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    limit = _LONG_MAX // num
    out = np.where(
        x > limit, _LONG_MAX, np.where(x < -limit, _LONG_MIN, x * np.where(np.abs(x) <= limit, num, 1))
    )
    return pa.array(out, pa.int64(), mask=np.asarray(pc.is_null(longs).to_numpy(zero_copy_only=False)))
