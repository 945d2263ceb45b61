"""Hashing record keys for bloom filters, vectorized over a batch of keys with numpy.

A key is hashed as its UTF-8 bytes by ``numHashes`` chained 32-bit hashes, ``h_0 = H(key, seed 0)``,
``h_i = H(key, seed h_(i-1))``; position ``i`` is ``|h_i|`` modulo the vector size (Java's signed
remainder, then absolute value). ``H`` is hash type 1, Hadoop's MurmurHash2 port (which Hudi always
writes), or hash type 0, Jenkins' lookup3 ``hashlittle`` (Hudi's ``org.apache.hudi.common.util.hash``).
One pass per hash round goes over all keys. The filters themselves are in :mod:`hoodie.bloom`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.errors import InvalidInputError

HASH_JENKINS = 0
HASH_MURMUR = 1

U32 = npt.NDArray[np.uint32]
Bits = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]
Keys: TypeAlias = Iterable[str] | pa.Array | pa.ChunkedArray

_MURMUR_M = np.uint32(0x5BD1E995)
_JENKINS_INIT = np.uint32(0xDEADBEEF)
_ONE = np.uint32(1)
_ZERO = np.uint32(0)
_T = TypeVar("_T", bound=np.generic)

# ---------------------------------------------------------------- key batches


PARALLEL_SLICE = 262_144  # keys hashed per thread-pool task


@dataclass(slots=True)
class KeyBatch:
    """A batch of keys as UTF-8 bytes: one zero-padded row per key, width a multiple of 12."""

    matrix: npt.NDArray[np.uint8]
    lengths: Ints

    def __len__(self) -> int:
        return len(self.lengths)


def as_arrow(keys: Keys) -> list[pa.Array]:
    if isinstance(keys, pa.ChunkedArray):
        return list(keys.chunks)
    if isinstance(keys, pa.Array):
        return [keys]
    if isinstance(keys, str):
        raise InvalidInputError(f"bloom filter keys must be an iterable of str, got the str {keys!r}")
    items = keys if isinstance(keys, list) else list(keys)
    try:
        converted = pa.array(items, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise InvalidInputError(f"bloom filter keys must all be str: {exc}") from exc
    # pyarrow splits input too large for 32-bit offsets into chunks.
    return list(converted.chunks) if isinstance(converted, pa.ChunkedArray) else [converted]


def encode_keys(arr: pa.Array) -> KeyBatch:
    kind = arr.type
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        offset_type: np.dtype[np.signedinteger[Any]] = np.dtype(np.int32)
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        offset_type = np.dtype(np.int64)
    else:
        try:
            arr = arr.cast(pa.large_string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidInputError(f"bloom filter keys must be strings, got Arrow type {kind}") from exc
        offset_type = np.dtype(np.int64)
    if arr.null_count:
        first = int(np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False))[0])
        raise InvalidInputError(f"bloom filter key #{first} is null")
    n = len(arr)
    if n == 0:
        return KeyBatch(np.zeros((0, 12), dtype=np.uint8), np.zeros(0, dtype=np.int64))
    buffers = arr.buffers()
    offsets = np.frombuffer(
        buffers[1], dtype=offset_type, count=n + 1, offset=arr.offset * offset_type.itemsize
    ).astype(np.int64)
    lengths = np.diff(offsets)
    first_byte, end_byte = int(offsets[0]), int(offsets[-1])
    total = end_byte - first_byte
    data = (
        np.frombuffer(buffers[2], dtype=np.uint8, count=total, offset=first_byte)
        if total
        else np.zeros(0, dtype=np.uint8)
    )
    longest = int(lengths.max())
    width = max(12, -(-longest // 12) * 12)
    matrix = np.zeros((n, width), dtype=np.uint8)
    if longest and int(lengths.min()) == longest:
        matrix[:, :longest] = data.reshape(n, longest)
    elif total:
        shift = np.arange(n, dtype=np.int64) * width - (offsets[:-1] - first_byte)
        matrix.reshape(-1)[np.arange(total, dtype=np.int64) + np.repeat(shift, lengths)] = data
    return KeyBatch(matrix, lengths)


# ---------------------------------------------------------------- hash streams


def _rotl(x: U32, k: int) -> U32:
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _prefix_counts(blocks: Ints) -> list[int]:
    """For keys sorted by block count (descending): how many keys have more than i blocks."""
    if not len(blocks):
        return []
    top = int(blocks[0])
    if top == int(blocks[-1]):
        return [len(blocks)] * top
    ascending = blocks[::-1]
    return [len(blocks) - int(np.searchsorted(ascending, i, side="right")) for i in range(top)]


class HashStream(ABC):
    """Chained hashes of a batch of keys, one round per :meth:`next_positions` call.

    Keys are kept sorted by block count (descending) so that each block step works on a prefix;
    ``order[j]`` is the index in the caller's batch of internal slot ``j``.
    """

    def __init__(self, batch: KeyBatch, blocks: Ints, vector_size: int) -> None:
        self._sorted = len(blocks) == 0 or int(blocks.min()) == int(blocks.max())
        if self._sorted:
            self.order: Ints = np.arange(len(blocks), dtype=np.int64)
        else:
            self.order = np.argsort(-blocks, kind="stable").astype(np.int64)
        self._blocks = self._arrange(blocks)
        self._counts = _prefix_counts(self._blocks)
        self._vector_size = np.uint32(vector_size)
        self._seed: U32 = np.zeros(len(batch), dtype=np.uint32)
        self._lengths: U32 = self._arrange(batch.lengths).astype(np.uint32)

    def _arrange(self, values: npt.NDArray[_T]) -> npt.NDArray[_T]:
        """``values`` (indexed like the caller's batch) in slot order."""
        return values if self._sorted else values[self.order]

    def next_positions(self) -> U32:
        """Advance one hash round; the bit position of every slot for this round."""
        h = self._round(self._seed)
        self._seed = h
        # Java: Math.abs(h % size) = |h| mod size; |int32| as uint32 is exact even for -2**31. The
        # remainder as |h| - (|h| // size) * size: numpy divides by a scalar with SIMD, not ``%``.
        magnitude = np.abs(h.view(np.int32)).view(np.uint32)
        multiple = magnitude // self._vector_size
        multiple *= self._vector_size
        magnitude -= multiple
        return magnitude

    def keep(self, mask: Bits) -> None:
        """Drop the slots where ``mask`` is false (keeps the order, hence the sort)."""
        self.order = self.order[mask]
        self._blocks = self._blocks[mask]
        self._counts = _prefix_counts(self._blocks)
        self._seed = self._seed[mask]
        self._lengths = self._lengths[mask]
        self._keep(mask)

    @abstractmethod
    def _round(self, seed: U32) -> U32: ...

    @abstractmethod
    def _keep(self, mask: Bits) -> None: ...


class _MurmurStream(HashStream):
    """Hadoop's MurmurHash2: 4-byte little-endian blocks, then a tail of sign-extended bytes.

    The tail differs from the C original: with ``left`` trailing bytes ``t0..``, the port XORs
    ``t0 << 8*(left-1)``, ..., ``t(left-1)`` (first tail byte highest), each byte as a signed int.
    """

    def __init__(self, batch: KeyBatch, vector_size: int) -> None:
        super().__init__(batch, batch.lengths >> 2, vector_size)
        words = self._arrange(batch.matrix.view(np.dtype("<u4")))
        # Block words are mixed independently of the seed, so do that once for all rounds.
        mixed = np.array(words[:, : len(self._counts)].T, dtype=np.uint32, order="C")
        mixed *= _MURMUR_M
        mixed ^= mixed >> np.uint32(24)
        mixed *= _MURMUR_M
        self._mixed: U32 = mixed
        lengths = self._arrange(batch.lengths)
        left = (lengths & 3).astype(np.uint32)
        # The tail's bytes t0.. are the low bytes of the word at index length // 4 (zero padding
        # after the key; a key without a tail reads a word it does not use, clamped into the row).
        width = words.shape[1]
        at = np.minimum(lengths >> 2, width - 1) + np.arange(len(lengths), dtype=np.int64) * width
        word = np.ascontiguousarray(words).reshape(-1)[at]
        tail = np.zeros(len(lengths), dtype=np.uint32)
        for k in (0, 1, 2):  # byte t_k, sign-extended, goes to bits 8 * (left - 1 - k)
            byte = ((word >> np.uint32(8 * k)) & np.uint32(0xFF)).astype(np.int32)
            signed = ((byte ^ 0x80) - 0x80).view(np.uint32)
            has = left > k
            shift = np.where(has, (left - np.uint32(1 + k)) * np.uint32(8), _ZERO)
            tail ^= np.where(has, signed << shift, _ZERO)
        self._tail: U32 = tail
        self._tail_mul: U32 = np.where(left != 0, _MURMUR_M, _ONE).astype(np.uint32)

    def _round(self, seed: U32) -> U32:
        h = seed ^ self._lengths
        for i, count in enumerate(self._counts):
            part = h[:count]
            part *= _MURMUR_M
            part ^= self._mixed[i, :count]
        h ^= self._tail
        h *= self._tail_mul
        h ^= h >> np.uint32(13)
        h *= _MURMUR_M
        h ^= h >> np.uint32(15)
        return h

    def _keep(self, mask: Bits) -> None:
        self._mixed = np.ascontiguousarray(self._mixed[: len(self._counts), mask])
        self._tail = self._tail[mask]
        self._tail_mul = self._tail_mul[mask]


def _jenkins_mix(a: U32, b: U32, c: U32) -> None:
    """lookup3 ``mix`` in place: per step ``x -= y; x ^= rotl(y, k); y += z``."""
    for x, y, z, k in ((a, c, b, 4), (b, a, c, 6), (c, b, a, 8), (a, c, b, 16), (b, a, c, 19), (c, b, a, 4)):
        np.subtract(x, y, out=x)
        np.bitwise_xor(x, _rotl(y, k), out=x)
        np.add(y, z, out=y)


def _jenkins_final(a: U32, b: U32, c: U32) -> None:
    """lookup3 ``final`` in place: per step ``x ^= y; x -= rotl(y, k)``; the result is ``c``."""
    for x, y, k in ((c, b, 14), (a, c, 11), (b, a, 25), (c, b, 16), (a, c, 4), (b, a, 14), (c, b, 24)):
        np.bitwise_xor(x, y, out=x)
        np.subtract(x, _rotl(y, k), out=x)


class _JenkinsStream(HashStream):
    """Bob Jenkins' lookup3 ``hashlittle``: 12-byte blocks; the last 1..12 bytes are the tail."""

    def __init__(self, batch: KeyBatch, vector_size: int) -> None:
        super().__init__(batch, np.maximum((batch.lengths - 1) // 12, 0), vector_size)
        words = self._arrange(batch.matrix.view(np.dtype("<u4")))
        self._words: U32 = np.array(words[:, : 3 * len(self._counts)].T, dtype=np.uint32, order="C")
        first = (3 * self._blocks)[:, None]
        self._tail: U32 = np.stack(
            [np.take_along_axis(words, first + j, axis=1)[:, 0] for j in range(3)]
        ).astype(np.uint32)

    def _round(self, seed: U32) -> U32:
        a = seed + self._lengths + _JENKINS_INIT
        b = a.copy()
        c = a.copy()
        for i, count in enumerate(self._counts):
            a_part, b_part, c_part = a[:count], b[:count], c[:count]
            a_part += self._words[3 * i, :count]
            b_part += self._words[3 * i + 1, :count]
            c_part += self._words[3 * i + 2, :count]
            _jenkins_mix(a_part, b_part, c_part)
        a += self._tail[0]
        b += self._tail[1]
        c += self._tail[2]
        _jenkins_final(a, b, c)
        return c

    def _keep(self, mask: Bits) -> None:
        self._words = np.ascontiguousarray(self._words[: 3 * len(self._counts), mask])
        self._tail = np.ascontiguousarray(self._tail[:, mask])


def hash_stream(batch: KeyBatch, hash_type: int, vector_size: int) -> HashStream:
    if hash_type == HASH_MURMUR:
        return _MurmurStream(batch, vector_size)
    return _JenkinsStream(batch, vector_size)


def hash_positions(keys: Keys, num_hashes: int, vector_size: int, hash_type: int) -> Ints:
    """Every key's bit positions, shape (keys, num_hashes), in input order (a test hook)."""
    batch = encode_keys(pa.concat_arrays(as_arrow(keys)))
    stream = hash_stream(batch, hash_type, vector_size)
    out = np.zeros((len(batch), num_hashes), dtype=np.int64)
    for i in range(num_hashes):
        out[stream.order, i] = stream.next_positions()
    return out
