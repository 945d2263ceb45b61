"""Time zones the way Hudi's Java code resolves them, and wall-clock conversion for Arrow columns.

A configured zone name goes through ``java.util.TimeZone.getTimeZone`` and then Joda-Time's
``DateTimeZone.forTimeZone``. Conversions run in Arrow, except that Arrow reads only the
transitions the tz files list (up to 2037): later instants in zones with daylight saving are
converted with Python's ``zoneinfo``, which applies the recurring rule.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError

# Java's three-letter zone aliases, as Joda converts them before looking the zone up.
_JODA_ALIASES = {
    "GMT": "UTC", "WET": "WET", "CET": "CET", "MET": "CET", "ECT": "CET", "EET": "EET",
    "MIT": "Pacific/Apia", "HST": "Pacific/Honolulu", "AST": "America/Anchorage",
    "PST": "America/Los_Angeles", "MST": "America/Denver", "PNT": "America/Phoenix",
    "CST": "America/Chicago", "EST": "America/New_York", "IET": "America/Indiana/Indianapolis",
    "PRT": "America/Puerto_Rico", "CNT": "America/St_Johns", "AGT": "America/Argentina/Buenos_Aires",
    "BET": "America/Sao_Paulo", "ART": "Africa/Cairo", "CAT": "Africa/Harare",
    "EAT": "Africa/Addis_Ababa", "NET": "Asia/Yerevan", "PLT": "Asia/Karachi", "IST": "Asia/Kolkata",
    "BST": "Asia/Dhaka", "VST": "Asia/Ho_Chi_Minh", "CTT": "Asia/Shanghai", "JST": "Asia/Tokyo",
    "ACT": "Australia/Darwin", "AET": "Australia/Sydney", "SST": "Pacific/Guadalcanal",
    "NST": "Pacific/Auckland",
}  # fmt: skip
_CUSTOM_GMT_RE = re.compile(r"^GMT([+-])(\d{1,2})(?::?(\d{2}))?$")
_MS_PER_DAY = 86_400_000


@dataclass(frozen=True)
class JodaZone:
    """A zone as Joda sees it: ``joda_id`` is what ``ZZZ`` prints, ``arrow_tz`` what Arrow computes with."""

    joda_id: str
    arrow_tz: str


UTC = JodaZone("UTC", "UTC")


def fixed_offset_zone(offset_ms: int) -> JodaZone:
    """The zone of a fixed offset (``+08:00``); a zero offset is ``UTC``."""
    if offset_ms == 0:
        return UTC
    sign = "-" if offset_ms < 0 else "+"
    minutes = abs(offset_ms) // 60_000
    text = f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return JodaZone(text, text)


@cache
def resolve_java_zone(zone_id: str) -> JodaZone:
    """The zone Hudi ends up with for a configured zone name.

    Java accepts any tz-database name, its legacy three-letter aliases and ``GMT+h[h][[:]mm]``;
    anything else (including names with stray spaces) silently becomes GMT. Joda then maps the
    three-letter aliases to regions (``EST`` is New York, with daylight saving), ``GMT`` to
    ``UTC``, and tz-database links to their targets (``Asia/Calcutta`` is ``Asia/Kolkata``).
    """
    name = _JODA_ALIASES.get(zone_id, zone_id)
    if name == "UTC":
        return UTC
    custom = _CUSTOM_GMT_RE.match(name)
    if custom:
        sign, hours, minutes = custom.group(1), int(custom.group(2)), int(custom.group(3) or 0)
        if hours > 23 or minutes > 59:
            return UTC
        return fixed_offset_zone((-1 if sign == "-" else 1) * (hours * 60 + minutes) * 60_000)
    return region_zone(name) or UTC


def region_zone(name: str) -> JodaZone | None:
    """The tz-database zone ``name`` (links followed), or ``None`` if the name is unknown."""
    target = _zone_links().get(name, name)
    if target == "UTC":
        return UTC
    return JodaZone(target, target) if target in _available_zones() else None


@cache
def _available_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


@cache
def _zone_links() -> dict[str, str]:
    """Link name to target from the system's ``tzdata.zi`` (empty when the file is absent)."""
    for base in zoneinfo.TZPATH:
        try:
            with open(f"{base}/tzdata.zi", encoding="utf-8") as fh:
                return {p[2]: p[1] for p in (line.split() for line in fh) if len(p) == 3 and p[0] == "L"}
        except OSError:
            continue
    return {}


def is_region(zone: JodaZone) -> bool:
    """Whether the zone has rules (daylight saving, history) rather than a fixed offset."""
    return zone.arrow_tz != "UTC" and zone.arrow_tz[0] not in "+-"


# Where Arrow's tz lookups stop being reliable, and where Python's datetime ends.
_ARROW_TZ_LIMIT_MS = 2_145_916_800_000  # 2038-01-01T00:00:00Z
_PY_DATETIME_LIMIT_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z
_EPOCH = dt.datetime(1970, 1, 1)


def local_wall_clock(millis: pa.Array, zone: JodaZone | str) -> pa.Array:
    """Epoch millis as naive ``timestamp[ms]`` wall-clock times in ``zone``."""
    if isinstance(zone, str):
        zone = resolve_java_zone(zone)
    millis = millis.cast(pa.int64())
    wall = pc.local_timestamp(millis.cast(pa.timestamp("ms", tz=zone.arrow_tz)))
    if not is_region(zone):
        return wall
    late = pc.fill_null(
        pc.and_(pc.greater_equal(millis, _ARROW_TZ_LIMIT_MS), pc.less(millis, _PY_DATETIME_LIMIT_MS)), False
    )
    if not pc.any(late).as_py():
        return wall
    tz = zoneinfo.ZoneInfo(zone.arrow_tz)
    fixed = []
    for ms in pc.filter(millis, late).to_pylist():
        utc = (_EPOCH + dt.timedelta(milliseconds=ms)).replace(tzinfo=dt.UTC)
        offset = utc.astimezone(tz).utcoffset() or dt.timedelta(0)
        fixed.append(ms + offset // dt.timedelta(milliseconds=1))
    return pc.replace_with_mask(wall, late, pa.array(fixed, pa.int64()).cast(pa.timestamp("ms")))


def to_instants(local: np.ndarray, zone: JodaZone, field: str) -> np.ndarray:
    """Wall-clock millis in ``zone`` to epoch millis: gaps are errors, overlaps take the earlier instant."""
    if not len(local):
        return local
    naive = pa.array(local, pa.int64()).cast(pa.timestamp("ms"))
    try:
        zoned = pc.assume_timezone(naive, timezone=zone.arrow_tz, ambiguous="earliest", nonexistent="raise")
    except pa.ArrowInvalid as exc:
        raise InvalidInputError(
            f"field {field!r}: a parsed date-time does not exist in zone {zone.joda_id}: {exc}"
        ) from exc
    out = np.asarray(zoned.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64).copy()
    if is_region(zone):
        late = (local >= _ARROW_TZ_LIMIT_MS - _MS_PER_DAY) & (local < _PY_DATETIME_LIMIT_MS)
        if late.any():
            tz = zoneinfo.ZoneInfo(zone.arrow_tz)
            out[late] = [_py_instant(int(ms), tz, zone, field) for ms in local[late]]
    return out


def _py_instant(local_ms: int, tz: zoneinfo.ZoneInfo, zone: JodaZone, field: str) -> int:
    wall = _EPOCH + dt.timedelta(milliseconds=local_ms)
    offset = wall.replace(tzinfo=tz, fold=0).utcoffset() or dt.timedelta(0)
    instant = local_ms - offset // dt.timedelta(milliseconds=1)
    back = (_EPOCH + dt.timedelta(milliseconds=instant)).replace(tzinfo=dt.UTC).astimezone(tz)
    if back.replace(tzinfo=None) != wall:
        raise InvalidInputError(
            f"field {field!r}: a parsed date-time {wall} does not exist in zone {zone.joda_id}"
        )
    return instant
