"""The file-system view: a table's file groups and slices as of any instant.

It applies Apache Hudi's visibility rules when building slices from a storage listing:

* a base file is visible only if its instant completed (instants older than the active timeline
  count as completed, as Hudi assumes for archived instants); base files of pending compaction or
  clustering, and files left by failed or rolled-back writes, are therefore invisible;
* table version 6 (layout 1): a log file belongs to the slice named by its base instant; a pending
  compaction at ``C`` opens an empty slice ``C`` that collects the logs written after it, and a
  snapshot read merges it with the previous slice;
* table versions 8+ (layout 2): a log file carries its delta commit's instant and belongs to the
  newest slice whose base instant is at or before the delta commit's *completion* time; logs of
  pending delta commits go to the newest slice; a pending compaction slice is opened before logs
  are placed, and merged for snapshot reads as above;
* file groups replaced by a completed replace commit at or before the query instant are hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileGroup, FileGroupId, FileSlice
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.view_arrays import ArraySelections
from hoodie.io.fileio import FileInfo, FileIO, join
from hoodie.timeline.instant import Action
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import Timeline

PARTITION_METAFILE = ".hoodie_partition_metadata"
_PARTITION_METAFILES = (PARTITION_METAFILE, PARTITION_METAFILE + ".parquet", PARTITION_METAFILE + ".orc")


class PartitionListing:
    """The files found in one partition folder: names and sizes, parsed into base and log files
    on first use (planners over many partitions parse whole listings at once instead, through
    :class:`hoodie.file_group.file_index.FileIndex`). A listing cut from :class:`ListingColumns`
    holds its rows there and makes Python lists of them only when asked."""

    __slots__ = ("_at", "_columns", "_names", "_parsed", "_sizes", "partition_path")

    def __init__(self, partition_path: str, names: list[str], sizes: list[int]) -> None:
        self.partition_path = partition_path
        self._names: list[str] | None = names
        self._sizes: list[int] | None = sizes
        self._columns: ListingColumns | None = None
        self._at = -1
        self._parsed: tuple[tuple[BaseFile, ...], tuple[LogFile, ...]] | None = None

    @classmethod
    def of(cls, partition_path: str, files: Mapping[str, int]) -> PartitionListing:
        return cls(partition_path, list(files), list(files.values()))

    @classmethod
    def cut(cls, columns: ListingColumns, at: int) -> PartitionListing:
        """Partition ``at`` of ``columns``."""
        listing = cls(columns.partitions[at], [], [])
        listing._names = listing._sizes = None
        listing._columns, listing._at = columns, at
        return listing

    @property
    def columns(self) -> tuple[ListingColumns, int] | None:
        """The columns this listing was cut from and its partition's position there, if any."""
        return None if self._columns is None else (self._columns, self._at)

    @property
    def names(self) -> list[str]:
        if self._names is None:
            assert self._columns is not None
            start, stop = self._columns.bounds[self._at : self._at + 2].tolist()
            self._names = self._columns.names[start:stop].to_pylist()
        return self._names

    @property
    def sizes(self) -> list[int]:
        if self._sizes is None:
            assert self._columns is not None
            start, stop = self._columns.bounds[self._at : self._at + 2].tolist()
            self._sizes = self._columns.sizes[start:stop].tolist()
        return self._sizes

    def _parse(self) -> tuple[tuple[BaseFile, ...], tuple[LogFile, ...]]:
        if self._parsed is None:
            bases: list[BaseFile] = []
            logs: list[LogFile] = []
            for name, size in zip(self.names, self.sizes, strict=True):
                if name.startswith("."):  # log file names start with a dot, base file names never do
                    log = LogFile.parse(name, size)
                    if log is not None and log.extension == "log" and not log.is_cdc:
                        logs.append(log)
                    continue
                base = BaseFile.parse(name, size)
                if base is not None:
                    bases.append(base)
            self._parsed = (tuple(bases), tuple(logs))
        return self._parsed

    @property
    def base_files(self) -> tuple[BaseFile, ...]:
        return self._parse()[0]

    @property
    def log_files(self) -> tuple[LogFile, ...]:
        return self._parse()[1]


@dataclass(frozen=True)
class ListingColumns:
    """The files of many partitions as columns (e.g. decoded from the metadata table's ``files``
    partition): partition ``i`` holds rows ``bounds[i]:bounds[i + 1]``, in its listing order."""

    partitions: list[str]
    bounds: npt.NDArray[np.int64]
    names: pa.StringArray
    sizes: npt.NDArray[np.int64]

    def listings(self) -> list[PartitionListing]:
        return [PartitionListing.cut(self, at) for at in range(len(self.partitions))]

    def names_by_partition(self) -> dict[str, list[str]]:
        """Partition -> its file names (each a :class:`ListedNames`), in partition order."""
        names = self.names.to_pylist()
        bounds = self.bounds.tolist()
        return {
            p: ListedNames(PartitionListing.cut(self, at), names[bounds[at] : bounds[at + 1]])
            for at, p in enumerate(self.partitions)
        }


class ListedNames(list[str]):
    """A partition's file names with the listing they were cut from, whose columns a file index
    over them takes whole (``FileIndex.build``) instead of the names."""

    __slots__ = ("listing",)

    def __init__(self, listing: PartitionListing, names: list[str]) -> None:
        super().__init__(names)
        self.listing = listing


def list_partition_paths(fileio: FileIO, base_path: str) -> list[str]:
    """Every partition (a folder holding ``.hoodie_partition_metadata``), relative to ``base_path``.

    The table root itself is the partition ``""`` of a non-partitioned table.
    """
    return [listing.partition_path for listing in list_table(fileio, base_path)]


def list_table(fileio: FileIO, base_path: str) -> list[PartitionListing]:
    """Every partition with its files, in partition order: one directory listing per folder."""
    out: list[PartitionListing] = []

    def walk(path: str, rel: str) -> None:
        entries = fileio.list_dir(path)
        if any(not e.is_dir and e.name in _PARTITION_METAFILES for e in entries):
            out.append(_listing_of(rel, entries))
        for e in entries:
            if e.is_dir and not e.name.startswith("."):
                walk(e.path, f"{rel}/{e.name}" if rel else e.name)

    walk(base_path, "")
    return sorted(out, key=lambda listing: listing.partition_path)


def list_partition(fileio: FileIO, base_path: str, partition_path: str) -> PartitionListing:
    return _listing_of(partition_path, fileio.list_dir(join(base_path, partition_path)))


def _listing_of(partition_path: str, entries: Iterable[FileInfo]) -> PartitionListing:
    files = [e for e in entries if not e.is_dir]
    return PartitionListing(partition_path, [e.name for e in files], [e.size for e in files])


def partition_listing(partition_path: str, files: Iterable[tuple[str, int]]) -> PartitionListing:
    """The listing of one partition from its files' (name, size)."""
    pairs = list(files)
    return PartitionListing(partition_path, [n for n, _ in pairs], [s for _, s in pairs])


ListingSource = Callable[[Sequence[str] | None], list[PartitionListing]]
"""Listings of the given partitions, or of every partition for None (e.g. the metadata table's)."""


class FileSystemView(ArraySelections):
    """File groups of a table as of a point on its timeline.

    ``timeline`` is the table's active timeline; ``as_of`` (a requested instant time, inclusive)
    limits what is visible, None meaning the latest state. ``pending_compactions`` maps the file
    groups of pending compaction plans to the plan's instant; ``replaced`` maps file groups named
    in completed replace commits to the replace instant. ``completion_time`` resolves the
    completion time of instants older than the active timeline (archived), for layout 2.
    """

    def __init__(
        self,
        fileio: FileIO,
        base_path: str,
        layout: int,
        timeline: Timeline,
        *,
        pending_compactions: Mapping[FileGroupId, str],
        replaced: Mapping[FileGroupId, str],
        as_of: str | None = None,
        archived_completion_time: Callable[[str], str | None] | None = None,
        listings: Iterable[PartitionListing] | None = None,
        source: ListingSource | None = None,
    ) -> None:
        self.fileio = fileio
        self.base_path = base_path
        self.layout = layout
        self.as_of = as_of
        self._timeline = timeline
        writes = timeline.writes()
        visible = writes.completed()
        if as_of is not None:
            visible = visible.before(as_of, inclusive=True)
        self._visible = visible
        # Hudi's timeline starts at its first commit that is not savepointed: archival may keep a
        # savepointed commit and archive past it, and files between the two are not "before" it.
        savepointed = {i.requested_time for i in timeline.actions(Action.SAVEPOINT).completed()}
        first_completed = next((i for i in writes.completed() if i.requested_time not in savepointed), None)
        self._timeline_start = normalize(first_completed.requested_time) if first_completed else None
        self._pending_compactions = {
            fg: ts
            for fg, ts in pending_compactions.items()
            if as_of is None or normalize(ts) <= normalize(as_of)
        }
        self._replaced = {
            fg: ts for fg, ts in replaced.items() if as_of is None or normalize(ts) <= normalize(as_of)
        }
        self._archived_completion_time = archived_completion_time
        self._listings: dict[str, PartitionListing] = {}
        self._committed: dict[str, bool] = {}
        self._completion_times: dict[str, str | None] = {}
        if listings is not None:
            for listing in listings:
                self._listings[listing.partition_path] = listing
        self._partitions: list[str] | None = None
        self._source = source

    # -- visibility ---------------------------------------------------------------------------
    def _before_timeline_start(self, ts: str) -> bool:
        return self._timeline_start is not None and normalize(ts) < self._timeline_start

    def is_committed(self, ts: str) -> bool:
        """Whether files written at ``ts`` are visible (completed, or older than the timeline)."""
        known = self._committed.get(ts)
        if known is None:  # asked once per file: the answer per instant is kept
            if self.as_of is not None and normalize(ts) > normalize(self.as_of):
                known = False
            else:
                known = ts in self._visible or self._before_timeline_start(ts)
            self._committed[ts] = known
        return known

    def completion_time(self, ts: str) -> str | None:
        """Completion time of a completed write instant (None if pending or unknown)."""
        if ts in self._completion_times:  # asked once per log file: kept per instant
            return self._completion_times[ts]
        found = self._completion_time(ts)
        self._completion_times[ts] = found
        return found

    def _completion_time(self, ts: str) -> str | None:
        ct = self._timeline.completion_time(ts)
        if ct is not None:
            return ct
        if self._before_timeline_start(ts):
            if self._archived_completion_time is not None:
                found = self._archived_completion_time(ts)
                if found is not None:
                    return found
            return ts
        return None

    # -- listing ------------------------------------------------------------------------------
    def partitions(self) -> list[str]:
        if self._partitions is None:
            # The walk that finds the partitions lists their files too: kept, not listed again.
            found = self._source(None) if self._source else list_table(self.fileio, self.base_path)
            for listing in found:
                self._listings.setdefault(listing.partition_path, listing)
            self._partitions = [listing.partition_path for listing in found]
        return self._partitions

    def prefetch(self, partitions: Sequence[str]) -> None:
        """List ``partitions`` now, in one read of the listing source when there is one."""
        wanted = [p for p in partitions if p not in self._listings]
        if self._source is not None and wanted:
            for listing in self._source(wanted):
                self._listings[listing.partition_path] = listing

    def listing(self, partition_path: str) -> PartitionListing:
        cached = self._listings.get(partition_path)
        if cached is None:
            if self._source is not None:
                cached = self._source([partition_path])[0]
            else:
                cached = list_partition(self.fileio, self.base_path, partition_path)
            self._listings[partition_path] = cached
        return cached

    # -- file groups --------------------------------------------------------------------------
    def file_groups(self, partition_path: str) -> list[FileGroup]:
        """All file groups of a partition with their visible slices (replaced groups included)."""
        listing = self.listing(partition_path)
        return self._file_groups(partition_path, listing.base_files, listing.log_files, None)

    def _file_groups(
        self,
        partition_path: str,
        base_files: Iterable[BaseFile],
        log_files: Iterable[LogFile],
        only: Collection[str] | None,
    ) -> list[FileGroup]:
        """The file groups of these files (and of pending compactions, all or those in ``only``)."""
        groups: dict[str, FileGroup] = {}

        def group(file_id: str) -> FileGroup:
            fg = groups.get(file_id)
            if fg is None:
                fg = groups[file_id] = FileGroup(partition_path, file_id)
            return fg

        for base in base_files:
            if self.is_committed(base.commit_time):
                group(base.file_id).add_base_file(base)
        for fg_id, ts in self._pending_compactions.items():
            if fg_id.partition_path == partition_path and (only is None or fg_id.file_id in only):
                group(fg_id.file_id).add_slice_key(ts)
        logs = sorted(log_files, key=lambda lf: (lf.file_id, lf.sort_key))
        for log in logs:
            if self.layout >= 2:
                self._place_log_v2(group(log.file_id), log)
            else:
                self._place_log_v1(group(log.file_id), log)
        return [fg for fg in groups.values() if fg.has_slices()]

    def _place_log_v1(self, fg: FileGroup, log: LogFile) -> None:
        # Layout 1 names a log by its slice's base instant; blocks of uncommitted or later
        # instants are skipped when the log is scanned.
        if self.as_of is not None and normalize(log.instant_time) > normalize(self.as_of):
            return
        fg.add_log_file(log.instant_time, log)

    def _place_log_v2(self, fg: FileGroup, log: LogFile) -> None:
        if not self.is_committed(log.instant_time):
            return  # uncommitted (pending, failed, rolled back) or after the query instant
        keys = fg.slice_keys_desc()
        if not keys:
            fg.add_log_file(log.instant_time, log)
            return
        completed_at = self.completion_time(log.instant_time)
        if completed_at is None:
            fg.add_log_file(keys[0], log)
            return
        for key in keys:
            if normalize(completed_at) >= normalize(key):
                fg.add_log_file(key, log)
                return
        fg.add_log_file(log.instant_time, log)

    def is_replaced(self, fg_id: FileGroupId) -> bool:
        return fg_id in self._replaced

    # -- queries ------------------------------------------------------------------------------
    def latest_file_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """The slice a snapshot read merges, per live file group (pending compaction merged)."""
        out: list[FileSlice] = []
        for partition in self.partitions() if partitions is None else partitions:
            for fg in self.file_groups(partition):
                if self.is_replaced(fg.group_id):
                    continue
                merged = self._merged_latest(fg)
                if merged is not None and not merged.is_empty:
                    out.append(merged)
        return sorted(out, key=lambda s: (s.partition_path, s.file_id))

    def _merged_latest(self, fg: FileGroup) -> FileSlice | None:
        slices = fg.slices()
        if not slices:
            return None
        latest = slices[0]
        pending = self._pending_compactions.get(fg.group_id)
        if pending is not None and latest.base_instant_time == pending and len(slices) > 1:
            previous = slices[1]
            return FileSlice(
                latest.partition_path,
                latest.file_id,
                previous.base_instant_time,
                previous.base_file,
                previous.log_files + latest.log_files,
            )
        return latest

    def latest_base_files(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """Read-optimized: the newest committed base file per live file group, without logs."""
        out: list[FileSlice] = []
        for partition in self.partitions() if partitions is None else partitions:
            for fg in self.file_groups(partition):
                if self.is_replaced(fg.group_id):
                    continue
                for s in fg.slices():
                    if s.base_file is not None:
                        out.append(s.without_logs())
                        break
        return sorted(out, key=lambda s: (s.partition_path, s.file_id))

    def all_file_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        """Every slice of every live file group (for planning table services)."""
        out: list[FileSlice] = []
        for partition in self.partitions() if partitions is None else partitions:
            for fg in self.file_groups(partition):
                if not self.is_replaced(fg.group_id):
                    out.extend(fg.slices())
        return out

    def visible_timeline(self) -> Timeline:
        """Completed write instants visible to this view."""
        return self._visible
