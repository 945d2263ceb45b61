"""Java's ``hashCode`` of strings and lists of strings, which Hudi's indexes place keys by
(``BucketIdentifier`` for bucket tables, ``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``
for the metadata table's file groups)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

_MASK32 = 0xFFFFFFFF
_POWERS_OF_31: list[int] = [1]


def powers_of_31(n: int) -> list[int]:
    """31**(n-1), ..., 31**0 modulo 2**32 (grown on demand): the weights of ``String.hashCode``."""
    while len(_POWERS_OF_31) < n:
        _POWERS_OF_31.append((_POWERS_OF_31[-1] * 31) & _MASK32)
    return _POWERS_OF_31[n - 1 :: -1] if n else []


def _signed32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, as a signed int32.

    That is the sum of ``c[i] * 31**(n-1-i)`` modulo 2**32, computed in C over the code units (a
    character outside the BMP is two units)."""
    if text.isascii():
        units: Iterable[int] = text.encode("ascii")
        n = len(text)
    else:
        data = text.encode("utf-16-be")
        n = len(data) // 2
        units = ((data[i] << 8) | data[i + 1] for i in range(0, len(data), 2))
    return _signed32(sum(map(operator.mul, units, powers_of_31(n))))


def java_list_hash(items: Sequence[str | None]) -> int:
    """Java's ``List.hashCode`` of a list of strings (``31*h + element hash`` from 1; null is 0)."""
    h = 1
    for item in items:
        h = (31 * h + (0 if item is None else java_string_hash(item))) & _MASK32
    return _signed32(h)
