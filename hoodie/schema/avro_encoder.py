"""Vectorized encoding of Arrow rows into Avro binary datums.

Every Avro value of a row is a short run of bytes, and a datum is those runs back to back in
schema order. The encoder builds each run for all rows at once: small ones (union branch bytes,
varints, fixed-width values) as a numpy matrix plus a length per row, merging neighbours into
one matrix; string and bytes bodies as Arrow binary arrays over the input's own buffers. One
``binary_join_element_wise`` then concatenates the runs row by row. Arrays and maps encode their
items the same way, join them per item, then per row with ``binary_join``.

The input arrays must already have the Arrow types :func:`hoodie.schema.avro_types.arrow_type`
gives for the schema (the public wrapper casts them).
"""

from __future__ import annotations

from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import SchemaError
from hoodie.schema.avro_types import (
    AvroType,
    decimal_minimal_lengths,
    decimal_to_be_matrix,
    validity_buffer,
)

_LIMITS = [np.uint64(1) << np.uint64(7 * j) for j in range(1, 10)]
#: Widest numpy run before a new one starts (keeps merged matrices small).
_MAX_WIDTH = 64


class _Bytes:
    """Runs still in numpy: row r contributes ``matrix[r, :lengths[r]]`` of each part in turn."""

    __slots__ = ("lengths", "parts", "width")

    def __init__(self, matrix: np.ndarray, lengths: np.ndarray | None) -> None:
        # lengths None: every row uses the full width
        self.parts: list[tuple[np.ndarray, np.ndarray | None]] = [(matrix, lengths)]
        self.width = matrix.shape[1]
        self.lengths = np.full(len(matrix), self.width, np.int64) if lengths is None else lengths

    def extend(self, other: _Bytes) -> None:
        """Append ``other``'s runs to this one's."""
        self.parts.extend(other.parts)
        self.width += other.width
        self.lengths = self.lengths + other.lengths

    def arrow(self) -> pa.Array:
        rows = len(self.lengths)
        matrix = self.parts[0][0] if len(self.parts) == 1 else np.hstack([m for m, _ in self.parts])
        offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        if all(lengths is None for _, lengths in self.parts):
            return _binary(offsets, matrix.ravel(), None)
        # row-major boolean compaction keeps, per row, each part's bytes in order
        keep = np.hstack(
            [
                np.ones(m.shape, bool) if lengths is None else np.arange(m.shape[1]) < lengths[:, None]
                for m, lengths in self.parts
            ]
        )
        return _binary(offsets, matrix[keep], None)


Run: TypeAlias = "pa.Array | _Bytes"


def _binary(offsets: np.ndarray, data: np.ndarray, live: np.ndarray | None) -> pa.Array:
    """A binary array from numpy offsets and bytes; slots where ``live`` is False are null."""
    big = int(offsets[-1]) >= 2**31 - 1
    kind = pa.large_binary() if big else pa.binary()
    offsets = offsets.astype(np.int64 if big else np.int32, copy=False)
    buffers = [validity_buffer(live), pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    return pa.Array.from_buffers(kind, len(offsets) - 1, buffers)


def _mask(arr: pa.Array) -> np.ndarray:
    """True where ``arr`` holds a value."""
    if arr.null_count == 0:
        return np.ones(len(arr), bool)
    return np.asarray(arr.is_valid())


def _fixed(matrix: np.ndarray, live: np.ndarray | None) -> _Bytes:
    """Each row of an (n, width) uint8 matrix as one run (empty where not live)."""
    if live is None:
        return _Bytes(matrix, None)
    return _Bytes(matrix, live.astype(np.int64) * matrix.shape[1])


def _varints(values: np.ndarray, live: np.ndarray | None) -> _Bytes:
    """Unsigned varints of ``values`` (already zigzagged where Avro wants it)."""
    unsigned = values.view(np.uint64)
    top = int(unsigned.max()) if len(unsigned) else 0
    width = 1
    while width < len(_LIMITS) + 1 and top >= int(_LIMITS[width - 1]):
        width += 1
    nbytes = np.ones(len(unsigned), np.int64)
    for limit in _LIMITS[: width - 1]:
        nbytes += unsigned >= limit
    if live is not None:
        nbytes[~live] = 0
    matrix = np.empty((len(unsigned), width), np.uint8)
    for j in range(width):
        byte = (unsigned >> np.uint64(7 * j)) & np.uint64(0x7F)
        matrix[:, j] = byte | ((nbytes > j + 1).astype(np.uint64) << np.uint64(7))
    return _Bytes(matrix, None if width == 1 and live is None else nbytes)


def _zigzag(values: np.ndarray) -> np.ndarray:
    signed = values.astype(np.int64, copy=False)
    return ((signed << 1) ^ (signed >> 63)).view(np.uint64)


def _ints(arr: pa.Array) -> np.ndarray:
    """The integers behind an int/date/time/timestamp array (zero for null slots)."""
    width = arr.type.bit_width
    plain = arr.view(pa.int64() if width == 64 else pa.int32())
    return np.asarray(plain.fill_null(0) if plain.null_count else plain)


def _binary_runs(arr: pa.Array, live: np.ndarray | None) -> list[Run]:
    """A length varint and the bytes themselves, for string/binary arrays."""
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.binary())
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], np.int32, len(arr) + 1, arr.offset * 4)
    lengths = np.diff(offsets).astype(np.int64)
    body_live = live
    if arr.null_count:
        body_live = _mask(arr) if live is None else live & _mask(arr)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    valid = validity_buffer(body_live)
    body = pa.Array.from_buffers(pa.binary(), len(arr), [valid, pa.py_buffer(offsets), pa.py_buffer(data)])
    return [_varints(_zigzag(lengths), body_live), body]


def _check_nulls(arr: pa.Array, live: np.ndarray | None, where: str) -> None:
    if arr.null_count:
        bad = ~_mask(arr) if live is None else live & ~_mask(arr)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise SchemaError(f"{where}: null in row {row} of a non-nullable Avro field")


def _collection_runs(node: AvroType, arr: pa.Array, live: np.ndarray | None, where: str) -> list[Run]:
    offsets = np.asarray(arr.offsets).astype(np.int64)
    present = _mask(arr) if live is None else live & _mask(arr)
    counts = np.where(present, np.diff(offsets), 0)
    first, last = int(offsets[0]), int(offsets[-1])
    # items owned by a present row are live; everything else in the child arrays is skipped
    marks = np.zeros(last - first + 1, np.int64)
    np.add.at(marks, offsets[:-1][counts > 0] - first, 1)
    np.add.at(marks, offsets[1:][counts > 0] - first, -1)
    item_live = np.cumsum(marks[:-1]) > 0
    if node.kind == "map":
        keys, values = arr.keys.slice(first, last - first), arr.items.slice(first, last - first)
        _check_nulls(keys, item_live, f"{where} (map key)")
        items = _binary_runs(keys, item_live) + runs(node.child, values, item_live, f"{where}[value]")
    else:
        values = arr.values.slice(first, last - first)
        items = runs(node.child, values, item_live, f"{where}[]")
    item_bytes = join(items, last - first)
    nonempty = counts > 0
    lists = pa.ListArray.from_arrays(
        pa.array((offsets - first).astype(np.int32)), item_bytes, mask=pa.array(~nonempty)
    )
    body = pc.binary_join(lists, b"")
    terminator = _fixed(np.zeros((len(arr), 1), np.uint8), live)
    return [_varints(_zigzag(counts), nonempty), body, terminator]


def runs(node: AvroType, arr: pa.Array, live: np.ndarray | None, where: str) -> list[Run]:
    """The byte runs encoding one value of ``node`` per slot of ``arr`` (empty where not ``live``)."""
    kind, logical = node.kind, node.logical
    if kind == "union":
        split = node.nullable_split()
        if split is None:  # only null branches: a union of null
            return [_varints(np.zeros(len(arr), np.uint64), live)]
        present = _mask(arr) if live is None else live & _mask(arr)
        index, inner = split
        branch = np.where(present, 2 * index, 2 * (1 - index)).astype(np.uint8)[:, None]
        return [_fixed(branch, live), *runs(inner, arr, present, where)]
    if kind == "null":
        return []
    _check_nulls(arr, live, where)
    if kind == "record":
        out: list[Run] = []
        for i, field in enumerate(node.fields):
            out.extend(runs(field.type, arr.field(i), live, f"{where}.{field.name}"))
        return out
    if kind in ("array", "map"):
        return _collection_runs(node, arr, live, where)
    if kind in ("string", "bytes") and logical != "decimal":
        return _binary_runs(arr, live)
    if kind in ("int", "long"):
        return [_varints(_zigzag(_ints(arr)), live)]
    if kind in ("float", "double"):
        width = 4 if kind == "float" else 8
        values = np.asarray(arr.fill_null(0) if arr.null_count else arr).astype(f"<f{width}", copy=False)
        return [_fixed(values.view(np.uint8).reshape(len(arr), width), live)]
    if kind == "boolean":
        values = np.asarray(arr.fill_null(False) if arr.null_count else arr)
        return [_fixed(values.astype(np.uint8)[:, None], live)]
    if kind == "enum":
        index = pc.index_in(arr, value_set=pa.array(node.symbols, pa.string()))
        missing = np.asarray(index.is_null()) & _mask(arr)
        if live is not None:
            missing &= live
        if missing.any():
            value = arr[int(np.flatnonzero(missing)[0])].as_py()
            raise SchemaError(f"{where}: {value!r} is not a symbol of Avro enum {node.name!r}")
        return [_varints(_zigzag(np.asarray(index.fill_null(0))), live)]
    if logical == "decimal" and kind == "fixed":
        return [_fixed(decimal_to_be_matrix(arr, node.size, where), live)]
    if logical == "decimal":  # bytes: minimal two's complement, as Java's BigInteger writes it
        width = arr.type.byte_width
        matrix = decimal_to_be_matrix(arr, width, where)
        lengths = decimal_minimal_lengths(matrix)
        if live is not None:
            lengths[~live] = 0
        # right-align: row r's value is its last lengths[r] bytes
        shifted = matrix[np.arange(len(arr))[:, None], (np.arange(width) + width - lengths[:, None]) % width]
        return [_varints(_zigzag(lengths), live), _Bytes(shifted, lengths)]
    if arr.type.byte_width != node.size:  # plain fixed
        raise SchemaError(f"{where}: {arr.type} does not fit Avro fixed({node.size})")
    data = np.frombuffer(arr.buffers()[1], np.uint8, len(arr) * node.size, arr.offset * node.size)
    return [_fixed(data.reshape(len(arr), node.size), live)]


def _merged(parts: list[Run]) -> list[pa.Array]:
    """Neighbouring numpy runs merged, everything as Arrow."""
    out: list[pa.Array] = []
    pending: _Bytes | None = None
    for part in parts:
        if isinstance(part, _Bytes):
            if pending is not None and pending.width + part.width <= _MAX_WIDTH:
                pending.extend(part)
            else:
                if pending is not None:
                    out.append(pending.arrow())
                pending = part
            continue
        if pending is not None:
            out.append(pending.arrow())
            pending = None
        out.append(part)
    if pending is not None:
        out.append(pending.arrow())
    return out


def join(parts: list[Run], rows: int) -> pa.Array:
    """Concatenate the byte runs slot by slot (null slots count as empty)."""
    arrays = _merged(parts)
    if not arrays:
        return pa.array([b""] * rows, pa.binary())
    if len(arrays) == 1:
        return arrays[0].fill_null(b"") if arrays[0].null_count else arrays[0]
    return pc.binary_join_element_wise(*arrays, b"", null_handling="replace", null_replacement=b"")


def _lengths(run: Run) -> np.ndarray:
    """Bytes each slot of a run contributes."""
    if isinstance(run, _Bytes):
        return run.lengths
    kind = np.int64 if pa.types.is_large_binary(run.type) else np.int32
    offsets = np.frombuffer(run.buffers()[1], kind, len(run) + 1, run.offset * np.dtype(kind).itemsize)
    lengths = np.diff(offsets).astype(np.int64)
    if run.null_count:
        lengths[~np.asarray(run.is_valid())] = 0
    return lengths


def encode_datums(batch: pa.RecordBatch, record: AvroType, *, framed: bool) -> pa.Array:
    """One binary slot per row: its Avro datum, preceded by its int32 big-endian length if ``framed``."""
    parts: list[Run] = []
    for i, field in enumerate(record.fields):
        parts.extend(runs(field.type, batch.column(i), None, field.name))
    if framed:
        lengths = np.zeros(batch.num_rows, np.int64)
        for part in parts:
            lengths += _lengths(part)
        prefix = lengths.astype(">i4").view(np.uint8).reshape(-1, 4)
        parts.insert(0, _fixed(prefix, None))
    return join(parts, batch.num_rows)
