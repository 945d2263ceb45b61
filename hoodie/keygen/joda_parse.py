"""Joda-Time date patterns parsed over Arrow columns, with regular expressions instead of per-row Python.

Supported letters: ``G Y y M d E e D a K h H k m s S Z ZZ ZZZ`` and literals. As in Joda,
numbers may be shorter than the pattern (``M`` reads one or two digits), a year takes up to
nine digits unless a number follows it directly, two-letter years pivot around the current year
minus 30, literals and names match case-insensitively, a pattern must consume the whole text,
and of several patterns the first that does wins. A date read without a year starts from 2000,
and a weekday moves the date within its ISO week, both as Joda does.

Differences: where Joda's greedy, non-backtracking reading fails on adjacent numbers (``Md`` on
``12``), the regular expressions may still find a split; and Joda crashes on a lenient
two-letter year running past nine digits, where here that pattern simply does not match.

Wall-clock times that a zone skips (spring-forward gaps) are rejected, and ambiguous ones
(fall-back overlaps) take the earlier instant, as Joda does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError, InvalidTableConfigError
from hoodie.keygen.joda import MONTHS, PARSE_LETTERS, WEEKDAYS, Token, ZoneColumn, check_pattern
from hoodie.keygen.zones import UTC, JodaZone, fixed_offset_zone, region_zone, to_instants

_MS_PER_DAY = 86_400_000


def _re2_literal(text: str) -> str:
    out = []
    for c in text:
        if c.isascii() and c.isalnum():
            out.append(c)
        else:
            out.append(f"\\x{{{ord(c):x}}}")
    return "(?i:" + "".join(out) + ")" if out else ""


def _alternatives(words: list[str]) -> str:
    forms = sorted({f for w in words for f in (w, w.lower(), w.upper())}, key=lambda s: (-len(s), s))
    return "(?:" + "|".join(forms) + ")"


@dataclass(frozen=True)
class _ParsePlan:
    regex: str
    groups: tuple[Token, ...]
    lenient_two_digit_year: bool


@cache
def _parse_plan(pattern: str) -> _ParsePlan:
    tokens = check_pattern(pattern, PARSE_LETTERS, "input")
    pieces: list[str] = []
    groups: list[Token] = []
    lenient_yy = True
    for i, tok in enumerate(tokens):
        if not tok.letter:
            pieces.append(_re2_literal(tok.text))
            continue
        next_numeric = i + 1 < len(tokens) and tokens[i + 1].letter != "" and tokens[i + 1].is_numeric
        letter, n = tok.letter, tok.count
        if letter in "yY" and n == 2:
            lenient_yy = not next_numeric
            piece = r"\d{2}" if next_numeric else r"[-+]?\d+"
        elif letter in "yY":
            piece = rf"[-+]?\d{{{n}}}" if next_numeric else r"[-+]?\d{1,9}"
        elif letter == "M" and n >= 3:
            piece = _alternatives([*MONTHS, *(m[:3] for m in MONTHS)])
        elif letter == "E":
            piece = _alternatives([*WEEKDAYS, *(d[:3] for d in WEEKDAYS)])
        elif letter == "a":
            piece = _alternatives(["AM", "PM"])
        elif letter == "G":
            piece = _alternatives(["AD", "BC"])
        elif letter == "Z" and n <= 2:
            piece = r"[Zz]|[-+]\d{2}(?::?\d{2})?"
        elif letter == "Z":
            piece = r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)*"
        elif letter == "S":
            piece = rf"\d{{1,{n}}}"
        else:
            piece = r"\d{1,3}" if letter == "D" else (r"\d" if letter == "e" else r"\d{1,2}")
        piece = f"(?P<g{len(groups)}>{piece})"
        pieces.append(piece)
        groups.append(tok)
    return _ParsePlan("^" + "".join(pieces) + "$", tuple(groups), lenient_yy)


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return _i64(era * 146097 + doe - 719468)


def _i64(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _is_leap(y: np.ndarray) -> np.ndarray:
    return np.asarray(((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0), dtype=bool)


_DAYS_IN_MONTH = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _civil_from_days(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = z + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (m <= 2), m, d


def _month_length(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    return _i64(_DAYS_IN_MONTH[m - 1] + ((m == 2) & _is_leap(y)))


def _set_date_field(days: np.ndarray, name: str, value: np.ndarray, pattern: str, field: str) -> np.ndarray:
    """One Joda field ``set`` on epoch days: year and month keep the day (clamped to the month),
    day fields are validated, a weekday moves within the ISO week."""
    if name == "dow":
        return _i64(days + (value - 1 - (days + 3) % 7))
    y, m, d = _civil_from_days(days)
    if name == "year":
        return _days_from_civil(value, m, np.minimum(d, _month_length(value, m)))
    if name == "month":
        return _days_from_civil(y, value, np.minimum(d, _month_length(y, value)))
    limit = np.where(_is_leap(y), 366, 365) if name == "doy" else _month_length(y, m)
    bad = value > limit
    if bad.any():
        what = "day of year" if name == "doy" else "day of month"
        raise InvalidInputError(
            f"field {field!r}: {what} {int(value[bad][0])} out of range in a value parsed with {pattern!r}"
        )
    if name == "doy":
        return _i64(_days_from_civil(y, np.ones_like(y), np.ones_like(y)) + value - 1)
    return _days_from_civil(y, m, value)


@dataclass(frozen=True)
class ParsedInstants:
    """Parse results: epoch millis, and the zone Joda attached to each parsed value."""

    millis: pa.Array
    zones: ZoneColumn


def parse_instants(
    text: pa.Array,
    patterns: tuple[str, ...],
    *,
    input_zone: JodaZone | None,
    default_zone: JodaZone,
    field: str,
) -> ParsedInstants:
    """Parse strings with the first of ``patterns`` that matches each whole string.

    Without an offset or zone in the text, wall-clock times are read in ``input_zone`` (or
    ``default_zone``, the JVM's). The zone attached to a row is ``input_zone`` when given,
    else the offset/zone parsed from the text, else ``default_zone``. Nulls stay null.
    """
    if not patterns:
        raise InvalidTableConfigError(
            "hoodie.keygen.timebased.input.dateformat is required to parse date strings"
        )
    text = text.cast(pa.string())
    n = len(text)
    local = np.zeros(n, dtype=np.int64)
    offset = np.zeros(n, dtype=np.int64)
    has_offset = np.zeros(n, dtype=bool)
    name_idx = np.full(n, -1, dtype=np.int64)
    names: list[str] = []
    done = np.zeros(n, dtype=bool)
    for pattern in patterns:
        plan = _parse_plan(pattern)
        matched = pc.extract_regex(text, plan.regex)
        take = _np_bool(pc.is_valid(matched)) & ~done
        if not take.any():
            continue
        rows = np.nonzero(take)[0]
        parts = _assemble(pc.take(matched, pa.array(rows)), plan, pattern, field)
        local[rows], offset[rows], has_offset[rows] = parts.local, parts.offset, parts.has_offset
        if parts.zone_names is not None:
            names.extend(z for z in pc.unique(parts.zone_names).to_pylist() if z not in names)
            idx = pc.index_in(parts.zone_names, value_set=pa.array(names, pa.string()))
            name_idx[rows] = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64)
        done |= take
    bad = ~done & _np_bool(pc.is_valid(text))
    if bad.any():
        sample = text[int(np.nonzero(bad)[0][0])].as_py()
        raise InvalidInputError(
            f"field {field!r}: {sample!r} matches none of the input date formats {list(patterns)}"
        )

    wall_zone = input_zone or default_zone
    choices: list[JodaZone] = [wall_zone]
    choice = np.zeros(n, dtype=np.int64)
    millis = local - np.where(has_offset, offset, 0)
    for off in np.unique(offset[has_offset]).tolist():
        choices.append(fixed_offset_zone(int(off)))
        choice[has_offset & (offset == off)] = len(choices) - 1
    for j, name in enumerate(names):
        rows = (name_idx == j) & ~has_offset
        if rows.any():
            zone = _parsed_zone(name, field)
            millis[rows] = to_instants(local[rows], zone, field)
            choices.append(zone)
            choice[rows] = len(choices) - 1
    plain = done & ~has_offset & (name_idx < 0)
    millis[plain] = to_instants(local[plain], wall_zone, field)
    result = pa.array(millis, pa.int64(), mask=~done)
    if input_zone is not None or len(choices) == 1:
        return ParsedInstants(result, ZoneColumn(single=wall_zone))
    return ParsedInstants(result, ZoneColumn(index=pa.array(choice, pa.int64()), choices=tuple(choices)))


def _np_bool(values: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)


def _parsed_zone(name: str, field: str) -> JodaZone:
    zone = UTC if name == "UTC" else region_zone(name)
    if zone is None:
        raise InvalidInputError(f"field {field!r}: unknown time zone id {name!r} in a date string")
    return zone


@dataclass(frozen=True)
class _Assembled:
    local: np.ndarray
    offset: np.ndarray
    has_offset: np.ndarray
    zone_names: pa.Array | None


def _assemble(sub: pa.Array, plan: _ParsePlan, pattern: str, field: str) -> _Assembled:
    """Local millis, offsets and zone names of the rows one pattern matched."""
    n = len(sub)
    letters = {tok.letter for tok in plan.groups}
    # Joda's parse starts from 1970-01-01, or from 2000 when a month or day is read without a year.
    default_year = 2000 if not letters & set("yY") and letters & set("MdDEe") else 1970
    year = np.full(n, default_year, np.int64)
    day_of_week: np.ndarray | None = None
    month: np.ndarray | None = None
    day: np.ndarray | None = None
    day_of_year: np.ndarray | None = None
    hour = np.zeros(n, np.int64)
    minute = np.zeros(n, np.int64)
    second = np.zeros(n, np.int64)
    millis = np.zeros(n, np.int64)
    pm: np.ndarray | None = None
    half_hour: np.ndarray | None = None
    bc = np.zeros(n, bool)
    offset = np.zeros(n, np.int64)
    has_offset = np.zeros(n, bool)
    zone_names: pa.Array | None = None
    hour_set = False

    def ints(i: int) -> np.ndarray:
        raw = pc.utf8_ltrim(pc.struct_field(sub, [i]), characters="+")
        return np.asarray(raw.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)

    def strs(i: int) -> pa.Array:
        return pc.struct_field(sub, [i])

    def check(values: np.ndarray, low: int, high: np.ndarray | int, what: str) -> None:
        bad = (values < low) | (values > high)
        if bad.any():
            sample = int(values[bad][0])
            raise InvalidInputError(
                f"field {field!r}: {what} {sample} out of range in a value parsed with {pattern!r}"
            )

    for i, tok in enumerate(plan.groups):
        letter, count = tok.letter, tok.count
        if letter in "yY":
            year = ints(i)
            if count == 2:
                raw = strs(i)
                two = _np_bool(pc.equal(pc.utf8_length(raw), 2)) & ~_np_bool(
                    pc.match_substring_regex(raw, "^[-+]")
                )
                if not plan.lenient_two_digit_year:
                    two[:] = True
                low = dt.date.today().year - 30 - 50
                base = low % 100
                pivoted = year + low + np.where(year < base, 100, 0) - base
                year = np.where(two, pivoted, year)
        elif letter == "G":
            # The era only matters for a year of era ('Y'); a plain year ('y') overrides it.
            bc = _np_bool(pc.equal(pc.utf8_upper(strs(i)), "BC")) & ("Y" in letters and "y" not in letters)
        elif letter == "M":
            if count >= 3:
                names = [
                    f for m in MONTHS for f in (m, m.lower(), m.upper(), m[:3], m[:3].lower(), m[:3].upper())
                ]
                idx = pc.index_in(strs(i), value_set=pa.array(names))
                month = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64) // 6 + 1
            else:
                month = ints(i)
        elif letter == "d":
            day = ints(i)
        elif letter == "D":
            day_of_year = ints(i)
        elif letter in "Hk":
            hour = ints(i) % 24 if letter == "k" else ints(i)
            check(ints(i), 1 if letter == "k" else 0, 24 if letter == "k" else 23, "hour")
            hour_set = True
        elif letter in "hK":
            raw_half = ints(i)
            check(raw_half, 1 if letter == "h" else 0, 12 if letter == "h" else 11, "hour")
            half_hour = raw_half % 12
        elif letter == "a":
            pm = np.asarray(pc.equal(pc.utf8_upper(strs(i)), "PM").to_numpy(zero_copy_only=False), dtype=bool)
        elif letter == "m":
            minute = ints(i)
        elif letter == "s":
            second = ints(i)
        elif letter == "S":
            digits = pc.utf8_rpad(strs(i), width=3, padding="0")
            millis = np.asarray(
                pc.utf8_slice_codeunits(digits, 0, 3).cast(pa.int64()).to_numpy(), dtype=np.int64
            )
        elif letter == "Z" and count <= 2:
            cleaned = pc.replace_substring(strs(i), ":", "")
            is_zero = np.asarray(
                pc.equal(pc.utf8_upper(cleaned), "Z").to_numpy(zero_copy_only=False), dtype=bool
            )
            num = pc.if_else(pc.equal(pc.utf8_upper(cleaned), "Z"), pa.scalar("+0000"), cleaned)
            num = pc.utf8_rpad(num, width=5, padding="0")  # minutes are optional: "+05" is "+0500"
            sign = np.where(
                np.asarray(pc.starts_with(num, "-").to_numpy(zero_copy_only=False), dtype=bool), -1, 1
            )
            hh = np.asarray(pc.utf8_slice_codeunits(num, 1, 3).cast(pa.int64()).to_numpy(), dtype=np.int64)
            mm = np.asarray(pc.utf8_slice_codeunits(num, 3, 5).cast(pa.int64()).to_numpy(), dtype=np.int64)
            check(hh, 0, 23, "offset hours")
            check(mm, 0, 59, "offset minutes")
            offset = np.where(is_zero, 0, sign * (hh * 3_600_000 + mm * 60_000))
            has_offset[:] = True
        elif letter == "Z":
            zone_names = strs(i)
        elif letter == "E":
            idx = pc.index_in(
                pc.utf8_slice_codeunits(pc.utf8_lower(strs(i)), 0, 3),
                value_set=pa.array([d[:3].lower() for d in WEEKDAYS]),
            )
            day_of_week = np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64) + 1
        elif letter == "e":
            day_of_week = ints(i)
            check(day_of_week, 1, 7, "day of week")

    if half_hour is not None and not hour_set:
        hour = half_hour + np.where(pm, 12, 0) if pm is not None else half_hour
    year = np.where(bc, 1 - year, year)
    if month is not None:
        check(month, 1, 12, "month")
    if day is not None:
        check(day, 1, 31, "day of month")
    if day_of_year is not None:
        check(day_of_year, 1, 366, "day of year")
    # Joda sets the parsed date fields, largest first, twice over (its second pass re-applies
    # them to the result of the first). With a full consistent date that is just the date.
    steps: list[tuple[str, np.ndarray]] = []
    if default_year != 1970 or letters & set("yY"):
        steps.append(("year", year))
    optional = (("month", month), ("doy", day_of_year), ("dom", day), ("dow", day_of_week))
    steps += [(name, v) for name, v in optional if v is not None]
    days = np.zeros(n, np.int64)
    for _ in range(2 if steps else 0):
        for name, value in steps:
            days = _set_date_field(days, name, value, pattern, field)
    check(hour, 0, 23, "hour")
    check(minute, 0, 59, "minute")
    check(second, 0, 59, "second")
    local = days * _MS_PER_DAY + hour * 3_600_000 + minute * 60_000 + second * 1000 + millis
    return _Assembled(local, offset, has_offset, zone_names)
