"""Record-key bloom filters, byte-compatible with the ones Apache Hudi writes.

Hudi keeps one filter per base file: in the Parquet footer under :data:`BLOOM_FILTER_FOOTER_KEY`
(its type under :data:`BLOOM_TYPE_FOOTER_KEY`), in a base HFile's ``bloomFilter`` meta block, and
in the metadata table's ``bloom_filters`` partition (there as the UTF-8 bytes of the same text).
The text is standard padded base64 of these big-endian bytes::

    header      int32 -1 (format version) | int32 numHashes | int8 hashType | int32 vectorSize
    bit vector  ceil(vectorSize / 8) bytes; bit i is byte i // 8, mask 1 << (i % 8)
    SIMPLE      header | bit vector
    DYNAMIC_V0  header | int32 rowCapacity | int32 keysInLastRow | int32 rowCount
                | rowCount x (header | bit vector)

A positive first int32 is the older, unversioned header: it is numHashes, and the hash is Jenkins.

A key is hashed as its UTF-8 bytes. Its positions come from ``numHashes`` chained 32-bit hashes,
``h_0 = H(key, seed 0)``, ``h_i = H(key, seed h_(i-1))``; position ``i`` is ``|h_i|`` modulo the
vector size (Java's signed remainder, then absolute value). ``H`` is hash type 1, Hadoop's
MurmurHash2 port (which Hudi always writes), or hash type 0, Jenkins' lookup3 ``hashlittle``.

Sizing from (n entries, false-positive rate p): ``bits = ceil(n * (-ln p / ln(2)^2))`` and
``hashes = ceil(ln 2 * bits / n)``; Hudi's defaults (60000, 1e-9) give 2587966 bits, 30 hashes.

DYNAMIC_V0 is a list of rows sharing those parameters. Keys fill the last row until it holds
``rowCapacity`` keys, then a fresh row is appended while ``rowCount * rowCapacity < maxEntries``.
Once that bound is hit the next key goes to row 0 and later keys go round-robin over the rows
starting again at row 0, so the false-positive rate is no longer guaranteed. ``maxEntries`` is not
serialized: a deserialized filter never grows new rows. A key may be present if any row has all of
its positions set.

All hashing is vectorized with numpy over a batch of keys: one pass per hash round over all keys.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.errors import CorruptFileError, InvalidInputError

BLOOM_FILTER_FOOTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_FOOTER_KEY = "hoodie_bloom_filter_type_code"


class BloomFilterTypeCode(StrEnum):
    """The value of footer key ``hoodie_bloom_filter_type_code``."""

    SIMPLE = "SIMPLE"
    DYNAMIC_V0 = "DYNAMIC_V0"


_U32 = npt.NDArray[np.uint32]
_Bits = npt.NDArray[np.bool_]
_Ints = npt.NDArray[np.int64]

_FORMAT_VERSION = -1
_HASH_JENKINS = 0
_HASH_MURMUR = 1
_HEADER = struct.Struct(">iibi")
_DYNAMIC_FIELDS = struct.Struct(">iii")
_INT32_MAX = 2**31 - 1
# No (entries, fpp) sizing yields more than ~1100 hash rounds; a larger count is a corrupt header.
_MAX_HASHES = 1 << 16
_LN2 = math.log(2)
_LN2_SQUARED = _LN2 * _LN2

_MURMUR_M = np.uint32(0x5BD1E995)
_JENKINS_INIT = np.uint32(0xDEADBEEF)
_ONE = np.uint32(1)
_ZERO = np.uint32(0)

_Keys: TypeAlias = Iterable[str] | pa.Array | pa.ChunkedArray
_T = TypeVar("_T", bound=np.generic)


# ---------------------------------------------------------------- key batches


_PARALLEL_SLICE = 262_144  # keys hashed per thread-pool task


@dataclass(slots=True)
class _KeyBatch:
    """A batch of keys as UTF-8 bytes: one zero-padded row per key, width a multiple of 12."""

    matrix: npt.NDArray[np.uint8]
    lengths: _Ints

    def __len__(self) -> int:
        return len(self.lengths)


def _as_arrow(keys: _Keys) -> list[pa.Array]:
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


def _encode(arr: pa.Array) -> _KeyBatch:
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
        return _KeyBatch(np.zeros((0, 12), dtype=np.uint8), np.zeros(0, dtype=np.int64))
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
    return _KeyBatch(matrix, lengths)


# ---------------------------------------------------------------- hash streams


def _rotl(x: _U32, k: int) -> _U32:
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


def _prefix_counts(blocks: _Ints) -> list[int]:
    """For keys sorted by block count (descending): how many keys have more than i blocks."""
    if not len(blocks):
        return []
    top = int(blocks[0])
    if top == int(blocks[-1]):
        return [len(blocks)] * top
    ascending = blocks[::-1]
    return [len(blocks) - int(np.searchsorted(ascending, i, side="right")) for i in range(top)]


class _HashStream(ABC):
    """Chained hashes of a batch of keys, one round per :meth:`next_positions` call.

    Keys are kept sorted by block count (descending) so that each block step works on a prefix;
    ``order[j]`` is the index in the caller's batch of internal slot ``j``.
    """

    def __init__(self, batch: _KeyBatch, blocks: _Ints, vector_size: int) -> None:
        self._sorted = len(blocks) == 0 or int(blocks.min()) == int(blocks.max())
        if self._sorted:
            self.order: _Ints = np.arange(len(blocks), dtype=np.int64)
        else:
            self.order = np.argsort(-blocks, kind="stable").astype(np.int64)
        self._blocks = self._arrange(blocks)
        self._counts = _prefix_counts(self._blocks)
        self._vector_size = np.uint32(vector_size)
        self._seed: _U32 = np.zeros(len(batch), dtype=np.uint32)
        self._lengths: _U32 = self._arrange(batch.lengths).astype(np.uint32)

    def _arrange(self, values: npt.NDArray[_T]) -> npt.NDArray[_T]:
        """``values`` (indexed like the caller's batch) in slot order."""
        return values if self._sorted else values[self.order]

    def next_positions(self) -> _U32:
        """Advance one hash round; the bit position of every slot for this round."""
        h = self._round(self._seed)
        self._seed = h
        # Java: Math.abs(h % size). |int32| as uint32 is exact even for -2**31.
        return np.abs(h.view(np.int32)).view(np.uint32) % self._vector_size

    def keep(self, mask: _Bits) -> None:
        """Drop the slots where ``mask`` is false (keeps the order, hence the sort)."""
        self.order = self.order[mask]
        self._blocks = self._blocks[mask]
        self._counts = _prefix_counts(self._blocks)
        self._seed = self._seed[mask]
        self._lengths = self._lengths[mask]
        self._keep(mask)

    @abstractmethod
    def _round(self, seed: _U32) -> _U32: ...

    @abstractmethod
    def _keep(self, mask: _Bits) -> None: ...


class _MurmurStream(_HashStream):
    """Hadoop's MurmurHash2: 4-byte little-endian blocks, then a tail of sign-extended bytes.

    The tail differs from the C original: with ``left`` trailing bytes ``t0..``, the port XORs
    ``t0 << 8*(left-1)``, ..., ``t(left-1)`` (first tail byte highest), each byte as a signed int.
    """

    def __init__(self, batch: _KeyBatch, vector_size: int) -> None:
        super().__init__(batch, batch.lengths >> 2, vector_size)
        words = self._arrange(batch.matrix.view(np.dtype("<u4")))
        # Block words are mixed independently of the seed, so do that once for all rounds.
        mixed = np.array(words[:, : len(self._counts)].T, dtype=np.uint32, order="C")
        mixed *= _MURMUR_M
        mixed ^= mixed >> np.uint32(24)
        mixed *= _MURMUR_M
        self._mixed: _U32 = mixed
        lengths = self._arrange(batch.lengths)
        left = lengths & 3
        tail = np.zeros(len(lengths), dtype=np.uint32)
        for back in (1, 2, 3):
            byte = batch.matrix[self.order, np.maximum(lengths - back, 0)]
            signed = byte.view(np.int8).astype(np.int32).view(np.uint32)
            tail ^= np.where(left >= back, signed << np.uint32(8 * (back - 1)), _ZERO)
        self._tail: _U32 = tail
        self._tail_mul: _U32 = np.where(left != 0, _MURMUR_M, _ONE).astype(np.uint32)

    def _round(self, seed: _U32) -> _U32:
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

    def _keep(self, mask: _Bits) -> None:
        self._mixed = np.ascontiguousarray(self._mixed[: len(self._counts), mask])
        self._tail = self._tail[mask]
        self._tail_mul = self._tail_mul[mask]


def _jenkins_mix(a: _U32, b: _U32, c: _U32) -> None:
    """lookup3 ``mix`` in place: per step ``x -= y; x ^= rotl(y, k); y += z``."""
    for x, y, z, k in ((a, c, b, 4), (b, a, c, 6), (c, b, a, 8), (a, c, b, 16), (b, a, c, 19), (c, b, a, 4)):
        np.subtract(x, y, out=x)
        np.bitwise_xor(x, _rotl(y, k), out=x)
        np.add(y, z, out=y)


def _jenkins_final(a: _U32, b: _U32, c: _U32) -> None:
    """lookup3 ``final`` in place: per step ``x ^= y; x -= rotl(y, k)``; the result is ``c``."""
    for x, y, k in ((c, b, 14), (a, c, 11), (b, a, 25), (c, b, 16), (a, c, 4), (b, a, 14), (c, b, 24)):
        np.bitwise_xor(x, y, out=x)
        np.subtract(x, _rotl(y, k), out=x)


class _JenkinsStream(_HashStream):
    """Bob Jenkins' lookup3 ``hashlittle``: 12-byte blocks; the last 1..12 bytes are the tail."""

    def __init__(self, batch: _KeyBatch, vector_size: int) -> None:
        super().__init__(batch, np.maximum((batch.lengths - 1) // 12, 0), vector_size)
        words = self._arrange(batch.matrix.view(np.dtype("<u4")))
        self._words: _U32 = np.array(words[:, : 3 * len(self._counts)].T, dtype=np.uint32, order="C")
        first = (3 * self._blocks)[:, None]
        self._tail: _U32 = np.stack(
            [np.take_along_axis(words, first + j, axis=1)[:, 0] for j in range(3)]
        ).astype(np.uint32)

    def _round(self, seed: _U32) -> _U32:
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

    def _keep(self, mask: _Bits) -> None:
        self._words = np.ascontiguousarray(self._words[: 3 * len(self._counts), mask])
        self._tail = np.ascontiguousarray(self._tail[:, mask])


def _stream(batch: _KeyBatch, hash_type: int, vector_size: int) -> _HashStream:
    if hash_type == _HASH_MURMUR:
        return _MurmurStream(batch, vector_size)
    return _JenkinsStream(batch, vector_size)


def _hash_positions(keys: _Keys, num_hashes: int, vector_size: int, hash_type: int) -> _Ints:
    """Every key's bit positions, shape (keys, num_hashes), in input order (a test hook)."""
    batch = _encode(pa.concat_arrays(_as_arrow(keys)))
    stream = _stream(batch, hash_type, vector_size)
    out = np.zeros((len(batch), num_hashes), dtype=np.int64)
    for i in range(num_hashes):
        out[stream.order, i] = stream.next_positions()
    return out


# ---------------------------------------------------------------- filters


class BloomFilter(ABC):
    """A Hudi record-key bloom filter: one or more bit rows sharing size, hash count and hash."""

    def __init__(self, vector_size: int, num_hashes: int, hash_type: int, rows: list[_Bits]) -> None:
        self._vector_size = vector_size
        self._num_hashes = num_hashes
        self._hash_type = hash_type
        self._rows = rows

    @property
    @abstractmethod
    def type_code(self) -> BloomFilterTypeCode:
        """The type code Hudi stores beside the serialized filter."""

    @abstractmethod
    def _assign_rows(self, count: int) -> _Ints:
        """Advance the fill state by ``count`` keys; the row each of them goes to, in order."""

    @abstractmethod
    def _body(self) -> bytes:
        """The serialized bytes (before base64)."""

    def add(self, key: str) -> None:
        """Add one record key."""
        self.add_all([key])

    def add_all(self, keys: _Keys) -> None:
        """Add record keys in order (for DYNAMIC_V0 the order decides which row each key fills).

        Large inputs are hashed in slices on a thread pool (numpy releases the GIL); only the
        assignment of keys to rows is sequential, and setting a bit twice is harmless.
        """
        pieces = [
            arr.slice(start, _PARALLEL_SLICE)
            for arr in _as_arrow(keys)
            for start in range(0, max(len(arr), 1), _PARALLEL_SLICE)
        ]
        work = []
        for piece in pieces:
            batch = _encode(piece)
            if not len(batch):
                continue
            empty = np.flatnonzero(batch.lengths == 0)
            if len(empty):
                raise InvalidInputError(f"bloom filter key #{int(empty[0])} is the empty string")
            work.append((batch, self._assign_rows(len(batch))))
        workers = min(len(work), pa.cpu_count())
        if workers <= 1:
            for batch, rows in work:
                self._set_bits(batch, rows)
            return
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for done in [pool.submit(self._set_bits, batch, rows) for batch, rows in work]:
                done.result()

    def _set_bits(self, batch: _KeyBatch, assigned: _Ints) -> None:
        stream = _stream(batch, self._hash_type, self._vector_size)
        rows = assigned[stream.order]
        used = np.unique(rows)
        targets: list[tuple[_Bits, _Ints | None]]
        if len(used) == 1:
            targets = [(self._rows[int(used[0])], None)]
        else:
            targets = [(self._rows[int(r)], np.flatnonzero(rows == r)) for r in used]
        for _ in range(self._num_hashes):
            positions = stream.next_positions()
            for bits, selected in targets:
                bits[positions if selected is None else positions[selected]] = True

    def might_contain(self, key: str) -> bool:
        """False if ``key`` was certainly never added; True if it may have been."""
        return bool(self.might_contain_many([key])[0])

    def might_contain_many(self, keys: Sequence[str] | pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
        """A boolean mask over ``keys``: may each key be in the filter? Empty keys never are."""
        parts = [self._test_batch(_encode(arr)) for arr in _as_arrow(keys)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.bool_)

    def _test_batch(self, batch: _KeyBatch) -> _Bits:
        result = np.zeros(len(batch), dtype=np.bool_)
        if not len(batch):
            return result
        stream = _stream(batch, self._hash_type, self._vector_size)
        alive = [np.ones(len(batch), dtype=np.bool_) for _ in self._rows]
        for _ in range(self._num_hashes):
            positions = stream.next_positions()
            for bits, row_alive in zip(self._rows, alive, strict=True):
                np.logical_and(row_alive, bits[positions], out=row_alive)
            anywhere = np.logical_or.reduce(alive) if len(alive) > 1 else alive[0]
            remaining = int(np.count_nonzero(anywhere))
            if remaining == 0:
                return result
            if remaining * 2 < len(anywhere):
                stream.keep(anywhere)
                alive = [row_alive[anywhere] for row_alive in alive]
        found = np.logical_or.reduce(alive) if len(alive) > 1 else alive[0]
        result[stream.order[found]] = True
        result &= batch.lengths > 0
        return result

    def serialize(self) -> str:
        """The base64 text Hudi stores in the file footer."""
        return base64.b64encode(self._body()).decode("ascii")

    def _header(self) -> bytes:
        return _HEADER.pack(_FORMAT_VERSION, self._num_hashes, self._hash_type, self._vector_size)

    def _row_bytes(self, bits: _Bits) -> bytes:
        return self._header() + np.packbits(bits, bitorder="little").tobytes()


class _SimpleBloomFilter(BloomFilter):
    """One bit row (Hadoop's plain bloom filter layout)."""

    @property
    def type_code(self) -> BloomFilterTypeCode:
        return BloomFilterTypeCode.SIMPLE

    def _assign_rows(self, count: int) -> _Ints:
        return np.zeros(count, dtype=np.int64)

    def _body(self) -> bytes:
        return self._row_bytes(self._rows[0])


class _DynamicBoundedBloomFilter(BloomFilter):
    """Rows of ``row_capacity`` keys each, grown up to ``max_entries`` keys, then reused."""

    def __init__(
        self,
        vector_size: int,
        num_hashes: int,
        hash_type: int,
        rows: list[_Bits],
        *,
        row_capacity: int,
        max_entries: int,
        in_last_row: int,
    ) -> None:
        super().__init__(vector_size, num_hashes, hash_type, rows)
        self._row_capacity = row_capacity
        self._max_entries = max_entries
        self._in_last_row = in_last_row
        self._bounded = False
        self._next_row = 0

    @property
    def type_code(self) -> BloomFilterTypeCode:
        return BloomFilterTypeCode.DYNAMIC_V0

    def _assign_rows(self, count: int) -> _Ints:
        out = np.empty(count, dtype=np.int64)
        done = 0
        cap = self._row_capacity
        while done < count:
            if self._bounded:
                rest = count - done
                out[done:] = (self._next_row + np.arange(rest, dtype=np.int64)) % len(self._rows)
                self._next_row += rest
                self._in_last_row += rest
                break
            if self._in_last_row >= cap:
                if len(self._rows) * cap < self._max_entries:
                    self._rows.append(np.zeros(self._vector_size, dtype=np.bool_))
                    self._in_last_row = 0
                else:
                    # The bound is reached: this key goes to row 0, later ones round-robin from 0.
                    self._bounded = True
                    out[done] = 0
                    self._in_last_row += 1
                    done += 1
                continue
            take = min(cap - self._in_last_row, count - done)
            out[done : done + take] = len(self._rows) - 1
            self._in_last_row += take
            done += take
        return out

    def _body(self) -> bytes:
        fields = _DYNAMIC_FIELDS.pack(self._row_capacity, _as_int32(self._in_last_row), len(self._rows))
        return self._header() + fields + b"".join(self._row_bytes(bits) for bits in self._rows)


def _as_int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


# ---------------------------------------------------------------- construction


def _parse_type_code(type_code: BloomFilterTypeCode | str) -> BloomFilterTypeCode | None:
    try:
        return BloomFilterTypeCode(str(type_code).upper())
    except ValueError:
        return None


def _sizing(num_entries: int, fpp: float) -> tuple[int, int]:
    """(vector size in bits, number of hashes), computed in the same double arithmetic as Hudi."""
    bits = math.ceil(num_entries * (-math.log(fpp) / _LN2_SQUARED))
    if bits > _INT32_MAX:
        raise InvalidInputError(f"bloom filter for {num_entries} entries at fpp {fpp} needs {bits} bits")
    return bits, math.ceil(_LN2 * bits / num_entries)


def create_bloom_filter(
    num_entries: int = 60000,
    fpp: float = 1e-9,
    type_code: BloomFilterTypeCode | str = "DYNAMIC_V0",
    max_entries: int = 100000,
) -> BloomFilter:
    """An empty filter sized as Hudi sizes it (MurmurHash; defaults are Hudi's write defaults)."""
    code = _parse_type_code(type_code)
    if code is None:
        raise InvalidInputError(f"unknown bloom filter type code {type_code!r}")
    if not 0 < num_entries <= _INT32_MAX:
        raise InvalidInputError(f"bloom filter num_entries must be in 1..{_INT32_MAX}, got {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise InvalidInputError(f"bloom filter fpp must be in (0, 1), got {fpp}")
    if not 0 <= max_entries <= _INT32_MAX:
        raise InvalidInputError(f"bloom filter max_entries must be in 0..{_INT32_MAX}, got {max_entries}")
    bits, hashes = _sizing(num_entries, fpp)
    rows = [np.zeros(bits, dtype=np.bool_)]
    if code is BloomFilterTypeCode.SIMPLE:
        return _SimpleBloomFilter(bits, hashes, _HASH_MURMUR, rows)
    return _DynamicBoundedBloomFilter(
        bits, hashes, _HASH_MURMUR, rows, row_capacity=num_entries, max_entries=max_entries, in_last_row=0
    )


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def remaining(self) -> int:
        return len(self._data) - self._pos

    def take(self, size: int, what: str) -> bytes:
        if size > self.remaining():
            raise CorruptFileError(
                f"bloom filter truncated: {what} needs {size} bytes at offset {self._pos}, "
                f"only {self.remaining()} left"
            )
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int32(self, what: str) -> int:
        value: int = struct.unpack(">i", self.take(4, what))[0]
        return value

    def header(self) -> tuple[int, int, int]:
        """(num_hashes, hash_type, vector_size), validated."""
        version = self.int32("version")
        if version > 0:
            num_hashes, hash_type = version, _HASH_JENKINS
        elif version == _FORMAT_VERSION:
            num_hashes = self.int32("hash count")
            hash_type = self.take(1, "hash type")[0]
        else:
            raise CorruptFileError(f"unsupported bloom filter version {version}")
        vector_size = self.int32("vector size")
        if not 0 < num_hashes <= _MAX_HASHES:
            raise CorruptFileError(f"bloom filter hash count {num_hashes} is out of range")
        if hash_type not in (_HASH_JENKINS, _HASH_MURMUR):
            raise CorruptFileError(f"unknown bloom filter hash type {hash_type}")
        if vector_size <= 0:
            raise CorruptFileError(f"bloom filter vector size {vector_size} is not positive")
        return num_hashes, hash_type, vector_size

    def bits(self, vector_size: int) -> _Bits:
        raw = np.frombuffer(self.take((vector_size + 7) // 8, "bit vector"), dtype=np.uint8)
        return np.unpackbits(raw, count=vector_size, bitorder="little").astype(np.bool_)


def deserialize_bloom_filter(text: str | bytes, type_code: BloomFilterTypeCode | str) -> BloomFilter:
    """Read a filter from Hudi's base64 text (``bytes`` holds the same ASCII text, as in the MDT).

    Hudi writes the type footer key only for DYNAMIC_V0; a footer without it holds a SIMPLE filter.
    """
    code = _parse_type_code(type_code)
    if code is None:
        raise CorruptFileError(f"unknown bloom filter type code {type_code!r}")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CorruptFileError(f"bloom filter is not valid base64: {exc}") from exc
    reader = _Reader(raw)
    params = reader.header()
    num_hashes, hash_type, vector_size = params
    result: BloomFilter
    if code is BloomFilterTypeCode.SIMPLE:
        result = _SimpleBloomFilter(
            num_hashes=num_hashes,
            hash_type=hash_type,
            vector_size=vector_size,
            rows=[reader.bits(vector_size)],
        )
    else:
        row_capacity = reader.int32("row capacity")
        in_last_row = reader.int32("key count")
        row_count = reader.int32("row count")
        if row_capacity <= 0:
            raise CorruptFileError(f"bloom filter row capacity {row_capacity} is not positive")
        if in_last_row < 0:
            raise CorruptFileError(f"bloom filter key count {in_last_row} is negative")
        row_size = 8 + (vector_size + 7) // 8  # the smallest (unversioned) row header is 8 bytes
        if row_count <= 0 or row_count * row_size > reader.remaining():
            raise CorruptFileError(
                f"bloom filter row count {row_count} does not fit the {reader.remaining()} bytes left"
            )
        rows = []
        for index in range(row_count):
            row_params = reader.header()
            if row_params != params:
                raise CorruptFileError(
                    f"bloom filter row {index} has (hashes, hash type, bits) {row_params}, expected {params}"
                )
            rows.append(reader.bits(vector_size))
        # Hudi does not store the growth bound, so a read filter has none (0) and never grows.
        result = _DynamicBoundedBloomFilter(
            vector_size,
            num_hashes,
            hash_type,
            rows,
            row_capacity=row_capacity,
            max_entries=0,
            in_last_row=in_last_row,
        )
    if reader.remaining():
        raise CorruptFileError(f"bloom filter has {reader.remaining()} unexpected trailing bytes")
    return result
