"""File slices and file groups.

A file group is ``(partition path, file id)``; its slices are keyed by base instant time, newest
first. A slice is a base file (possibly absent) plus the log files written on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.log_file import LogFile
from hoodie.io.fileio import join
from hoodie.timeline.instant_time import normalize


@dataclass(frozen=True, slots=True)
class FileGroupId:
    partition_path: str
    file_id: str

    def __str__(self) -> str:
        return f"{self.partition_path or '<root>'}/{self.file_id}"


class SliceFiles(NamedTuple):
    """A file slice by its files' names and sizes only: what a plan naming files needs."""

    partition_path: str
    file_id: str
    base_instant_time: str
    base_file_name: str | None
    base_file_size: int
    log_file_names: list[str]
    log_file_sizes: list[int]

    @classmethod
    def of(cls, file_slice: FileSlice) -> SliceFiles:
        base = file_slice.base_file
        return cls(
            file_slice.partition_path,
            file_slice.file_id,
            file_slice.base_instant_time,
            base.name if base is not None else None,
            base.size if base is not None else 0,
            [lf.name for lf in file_slice.log_files],
            [lf.size for lf in file_slice.log_files],
        )


# Not frozen: planning builds these by the ten thousand and a frozen __init__ costs 3x; never mutated.
@dataclass(slots=True, unsafe_hash=True)
class FileSlice:
    """One slice of a file group: the base file at ``base_instant_time`` and its log files in read order."""

    partition_path: str
    file_id: str
    base_instant_time: str
    base_file: BaseFile | None = None
    log_files: tuple[LogFile, ...] = ()

    @property
    def group_id(self) -> FileGroupId:
        return FileGroupId(self.partition_path, self.file_id)

    @property
    def has_log_files(self) -> bool:
        return bool(self.log_files)

    @property
    def is_empty(self) -> bool:
        return self.base_file is None and not self.log_files

    @property
    def total_size(self) -> int:
        return (self.base_file.size if self.base_file else 0) + sum(lf.size for lf in self.log_files)

    def base_file_path(self, base_path: str) -> str | None:
        if self.base_file is None:
            return None
        return join(base_path, self.partition_path, self.base_file.name)

    def log_file_paths(self, base_path: str) -> list[str]:
        return [join(base_path, self.partition_path, lf.name) for lf in self.log_files]

    def file_paths(self, base_path: str) -> list[str]:
        """The base file's path (if any), then the log files' paths in read order."""
        base = self.base_file_path(base_path)
        return [*([base] if base else []), *self.log_file_paths(base_path)]

    def without_logs(self) -> FileSlice:
        return FileSlice(self.partition_path, self.file_id, self.base_instant_time, self.base_file, ())


@dataclass(slots=True)
class FileGroup:
    """A file group under construction or as built by the view: slices by base instant time."""

    partition_path: str
    file_id: str
    _bases: dict[str, BaseFile] = field(default_factory=dict)
    _logs: dict[str, list[LogFile]] = field(default_factory=dict)
    _keys: set[str] = field(default_factory=set)

    @property
    def group_id(self) -> FileGroupId:
        return FileGroupId(self.partition_path, self.file_id)

    def add_base_file(self, base: BaseFile) -> None:
        self._bases[base.commit_time] = base
        self._keys.add(base.commit_time)

    def add_slice_key(self, base_instant_time: str) -> None:
        """Open an (empty) slice, e.g. the one a pending compaction starts."""
        self._keys.add(base_instant_time)

    def add_log_file(self, base_instant_time: str, log: LogFile) -> None:
        self._keys.add(base_instant_time)
        self._logs.setdefault(base_instant_time, []).append(log)

    def slice_keys_desc(self) -> list[str]:
        return sorted(self._keys, key=normalize, reverse=True)

    def has_slices(self) -> bool:
        return bool(self._keys)

    @property
    def has_log_files(self) -> bool:
        """Whether any slice has log files (a cheap test before building the slices)."""
        return bool(self._logs)

    def slices(self) -> list[FileSlice]:
        """All slices, newest base instant first; logs in Hudi's log-file order."""
        out = []
        for key in self.slice_keys_desc():
            logs = tuple(sorted(self._logs.get(key, ()), key=lambda lf: lf.sort_key))
            out.append(FileSlice(self.partition_path, self.file_id, key, self._bases.get(key), logs))
        return out
