"""Java ``.properties`` text, as ``java.util.Properties`` loads and stores it.

Hudi keeps ``hoodie.properties`` in this format: ``#`` comment lines, then ``key=value`` lines
where ``:``, ``=``, ``#``, ``!`` and backslashes are escaped, and characters outside printable
ASCII are written as ``\\uXXXX`` escapes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

_LOAD_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_STORE_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}
_WHITESPACE = " \t\f"


def _ends_with_continuation(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _logical_lines(text: str) -> list[str]:
    """Natural lines joined across continuations; comments and blank lines dropped."""
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(_WHITESPACE)
        if pending is None and (not line or line[0] in "#!"):
            continue
        if _ends_with_continuation(line):
            pending = (pending or "") + line[:-1]
            continue
        out.append((pending or "") + line)
        pending = None
    if pending:
        out.append(pending)
    return out


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
        elif s[i + 1] == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uXXXX escape {s[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_LOAD_ESCAPES.get(s[i + 1], s[i + 1]))
            i += 2
    # \uXXXX escapes of surrogate pairs come out as two code units; recombine them.
    return "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line) and line[i] not in "=:" and line[i] not in _WHITESPACE:
        i += 2 if line[i] == "\\" else 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse ``.properties`` text into a dict (a later duplicate key wins, as in Java)."""
    return dict(_split_key_value(line) for line in _logical_lines(text))


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    for idx, c in enumerate(s):
        if c == " ":
            out.append("\\ " if is_key or idx == 0 else " ")
        elif c in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[c])
        elif c in "=:#!\\":
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            units = c.encode("utf-16-be").hex().upper()
            out.extend("\\u" + units[j : j + 4] for j in range(0, len(units), 4))
        else:
            out.append(c)
    return "".join(out)


def java_date_string(now: dt.datetime) -> str:
    """``java.util.Date#toString`` rendered in UTC: ``EEE MMM dd HH:mm:ss zzz yyyy``."""
    return now.astimezone(dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")


def format_properties(props: Mapping[str, str], comment: str, now: dt.datetime | None = None) -> str:
    """Render ``props`` as ``Properties.store`` does: the comment, a date comment, sorted entries."""
    now = now or dt.datetime.now(dt.UTC)
    lines = [f"#{comment}", f"#{java_date_string(now)}"]
    lines.extend(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in sorted(props.items()))
    return "\n".join(lines) + "\n"
