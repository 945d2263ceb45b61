"""FileIO: the only way :mod:`hoodie` touches storage.

Paths are strings in the filesystem's own namespace (``/abs/path`` locally, ``bucket/key`` on
object stores), joined with ``/``. :meth:`FileIO.for_uri` picks the backend by URI scheme;
``file://`` and plain paths get :class:`LocalFileIO`, which can create instant files atomically
(create-if-absent with a hard link). Object stores have no rename and ``pyarrow.fs`` has no
create-if-absent, so :meth:`FileIO.create_new` on them (every timeline transition) is a
:class:`ConditionalPut` where one is registered for the scheme and the store supports it: one PUT
that the store refuses if the object exists (S3's ``If-None-Match: *``). ``hoodie`` talks to no
object-store SDK itself; the implementation is registered from outside with
:func:`register_conditional_put` (``jobs.objectstore`` registers S3's when ``jobs`` is imported).
Without one, ``create_new`` checks and then writes, and the exclusion comes from the table lock,
as in Apache Hudi on stores without conditional writes. Every operation is counted
(:mod:`hoodie.io.requests`) into the request counters active in the caller's context, and into the
run's cost with the bytes and files it read (reads through :meth:`FileIO.open_input` too).
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.io.counted import CountedInput
from hoodie.io.requests import count, recipients


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One directory entry: full path, base name, size in bytes, mtime in epoch ms."""

    path: str
    name: str
    size: int
    mtime_ms: int
    is_dir: bool


def _name_of(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def join(*parts: str) -> str:
    """Join path segments with ``/``, ignoring empty segments (the non-partitioned partition)."""
    out = ""
    for part in parts:
        if not part:
            continue
        if not out or part.startswith("/"):
            out = part
        else:
            out = out.rstrip("/") + "/" + part
    return out


class ConditionalPut(Protocol):
    """A store's create-if-absent in one request."""

    def put_if_absent(self, path: str, data: bytes) -> bool:
        """Write ``data`` at ``path`` (``bucket/key``) unless an object is there (then raise
        :class:`FileExistsError`, writing nothing). Return False, writing nothing, if the store does
        not support conditional writes (the caller falls back to check-then-write under the lock)."""


ConditionalPutFactory = Callable[[str, Mapping[str, Any]], ConditionalPut]
"""Makes the :class:`ConditionalPut` for a URI scheme and the table's ``storage_options``."""

_CONDITIONAL_PUTS: dict[str, ConditionalPutFactory] = {}


def register_conditional_put(schemes: Iterable[str], factory: ConditionalPutFactory) -> None:
    """Use ``factory``'s conditional put for every FileIO :meth:`FileIO.for_uri` makes for ``schemes``."""
    for scheme in schemes:
        _CONDITIONAL_PUTS[scheme.lower()] = factory


class FileIO(ABC):
    """Minimal storage interface used by the format core."""

    scheme: str = "file"

    @staticmethod
    def for_uri(uri: str, **options: Any) -> tuple[FileIO, str]:
        """Return the FileIO for ``uri`` and the path of ``uri`` inside that filesystem.

        ``options`` configure the filesystem (for S3: ``endpoint_override``, ``access_key``,
        ``secret_key``, ``region``, ``scheme``; see ``pyarrow.fs.S3FileSystem``; for ``abfs[s]://``
        ``pyarrow.fs.AzureFileSystem``'s keys, e.g. ``account_name``, ``account_key``,
        ``blob_storage_authority``).
        """
        if "://" not in uri:
            return LocalFileIO(), os.path.abspath(uri)
        scheme, rest = uri.split("://", 1)
        scheme = scheme.lower()
        if scheme == "file":
            return LocalFileIO(), os.path.abspath(rest)
        path = rest.rstrip("/")
        factory = _CONDITIONAL_PUTS.get(scheme)
        put = factory(scheme, options) if factory is not None else None
        if scheme in ("s3", "s3a") and options:
            return ArrowFileIO(pafs.S3FileSystem(**options), scheme, put), path
        if scheme in ("gs", "gcs") and options:
            return ArrowFileIO(pafs.GcsFileSystem(**options), scheme, put), path
        if scheme in ("abfs", "abfss"):
            path, host = azure_path(uri)
            fs = pafs.AzureFileSystem(**options) if options else pafs.AzureFileSystem(host.split(".", 1)[0])
            return AzureFileIO(fs, scheme, host), path
        fs, fs_path = pafs.FileSystem.from_uri(uri)
        return ArrowFileIO(fs, scheme, put), fs_path.rstrip("/")

    # -- reading ------------------------------------------------------------------------------
    @abstractmethod
    def read_bytes(self, path: str) -> bytes: ...

    @abstractmethod
    def read_range(self, path: str, offset: int, length: int) -> bytes: ...

    @abstractmethod
    def open_input(self, path: str) -> pa.NativeFile:
        """A random-access input file (for Parquet and log readers)."""

    @abstractmethod
    def info(self, path: str) -> FileInfo | None:
        """The entry at ``path``, or None if nothing is there."""

    @abstractmethod
    def list_dir(self, path: str) -> list[FileInfo]:
        """Direct children of ``path``; an empty list if the directory does not exist."""

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def list_files_recursive(self, path: str) -> list[FileInfo]:
        out: list[FileInfo] = []
        for entry in self.list_dir(path):
            if entry.is_dir:
                out.extend(self.list_files_recursive(entry.path))
            else:
                out.append(entry)
        return out

    # -- writing ------------------------------------------------------------------------------
    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Write (or replace) a whole file; readers see either the old or the new content."""

    @abstractmethod
    def create_new(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data``; raise :class:`FileExistsError` if it already exists."""

    @abstractmethod
    def open_output(self, path: str) -> pa.NativeFile:
        """A fresh output stream at ``path`` (parent directories are created)."""

    @abstractmethod
    def delete(self, path: str) -> bool:
        """Delete a file; return False if it did not exist."""

    @abstractmethod
    def delete_dir(self, path: str) -> None: ...

    @abstractmethod
    def makedirs(self, path: str) -> None: ...

    @abstractmethod
    def rename(self, src: str, dst: str) -> None: ...

    # -- interop ------------------------------------------------------------------------------
    @property
    @abstractmethod
    def arrow_fs(self) -> pafs.FileSystem:
        """The pyarrow filesystem behind this FileIO (for pyarrow.parquet)."""

    def to_uri(self, path: str) -> str:
        """A full URI for ``path`` (Hudi writes full URIs into some plans)."""
        if self.scheme == "file":
            return "file:" + path
        return f"{self.scheme}://{path}"

    def strip_uri(self, uri: str) -> str:
        """The inverse of :meth:`to_uri`; accepts ``file:/x``, ``file:///x``, ``s3://b/k`` and bare paths."""
        if uri.startswith("file:"):
            rest = uri[5:]
            if rest.startswith("///"):
                rest = rest[2:]
            return rest
        if "://" in uri:
            return uri.split("://", 1)[1]
        return uri


_OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})
"""``pyarrow.fs.FileSystem.type_name`` of the stores where a key's parent "directory" is implied."""


class ArrowFileIO(FileIO):
    """FileIO over any ``pyarrow.fs.FileSystem`` (S3, GCS, HDFS, local)."""

    def __init__(
        self, fs: pafs.FileSystem, scheme: str = "file", conditional_put: ConditionalPut | None = None
    ) -> None:
        self._fs = fs
        self.scheme = scheme
        self.conditional_put = conditional_put

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        return self._fs

    def read_bytes(self, path: str) -> bytes:
        try:
            with self._fs.open_input_stream(path) as f:
                data = bytes(f.read())
        except BaseException:
            count("read")  # a request that found nothing to read
            raise
        count("read", bytes_read=len(data), file_read=path)
        return data

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            with self._fs.open_input_file(path) as f:
                f.seek(offset)
                data = bytes(f.read(length))
        except BaseException:
            count("read")
            raise
        count("read", bytes_read=len(data), file_read=path)
        return data

    def open_input(self, path: str) -> pa.NativeFile:
        """The file; while anyone counts (a run's cost, a request counter), its reads count as
        ``read`` requests with the bytes they returned (:class:`~hoodie.io.counted.CountedInput`)."""
        to = recipients()
        try:
            f = self._fs.open_input_file(path)
        except BaseException:
            to.count("open", bytes_read=0)
            raise
        to.count("open", bytes_read=0, file_read=path)
        return CountedInput.open(f, path, to) if to.anyone else f

    def info(self, path: str) -> FileInfo | None:
        count("info")
        fi = self._fs.get_file_info(path)
        if fi.type == pafs.FileType.NotFound:
            return None
        return self._to_info(fi)

    @staticmethod
    def _to_info(fi: pafs.FileInfo) -> FileInfo:
        mtime_ns = fi.mtime_ns
        mtime = mtime_ns // 1_000_000 if mtime_ns is not None else 0
        size = fi.size  # None for directories: cheaper than ``fi.type``, an enum made on every access
        if size is not None:
            return FileInfo(fi.path, fi.base_name, int(size), mtime, False)
        is_dir = fi.type == pafs.FileType.Directory
        return FileInfo(fi.path, fi.base_name, 0, mtime, is_dir)

    def list_dir(self, path: str) -> list[FileInfo]:
        count("list")
        sel = pafs.FileSelector(path, allow_not_found=True, recursive=False)
        return [self._to_info(fi) for fi in self._fs.get_file_info(sel)]

    def write_bytes(self, path: str, data: bytes) -> None:
        self._ensure_parent(path)
        count("write")
        with self._fs.open_output_stream(path) as f:
            f.write(data)

    def create_new(self, path: str, data: bytes) -> None:
        if self.conditional_put is not None and self.conditional_put.put_if_absent(path, data):
            return
        if self.exists(path):  # no conditional write here: the table lock excludes other writers
            raise FileExistsError(path)
        self.write_bytes(path, data)

    def open_output(self, path: str) -> pa.NativeFile:
        self._ensure_parent(path)
        count("write")
        return self._fs.open_output_stream(path)

    def delete(self, path: str) -> bool:
        if not self.exists(path):
            return False
        count("delete")
        self._fs.delete_file(path)
        return True

    def delete_dir(self, path: str) -> None:
        if self.exists(path):
            count("delete")
            self._fs.delete_dir(path)

    def makedirs(self, path: str) -> None:
        count("mkdir")
        self._fs.create_dir(path, recursive=True)

    def rename(self, src: str, dst: str) -> None:
        count("rename")
        self._fs.move(src, dst)

    def _ensure_parent(self, path: str) -> None:
        # Object stores have no directories: a key needs no parent, and pyarrow's create_dir would
        # cost a HEAD of the bucket and a PUT of an empty marker object per ancestor on every write.
        if self._fs.type_name in _OBJECT_STORES:
            return
        parent = path.rsplit("/", 1)[0] if "/" in path else ""
        if parent:
            count("mkdir")
            self._fs.create_dir(parent, recursive=True)


def azure_path(uri: str) -> tuple[str, str]:
    """``abfs[s]://<container>@<account host>/<path>`` -> (``<container>/<path>``, the account host)."""
    authority, _, key = uri.split("://", 1)[1].partition("/")
    container, at, host = authority.partition("@")
    if not at or not container or not host:
        raise ValueError(
            f"{uri}: an Azure URI names its container and account, "
            "abfs://<container>@<account>.dfs.core.windows.net/<path>"
        )
    return (f"{container}/{key}".rstrip("/"), host)


class AzureFileIO(ArrowFileIO):
    """Azure Blob Storage / ADLS Gen2 through ``pyarrow.fs.AzureFileSystem``: paths are
    ``<container>/<path>``, URIs ``abfs[s]://<container>@<account host>/<path>`` as Hudi writes them."""

    def __init__(self, fs: pafs.FileSystem, scheme: str, host: str) -> None:
        super().__init__(fs, scheme)
        self.host = host

    def to_uri(self, path: str) -> str:
        container, _, key = path.partition("/")
        return f"{self.scheme}://{container}@{self.host}/{key}"

    def strip_uri(self, uri: str) -> str:
        if uri.startswith(("abfs://", "abfss://")):
            return azure_path(uri)[0]
        return super().strip_uri(uri)


class LocalFileIO(ArrowFileIO):
    """The local filesystem, with atomic whole-file writes and atomic create-if-absent."""

    def __init__(self) -> None:
        super().__init__(pafs.LocalFileSystem(), "file")

    def write_bytes(self, path: str, data: bytes) -> None:
        count("write")
        tmp = self._write_temp(path, data)
        os.replace(tmp, path)

    def create_new(self, path: str, data: bytes) -> None:
        count("write")
        tmp = self._write_temp(path, data)
        try:
            os.link(tmp, path)  # atomic; fails with FileExistsError if path exists
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def _write_temp(self, path: str, data: bytes) -> str:
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{_name_of(path)}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        return tmp

    def read_bytes(self, path: str) -> bytes:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except BaseException:
            count("read")
            raise
        count("read", bytes_read=len(data), file_read=path)
        return data

    def info(self, path: str) -> FileInfo | None:
        # One ``stat``, as Arrow's LocalFileSystem makes, without building an Arrow FileInfo: the
        # daemon asks this of every local table's timeline folder on every watch tick.
        count("info")
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        name = path.rsplit("/", 1)[-1]  # as Arrow's base_name: "" after a trailing "/"
        if stat.S_ISDIR(st.st_mode):
            return FileInfo(path, name, 0, st.st_mtime_ns // 1_000_000, True)
        return FileInfo(path, name, st.st_size, st.st_mtime_ns // 1_000_000, False)

    def makedirs(self, path: str) -> None:
        count("mkdir")
        os.makedirs(path, exist_ok=True)

    def rename(self, src: str, dst: str) -> None:
        count("rename")
        os.replace(src, dst)
