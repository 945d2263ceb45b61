"""The file-system view's selections over whole listings as arrays (planning at scale).

:class:`FileSystemView` gets these from :class:`ArraySelections`: which file groups a planner
looks at is decided with array operations over a :class:`FileIndex` (the listing parsed at once),
and ``FileSlice`` objects (or plain names and sizes) are built only for the groups chosen. Each
selection equals what the view's objects give (``tests/fixtures/test_file_index.py``).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_index import FileIndex, Ints, Mask, group_any, group_max, group_min, paused_gc
from hoodie.file_group.file_slice import FileGroup, FileGroupId, FileSlice, SliceFiles
from hoodie.file_group.log_file import LogFile
from hoodie.timeline.instant_time import normalize

if TYPE_CHECKING:
    from hoodie.file_group.view import PartitionListing


class ArraySelections:
    """Array selections of a file-system view (mixed into :class:`FileSystemView`)."""

    layout: int
    as_of: str | None
    _pending_compactions: Mapping[FileGroupId, str]
    _replaced: Mapping[FileGroupId, str]

    def is_committed(self, ts: str) -> bool:
        raise NotImplementedError

    def completion_time(self, ts: str) -> str | None:
        raise NotImplementedError

    def prefetch(self, partitions: Sequence[str]) -> None:
        raise NotImplementedError

    def listing(self, partition_path: str) -> PartitionListing:
        raise NotImplementedError

    def _file_groups(
        self,
        partition_path: str,
        base_files: Iterable[BaseFile],
        log_files: Iterable[LogFile],
        only: Collection[str] | None,
    ) -> list[FileGroup]:
        raise NotImplementedError

    def file_index(self, partitions: Sequence[str]) -> FileIndex:
        """The files of ``partitions`` parsed into arrays, for the selections below."""
        self.prefetch(partitions)
        return FileIndex.build([self.listing(p) for p in partitions])

    def _committed_bases(self, index: FileIndex) -> Mask:
        """Rows of base files whose instant is visible (what ``file_groups`` adds as base files)."""
        return ~index.is_log & index.per_instant([self.is_committed(t) for t in index.instants])

    def _placed_logs(self, index: FileIndex) -> Mask:
        """Rows of log files ``file_groups`` places in a slice (``_place_log_v1`` / ``_place_log_v2``)."""
        if self.layout >= 2:
            flags = [self.is_committed(t) for t in index.instants]
        else:
            bound = normalize(self.as_of) if self.as_of is not None else None
            flags = [bound is None or normalize(t) <= bound for t in index.instants]
        return index.is_log & index.per_instant(flags)

    def _live(self, index: FileIndex, exclude: Collection[FileGroupId]) -> Mask:
        """File groups neither replaced nor in ``exclude``."""
        gone = [(g.partition_path, g.file_id) for g in (*self._replaced, *exclude)]
        return ~index.group_mask(gone)

    def with_log_files(self, index: FileIndex, exclude: Collection[FileGroupId] = ()) -> Mask:
        """Per file group of ``index``: live (not replaced, not in ``exclude``) with log files in a
        slice (``FileGroup.has_log_files``)."""
        with_logs = group_any(index.group[self._placed_logs(index)], index.num_groups)
        return with_logs & self._live(index, exclude)

    def latest_base_sizes(self, index: FileIndex, exclude: Collection[FileGroupId] = ()) -> tuple[Ints, Ints]:
        """Live file groups whose latest slice is not empty, and its base file's size (-1: none).

        Decided with arrays from the newest visible base file and the placed log files per group;
        groups under a pending compaction (whose latest slice may be the empty one it opened) are
        built as objects. Group numbers ascending.
        """
        groups = index.num_groups
        bases = self._committed_bases(index)
        logs = self._placed_logs(index)
        base_rank = group_max(index.group[bases], index.instant_rank[bases], groups)
        log_rank = group_max(index.group[logs], index.instant_rank[logs], groups)
        has_base = base_rank >= 0
        # Layout 2 places every log in a slice at or before the newest base file's; layout 1 names
        # the slice, which may be newer than every base file.
        base_latest = has_base if self.layout >= 2 else has_base & (base_rank >= log_rank)
        rows = np.flatnonzero(bases)
        newest = rows[index.instant_rank[rows] == base_rank[index.group[rows]]]
        base_row = group_max(index.group[newest], newest, groups)  # the last listed one, as a dict keeps
        size = np.where(base_latest, index.size[np.maximum(base_row, 0)], -1)
        live = self._live(index, exclude)
        pending = index.group_mask([(g.partition_path, g.file_id) for g in self._pending_compactions])
        simple = np.flatnonzero(live & ~pending & (has_base | (log_rank >= 0)))
        if not pending.any():
            return simple, size[simple]
        found = dict(zip(simple.tolist(), size[simple].tolist(), strict=True))
        for fg in self.build_file_groups(index, live & pending):
            latest = fg.slices()[0]
            if not latest.is_empty:
                (number,) = index.groups_of([(fg.partition_path, fg.file_id)]).tolist()
                found[number] = latest.base_file.size if latest.base_file is not None else -1
        numbers = sorted(found)
        return np.asarray(numbers, dtype=np.int64), np.asarray([found[n] for n in numbers], dtype=np.int64)

    def latest_slices(self, index: FileIndex, chosen: Mask) -> list[FileSlice]:
        """The latest slice of each chosen file group, in ``build_file_groups``' order: what
        ``[fg.slices()[0] for fg in build_file_groups(index, chosen)]`` gives."""
        with paused_gc():
            order, logs = self._latest_rows(index, chosen)
            log_files: dict[int, list[LogFile]] = {}
            for number, (_, log) in zip(index.group[logs].tolist(), index.files(logs), strict=True):
                assert isinstance(log, LogFile)
                log_files.setdefault(number, []).append(log)
            simple = [(number, row) for number, row in order if isinstance(row, int)]
            bases = index.files(np.asarray([row for _, row in simple], dtype=np.int64))
            built: dict[int, FileSlice] = {}
            for (number, _), (part, base) in zip(simple, bases, strict=True):
                assert isinstance(base, BaseFile)
                logs_of = tuple(log_files.get(number, ()))
                built[number] = FileSlice(
                    index.partitions[part], base.file_id, base.commit_time, base, logs_of
                )
            return [row if isinstance(row, FileSlice) else built[number] for number, row in order]

    def latest_slice_files(self, index: FileIndex, chosen: Mask) -> list[SliceFiles]:
        """``latest_slices`` as names and sizes only (no file objects), for plans that name files."""
        with paused_gc():
            order, logs = self._latest_rows(index, chosen)
            # The logs come by group: each slice takes a run of them.
            names = index.name.take(pa.array(logs, pa.int64())).to_pylist()
            sizes = index.size[logs].tolist()
            log_groups = index.group[logs]
            numbers = np.asarray([number for number, row in order if isinstance(row, int)], dtype=np.int64)
            rows = np.asarray([row for _, row in order if isinstance(row, int)], dtype=np.int64)
            take = pa.array(rows, pa.int64())
            columns = zip(
                index.part[rows].tolist(),
                index.file_id.take(take).to_pylist(),
                index.instant.take(take).to_pylist(),
                index.name.take(take).to_pylist(),
                index.size[rows].tolist(),
                np.searchsorted(log_groups, numbers, side="left").tolist(),
                np.searchsorted(log_groups, numbers, side="right").tolist(),
                strict=True,
            )
            partitions = index.partitions
            out: list[SliceFiles] = []
            for _, row in order:
                if isinstance(row, FileSlice):
                    out.append(SliceFiles.of(row))
                    continue
                part, file_id, instant, name, size, start, end = next(columns)
                out.append(
                    SliceFiles(
                        partitions[part], file_id, instant, name, size, names[start:end], sizes[start:end]
                    )
                )
            return out

    def _latest_rows(self, index: FileIndex, chosen: Mask) -> tuple[list[tuple[int, int | FileSlice]], Ints]:
        """The chosen groups in ``build_file_groups``' order, each with its latest slice's base-file
        row or, for groups sliced as objects, the slice; and the rows of the sliced groups' logs,
        by group in Hudi's log order.

        A group with a visible base file and no pending compaction is sliced with arrays: its latest
        slice is that base file's, holding (layout 2) the placed logs whose delta commit completed at
        or after the base instant, or (layout 1) those named by it. Other groups (no base file, a
        pending compaction, a layout-1 log newer than every base file) are built as objects.
        """
        groups = index.num_groups
        bases = self._committed_bases(index)
        logs = self._placed_logs(index)
        base_rank = group_max(index.group[bases], index.instant_rank[bases], groups)
        rows = np.flatnonzero(bases)
        newest = rows[index.instant_rank[rows] == base_rank[index.group[rows]]]
        base_row = group_max(index.group[newest], newest, groups)
        first_base = group_min(index.group[rows], rows, groups)  # the order of file_groups
        pending = index.group_mask([(g.partition_path, g.file_id) for g in self._pending_compactions])
        simple = chosen & (base_rank >= 0) & ~pending
        log_rows = np.flatnonzero(logs & simple[index.group])
        log_groups = index.group[log_rows]
        if self.layout >= 2:
            completed = self._completion_positions(index)[index.instant_code[log_rows]]
            in_latest = completed >= base_rank[log_groups]
        else:
            log_rank = group_max(log_groups, index.instant_rank[log_rows], groups)
            simple &= log_rank <= base_rank
            in_latest = simple[log_groups] & (index.instant_rank[log_rows] == base_rank[log_groups])
        log_rows = log_rows[in_latest]
        # Hudi's log order: instant, version, write token (none first); one group's logs together.
        take = pa.array(log_rows, pa.int64())
        token = index.token.take(take)
        ordered = pa.table(
            {
                "group": index.group[log_rows],
                "instant": index.instant.take(take),
                "version": index.version[log_rows],
                "has_token": pc.not_equal(token, ""),
                "token": token,
                "row": log_rows,
            }
        ).sort_by([(c, "ascending") for c in ("group", "instant", "version", "has_token", "token")])
        sorted_rows = np.asarray(ordered.column("row").to_numpy(), dtype=np.int64)
        numbers = np.flatnonzero(simple)
        parts = index.part[base_row[numbers]].tolist()
        out: list[tuple[tuple[int, int, int, str], int, int | FileSlice]] = [
            ((part, 0, first, ""), number, row)
            for part, first, number, row in zip(
                parts, first_base[numbers].tolist(), numbers.tolist(), base_row[numbers].tolist(), strict=True
            )
        ]
        complex_groups = chosen & ~simple
        if complex_groups.any():
            pending_order = {g: i for i, g in enumerate(self._pending_compactions)}
            position = {p: i for i, p in enumerate(index.partitions)}
            for fg in self.build_file_groups(index, complex_groups):
                (number,) = index.groups_of([(fg.partition_path, fg.file_id)]).tolist()
                part = position[fg.partition_path]
                if first_base[number] >= 0:
                    key = (part, 0, int(first_base[number]), "")
                elif fg.group_id in pending_order:
                    key = (part, 1, pending_order[fg.group_id], "")
                else:
                    key = (part, 2, 0, fg.file_id)
                out.append((key, number, fg.slices()[0]))
        out.sort(key=lambda entry: entry[0])
        return [(number, row) for _, number, row in out], sorted_rows

    def _completion_positions(self, index: FileIndex) -> Ints:
        """Per distinct instant, the rank of the newest instant at or before its completion time
        (all ranks for a visible instant without one, -1 for none)."""
        ordered = sorted((normalize(t), t) for t in index.instants)
        normalized = [n for n, _ in ordered]
        out = np.full(len(index.instants), -1, dtype=np.int64)
        for i, t in enumerate(index.instants):
            done = self.completion_time(t) if self.is_committed(t) else None
            if done is None:
                out[i] = len(ordered) if self.is_committed(t) else -1
            else:
                out[i] = bisect.bisect_right(normalized, normalize(done)) - 1
        return out

    def build_file_groups(self, index: FileIndex, chosen: Mask) -> list[FileGroup]:
        """The chosen file groups (a flag per group of ``index``) as ``file_groups`` builds them, in
        partition order and, within a partition, in ``file_groups``' order."""
        with paused_gc():
            return self._build_file_groups(index, chosen)

    def _build_file_groups(self, index: FileIndex, chosen: Mask) -> list[FileGroup]:
        by_partition: dict[int, tuple[list[BaseFile], list[LogFile]]] = {}
        for part, file in index.files(np.flatnonzero(chosen[index.group])):
            bases, logs = by_partition.setdefault(part, ([], []))
            if isinstance(file, LogFile):
                logs.append(file)
            else:
                bases.append(file)
        out: list[FileGroup] = []
        for part in sorted(by_partition):
            bases, logs = by_partition[part]
            only = {b.file_id for b in bases} | {lf.file_id for lf in logs}
            out.extend(self._file_groups(index.partitions[part], bases, logs, only))
        return out
