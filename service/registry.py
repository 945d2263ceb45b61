"""The tables the daemon serves: a static list plus discovery, each with its resolved settings.

Discovery walks the configured roots for folders holding ``.hoodie/hoodie.properties`` (without
descending into a table) and runs again every ``tables.rescan_interval_s``. A table's id is its
configured ``id``; otherwise, for a discovered table, its path below the root with ``/`` → ``.``
(``sales/orders`` → ``sales.orders``), and for a listed one its folder name; when two tables would
share an id, later ones (by path) get ``-<6 hex of the path's SHA-1>`` appended.

A table that fails to open (corrupt ``hoodie.properties``, unsupported version, storage errors)
stays in the registry with the reason and is retried with exponential backoff; it never stops
the daemon from serving the others.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hoodie.config.table_config import METAFOLDER
from hoodie.errors import HoodieError
from hoodie.io.fileio import FileIO, join
from hoodie.io.requests import RequestCounter
from hoodie.services.recovery import lazy_failed_writes
from hoodie.table import HoodieTable
from hoodie.transaction.heartbeat import HeartbeatConfig
from service.settings import Policy, Settings, TableSpec

log = logging.getLogger(__name__)

_SKIP_DIRS = {METAFOLDER, ".git", "__pycache__"}
_MAX_DEPTH = 6


@dataclass
class TableConfig:
    """A table's settings after defaults and its own overrides are applied."""

    uri: str
    options: dict[str, str]
    policies: dict[str, Policy]
    priority: int
    max_concurrent: int
    storage_options: dict[str, str]
    paused: bool
    source: str  # "static" or "discovered"

    # Asked for on every look at the table: read from ``options`` once (a config is never changed).
    @functools.cached_property
    def heartbeat(self) -> HeartbeatConfig:
        """The writers' heartbeat settings (``hoodie.client.heartbeat.*``)."""
        return HeartbeatConfig.from_options(self.options)

    @functools.cached_property
    def lazy_failed_writes(self) -> bool:
        """The writers keep heartbeats and leave failed writes to be rolled back (LAZY policy)."""
        return lazy_failed_writes(self.options)

    @property
    def remote(self) -> bool:
        """On an object store (``s3://``, ``gs://`` ...), not on this machine's file system."""
        return "://" in self.uri and not self.uri.startswith("file://")


@dataclass
class TableEntry:
    """One served table and what the daemon knows about it."""

    id: str
    config: TableConfig
    table: HoodieTable | None = None
    error: str | None = None
    error_kind: str | None = None
    failures: int = 0
    next_open_at: float = 0.0
    paused: bool = False
    lock: Any = None  # service.locks.ObservedLock once opened
    clock: Any = None  # service.truetime.TableClock once opened
    watch: Any = None  # service.watcher.TableWatch
    removed: bool = False
    guard: threading.RLock = field(default_factory=threading.RLock)
    requests: RequestCounter = field(default_factory=RequestCounter)
    """Storage requests made for this table in this process (watching and runs)."""

    @property
    def uri(self) -> str:
        return self.config.uri

    @property
    def healthy(self) -> bool:
        return self.table is not None and self.error is None

    @property
    def health(self) -> str:
        if self.removed:
            return "removed"
        if self.table is None:
            return "error" if self.error else "opening"
        return "error" if self.error else ("paused" if self.paused else "ok")

    def options(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {**self.config.options, **(extra or {})}


def resolve(settings: Settings, spec: TableSpec | None, uri: str, source: str) -> TableConfig:
    d = settings.defaults
    policies = dict(d.policies)
    options = dict(d.options)
    storage = dict(d.storage_options)
    if spec is not None:
        policies.update(spec.policies)
        options.update(spec.options)
        storage.update(spec.storage_options)
    return TableConfig(
        uri=uri,
        options=options,
        policies=policies,
        priority=spec.priority if spec is not None and spec.priority is not None else d.priority,
        max_concurrent=spec.max_concurrent if spec is not None and spec.max_concurrent else d.max_concurrent,
        storage_options=storage,
        paused=bool(spec.paused) if spec is not None else False,
        source=source,
    )


def discover(root: str, storage_options: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """``(uri, path below root)`` of every table under ``root``; a missing root has none."""
    fileio, base = FileIO.for_uri(root, **(storage_options or {}))
    found: list[tuple[str, str]] = []

    def walk(path: str, rel: str, depth: int) -> None:
        if fileio.exists(join(path, METAFOLDER, "hoodie.properties")):
            found.append((fileio.to_uri(path) if fileio.scheme != "file" else path, rel))
            return
        if depth >= _MAX_DEPTH:
            return
        for entry in sorted(fileio.list_dir(path), key=lambda e: e.name):
            if entry.is_dir and entry.name not in _SKIP_DIRS and not entry.name.startswith("."):
                walk(entry.path, f"{rel}/{entry.name}" if rel else entry.name, depth + 1)

    walk(base, "", 0)
    return found


def normalize_uri(uri: str) -> str:
    """One spelling per table: local paths absolute, no trailing slash."""
    if "://" not in uri and not uri.startswith("file:"):
        uri = os.path.abspath(uri)
    return uri.rstrip("/") or "/"


def _tag(entry: TableEntry) -> dict[str, str]:
    return {"table": entry.id}


def _short_hash(uri: str) -> str:
    return hashlib.sha1(uri.encode()).hexdigest()[:6]


def _candidate_id(uri: str, rel: str | None) -> str:
    base = rel.replace("/", ".") if rel else uri.rstrip("/").rsplit("/", 1)[-1]
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in base).strip(".") or "table"
    return cleaned[:100]


class Registry:
    """Tables by id; refreshed from the settings and discovery; thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._entries: dict[str, TableEntry] = {}
        self._by_uri: dict[str, str] = {}
        self._guard = threading.RLock()
        self.discovery_errors: dict[str, str] = {}
        self.last_scan: float | None = None
        self.any_remote = False
        """Some served table is on an object store (kept by :meth:`refresh`; asked every watch tick)."""

    def __iter__(self) -> Iterator[TableEntry]:
        with self._guard:
            entries = list(self._entries.values())
        return iter(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, table_id: str) -> TableEntry | None:
        with self._guard:
            return self._entries.get(table_id)

    def ids(self) -> list[str]:
        with self._guard:
            return sorted(self._entries)

    def refresh(self) -> tuple[list[TableEntry], list[TableEntry]]:
        """Apply the static list and a discovery scan; returns (added, removed) entries."""
        wanted: dict[str, tuple[TableSpec | None, str | None, str]] = {}
        for listed in self.settings.tables.static:
            wanted[normalize_uri(listed.path)] = (listed, None, "static")
        for root in self.settings.tables.discover:
            try:
                for found, below in discover(root, self.settings.defaults.storage_options):
                    wanted.setdefault(normalize_uri(found), (None, below, "discovered"))
                self.discovery_errors.pop(root, None)
            except (OSError, HoodieError, ValueError) as e:
                self.discovery_errors[root] = f"{type(e).__name__}: {e}"
                log.warning("discovery of %s failed: %s", root, e, extra={"root": root})
        self.last_scan = time.time()
        added: list[TableEntry] = []
        removed: list[TableEntry] = []
        with self._guard:
            for uri in sorted(wanted):
                if uri in self._by_uri:
                    continue
                spec, rel, source = wanted[uri]
                table_id = spec.id if spec is not None and spec.id else _candidate_id(uri, rel)
                if table_id in self._entries:
                    table_id = f"{table_id}-{_short_hash(uri)}"
                entry = TableEntry(table_id, resolve(self.settings, spec, uri, source))
                entry.paused = entry.config.paused
                self._entries[table_id] = entry
                self._by_uri[uri] = table_id
                added.append(entry)
            for uri, table_id in list(self._by_uri.items()):
                entry = self._entries[table_id]
                if (
                    uri not in wanted
                    and entry.config.source == "discovered"
                    and not any(r in self.discovery_errors for r in self.settings.tables.discover)
                ):
                    entry.removed = True
                    del self._entries[table_id]
                    del self._by_uri[uri]
                    removed.append(entry)
            self.any_remote = any(e.config.remote for e in self._entries.values())
        for entry in added:
            log.info(
                "serving table %s at %s (%s)", entry.id, entry.uri, entry.config.source, extra=_tag(entry)
            )
        for entry in removed:
            log.info("table %s at %s is gone; no longer served", entry.id, entry.uri, extra=_tag(entry))
        return added, removed

    def open(self, entry: TableEntry, now: float | None = None) -> bool:
        """Open (or re-open) ``entry``'s table when its retry time has come; True when it is open."""
        now = time.monotonic() if now is None else now
        if entry.table is not None and entry.error is None:
            return True
        if now < entry.next_open_at:
            return False
        try:
            entry.table = HoodieTable.open(entry.uri, **entry.config.storage_options)
        except (HoodieError, OSError, ValueError) as e:
            self.fail(entry, e, now)
            return False
        if entry.error is not None:
            log.info("table %s opens again", entry.id, extra=_tag(entry))
        entry.error = entry.error_kind = None
        entry.failures = 0
        return True

    def fail(self, entry: TableEntry, error: BaseException, now: float | None = None) -> None:
        """Record that ``entry`` is unusable for now, and when to try again."""
        now = time.monotonic() if now is None else now
        cfg = self.settings.tables
        entry.failures += 1
        delay = min(cfg.retry_max_s, cfg.retry_initial_s * 2 ** (entry.failures - 1))
        entry.next_open_at = now + delay
        entry.table = None
        message = f"{type(error).__name__}: {error}"
        if message != entry.error:
            log.warning(
                "table %s at %s cannot be served: %s (retry in %.0f s)",
                entry.id,
                entry.uri,
                message,
                delay,
                extra=_tag(entry),
            )
        entry.error = message
        entry.error_kind = type(error).__name__
