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

Keys are hashed by :mod:`hoodie.bloom_hash`, vectorized over a batch of keys.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import StrEnum

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.bloom_hash import (
    HASH_JENKINS,
    HASH_MURMUR,
    PARALLEL_SLICE,
    Bits,
    Ints,
    KeyBatch,
    Keys,
    as_arrow,
    encode_keys,
    hash_stream,
)
from hoodie.errors import CorruptFileError, InvalidInputError

BLOOM_FILTER_FOOTER_KEY = "org.apache.hudi.bloomfilter"
BLOOM_TYPE_FOOTER_KEY = "hoodie_bloom_filter_type_code"


class BloomFilterTypeCode(StrEnum):
    """The value of footer key ``hoodie_bloom_filter_type_code``."""

    SIMPLE = "SIMPLE"
    DYNAMIC_V0 = "DYNAMIC_V0"


_FORMAT_VERSION = -1
_HEADER = struct.Struct(">iibi")
_DYNAMIC_FIELDS = struct.Struct(">iii")
_INT32_MAX = 2**31 - 1
# No (entries, fpp) sizing yields more than ~1100 hash rounds; a larger count is a corrupt header.
_MAX_HASHES = 1 << 16
_LN2 = math.log(2)
_LN2_SQUARED = _LN2 * _LN2


# ---------------------------------------------------------------- filters


class BloomFilter(ABC):
    """A Hudi record-key bloom filter: one or more bit rows sharing size, hash count and hash."""

    def __init__(self, vector_size: int, num_hashes: int, hash_type: int, rows: list[Bits]) -> None:
        self._vector_size = vector_size
        self._num_hashes = num_hashes
        self._hash_type = hash_type
        self._rows = rows

    @property
    @abstractmethod
    def type_code(self) -> BloomFilterTypeCode:
        """The type code Hudi stores beside the serialized filter."""

    @abstractmethod
    def _assign_rows(self, count: int) -> Ints:
        """Advance the fill state by ``count`` keys; the row each of them goes to, in order."""

    @abstractmethod
    def _body(self) -> bytes:
        """The serialized bytes (before base64)."""

    def add(self, key: str) -> None:
        """Add one record key."""
        self.add_all([key])

    def add_all(self, keys: Keys) -> None:
        """Add record keys in order (for DYNAMIC_V0 the order decides which row each key fills).

        Large inputs are hashed in slices on a thread pool (numpy releases the GIL); only the
        assignment of keys to rows is sequential, and setting a bit twice is harmless.
        """
        pieces = [
            arr.slice(start, PARALLEL_SLICE)
            for arr in as_arrow(keys)
            for start in range(0, max(len(arr), 1), PARALLEL_SLICE)
        ]
        work = []
        for piece in pieces:
            batch = encode_keys(piece)
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

    def _set_bits(self, batch: KeyBatch, assigned: Ints) -> None:
        stream = hash_stream(batch, self._hash_type, self._vector_size)
        targets: list[tuple[Bits, Ints | None]]
        if int(assigned.min()) == int(assigned.max()):  # one row (always, once a dynamic filter is full)
            targets = [(self._rows[int(assigned[0])], None)]
        else:
            rows = assigned[stream.order]
            used = np.unique(rows)
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
        parts = [self._test_batch(encode_keys(arr)) for arr in as_arrow(keys)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.bool_)

    def _test_batch(self, batch: KeyBatch) -> Bits:
        result = np.zeros(len(batch), dtype=np.bool_)
        if not len(batch):
            return result
        stream = hash_stream(batch, self._hash_type, self._vector_size)
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

    def _row_bytes(self, bits: Bits) -> bytes:
        return self._header() + np.packbits(bits, bitorder="little").tobytes()


class _SimpleBloomFilter(BloomFilter):
    """One bit row (Hadoop's plain bloom filter layout)."""

    @property
    def type_code(self) -> BloomFilterTypeCode:
        return BloomFilterTypeCode.SIMPLE

    def _assign_rows(self, count: int) -> Ints:
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
        rows: list[Bits],
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

    def _assign_rows(self, count: int) -> Ints:
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
        return _SimpleBloomFilter(bits, hashes, HASH_MURMUR, rows)
    return _DynamicBoundedBloomFilter(
        bits, hashes, HASH_MURMUR, rows, row_capacity=num_entries, max_entries=max_entries, in_last_row=0
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
            num_hashes, hash_type = version, HASH_JENKINS
        elif version == _FORMAT_VERSION:
            num_hashes = self.int32("hash count")
            hash_type = self.take(1, "hash type")[0]
        else:
            raise CorruptFileError(f"unsupported bloom filter version {version}")
        vector_size = self.int32("vector size")
        if not 0 < num_hashes <= _MAX_HASHES:
            raise CorruptFileError(f"bloom filter hash count {num_hashes} is out of range")
        if hash_type not in (HASH_JENKINS, HASH_MURMUR):
            raise CorruptFileError(f"unknown bloom filter hash type {hash_type}")
        if vector_size <= 0:
            raise CorruptFileError(f"bloom filter vector size {vector_size} is not positive")
        return num_hashes, hash_type, vector_size

    def bits(self, vector_size: int) -> Bits:
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


def union_bloom_filters(filters: Sequence[BloomFilter]) -> BloomFilter:
    """One filter that may contain every key any of ``filters`` may contain (their rows OR-ed).

    Hudi merges the footers of files it stitches together by OR-ing their filters
    (``HoodieFileMetadataMerger``; Hadoop's bit-vector ``or``), which needs one type and the same
    bit count, hash count and hash. A dynamic filter ORs row by row. Hudi's
    ``InternalDynamicBloomFilter.or`` also demands the same row count and keys-in-last-row (else
    it throws and the clustering fails); here filters that have grown a different number of rows
    are merged too, the extra rows kept as they are (a key sits in one row of its file's filter,
    so its bits are still all set in that row of the union). Where Hudi's ``or`` succeeds, the
    result is the filter it serializes: the first filter's fill counts, the rows OR-ed.
    """
    if not filters:
        raise InvalidInputError("no bloom filters to merge")
    first = filters[0]
    params = (first.type_code, first._vector_size, first._num_hashes, first._hash_type)
    for other in filters[1:]:
        found = (other.type_code, other._vector_size, other._num_hashes, other._hash_type)
        if found != params:
            raise InvalidInputError(
                f"bloom filters cannot be or-ed: (type, bits, hashes, hash) {found} != {params}"
            )
    widest = max(filters, key=lambda f: len(f._rows))
    rows = [bits.copy() for bits in widest._rows]
    for other in filters:
        for i, bits in enumerate(other._rows):
            rows[i] |= bits
    vector_size, num_hashes, hash_type = first._vector_size, first._num_hashes, first._hash_type
    if isinstance(widest, _DynamicBoundedBloomFilter):
        capacities = {f._row_capacity for f in filters if isinstance(f, _DynamicBoundedBloomFilter)}
        if len(capacities) != 1:
            raise InvalidInputError(
                f"dynamic bloom filters cannot be or-ed: row capacities {sorted(capacities)}"
            )
        return _DynamicBoundedBloomFilter(
            vector_size,
            num_hashes,
            hash_type,
            rows,
            row_capacity=widest._row_capacity,
            max_entries=0,
            in_last_row=widest._in_last_row,
        )
    return _SimpleBloomFilter(vector_size, num_hashes, hash_type, rows)
