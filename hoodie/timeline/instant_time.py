"""Instant times: ``yyyyMMddHHmmssSSS`` wall-clock strings in the table's timeline time zone."""

from __future__ import annotations

import datetime as dt

from hoodie.errors import TimelineError

MILLIS_FORMAT_LENGTH = 17
SECS_FORMAT_LENGTH = 14
DEFAULT_MILLIS_EXT = "999"  # Hudi pads second-granularity instants to the end of their second

INIT_INSTANT_TS = "00000000000000"
METADATA_BOOTSTRAP_INSTANT_TS = "00000000000001"
FULL_BOOTSTRAP_INSTANT_TS = "00000000000002"
INVALID_INSTANT_TS = "0"


def timezone_of(name: str) -> dt.tzinfo:
    """``hoodie.table.timeline.timezone`` as a tzinfo: UTC, or the machine's local zone."""
    if name.upper() == "UTC":
        return dt.UTC
    local = dt.datetime.now().astimezone().tzinfo
    assert local is not None
    return local


def normalize(instant_time: str) -> str:
    """A 17-digit comparable form; second-granularity instants get Hudi's ``999`` millis."""
    if len(instant_time) == SECS_FORMAT_LENGTH and instant_time.isdigit():
        return instant_time + DEFAULT_MILLIS_EXT
    return instant_time


def is_valid_instant_time(value: str) -> bool:
    return value.isdigit() and len(value) in (MILLIS_FORMAT_LENGTH, SECS_FORMAT_LENGTH)


def format_instant_time(moment: dt.datetime, tz: dt.tzinfo) -> str:
    """Render ``moment`` in ``tz`` as a 17-digit instant time."""
    local = moment.astimezone(tz)
    return local.strftime("%Y%m%d%H%M%S") + f"{local.microsecond // 1000:03d}"


def instant_from_epoch_millis(millis: int, tz: dt.tzinfo) -> str:
    return format_instant_time(dt.datetime.fromtimestamp(millis / 1000, dt.UTC), tz)


def parse_instant_time(value: str, tz: dt.tzinfo) -> dt.datetime:
    """The moment an instant time names (second-granularity instants end at ``.999``)."""
    norm = normalize(value)
    if len(norm) != MILLIS_FORMAT_LENGTH or not norm.isdigit():
        raise TimelineError(f"invalid instant time {value!r}: expected yyyyMMddHHmmssSSS")
    try:
        base = dt.datetime.strptime(norm[:14], "%Y%m%d%H%M%S")
    except ValueError as e:
        raise TimelineError(f"invalid instant time {value!r}: {e}") from e
    return base.replace(microsecond=int(norm[14:]) * 1000, tzinfo=tz)


def instant_to_epoch_millis(value: str, tz: dt.tzinfo) -> int:
    return int(parse_instant_time(value, tz).timestamp() * 1000 + 0.5)
