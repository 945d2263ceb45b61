"""Write markers (Hudi's DIRECT markers): which data files an instant is creating.

``.hoodie/.temp/<instant>/<partition>/<file name>.marker.<CREATE|MERGE|APPEND>`` is created
before the data file, so that a rollback of a failed write (ours or Apache Hudi's) knows every
file to delete. The marker folder is removed once the instant completes.
"""

from __future__ import annotations

import contextlib
from enum import StrEnum

from hoodie.io.fileio import FileIO, join
from hoodie.timeline.layout import TablePaths

MARKER_EXTENSION = ".marker"


class IOType(StrEnum):
    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


class WriteMarkers:
    """The markers of one instant."""

    def __init__(self, fileio: FileIO, paths: TablePaths, instant_time: str) -> None:
        self.fileio = fileio
        self.root = paths.markers(instant_time)
        self.base_path = paths.base_path

    def create(self, partition_path: str, file_name: str, io_type: IOType) -> None:
        path = join(self.root, partition_path, f"{file_name}{MARKER_EXTENSION}.{io_type.value}")
        with contextlib.suppress(FileExistsError):
            self.fileio.create_new(path, b"")

    def delete(self, partition_path: str, file_name: str, io_type: IOType) -> bool:
        """Remove one marker (False when it is not there)."""
        return self.fileio.delete(
            join(self.root, partition_path, f"{file_name}{MARKER_EXTENSION}.{io_type.value}")
        )

    def files(self) -> list[tuple[str, str, IOType]]:
        """``(partition path, data file name, io type)`` of every marker."""
        out: list[tuple[str, str, IOType]] = []
        root = self.root.rstrip("/") + "/"
        for info in self.fileio.list_files_recursive(self.root):
            rel = info.path[len(root) :] if info.path.startswith(root) else info.name
            partition, _, name = rel.rpartition("/")
            stem, sep, kind = name.rpartition(MARKER_EXTENSION + ".")
            if not sep or kind not in IOType.__members__:
                continue
            out.append((partition, stem, IOType(kind)))
        return out

    def data_file_paths(self) -> list[str]:
        return [join(self.base_path, p, name) for p, name, _ in self.files()]

    def delete_all(self) -> None:
        self.fileio.delete_dir(self.root)
