"""Storage behind a small FileIO: the local filesystem and any ``pyarrow.fs`` filesystem."""

from __future__ import annotations

from hoodie.io.fileio import ArrowFileIO, FileInfo, FileIO, LocalFileIO
from hoodie.io.requests import RequestCounter, counting

__all__ = ["ArrowFileIO", "FileIO", "FileInfo", "LocalFileIO", "RequestCounter", "counting"]
