"""Record keys on the spill path: a fast 64-bit hash that buckets them, and the sorted index a base
file's keys are looked up in (:mod:`hoodie.read.spill`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

_MIX = np.uint64(0x9E3779B97F4A7C15)


def key_hashes(keys: pa.Array) -> npt.NDArray[np.uint64]:
    """A 64-bit hash per key of its UTF-8 bytes, read eight at a time (little-endian words)."""
    arr = keys.cast(pa.string())
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset : arr.offset + n + 1]
    offsets = offsets.astype(np.int64)
    lo, hi = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
    padded = np.zeros(hi - lo + 8, dtype=np.uint8)  # a word read at a key's end stays in bounds
    data_buf = arr.buffers()[2]
    if data_buf is not None and hi > lo:
        padded[: hi - lo] = np.frombuffer(data_buf, dtype=np.uint8, count=hi - lo, offset=lo)
    # Every byte position as the start of an (unaligned) 64-bit word.
    words = np.ndarray((hi - lo + 1,), dtype="<u8", buffer=padded, strides=(1,))
    starts = offsets[:-1] - lo
    lengths = np.diff(offsets)
    h = lengths.astype(np.uint64) * _MIX
    active = np.arange(n, dtype=np.int64)  # keys with bytes left at word ``k``
    k = 0
    with np.errstate(over="ignore"):
        while active.size:
            left = lengths[active] - 8 * k
            w = words[starts[active] + 8 * k]
            short = left < 8
            if short.any():  # the key's last word: only its own bytes
                w[short] &= (np.uint64(1) << (left[short].astype(np.uint64) * np.uint64(8))) - np.uint64(1)
            x = h[active] ^ w
            x *= _MIX
            x ^= x >> np.uint64(32)
            h[active] = x
            active = active[left > 8]
            k += 1
        h ^= h >> np.uint64(31)  # splitmix64's finalizer
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(29)
    return h


def bucket_of(keys: pa.Array, buckets: int) -> npt.NDArray[np.int64]:
    """A bucket in ``[0, buckets)`` per key, from :func:`key_hashes`."""
    if buckets == 1:
        return np.zeros(len(keys), dtype=np.int64)
    return np.asarray(key_hashes(keys) % np.uint64(buckets), dtype=np.int64)


class KeyIndex:
    """Record keys -> their code among all buckets' merged keys (-1: no log entry).

    The log keys are sorted once; each base batch is then a binary search in C++ (no hash table
    rebuilt per batch), and a found position is confirmed by comparing the keys themselves."""

    def __init__(self, keys: list[pa.Array], code_type: type[np.signedinteger[Any]]) -> None:
        chunked = pa.chunked_array(keys, pa.string())  # codes: the keys in bucket order
        order = pc.sort_indices(chunked)
        self.sorted = chunked.take(order).combine_chunks()
        del chunked
        self.code_of = order.to_numpy().astype(code_type)  # sorted position -> code

    def __call__(self, keys: pa.Array) -> npt.NDArray[np.int64]:
        n = len(self.sorted)
        if not n or not len(keys):
            return np.full(len(keys), -1, dtype=np.int64)
        found_at = pc.fill_null(pc.search_sorted(self.sorted, keys), 0)  # a null key matches nothing
        pos = np.asarray(found_at.to_numpy(), dtype=np.int64)
        np.minimum(pos, n - 1, out=pos)
        found = _true(pc.equal(self.sorted.take(pa.array(pos)), keys))
        return np.where(found, self.code_of[pos], -1)


def _true(values: pa.Array) -> npt.NDArray[np.bool_]:
    return np.asarray(pc.fill_null(values, False).to_numpy(zero_copy_only=False), dtype=bool)
