"""A base file's record keys read a row group at a time, each row group's looked up in the log keys once.

The merge of a slice finds, for every base row, its key's code among the merged log keys (or -1).
Looked up batch by batch, the hash table of the log keys is rebuilt for every batch (``pc.index_in``
builds one per call: on a 200,000-key log about as much work as probing 250,000 base keys). Here
the key column of a row group is decoded on its own before the row group's other columns, the
lookup runs once over it, and the row group's batches get zero-copy slices of that column and of
its codes. Memory holds the keys and codes of the row groups being read (Parquet writers bound a
row group's bytes: Hudi's ``hoodie.parquet.block.size``, 120 MB by default).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

#: record keys -> their codes among the log's merged keys (-1: no log entry)
CodesOf = Callable[[pa.Array], npt.NDArray[np.int64]]


class RowGroupKeys:
    """The key columns of a base file's row groups, in file order, handed from the thread that
    reads the file (:meth:`add`, before the row group's first batch) to the merge that consumes
    its batches in the same order (:meth:`codes_of`)."""

    def __init__(self, key_field: str) -> None:
        self.key_field = key_field
        self._groups: deque[pa.Array] = deque()
        self._guard = threading.Lock()
        self.split = False  # set by the reader: the batches carry the slices of what it added
        self._discarded = False

    def add(self, keys: pa.Array) -> None:
        """The key column of the next row group (its batches follow in order)."""
        with self._guard:
            self.split = True
            if not self._discarded:
                self._groups.append(keys)

    def discard(self) -> None:
        """Nothing will look keys up: hold none from now on."""
        with self._guard:
            self._discarded = True
            self._groups.clear()

    def _next_group(self) -> pa.Array:
        with self._guard:
            if not self._groups:
                raise RuntimeError("a base batch came without its row group's keys")
            return self._groups.popleft()

    def codes_of(self, dictionary: pa.Array) -> CodesOf:
        """Batch keys -> their codes in ``dictionary``, one lookup per row group (batches must be
        those read with this object, in order; when the reader did not split, one per batch)."""
        group: pa.Array | None = None
        codes = np.zeros(0, dtype=np.int64)
        pos = 0

        def lookup(keys: pa.Array) -> npt.NDArray[np.int64]:
            idx = pc.index_in(keys, value_set=dictionary)
            return np.asarray(pc.fill_null(idx, -1).to_numpy(zero_copy_only=False), dtype=np.int64)

        def codes_of(keys: pa.Array) -> npt.NDArray[np.int64]:
            nonlocal group, codes, pos
            if not self.split:
                return lookup(keys)
            n = len(keys)
            if not n:
                return np.zeros(0, dtype=np.int64)
            if group is None or pos == len(group):
                group, pos = self._next_group(), 0
                codes = lookup(group)
            if pos + n > len(group) or keys[0] != group[pos] or keys[n - 1] != group[pos + n - 1]:
                raise RuntimeError(f"a base batch of {n} rows is not rows {pos}.. of its row group's keys")
            out = codes[pos : pos + n]
            pos += n
            return out

        return codes_of
