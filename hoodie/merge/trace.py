"""Where the vectorized merge put each base row, for the CDC log of a compaction.

A compaction of a CDC table logs the diff between the old base file and the merged output (as
1.1's ``FileGroupReaderBasedMergeHandle`` does through its ``CDCCallback``). The merge already
knows that diff: every base row is kept in place or lost to its key's log winner, and every log
row it emits either replaces a lost base row (an update) or is new (an insert). :class:`MergeTrace`
records it as the merge runs, with the base rows it read, so the CDC log needs neither a second
read of the base file nor a key lookup between the two files.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa


@dataclass
class MergeTrace:
    """The base rows of one merge and what became of them (filled by ``iter_merge_slice``)."""

    base_parts: list[pa.Table] = field(default_factory=list)
    _lost_pos: list[npt.NDArray[np.int64]] = field(default_factory=list)
    _lost_codes: list[npt.NDArray[np.int64]] = field(default_factory=list)
    _base_rows: int = 0
    emitted_codes: npt.NDArray[np.int64] | None = None
    """Log-key codes of the log rows emitted after the kept base rows, in output order."""
    base_has: npt.NDArray[np.bool_] | None = None
    """Per log-key code: whether the base file held the key."""
    complete: bool = False

    def base_batch(
        self, batch: pa.Table, codes: npt.NDArray[np.int64] | None, keep: npt.NDArray[np.bool_]
    ) -> None:
        """A base batch went through the merge: ``codes`` per row (-1: no log entry), ``keep`` the
        rows kept in place."""
        self.base_parts.append(batch)
        lost = np.flatnonzero(~keep)
        if len(lost) and codes is not None:
            self._lost_pos.append(lost.astype(np.int64) + self._base_rows)
            self._lost_codes.append(codes[lost])
        self._base_rows += batch.num_rows

    def finish(self, emitted_codes: npt.NDArray[np.int64], base_has: npt.NDArray[np.bool_]) -> None:
        self.emitted_codes = emitted_codes
        self.base_has = base_has
        self.complete = True

    @property
    def base_rows(self) -> int:
        return self._base_rows

    def positions(
        self,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(updated base rows, their output rows, deleted base rows, inserted output rows), base
        rows in base order and output rows in output order; the output is the kept base rows in
        order, then the emitted log rows."""
        assert self.complete and self.emitted_codes is not None and self.base_has is not None
        lost_pos = np.concatenate(self._lost_pos) if self._lost_pos else np.zeros(0, np.int64)
        lost_codes = np.concatenate(self._lost_codes) if self._lost_codes else np.zeros(0, np.int64)
        kept = self._base_rows - len(lost_pos)
        out_of_code = np.full(len(self.base_has), -1, dtype=np.int64)
        out_of_code[self.emitted_codes] = kept + np.arange(len(self.emitted_codes), dtype=np.int64)
        after_of_lost = out_of_code[lost_codes]
        updated = after_of_lost >= 0
        inserted = kept + np.flatnonzero(~self.base_has[self.emitted_codes]).astype(np.int64)
        return lost_pos[updated], after_of_lost[updated], lost_pos[~updated], inserted
