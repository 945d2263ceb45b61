"""Joda-Time date patterns printed over Arrow columns without per-row Python.

Hudi's timestamp-based key generator formats with Joda-Time
(``org.joda.time.format.DateTimeFormat.forPattern``, English locale). Supported letters:
``G C Y y x w e E D M d a K h H k m s S Z ZZ ZZZ`` and quoted literals (``'T'``, ``''`` for a
quote); time-zone names (``z``) are refused. Parsing lives in :mod:`hoodie.keygen.joda_parse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError, InvalidTableConfigError
from hoodie.keygen.zones import JodaZone, local_wall_clock

MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_NUMERIC_LETTERS = frozenset("cCxyYdhHmsSeDFWkKw")
_PRINT_LETTERS = frozenset("GCYyxweEDMdaKhHkmsSZ")
PARSE_LETTERS = frozenset("GYyMdEeDaKhHkmsSZ")
_MS_PER_DAY = 86_400_000
_MIN_MS = -62_167_219_200_000 + _MS_PER_DAY  # 0000-01-02T00:00:00Z
_MAX_MS = 253_402_300_799_999 - _MS_PER_DAY  # 9999-12-30T23:59:59.999Z


@dataclass(frozen=True)
class Token:
    """One pattern element: a run of one letter (``letter``, ``count``) or literal ``text``."""

    letter: str = ""
    count: int = 0
    text: str = ""

    @property
    def is_numeric(self) -> bool:
        if self.letter == "M":
            return self.count <= 2
        return self.letter in _NUMERIC_LETTERS


@cache
def tokenize(pattern: str) -> tuple[Token, ...]:
    """Split a Joda pattern into letter runs and literal text (``'...'`` quoted, ``''`` a quote)."""
    tokens: list[Token] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c.isascii() and c.isalpha():
            j = i
            while j + 1 < n and pattern[j + 1] == c:
                j += 1
            tokens.append(Token(letter=c, count=j - i + 1))
            i = j + 1
            continue
        buf: list[str] = []
        quoted = False
        while i < n:
            c = pattern[i]
            if c == "'":
                if i + 1 < n and pattern[i + 1] == "'":
                    buf.append("'")
                    i += 1
                else:
                    quoted = not quoted
            elif not quoted and c.isascii() and c.isalpha():
                break
            else:
                buf.append(c)
            i += 1
        tokens.append(Token(text="".join(buf)))
    return tuple(tokens)


def check_pattern(pattern: str, allowed: frozenset[str], purpose: str) -> tuple[Token, ...]:
    if not pattern:
        raise InvalidTableConfigError(f"empty date pattern given as the {purpose} format")
    tokens = tokenize(pattern)
    for tok in tokens:
        if tok.letter and tok.letter not in allowed:
            raise InvalidTableConfigError(
                f"date pattern {pattern!r}: letter {tok.letter * tok.count!r} is not supported for {purpose}"
            )
    return tokens


def validate_output_pattern(pattern: str) -> None:
    """Raise :class:`InvalidTableConfigError` if ``pattern`` cannot be printed here."""
    check_pattern(pattern, _PRINT_LETTERS, "output")


def validate_input_pattern(pattern: str) -> None:
    """Raise :class:`InvalidTableConfigError` if ``pattern`` cannot be parsed here."""
    check_pattern(pattern, PARSE_LETTERS, "input")


def pad(values: pa.Array, width: int) -> pa.Array:
    """Integers as decimal strings zero-padded to ``width`` digits, a ``-`` before negatives."""
    ints = values.cast(pa.int64())
    digits = pc.utf8_lpad(pc.abs(ints).cast(pa.string()), width=width, padding="0")
    return pc.if_else(pc.less(ints, 0), pc.binary_join_element_wise("-", digits, ""), digits)


def _rem(values: pa.Array, divisor: int) -> pa.Array:
    """``values % divisor`` for non-negative integers."""
    return pc.subtract(values, pc.multiply(pc.divide(values, divisor), divisor))


def _names(index: pa.Array, names: tuple[str, ...], short: bool) -> pa.Array:
    words = pa.array([w[:3] if short else w for w in names], pa.string())
    return pc.take(words, index.cast(pa.int64()))


def _offset_text(offset_ms: pa.Array, colon: bool) -> pa.Array:
    minutes = pc.divide(pc.abs(offset_ms), 60_000)
    hours = pad(pc.divide(minutes, 60), 2)
    mins = pad(pc.subtract(minutes, pc.multiply(pc.divide(minutes, 60), 60)), 2)
    sign = pc.if_else(pc.less(offset_ms, 0), pa.scalar("-"), pa.scalar("+"))
    return pc.binary_join_element_wise(sign, hours, ":" if colon else "", mins, "")


def _print_token(tok: Token, wall: pa.Array, offset_ms: pa.Array, zone_ids: pa.Array) -> pa.Array:
    n, letter = tok.count, tok.letter
    if letter in "yYxC":
        year = pc.iso_year(wall) if letter == "x" else pc.year(wall)
        if n == 2 and letter != "C":
            return pad(_rem(pc.abs(year), 100), 2)
        if letter in "YC":
            year = pc.if_else(pc.less_equal(year, 0), pc.subtract(1, year), year)
        return pad(pc.divide(year, 100), n) if letter == "C" else pad(year, n)
    if letter == "G":
        return pc.if_else(pc.less_equal(pc.year(wall), 0), pa.scalar("BC"), pa.scalar("AD"))
    if letter == "M" and n >= 3:
        return _names(pc.subtract(pc.month(wall), 1), MONTHS, n == 3)
    if letter == "E":
        return _names(pc.day_of_week(wall), WEEKDAYS, n < 4)
    if letter == "a":
        return pc.if_else(pc.less(pc.hour(wall), 12), pa.scalar("AM"), pa.scalar("PM"))
    if letter == "Z":
        return zone_ids if n >= 3 else _offset_text(offset_ms, colon=n == 2)
    if letter == "S":
        ms = pc.millisecond(wall)
        if n < 3:
            return pad(pc.divide(ms, 10 ** (3 - n)), n)
        return pc.binary_join_element_wise(pad(ms, 3), "0" * (n - 3), "")
    if letter in "HkKh":
        hour = pc.hour(wall)
        if letter == "k":
            hour = pc.if_else(pc.equal(hour, 0), 24, hour)
        elif letter in "Kh":
            hour = _rem(hour, 12)
            if letter == "h":
                hour = pc.if_else(pc.equal(hour, 0), 12, hour)
        return pad(hour, n)
    fields = {
        "M": pc.month, "w": pc.iso_week, "D": pc.day_of_year, "d": pc.day, "m": pc.minute, "s": pc.second,
    }  # fmt: skip
    if letter == "e":
        return pad(pc.add(pc.day_of_week(wall), 1), n)
    return pad(fields[letter](wall), n)


@dataclass(frozen=True)
class ZoneColumn:
    """The zone of every row: one zone for all, or per row an index into ``choices``."""

    single: JodaZone | None = None
    index: pa.Array | None = None
    choices: tuple[JodaZone, ...] = ()


def format_instants(millis: pa.Array, zones: ZoneColumn, pattern: str) -> pa.Array:
    """Print epoch millis with a Joda pattern, each row in its zone.

    Instants must fall in the years 0000-9999 (Arrow's calendar arithmetic is not reliable
    beyond); others raise :class:`InvalidInputError`.
    """
    tokens = check_pattern(pattern, _PRINT_LETTERS, "output")
    millis = millis.cast(pa.int64())
    out_of_range = pc.or_(pc.less(millis, _MIN_MS), pc.greater(millis, _MAX_MS))
    if pc.any(out_of_range).as_py():
        sample = pc.filter(millis, out_of_range)[0].as_py()
        raise InvalidInputError(f"epoch millis {sample} is outside the supported years 0000-9999")
    if zones.single is not None:
        wall = local_wall_clock(millis, zones.single)
        zone_ids = pa.repeat(pa.scalar(zones.single.joda_id), len(millis))
    else:
        if zones.index is None:
            raise ValueError("ZoneColumn needs either a single zone or a per-row index")
        wall = millis.cast(pa.timestamp("ms"))
        zone_ids = pa.nulls(len(millis), pa.string())
        for i, zone in enumerate(zones.choices):
            mask = pc.fill_null(pc.equal(zones.index, i), False)
            if not pc.any(mask).as_py():
                continue
            wall = pc.replace_with_mask(wall, mask, local_wall_clock(pc.filter(millis, mask), zone))
            zone_ids = pc.if_else(mask, pa.scalar(zone.joda_id), zone_ids)
    offset_ms = pc.subtract(wall.cast(pa.int64()), millis)
    parts: list[pa.Array | str] = []
    for tok in tokens:
        parts.append(tok.text if not tok.letter else _print_token(tok, wall, offset_ms, zone_ids))
    if len(parts) == 1 and not isinstance(parts[0], str):
        return parts[0]
    # Joining with a null-derived array keeps null instants null, also for literal-only patterns.
    blank = pc.if_else(pc.is_valid(millis), pa.scalar(""), pa.scalar(None, pa.string()))
    return pc.binary_join_element_wise(*parts, blank, "")
