"""Java's ``hashCode`` of strings and lists of strings, which Hudi's indexes place keys by
(``BucketIdentifier`` for bucket tables, ``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``
for the metadata table's file groups)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

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


def java_string_hashes(texts: Sequence[str]) -> npt.NDArray[np.uint32]:
    """``String.hashCode`` of many strings at once, as unsigned 32-bit values.

    Horner's rule (``h = 31 * h + unit``) column by column over the strings of one length at a
    time; uint32 arithmetic wraps as Java's int does.
    """
    units = np.frombuffer("".join(texts).encode("utf-16-le"), dtype="<u2")
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    if units.size != int(lengths.sum()):  # characters outside the BMP take two code units
        utf16 = (len(t.encode("utf-16-le")) // 2 for t in texts)
        lengths = np.fromiter(utf16, dtype=np.int64, count=len(texts))
    starts = np.cumsum(lengths) - lengths
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = (np.flatnonzero(np.diff(sorted_lengths)) + 1).tolist()
    hashes = np.zeros(len(texts), dtype=np.uint32)
    for first, end in zip([0, *bounds], [*bounds, len(texts)], strict=True):
        width = int(sorted_lengths[first]) if end > first else 0
        members = order[first:end]
        block = units[starts[members][:, None] + np.arange(width)].astype(np.uint32)
        h = np.zeros(len(members), dtype=np.uint32)
        for column in range(width):
            h = h * np.uint32(31) + block[:, column]
        hashes[members] = h
    return hashes
