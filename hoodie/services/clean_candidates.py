"""The files a clean may delete from, found with array operations before file-by-file planning.

A file group with one slice loses nothing to a clean unless it is replaced, so the clean planner
(:mod:`hoodie.services.clean_planner`) need only walk the groups with more than one slice. Finding
them means parsing the whole listing into a :class:`FileIndex`, about 40% of what planning the
same files one by one costs; on a table whose groups almost all have several slices that is pure
overhead. So a sample of partitions spread over the listing is looked at first, and the whole
listing is cut only when the sample says the cut drops enough files to pay for itself. Either way
the plan is the same: the cut only leaves out groups the planner would keep whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from hoodie.file_group.file_index import FileIndex, Mask, group_any, group_max, group_min
from hoodie.file_group.view import ListedNames, PartitionListing

SAMPLE_FILES = 4096
"""Files a sample holds at least (whole partitions, spread evenly) before the cut is decided."""
SAMPLE_STRIDE_PARTITIONS = 16
"""The sample takes every ``len(partitions) // 16``-th partition, in turn, until it is big enough."""
WORTH_DROPPING = 0.4
"""Cut the whole listing when the sample's cut drops at least this share of its files: indexing a
file costs about 0.4 of planning it file by file (``make bench`` clean and planning sections)."""


def files_worth_planning(
    table_version: int,
    partitions: Sequence[str],
    listed: Mapping[str, Sequence[str]],
    whole: Iterable[str],
    pinned: Iterable[tuple[str, str]],
) -> Mapping[str, Sequence[str]]:
    """``listed`` cut to the file groups a clean may touch, when a sample says the cut pays.

    ``whole`` are partitions planned from every file (a replaced group: whether the partition
    goes looks at all its files); ``pinned`` are ``(partition, file id)`` pairs a pending
    compaction, log compaction or clustering holds, kept like groups of several slices.
    """
    given = set(whole)
    whole = {p for p in partitions if p in given}
    rest = [p for p in partitions if p not in whole]
    pinned = list(pinned)
    sample = _sample(rest, listed)
    if len(sample) < len(rest):
        kept, total = _kept_files(table_version, sample, listed, pinned)
        if total == 0 or kept > total * (1 - WORTH_DROPPING):
            return listed
    return more_than_one_slice(table_version, partitions, listed, whole, pinned)


def more_than_one_slice(
    table_version: int,
    partitions: Sequence[str],
    listed: Mapping[str, Sequence[str]],
    whole: Iterable[str],
    pinned: Iterable[tuple[str, str]],
) -> dict[str, Sequence[str]]:
    """``listed`` cut to the groups with more than one slice, ``pinned`` ones and ``whole`` partitions.

    Kept are groups with two base instants; layout 2 (table version 8+) groups with a log older
    than their newest base file (a log lands in an older slice only then) or, without a base file,
    logs of two instants; layout 1 groups whose files carry two instants. Partitions with a CDC
    log are kept whole too.
    """
    given = set(whole)
    whole = {p for p in partitions if p in given or any(n.endswith(".cdc") for n in listed[p])}
    rest = [p for p in partitions if p not in whole]
    index = FileIndex.build([_listing(p, listed[p]) for p in rest])
    several = _several(table_version, index, pinned)
    out: dict[str, Sequence[str]] = {p: listed[p] for p in whole}
    rows = np.flatnonzero(several[index.group])
    cut: dict[int, list[str]] = {}
    for part, name in zip(
        index.part[rows].tolist(), index.name.take(pa.array(rows)).to_pylist(), strict=True
    ):
        cut.setdefault(part, []).append(name)
    for part, partition in enumerate(rest):
        out[partition] = cut.get(part, [])
    return out


def _several(table_version: int, index: FileIndex, pinned: Iterable[tuple[str, str]]) -> Mask:
    """Per group of ``index``: whether it has more than one slice, or is ``pinned``."""
    groups, rank = index.num_groups, index.instant_rank
    bases, logs = ~index.is_log, index.is_log
    base_max = group_max(index.group[bases], rank[bases], groups)
    base_min = group_min(index.group[bases], rank[bases], groups)
    if table_version >= 8:
        log_max = group_max(index.group[logs], rank[logs], groups)
        log_min = group_min(index.group[logs], rank[logs], groups)
        older_log = group_any(index.group[logs & (rank < base_max[index.group])], groups)
        no_base_two = (base_max < 0) & (log_max != log_min)
        several = (base_max != base_min) | older_log | no_base_two
    else:
        several = (group_max(index.group, rank, groups) != group_min(index.group, rank, groups)) | (
            base_max != base_min
        )
    return np.asarray(several | index.group_mask(list(pinned)), dtype=bool)


def _sample(partitions: Sequence[str], listed: Mapping[str, Sequence[str]]) -> list[str]:
    """Whole partitions spread over ``partitions`` until they hold ``SAMPLE_FILES`` files."""
    stride = max(1, len(partitions) // SAMPLE_STRIDE_PARTITIONS)
    out: list[str] = []
    files = 0
    for start in range(stride):
        for partition in partitions[start::stride]:
            if files >= SAMPLE_FILES:
                return out
            out.append(partition)
            files += len(listed[partition])
    return out


def _kept_files(
    table_version: int,
    sample: Sequence[str],
    listed: Mapping[str, Sequence[str]],
    pinned: list[tuple[str, str]],
) -> tuple[int, int]:
    """Files of ``sample`` the cut keeps, and the files it looked at (base and log files)."""
    index = FileIndex.build([_listing(p, listed[p]) for p in sample])
    several = _several(table_version, index, pinned)
    return int(np.count_nonzero(several[index.group])), len(index.group)


def _listing(partition: str, names: Sequence[str]) -> PartitionListing:
    """The listing of ``names`` (sizes do not matter to the cut), or the one they were cut from."""
    if isinstance(names, ListedNames):
        return names.listing
    return PartitionListing(partition, list(names), [0] * len(names))
