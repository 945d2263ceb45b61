"""A listing of many partitions parsed into arrays, for planning over wide tables.

Every file name of the listing is parsed at once with Arrow's regular expressions (the same
patterns :class:`BaseFile` and :class:`LogFile` parse one name with), so that the file-system
view can decide which file groups a planner looks at with array operations and build
``FileSlice`` objects only for those. Rows are the base files (in listing order) followed by the
log files (in listing order) of every partition; CDC logs, archive logs and names that are
neither are left out, as :func:`hoodie.file_group.view.partition_listing` leaves them out.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.file_group.base_file import BASE_PATTERN, BaseFile
from hoodie.file_group.log_file import LOG_PATTERN, LogFile
from hoodie.timeline.instant_time import normalize

if TYPE_CHECKING:
    from hoodie.file_group.view import PartitionListing

Mask = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FileIndex:
    """Base and log files of ``partitions`` as columns; one row per file.

    ``group`` numbers the file groups ``(partition, file id)`` of the listing; ``instants`` are the
    distinct instant times the names carry, ``instant_code`` a row's index into them and
    ``instant_rank`` their order by normalized time (ties broken by the text, so distinct texts
    rank apart).
    """

    partitions: list[str]
    part: Ints
    is_log: Mask
    name: pa.Array
    size: Ints
    file_id: pa.Array
    token: pa.Array
    instant: pa.Array
    ext: pa.Array
    version: Ints
    group: Ints
    file_ids: pa.Array
    """The distinct file ids; a group's key is ``partition index * len(file_ids) + file id's index``."""
    group_keys: Ints
    """Each group's key, ascending (the group number is its position)."""
    instants: list[str]
    instant_code: Ints
    instant_rank: Ints

    @property
    def num_groups(self) -> int:
        return len(self.group_keys)

    @classmethod
    def build(cls, listings: Sequence[PartitionListing]) -> FileIndex:
        every, size_all, counts = _columns(listings)
        part_all = np.repeat(np.arange(len(listings), dtype=np.int64), counts)
        dot = np.asarray(pc.starts_with(every, ".").to_numpy(zero_copy_only=False), dtype=bool)
        # Base names never start with a dot and log names always do (``partition_listing``).
        base_rows, base = _base_files(every, np.flatnonzero(~dot))
        log_rows, logs = _log_files(every, np.flatnonzero(dot))
        rows = np.concatenate([base_rows, log_rows])
        n_base, n_log = len(base_rows), len(log_rows)
        part = part_all[rows]
        file_id = pa.concat_arrays([base.field("file_id"), logs.field("file_id")])
        instant = pa.concat_arrays([base.field("instant"), logs.field("instant")])
        ids = file_id.dictionary_encode()
        keys = part * max(len(ids.dictionary), 1) + np.asarray(ids.indices.to_numpy(), dtype=np.int64)
        group_keys, group = np.unique(keys, return_inverse=True)
        codes = instant.dictionary_encode()
        instants = codes.dictionary.to_pylist()
        order = sorted(range(len(instants)), key=lambda i: (normalize(instants[i]), instants[i]))
        rank = np.empty(len(instants), dtype=np.int64)
        rank[order] = np.arange(len(instants), dtype=np.int64)
        instant_code = np.asarray(codes.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        return cls(
            partitions=[listing.partition_path for listing in listings],
            part=part,
            is_log=np.concatenate([np.zeros(n_base, dtype=bool), np.ones(n_log, dtype=bool)]),
            name=every.take(pa.array(rows, pa.int64())),
            size=size_all[rows],
            file_id=file_id,
            token=pa.concat_arrays([base.field("token"), logs.field("token")]),
            instant=instant,
            ext=pa.concat_arrays([base.field("ext"), logs.field("ext")]),
            version=np.concatenate(
                [
                    np.zeros(n_base, dtype=np.int64),
                    np.asarray(pc.cast(logs.field("version"), pa.int64()).to_numpy(), dtype=np.int64),
                ]
            ),
            group=np.asarray(group, dtype=np.int64).reshape(-1),
            file_ids=ids.dictionary,
            group_keys=np.asarray(group_keys, dtype=np.int64),
            instants=instants,
            instant_code=instant_code,
            instant_rank=rank[instant_code] if len(instant_code) else instant_code,
        )

    def first_rows(self, groups: Ints) -> Ints:
        """A row of each of ``groups`` (its first)."""
        _, first = np.unique(self.group, return_index=True)
        return np.asarray(first[groups], dtype=np.int64)

    def group_part(self, groups: Ints) -> Ints:
        """The partition index of each of ``groups``."""
        return self.part[self.first_rows(groups)]

    def groups_of(self, partition_file_ids: Sequence[tuple[str, str]]) -> Ints:
        """The group numbers of ``(partition, file id)`` pairs; pairs not in the listing are left out."""
        position = {p: i for i, p in enumerate(self.partitions)}
        pairs = [(position[p], f) for p, f in partition_file_ids if p in position]
        if not pairs or not len(self.group_keys):
            return np.zeros(0, dtype=np.int64)
        ids = pc.index_in(pa.array([f for _, f in pairs], pa.string()), value_set=self.file_ids)
        found = np.asarray(pc.fill_null(ids, -1).to_numpy(), dtype=np.int64)
        keys = np.asarray([p for p, _ in pairs], dtype=np.int64) * len(self.file_ids) + found
        at = np.minimum(np.searchsorted(self.group_keys, keys), len(self.group_keys) - 1)
        return np.asarray(at[(found >= 0) & (self.group_keys[at] == keys)], dtype=np.int64)

    def group_mask(self, partition_file_ids: Sequence[tuple[str, str]]) -> Mask:
        mask = np.zeros(self.num_groups, dtype=bool)
        mask[self.groups_of(partition_file_ids)] = True
        return mask

    def per_instant(self, values: Sequence[bool]) -> Mask:
        """A per-row flag from a flag per distinct instant (``instants`` order)."""
        return np.asarray(values, dtype=bool)[self.instant_code]

    def files(self, rows: Ints) -> list[tuple[int, BaseFile | LogFile]]:
        """``(partition index, file)`` objects of ``rows``, built from the parsed columns."""
        take = pa.array(rows, pa.int64())
        out: list[tuple[int, BaseFile | LogFile]] = []
        columns = zip(
            self.part[rows].tolist(),
            self.is_log[rows].tolist(),
            self.file_id.take(take).to_pylist(),
            self.token.take(take).to_pylist(),
            self.instant.take(take).to_pylist(),
            self.ext.take(take).to_pylist(),
            self.version[rows].tolist(),
            self.size[rows].tolist(),
            strict=True,
        )
        for part, is_log, file_id, token, instant, ext, version, size in columns:
            if is_log:
                out.append((part, LogFile(file_id, instant, version, token or None, ext, "", size)))
            else:
                out.append((part, BaseFile(file_id, token, instant, ext, size)))
        return out


def _columns(listings: Sequence[PartitionListing]) -> tuple[pa.Array, Ints, Ints]:
    """Names and sizes of every listing, one after the other, and each listing's count: taken
    from the columns they were cut from when all were cut from the same, else from their lists."""
    cut = [listing.columns for listing in listings]
    block = cut[0][0] if cut and cut[0] is not None else None
    if block is not None and all(c is not None and c[0] is block for c in cut):
        at = np.asarray([c[1] for c in cut if c is not None], dtype=np.int64)
        starts, stops = block.bounds[at], block.bounds[at + 1]
        counts = stops - starts
        if np.array_equal(at, np.arange(len(block.partitions))):
            return block.names, block.sizes, counts
        first = np.cumsum(counts) - counts
        rows = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(starts - first, counts)
        return block.names.take(pa.array(rows, pa.int64())), block.sizes[rows], counts
    names: list[str] = []
    sizes: list[int] = []
    lengths: list[int] = []
    for listing in listings:
        names.extend(listing.names)
        sizes.extend(listing.sizes)
        lengths.append(len(listing.names))
    return pa.array(names, pa.string()), np.asarray(sizes, dtype=np.int64), np.asarray(lengths, np.int64)


def _matching(names: pa.Array, rows: Ints, pattern: str) -> tuple[Ints, pa.Array]:
    """The rows among ``rows`` whose name matches ``pattern``, and those names."""
    candidates = names.take(pa.array(rows, pa.int64()))
    matched = pc.match_substring_regex(candidates, pattern)
    kept = np.asarray(matched.to_numpy(zero_copy_only=False), dtype=bool)
    return rows[kept], candidates.filter(matched)


def _base_files(names: pa.Array, rows: Ints) -> tuple[Ints, pa.StructArray]:
    """Base files among ``rows``: ``<fileId>_<writeToken>_<instant>.<ext>``.

    Checked against :data:`BASE_PATTERN` (whose parts hold no ``_`` and an instant of digits), then
    cut at the underscores and the last part's dot: the pattern's groups, without capturing.
    """
    rows, matched = _matching(names, rows, BASE_PATTERN)
    parts = pc.split_pattern(matched, "_")
    instant_ext = pc.split_pattern(pc.list_element(parts, 2), ".", max_splits=1)
    fields = {
        "file_id": pc.list_element(parts, 0),
        "token": pc.list_element(parts, 1),
        "instant": pc.list_element(instant_ext, 0),
        "ext": pc.list_element(instant_ext, 1),
    }
    return rows, pa.StructArray.from_arrays(list(fields.values()), names=list(fields))


def _log_files(names: pa.Array, rows: Ints) -> tuple[Ints, pa.StructArray]:
    """Data log files among ``rows``: ``.<fileId>_<instant>.log.<version>[_<writeToken>]``.

    Checked against :data:`LOG_PATTERN` (the file id and the instant hold no ``_``, the instant no
    dot), CDC logs (``.cdc``) and archive logs left out, then cut at the underscores and dots.
    """
    rows, matched = _matching(names, rows, LOG_PATTERN)
    data = pc.invert(pc.ends_with(matched, ".cdc"))
    rows, matched = rows[np.asarray(data.to_numpy(zero_copy_only=False), dtype=bool)], matched.filter(data)
    parts = pc.split_pattern(matched, "_", max_splits=2)
    instant_ext_version = pc.split_pattern(pc.list_element(parts, 1), ".")
    ext = pc.list_element(instant_ext_version, 1)
    is_log = pc.equal(ext, "log")
    fields = {
        "file_id": pc.utf8_slice_codeunits(pc.list_element(parts, 0), 1),
        "token": pc.binary_join(pc.list_slice(parts, 2, 3), ""),
        "instant": pc.list_element(instant_ext_version, 0),
        "ext": ext,
        "version": pc.list_element(instant_ext_version, 2),
    }
    logs = pa.StructArray.from_arrays(list(fields.values()), names=list(fields)).filter(is_log)
    return rows[np.asarray(is_log.to_numpy(zero_copy_only=False), dtype=bool)], logs


@contextmanager
def paused_gc() -> Iterator[None]:
    """Cyclic garbage collection paused while a plan's objects are built.

    Building ten thousand slices (objects without cycles) triggers generation-2 collections that
    walk the whole heap, the listing's included: three quarters of the building time on a
    2,000-partition table. Collection resumes after (unless it was off already).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def group_max(groups: Ints, values: Ints, num_groups: int, empty: int = -1) -> Ints:
    """Per group, the largest of ``values`` (``empty`` for groups without any)."""
    out = np.full(num_groups, empty, dtype=np.int64)
    np.maximum.at(out, groups, values)
    return out


def group_min(groups: Ints, values: Ints, num_groups: int, empty: int = -1) -> Ints:
    """Per group, the smallest of ``values`` (``empty`` for groups without any)."""
    out = np.full(num_groups, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(out, groups, values)
    out[out == np.iinfo(np.int64).max] = empty
    return out


def group_any(groups: Ints, num_groups: int) -> Mask:
    out = np.zeros(num_groups, dtype=bool)
    out[groups] = True
    return out
