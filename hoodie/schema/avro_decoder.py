"""Vectorized decoding of many Avro binary datums (one writer schema) into Arrow columns.

All datums of a log block share one writer schema, so instead of walking one record at a time
the decoder walks the *schema* once and moves a cursor for every record in lock step: each
field is one handful of numpy gathers over all records (union branch bytes, varints read from a
strided 10-byte window, fixed-width values, string bodies cut out of the payload by an Arrow
``take`` over interleaved offsets). Records are processed in chunks that fit in cache.

Arrays and maps are decoded in rounds (item j of every record that still has one), which stays
fast for the short collections tables hold; a collection longer than :data:`MAX_ROUNDS` raises
:class:`Unsupported` and the caller falls back to the per-record fastavro path.

Errors from malformed bytes surface as ``IndexError``/``ValueError``/``OverflowError`` or
``pyarrow.ArrowInvalid``; the public wrapper turns them into ``CorruptFileError``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided

from hoodie.schema.avro_types import (
    AvroType,
    arrow_field,
    arrow_type,
    decimal_from_be_binary,
    decimal_from_be_matrix,
    validity_buffer,
)

#: Records decoded together; 32k keeps each field's working set in cache.
CHUNK_ROWS = 32768
#: Most items of one array or map the round-based decoder handles before giving up.
MAX_ROUNDS = 1024

_VARINT_MAX = 10
_SHIFTS = [np.uint64(7 * j) for j in range(_VARINT_MAX)]
_EMPTY = np.zeros(0, np.int64)
_HIGH_BITS = np.uint64(0x8080808080808080)
_PAIRS = [
    np.uint64(m)
    for m in (
        0x007F007F007F007F,
        0x7F007F007F007F00,
        0x00003FFF00003FFF,
        0x3FFF00003FFF0000,
        0x000000000FFFFFFF,
        0x0FFFFFFF00000000,
    )
]


class Unsupported(Exception):
    """The vectorized decoder does not handle this input; use the per-record path."""


class _Payload:
    """The bytes being decoded, as numpy and as an Arrow buffer, plus strided windows."""

    __slots__ = ("arrow", "buf", "size", "windows", "words")

    def __init__(self, payload: bytes | memoryview) -> None:
        self.buf = np.frombuffer(payload, np.uint8)
        self.arrow = pa.py_buffer(payload)
        self.size = len(self.buf)
        self.windows: dict[int, np.ndarray] = {}
        # the 8 bytes at every position as one little-endian word (unaligned, stride 1)
        self.words = as_strided(
            self.buf[:0].view("<u8") if self.size < 8 else self.buf[: self.size - self.size % 8].view("<u8"),
            shape=(max(self.size - 7, 0),),
            strides=(1,),
            writeable=False,
        )

    def word_at(self, pos: np.ndarray) -> np.ndarray | None:
        """The little-endian 8-byte word at each position, or None if one would run past the end."""
        if pos.size and int(pos.max()) + 8 > self.size:
            return None
        words: np.ndarray = self.words[pos]
        return words

    def gather(self, pos: np.ndarray, width: int) -> np.ndarray:
        """A (len(pos), width) matrix of the bytes at each position; IndexError past the end."""
        window = self.windows.get(width)
        if window is None:
            rows = max(self.size - width + 1, 0)
            window = as_strided(self.buf, shape=(rows, width), strides=(1, 1), writeable=False)
            self.windows[width] = window
        matrix: np.ndarray = window[pos]
        return matrix


def _unzigzag(raw: np.ndarray) -> np.ndarray:
    unsigned = raw.view(np.uint64)
    return (unsigned >> np.uint64(1)).view(np.int64) ^ -(raw & 1)


def read_varints(data: _Payload, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The raw (not zigzag-decoded) unsigned varints at ``pos`` and the positions after them."""
    if pos.size == 0:
        return _EMPTY, pos
    first = data.buf[pos]
    if not (first & 0x80).any():
        return first.astype(np.int64), pos + 1
    words = data.word_at(pos)
    if words is not None:
        stop = ~words & _HIGH_BITS  # the high bit of every byte that ends a varint
        if stop.all():  # every varint ends within its first 8 bytes
            last = stop & (~stop + np.uint64(1))  # the high bit of the first such byte
            x = words & (last | (last - np.uint64(1)))
            # squeeze out the continuation bits: 7-bit groups -> 14 -> 28 -> 56 bits
            x = (x & _PAIRS[0]) | ((x & _PAIRS[1]) >> np.uint64(1))
            x = (x & _PAIRS[2]) | ((x & _PAIRS[3]) >> np.uint64(2))
            x = (x & _PAIRS[4]) | ((x & _PAIRS[5]) >> np.uint64(4))
            # `last` is 0x80 << 8k for a varint of k + 1 bytes; powers of two are exact in float64
            nbytes = ((np.log2(last.astype(np.float64)).astype(np.int64) - 7) >> 3) + 1
            return x.view(np.int64), pos + nbytes
    if int(pos.max()) + _VARINT_MAX <= data.size:
        window = data.gather(pos, _VARINT_MAX)
        value = (window[:, 0] & 0x7F).astype(np.uint64)
        active = window[:, 0] >= 0x80
        after = pos + 1
        for j in range(1, _VARINT_MAX):
            after += active
            column = window[:, j]
            value |= ((column & 0x7F) * active).astype(np.uint64) << _SHIFTS[j]
            active &= column >= 0x80
            if not active.any():
                return value.view(np.int64), after
        raise ValueError("Avro varint longer than 10 bytes")
    value = (first & 0x7F).astype(np.uint64)
    length = np.ones(len(pos), np.int64)
    more = np.flatnonzero(first & 0x80)
    for j in range(1, _VARINT_MAX + 1):
        if not more.size:
            return value.view(np.int64), pos + length
        if j == _VARINT_MAX:
            break
        byte = data.buf[pos[more] + j]
        value[more] |= (byte & 0x7F).astype(np.uint64) << _SHIFTS[j]
        length[more] += 1
        more = more[(byte & 0x80) != 0]
    raise ValueError("Avro varint longer than 10 bytes")


def read_longs(data: _Payload, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zigzag-decoded Avro ints/longs at ``pos``."""
    raw, after = read_varints(data, pos)
    return _unzigzag(raw), after


def _expand(arr: pa.Array, valid: np.ndarray | None) -> pa.Array:
    """Spread ``arr`` (one value per True in ``valid``) over ``len(valid)`` slots, nulls between."""
    if valid is None:
        return arr
    index = np.cumsum(valid, dtype=np.int32) - 1
    return arr.take(pa.array(index, mask=~valid))


def _fixed_width(typ: pa.DataType, values: np.ndarray, valid: np.ndarray | None) -> pa.Array:
    """An Arrow array from one numpy value per present slot."""
    if valid is not None:
        full = np.zeros((len(valid), *values.shape[1:]), values.dtype)
        full[valid] = values
        values = full
    count = len(values)
    data = np.packbits(values, bitorder="little") if typ == pa.bool_() else values
    return pa.Array.from_buffers(typ, count, [validity_buffer(valid), pa.py_buffer(data)])


def _decode_binary(
    data: _Payload, pos: np.ndarray, valid: np.ndarray | None, string: bool
) -> tuple[pa.Array, np.ndarray]:
    lengths, pos = read_longs(data, pos)
    count = len(pos)
    if not count:
        empty = pa.nulls(0 if valid is None else len(valid), pa.string() if string else pa.binary())
        return empty, pos
    if lengths.min() < 0 or int((pos + lengths).max()) > data.size:
        raise ValueError("Avro string or bytes length runs outside the datum")
    ends = pos + lengths
    big = bool(count) and int(ends[-1]) >= 2**31 - 1
    # Offsets (start0, end0, start1, end1, ...) over the whole payload make a binary array whose
    # even slots are exactly our values; one take copies them out.
    offsets = np.empty(2 * count, np.int64 if big else np.int32)
    offsets[0::2] = pos
    offsets[1::2] = ends
    kind = pa.large_binary() if big else pa.binary()
    slots = max(2 * count - 1, 0)
    interleaved = pa.Array.from_buffers(kind, slots, [None, pa.py_buffer(offsets), data.arrow])
    if valid is None:
        index = pa.array(np.arange(0, 2 * count, 2, dtype=np.int32))
    else:
        even = np.cumsum(valid, dtype=np.int32)
        even -= 1
        even *= 2
        index = pa.array(even, mask=~valid)
    out = interleaved.take(index)
    if big:
        out = out.cast(pa.binary())
    return (out.cast(pa.string()) if string else out), ends


def _decode_scalar(
    node: AvroType, data: _Payload, pos: np.ndarray, valid: np.ndarray | None
) -> tuple[pa.Array, np.ndarray]:
    kind, logical = node.kind, node.logical
    if kind in ("string", "bytes"):
        arr, pos = _decode_binary(data, pos, None if logical == "decimal" else valid, kind == "string")
        if logical == "decimal":
            arr = _expand(decimal_from_be_binary(arr, node.precision, node.scale), valid)
        return arr, pos
    typ = arrow_type(node)
    if kind in ("int", "long"):
        longs, pos = read_longs(data, pos)
        values: np.ndarray = longs
        if kind == "int":
            if longs.size and (longs.min() < -(2**31) or longs.max() >= 2**31):
                raise ValueError("Avro int outside the 32-bit range")
            values = longs.astype(np.int32)
    elif kind in ("float", "double"):
        width = 4 if kind == "float" else 8
        words = data.word_at(pos)
        if words is None:
            values = data.gather(pos, width).view(f"<f{width}").ravel()
        elif kind == "float":
            values = words.astype("<u4").view("<f4")
        else:
            values = words.view("<f8")
        pos = pos + width
    elif kind == "boolean":
        values, pos = data.buf[pos], pos + 1
        if values.size and values.max() > 1:
            raise ValueError(f"Avro boolean byte {int(values.max())} is neither 0 nor 1")
        values = values.astype(bool)
    elif kind == "fixed":
        words = data.word_at(pos) if logical == "decimal" and node.size <= 8 else None
        if words is not None and node.precision <= 38:
            # the big-endian value in the first `size` bytes, sign-extended by an arithmetic shift
            unscaled = words.byteswap().view(np.int64) >> np.int64(64 - 8 * node.size)
            values = np.empty((len(pos), 2), np.int64)
            values[:, 0] = unscaled
            values[:, 1] = unscaled >> np.int64(63)
            return _fixed_width(typ, values, valid), pos + node.size
        matrix, pos = data.gather(pos, node.size), pos + node.size
        if logical == "decimal":
            return _expand(decimal_from_be_matrix(matrix, node.precision, node.scale), valid), pos
        values = np.ascontiguousarray(matrix)
    elif kind == "enum":
        index, pos = read_longs(data, pos)
        if index.size and (index.min() < 0 or index.max() >= len(node.symbols)):
            raise ValueError(f"Avro enum index outside {len(node.symbols)} symbols of {node.name!r}")
        symbols = pa.array(node.symbols, pa.string())
        return _expand(symbols.take(pa.array(index)), valid), pos
    else:  # null
        return pa.nulls(len(pos) if valid is None else len(valid)), pos
    return _fixed_width(typ, values, valid), pos


def _decode_union(node: AvroType, data: _Payload, pos: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    split = node.nullable_split()
    if split is None:
        if not all(b.kind == "null" for b in node.branches):
            raise Unsupported(f"union {[b.kind for b in node.branches]}")
        branch, pos = read_longs(data, pos)
        if branch.size and (branch.min() < 0 or branch.max() >= len(node.branches)):
            raise ValueError("Avro union branch index out of range")
        return pa.nulls(len(pos)), pos
    index, inner = split
    branch = data.buf[pos]
    present = branch == 2 * index
    if not (present | (branch == 2 * (1 - index))).all():
        raise ValueError(f"Avro union branch byte {int(branch.max())} is not 0 or 2")
    pos = pos + 1
    if present.all():
        return decode(inner, data, pos, None)
    arr, after = decode(inner, data, pos[present], present)
    pos[present] = after
    return arr, pos


def _decode_record(
    node: AvroType, data: _Payload, pos: np.ndarray, valid: np.ndarray | None
) -> tuple[pa.Array, np.ndarray]:
    children = []
    for field in node.fields:
        child, pos = decode(field.type, data, pos, None)
        children.append(child)
    fields = [arrow_field(f.name, f.type) for f in node.fields]
    if not fields:
        struct = pa.array([{}] * len(pos), pa.struct([]))
    else:
        struct = pa.StructArray.from_arrays(children, fields=fields)
    return _expand(struct, valid), pos


def _decode_items(
    node: AvroType, data: _Payload, pos: np.ndarray
) -> tuple[np.ndarray, list[pa.Array], list[pa.Array], np.ndarray]:
    """Items of one array/map per record, in rounds: (counts, keys, values, positions after)."""
    rows = len(pos)
    cursor = pos.copy()
    counts = np.zeros(rows, np.int64)
    remaining = np.zeros(rows, np.int64)
    active = np.arange(rows)
    order: list[np.ndarray] = []
    keys: list[pa.Array] = []
    values: list[pa.Array] = []
    for round_no in range(MAX_ROUNDS + 1):
        need = active[remaining[active] == 0]
        if need.size:
            block, cursor[need] = read_longs(data, cursor[need])
            negative = block < 0
            if negative.any():  # a negative count is followed by the block's byte size
                _, cursor[need[negative]] = read_varints(data, cursor[need[negative]])
                block = np.abs(block)
            remaining[need] = block
            active = active[remaining[active] > 0]
        if not active.size:
            break
        if round_no == MAX_ROUNDS:
            raise Unsupported(f"an Avro {node.kind} holds more than {MAX_ROUNDS} items")
        at = cursor[active]
        if node.kind == "map":
            key, at = _decode_binary(data, at, None, True)
            keys.append(key)
        value, at = decode(node.child, data, at, None)
        cursor[active] = at
        values.append(value)
        order.append(active)
        counts[active] += 1
        remaining[active] -= 1
    # Round r holds item r of each active record; reorder to record-major.
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    if order:
        target = np.concatenate([offsets[rows_r] + r for r, rows_r in enumerate(order)])
        inverse = np.empty_like(target)
        inverse[target] = np.arange(len(target))
        perm = pa.array(inverse)
        keys = [pa.concat_arrays(keys).take(perm)] if keys else []
        values = [pa.concat_arrays(values).take(perm)]
    return offsets, keys, values, cursor


def _decode_collection(
    node: AvroType, data: _Payload, pos: np.ndarray, valid: np.ndarray | None
) -> tuple[pa.Array, np.ndarray]:
    offsets, keys, values, pos = _decode_items(node, data, pos)
    typ = arrow_type(node)
    if valid is not None:
        full = np.zeros(len(valid) + 1, np.int64)
        full[1:][valid] = np.diff(offsets)
        offsets = np.cumsum(full)
    mask = None if valid is None else pa.array(~valid)
    offset_array = pa.array(offsets.astype(np.int32))
    if node.kind == "map":
        key_values = keys[0] if keys else pa.array([], pa.string())
        items = values[0] if values else pa.array([], typ.item_type)
        return pa.MapArray.from_arrays(offset_array, key_values, items, type=typ, mask=mask), pos
    items = values[0] if values else pa.array([], typ.value_type)
    return pa.ListArray.from_arrays(offset_array, items, type=typ, mask=mask), pos


def decode(
    node: AvroType, data: _Payload, pos: np.ndarray, valid: np.ndarray | None
) -> tuple[pa.Array, np.ndarray]:
    """Decode one value of ``node`` at each position.

    ``valid`` (when given) has one slot per output row and is True where a value is present;
    ``pos`` then holds only the present rows' positions. Returns the array and the new positions.
    """
    kind = node.kind
    if kind == "union":
        return _decode_union(node, data, pos)
    if kind == "record":
        return _decode_record(node, data, pos, valid)
    if kind in ("array", "map"):
        return _decode_collection(node, data, pos, valid)
    return _decode_scalar(node, data, pos, valid)


def skip(node: AvroType, data: _Payload, pos: np.ndarray) -> np.ndarray:
    """Positions after one value of ``node`` at each position, materializing as little as possible."""
    kind = node.kind
    if kind in ("string", "bytes"):
        lengths, pos = read_longs(data, pos)
        if lengths.size and lengths.min() < 0:
            raise ValueError("negative Avro string or bytes length")
        after: np.ndarray = pos + lengths
        return after
    if kind in ("int", "long", "enum"):
        return read_varints(data, pos)[1]
    width = {"null": 0, "boolean": 1, "float": 4, "double": 8, "fixed": node.size}.get(kind)
    if width is not None:
        return pos + width
    if kind == "record":
        for field in node.fields:
            pos = skip(field.type, data, pos)
        return pos
    if kind == "union" and node.nullable_split() is not None:
        index, inner = node.nullable_split()  # type: ignore[misc]
        present = data.buf[pos] == 2 * index
        pos = pos + 1
        pos[present] = skip(inner, data, pos[present])
        return pos
    return decode(node, data, pos, None)[1]


def decode_datums(
    payload: bytes | memoryview,
    starts: np.ndarray,
    ends: np.ndarray,
    record: AvroType,
    wanted: frozenset[str],
) -> dict[str, list[pa.Array]]:
    """Decode the datums ``payload[starts[i]:ends[i]]`` of the Avro ``record`` schema.

    Returns, for each field of the record in ``wanted``, one array per chunk of records.
    Raises ``ValueError`` when a datum does not end exactly at its ``ends`` position.
    """
    data = _Payload(payload)
    columns: dict[str, list[pa.Array]] = {f.name: [] for f in record.fields if f.name in wanted}
    for first in range(0, len(starts), CHUNK_ROWS):
        pos = starts[first : first + CHUNK_ROWS].astype(np.int64, copy=True)
        for field in record.fields:
            if field.name in columns:
                arr, pos = decode(field.type, data, pos, None)
                columns[field.name].append(arr)
            else:
                pos = skip(field.type, data, pos)
        expected = ends[first : first + CHUNK_ROWS]
        if not np.array_equal(pos, expected):
            bad = int(np.flatnonzero(pos != expected)[0]) + first
            raise ValueError(f"Avro datum {bad} does not end at its recorded length")
    return columns
