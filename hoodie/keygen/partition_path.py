"""Partition paths as Hudi writes them: escaping, Hive style, the default partition, parsing back.

A partition path is one segment per partition field, joined with ``/``. Each segment is the
field's value as a string, optionally ``%XX``-escaped (``hoodie.datasource.write.partitionpath.urlencode``)
and optionally prefixed with ``<field>=`` (``hoodie.datasource.write.hive_style_partitioning``).
A null or empty value becomes ``__HIVE_DEFAULT_PARTITION__`` (Hudi 0.12 and later; older writers
used ``default``, which readers still recognise). Non-partitioned tables use the empty path.

The escaped set is Hive's: every ASCII control character (0x00-0x1F), DEL (0x7F) and
``" # % ' * / : = ? \\ { [ ] ^``. Each such character becomes ``%`` plus two upper-case hex
digits; nothing else (not even non-ASCII text) is touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidInputError

DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"
"""The segment written for a null or empty partition value (Hudi 0.12+)."""

DEPRECATED_DEFAULT_PARTITION_PATH = "default"
"""The segment pre-0.12 writers used for a null or empty partition value; still read as null."""

PARTITION_PATH_SEPARATOR = "/"
HIVE_STYLE_SEPARATOR = "="
NON_PARTITIONED_PATH = ""

ESCAPED_CHARS: frozenset[str] = frozenset([chr(c) for c in range(0x20)] + list("\"#%'*/:=?\\\x7f{[]^"))
"""Characters that partition-path escaping turns into ``%XX``."""

# '%' must be rewritten before any other character, or the '%' of earlier escapes would be escaped again.
_ESCAPE_ORDER: tuple[str, ...] = ("%", *sorted(ESCAPED_CHARS - {"%"}))
_ESCAPED_CLASS = "[" + "".join(f"\\x{ord(c):02x}" for c in sorted(ESCAPED_CHARS)) + "]"
_ESCAPED_RE = re.compile(_ESCAPED_CLASS)
# Hudi decodes '%' followed by two characters that Java's Integer.parseInt(s, 16) accepts as a
# non-negative number: two hex digits, or '+' and one hex digit.
_UNESCAPE_RE = re.compile(r"%([0-9A-Fa-f]{2}|\+[0-9A-Fa-f])")


def _escape_char(c: str) -> str:
    return f"%{ord(c):02X}"


def escape_path_name(value: str) -> str:
    """Escape one partition value; the empty string becomes :data:`DEFAULT_PARTITION_PATH`."""
    if not value:
        return DEFAULT_PARTITION_PATH
    return _ESCAPED_RE.sub(lambda m: _escape_char(m.group(0)), value)


def unescape_path_name(path: str) -> str:
    """Undo :func:`escape_path_name` (``%XX`` back to the character; malformed escapes stay as they are)."""
    return _UNESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), path)


def escape_path_names(values: pa.Array) -> pa.Array:
    """Vectorized :func:`escape_path_name` over a string array, except that empty strings stay empty.

    Nulls stay null. Rows without a character to escape are passed through untouched; only the
    rows that need it go through the replacement passes, one pass per distinct escaped character.
    """
    values = _as_string_array(values)
    needs = pc.fill_null(pc.match_substring_regex(values, _ESCAPED_CLASS), False)
    if not pc.any(needs).as_py():
        return values
    subset = pc.filter(values, needs)
    data = subset.buffers()[2]
    present = {chr(b) for b in set(data.to_pybytes())} if data is not None else set()
    escaped: pa.Array = subset
    for c in _ESCAPE_ORDER:
        if c in present:
            escaped = pc.replace_substring(escaped, c, _escape_char(c))
    return _scatter(values, needs, escaped)


def is_default_partition_value(value: str) -> bool:
    """Whether a segment (with or without a ``field=`` prefix) is a null/empty-value marker."""
    _, sep, rest = value.partition(HIVE_STYLE_SEPARATOR)
    bare = rest if sep else value
    return bare in (DEFAULT_PARTITION_PATH, DEPRECATED_DEFAULT_PARTITION_PATH)


def partition_segment(field: str, value: str | None, *, hive_style: bool, url_encode: bool) -> str:
    """The path segment for one field's string value, as Hudi's simple and complex generators build it."""
    if value is None or value == "":
        text = DEFAULT_PARTITION_PATH
    else:
        text = escape_path_name(value) if url_encode else value
    return f"{field}{HIVE_STYLE_SEPARATOR}{text}" if hive_style else text


def format_partition_path(
    fields: Sequence[str],
    values: Sequence[str | None],
    *,
    hive_style: bool,
    url_encode: bool,
) -> str:
    """Join the segments of one record's partition values (no fields: the non-partitioned path ``""``)."""
    if len(fields) != len(values):
        raise InvalidInputError(f"{len(values)} partition values given for partition fields {list(fields)}")
    return PARTITION_PATH_SEPARATOR.join(
        partition_segment(f, v, hive_style=hive_style, url_encode=url_encode)
        for f, v in zip(fields, values, strict=True)
    )


def partition_segments(
    field: str, values: pa.Array, *, hive_style: bool, url_encode: bool, default_for_empty: bool = True
) -> pa.Array:
    """Vectorized :func:`partition_segment` over a string array of one field's values.

    With ``default_for_empty=False`` null and empty values are not replaced (the timestamp-based
    generator never produces them); everything else is the same.
    """
    values = _as_string_array(values)
    text = escape_path_names(values) if url_encode else values
    if default_for_empty:
        missing = pc.fill_null(pc.equal(values, ""), True)
        text = pc.if_else(missing, pa.scalar(DEFAULT_PARTITION_PATH), text)
    if hive_style:
        text = pc.binary_join_element_wise(pa.scalar(field + HIVE_STYLE_SEPARATOR), text, "")
    return text


def join_segments(segments: Sequence[pa.Array], length: int) -> pa.Array:
    """Join per-field segment arrays with ``/``; no segments gives ``length`` empty paths."""
    if not segments:
        return pa.repeat(pa.scalar(NON_PARTITIONED_PATH), length)
    if len(segments) == 1:
        return segments[0]
    return pc.binary_join_element_wise(*segments, PARTITION_PATH_SEPARATOR)


def parse_partition_path(
    path: str,
    fields: Sequence[str],
    *,
    hive_style: bool,
    url_encoded: bool,
) -> dict[str, str | None]:
    """The partition values a partition path encodes, keyed by field; default markers become ``None``.

    With a single field the whole path is its value (a timestamp-based field formatted as
    ``yyyy/MM/dd`` spans several directories). With several fields the path must have one segment
    per field. Hive-style segments may omit their ``field=`` prefix (Hudi readers accept both).
    """
    if not fields:
        if path not in ("", "."):
            raise InvalidInputError(f"partition path {path!r} given for a non-partitioned table")
        return {}
    segments = [path] if len(fields) == 1 else path.split(PARTITION_PATH_SEPARATOR)
    if len(segments) != len(fields):
        raise InvalidInputError(
            f"partition path {path!r} has {len(segments)} segments, expected one per field of {list(fields)}"
        )
    out: dict[str, str | None] = {}
    for field, segment in zip(fields, segments, strict=True):
        prefix = field + HIVE_STYLE_SEPARATOR
        value = segment[len(prefix) :] if hive_style and segment.startswith(prefix) else segment
        if value in (DEFAULT_PARTITION_PATH, DEPRECATED_DEFAULT_PARTITION_PATH):
            out[field] = None
        else:
            out[field] = unescape_path_name(value) if url_encoded else value
    return out


def _as_string_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not pa.types.is_string(values.type):
        values = values.cast(pa.string())
    return values


def _scatter(base: pa.Array, mask: pa.Array, replacement: pa.Array) -> pa.Array:
    """``base`` with the rows selected by ``mask`` replaced, in order, by ``replacement``."""
    return pc.replace_with_mask(base, mask, replacement)
