"""A random-access input file whose reads are counted: requests and the bytes they transferred.

Parquet and log readers read through the file :meth:`hoodie.io.fileio.FileIO.open_input` returns;
pyarrow issues those reads itself (a footer, then column chunks, coalesced when it pre-buffers), on
its own I/O threads. :class:`CountedInput` stands between the reader and the store's file and
counts each read that returned data as one ``read`` request (on an object store, one ranged GET)
with the bytes it returned — what was transferred, not the file's size. The counters are the ones
active where the file was opened (:class:`~hoodie.io.requests.Recipients`), since Arrow's threads
carry no context of their own.

pyarrow reaches it through :class:`pyarrow.PythonFile`, which calls :meth:`CountedInput.read_buffer`
(the store's buffer is handed over without a copy; the store's read itself runs without the GIL).
"""

from __future__ import annotations

import pyarrow as pa

from hoodie.io.requests import Recipients


class CountedInput:
    """The file-like object behind a :class:`pyarrow.PythonFile` (read-only, seekable)."""

    def __init__(self, source: pa.NativeFile, path: str, to: Recipients) -> None:
        self._source = source
        self._path = path
        self._to = to

    @classmethod
    def open(cls, source: pa.NativeFile, path: str, to: Recipients) -> pa.NativeFile:
        """``source`` as a NativeFile whose reads count for ``to``."""
        return pa.PythonFile(cls(source, path, to), mode="r")

    def _counted(self, data: pa.Buffer) -> pa.Buffer:
        if data.size:
            self._to.count("read", bytes_read=data.size, file_read=self._path)
        return data

    def read_buffer(self, nbytes: int | None = None) -> pa.Buffer:
        return self._counted(self._source.read_buffer(nbytes))

    def read(self, nbytes: int | None = None) -> bytes:
        return bytes(self._counted(self._source.read_buffer(nbytes)))

    def seek(self, position: int, whence: int = 0) -> int:
        return int(self._source.seek(position, whence))

    def tell(self) -> int:
        return int(self._source.tell())

    def size(self) -> int:
        return int(self._source.size())

    def close(self) -> None:
        self._source.close()

    @property
    def closed(self) -> bool:
        return bool(self._source.closed)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False
