"""A proxy of our own between S3 clients and the emulated S3 endpoint (moto, :mod:`tests.servers.s3`).

It forwards bytes as they come (TCP, one upstream connection per client connection, so keep-alive,
``Expect: 100-continue`` and streamed bodies behave as they do without it) and follows the HTTP/1.1
requests in the client's direction only to find where each one starts. For each request it

* waits ``latency_s`` (settable at any time) before forwarding it, standing in for the round trip
  to a real object store (moto on loopback answers in about a millisecond; S3 in 10-50 ms);
* counts it by S3 operation, named from the method, the query string and the path
  (:func:`operation`), and keeps a short record of it (:class:`Seen`) for tests to assert on.

:meth:`S3Proxy.cut` makes the store unreachable at once (open connections are closed, new ones
refused), for the storage-lock tests that lose S3 mid-lease. Requests are counted, responses are
not parsed: a refused conditional PUT (412) counts as one PUT like a successful one.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

_HEAD_END = b"\r\n\r\n"
_MAX_SEEN = 100_000


@dataclass(frozen=True)
class Seen:
    """One request as the proxy saw it."""

    op: str
    method: str
    path: str
    query: str
    if_none_match: str | None
    if_match: str | None


def operation(method: str, target: str, headers: dict[str, str]) -> str:
    """The S3 operation a request is (path-style addressing, which pyarrow and boto3 use on an
    endpoint override): ``LIST`` for a bucket GET (ListObjects/V2), ``GET``/``HEAD``/``PUT``/``DELETE``
    on an object, ``COPY`` (a PUT with ``x-amz-copy-source``), ``DELETE_OBJECTS`` (the batch POST),
    the multipart steps, ``CREATE_BUCKET``/``HEAD_BUCKET``/``DELETE_BUCKET``; a request of another
    AWS API on the same server (``X-Amz-Target``) is named by its target."""
    split = urlsplit(target)
    query = parse_qs(split.query, keep_blank_values=True)
    segments = [s for s in split.path.split("/") if s]
    on_bucket = len(segments) <= 1
    if "x-amz-target" in headers:
        return headers["x-amz-target"].rsplit(".", 1)[-1]
    if method == "GET":
        if "uploads" in query:
            return "LIST_UPLOADS"
        if "uploadId" in query:
            return "LIST_PARTS"
        return "LIST" if on_bucket else "GET"
    if method == "HEAD":
        return "HEAD_BUCKET" if on_bucket else "HEAD"
    if method == "PUT":
        if "uploadId" in query:
            return "UPLOAD_PART"
        if on_bucket:
            return "CREATE_BUCKET"
        return "COPY" if "x-amz-copy-source" in headers else "PUT"
    if method == "POST":
        if "delete" in query:
            return "DELETE_OBJECTS"
        if "uploads" in query:
            return "CREATE_MULTIPART"
        if "uploadId" in query:
            return "COMPLETE_MULTIPART"
        return "POST"
    if method == "DELETE":
        if "uploadId" in query:
            return "ABORT_MULTIPART"
        return "DELETE_BUCKET" if on_bucket else "DELETE"
    return method


class _RequestStream:
    """Finds request boundaries in one connection's client-to-server bytes, forwarding as it goes."""

    def __init__(self, proxy: S3Proxy, upstream: socket.socket) -> None:
        self.proxy = proxy
        self.upstream = upstream
        self.buf = b""
        self.body_left = 0  # bytes of a Content-Length body (or of a chunk, with its CRLF) still to pass
        self.chunked = False  # inside a chunked body, between chunks
        self.trailers = False  # after the last chunk, until the empty line

    def feed(self, data: bytes) -> None:
        self.buf += data
        while self.buf:
            if self.body_left:
                n = min(self.body_left, len(self.buf))
                self._send(n)
                self.body_left -= n
            elif self.chunked or self.trailers:
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return
                line = self.buf[:end]
                self._send(end + 2)
                if self.trailers:
                    self.trailers = bool(line)
                else:
                    size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                    if size == 0:
                        self.chunked, self.trailers = False, True
                    else:
                        self.body_left = size + 2
            else:
                end = self.buf.find(_HEAD_END)
                if end < 0:
                    return
                self._start_request(self.buf[:end].decode("latin-1"))
                self._send(end + len(_HEAD_END))

    def _start_request(self, head: str) -> None:
        request_line, *header_lines = head.split("\r\n")
        method, target = request_line.split(" ")[:2]
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.chunked = True
        else:
            self.body_left = int(headers.get("content-length", "0") or 0)
        self.proxy._record(method, target, headers)
        if self.proxy.latency_s > 0:
            time.sleep(self.proxy.latency_s)

    def _send(self, n: int) -> None:
        self.upstream.sendall(self.buf[:n])
        self.buf = self.buf[n:]


class S3Proxy:
    """A counting proxy with injected latency in front of ``target`` (``http://host:port``)."""

    def __init__(self, target: str, *, latency_s: float = 0.0) -> None:
        host, port = target.split("://", 1)[1].rstrip("/").rsplit(":", 1)
        self.target = (host, int(port))
        self.latency_s = latency_s
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._seen: list[Seen] = []
        self._sockets: set[socket.socket] = set()
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, name="s3-proxy", daemon=True).start()

    # -- what tests read ----------------------------------------------------------------------
    def counts(self) -> Counter[str]:
        """Requests by operation since the last :meth:`reset`."""
        with self._lock:
            return Counter(self._counts)

    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def seen(self) -> list[Seen]:
        """The requests since the last :meth:`reset`, in arrival order."""
        with self._lock:
            return list(self._seen)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._seen.clear()

    def _record(self, method: str, target: str, headers: dict[str, str]) -> None:
        op = operation(method, target, headers)
        split = urlsplit(target)
        seen = Seen(
            op, method, split.path, split.query, headers.get("if-none-match"), headers.get("if-match")
        )
        with self._lock:
            self._counts[op] += 1
            if len(self._seen) < _MAX_SEEN:
                self._seen.append(seen)

    # -- forwarding ---------------------------------------------------------------------------
    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client), daemon=True).start()

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        stream = _RequestStream(self, upstream)
        try:
            while data := client.recv(65536):
                stream.feed(data)
        except (OSError, ValueError):
            pass
        finally:
            self._close(client, upstream)

    def _responses(self, upstream: socket.socket, client: socket.socket) -> None:
        try:
            while data := upstream.recv(65536):
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._close(upstream, client)

    def _close(self, *sockets: socket.socket) -> None:
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
            with self._lock:
                self._sockets.discard(s)

    def cut(self) -> None:
        """The store becomes unreachable: open connections are closed and new ones refused."""
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        self._close(*sockets)

    close = cut
