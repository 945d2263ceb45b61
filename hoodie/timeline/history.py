"""The LSM archived timeline of timeline layout 2 (table versions 8, 9): ``.hoodie/timeline/history/``.

Archival moves completed instants out of the active timeline into Parquet files named
``<minInstant>_<maxInstant>_<level>.parquet``. Each row is a ``HoodieLSMTimelineInstant``: the
requested and completion time, the completed action, the raw bytes of the completed instant file
(``metadata``) and, for cleans, compactions, log compactions and replace commits, the raw bytes of
the plan (``plan``). A write adds one level-0 file; once a level holds ``batch_size`` (10) files,
the oldest of them are merged into one file of the next level.

Which files make up the timeline is decided by a snapshot: ``manifest_<N>`` is Jackson
pretty-printed JSON ``{"files":[{"fileName":..,"fileLen":..}]}`` and ``_version_`` holds the
latest ``N`` as decimal text (readers list ``manifest_*`` when it is absent or unreadable). Every
write or merge creates the next manifest; cleaning keeps the newest three snapshots (plus one per
merge just done) and deletes every manifest and data file no kept snapshot lists.

This module also defines the records both archived-timeline layouts read into
(:class:`ArchivedInstant`, with lazily decoded :class:`Payload` s) and the input both archive
writers take (:class:`InstantFiles`, the state files of one completed instant).
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import CorruptFileError, TimelineError, UnsupportedTableError
from hoodie.io.fileio import FileIO, join
from hoodie.models import codec
from hoodie.models.archived import LSMTimelineInstant
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata
from hoodie.timeline.archived_instant import (
    COMMIT_RECORD_NAMES,
    LSM_PLAN_RECORD,
    METADATA_RECORD,
    ArchivedInstant,
    InstantFiles,
    Payload,
)
from hoodie.timeline.instant import Action, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.layout import TablePaths

log = logging.getLogger(__name__)

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"
LSM_INSTANT_VERSION = 1
DEFAULT_COMPACTION_BATCH_SIZE = 10
"""``hoodie.timeline.compaction.batch.size``: files of one level merged at once."""
DEFAULT_COMPACTION_MAX_BYTES = 1 << 30
"""A merge stops adding files once their total size passes this (unless it has fewer than two)."""
SNAPSHOTS_TO_KEEP = 3
"""Manifest versions kept by cleaning, plus one for each merge done in the same run."""
PARQUET_COMPRESSION = "gzip"  # hoodie.parquet.compression.codec default

_DATA_FILE_RE = re.compile(r"^(\d+)_(\d+)_(\d)\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_(\d+)$")
_ROW_NAME = LSMTimelineInstant.AVRO_NAME
_COLUMNS = ("instantTime", "completionTime", "action", "metadata", "plan", "version")
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ]
)

# ------------------------------------------------------------------------------------------------
# file names and snapshots


@dataclass(frozen=True, slots=True, order=True)
class HistoryFile:
    """A data file of the LSM timeline: ``<min>_<max>_<level>.parquet``."""

    min_time: str
    max_time: str
    level: int

    @property
    def name(self) -> str:
        return f"{self.min_time}_{self.max_time}_{self.level}.parquet"

    @classmethod
    def parse(cls, name: str) -> HistoryFile | None:
        m = _DATA_FILE_RE.match(name)
        return None if m is None else cls(m.group(1), m.group(2), int(m.group(3)))

    def overlaps(self, start: str | None, end: str | None) -> bool:
        """Whether the file's instant range meets the closed range ``[start, end]``."""
        lo, hi = normalize(self.min_time), normalize(self.max_time)
        return (start is None or hi >= normalize(start)) and (end is None or lo <= normalize(end))


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    file_name: str
    file_len: int


@dataclass(frozen=True, slots=True)
class Manifest:
    """``HoodieLSMTimelineManifest``: the data files of one snapshot, in the order they were added."""

    files: tuple[ManifestEntry, ...] = ()

    def file_names(self) -> list[str]:
        return [e.file_name for e in self.files]

    def without(self, names: Iterable[str]) -> Manifest:
        drop = set(names)
        return Manifest(tuple(e for e in self.files if e.file_name not in drop))

    def with_file(self, entry: ManifestEntry) -> Manifest:
        return Manifest((*self.files, entry))

    def to_json(self) -> str:
        """Jackson's default pretty printer: two-space object indent, arrays inline."""
        if not self.files:
            return '{\n  "files" : [ ]\n}'
        entries = ", ".join(
            f'{{\n    "fileName" : {json.dumps(e.file_name)},\n    "fileLen" : {e.file_len}\n  }}'
            for e in self.files
        )
        return '{\n  "files" : [ ' + entries + " ]\n}"

    @classmethod
    def from_json(cls, text: str, source: str) -> Manifest:
        if not text.strip():
            return cls()  # Hudi reads an empty manifest as an empty snapshot
        try:
            data = json.loads(text)
            files = data.get("files") or []
            entries = tuple(ManifestEntry(str(f["fileName"]), int(f.get("fileLen") or 0)) for f in files)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CorruptFileError(f"{source}: not a valid LSM timeline manifest: {exc!r}") from exc
        for entry in entries:
            if HistoryFile.parse(entry.file_name) is None:
                raise CorruptFileError(
                    f"{source}: unexpected archived timeline file name {entry.file_name!r}"
                )
        return cls(entries)


def _require_layout2(paths: TablePaths) -> str:
    if paths.layout < 2:
        raise UnsupportedTableError(
            f"{paths.base_path}: timeline layout {paths.layout} has no LSM history; "
            "use the layout-1 archive in hoodie.timeline.archived"
        )
    return paths.history


def _manifest_versions(fileio: FileIO, folder: str) -> list[int]:
    versions = []
    for entry in fileio.list_dir(folder):
        m = _MANIFEST_RE.match(entry.name)
        if m is not None and not entry.is_dir:
            versions.append(int(m.group(1)))
    return versions


def latest_snapshot_version(fileio: FileIO, paths: TablePaths) -> int:
    """The latest manifest version: ``_version_``, else the largest ``manifest_N``; -1 for none."""
    folder = _require_layout2(paths)
    version_path = join(folder, VERSION_FILE)
    if fileio.exists(version_path):
        text = fileio.read_bytes(version_path).decode("utf-8", errors="replace").strip()
        if text.isdigit():
            return int(text)
        log.warning("%s: unreadable content %r; listing manifests instead", version_path, text[:40])
    return max(_manifest_versions(fileio, folder), default=-1)


def read_manifest(fileio: FileIO, paths: TablePaths, version: int) -> Manifest:
    """The manifest of snapshot ``version`` (an empty manifest for version -1)."""
    if version < 0:
        return Manifest()
    path = join(_require_layout2(paths), f"{MANIFEST_PREFIX}{version}")
    try:
        data = fileio.read_bytes(path)
    except FileNotFoundError as exc:
        raise CorruptFileError(f"{path}: the manifest of snapshot version {version} is missing") from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptFileError(f"{path}: manifest is not UTF-8 text") from exc
    return Manifest.from_json(text, path)


def latest_manifest(fileio: FileIO, paths: TablePaths) -> tuple[int, Manifest]:
    """The latest snapshot version and its manifest."""
    version = latest_snapshot_version(fileio, paths)
    return version, read_manifest(fileio, paths, version)


# ------------------------------------------------------------------------------------------------
# reading


def _read_rows(fileio: FileIO, paths: TablePaths, name: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    path = join(paths.history, name)
    try:
        data = fileio.read_bytes(path)
    except FileNotFoundError as exc:
        raise CorruptFileError(
            f"{path}: listed in the archived timeline manifest but missing from storage"
        ) from exc
    try:
        table = pq.read_table(pa.BufferReader(data), columns=list(columns))
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CorruptFileError(f"{path}: unreadable archived timeline Parquet file: {exc}") from exc
    return [dict(row) for row in table.to_pylist()]


def _row_to_instant(row: Mapping[str, Any], source: str, table_version: int) -> ArchivedInstant:
    entry = LSMTimelineInstant.from_avro(row)
    if not entry.instant_time or not entry.action:
        raise CorruptFileError(f"{source}: archived row without instantTime or action: {dict(row)!r:.200}")
    try:
        action = Action(entry.action)
    except ValueError as exc:
        raise CorruptFileError(f"{source}: unknown action {entry.action!r} at {entry.instant_time}") from exc
    metadata = plan = inflight = None
    if entry.metadata:
        metadata = Payload(
            METADATA_RECORD.get(action, CommitMetadata.AVRO_NAME), entry.metadata, None, table_version, source
        )
    pending = action
    if entry.plan:
        kind = LSM_PLAN_RECORD.get(action, RequestedReplaceMetadata.AVRO_NAME)
        payload = Payload(kind, entry.plan, None, table_version, source)
        if action is Action.REPLACE_COMMIT and payload.record_name in COMMIT_RECORD_NAMES:
            inflight = payload  # Hudi stores a non-empty replace-commit inflight file in place of the plan
        else:
            plan = payload
        pending = {Action.COMMIT: Action.COMPACTION, Action.DELTA_COMMIT: Action.LOG_COMPACTION}.get(
            action, action
        )
    return ArchivedInstant(
        entry.instant_time,
        action,
        entry.completion_time,
        State.COMPLETED,
        pending,
        metadata,
        plan,
        inflight,
        source,
    )


def _in_range(ts: str, start: str | None, end: str | None) -> bool:
    key = normalize(ts)
    return (start is None or key >= normalize(start)) and (end is None or key <= normalize(end))


def read_history(
    fileio: FileIO,
    paths: TablePaths,
    start: str | None = None,
    end: str | None = None,
    *,
    table_version: int = 8,
) -> list[ArchivedInstant]:
    """The archived instants of the latest snapshot whose requested time is in ``[start, end]``.

    Sorted by requested time; an instant listed in more than one file is reported once (the first
    file of the manifest wins, as Hudi's loader keeps the first it sees).
    """
    folder = _require_layout2(paths)
    version, manifest = latest_manifest(fileio, paths)
    seen: dict[str, ArchivedInstant] = {}
    for name in manifest.file_names():
        parsed = HistoryFile.parse(name)
        if parsed is None or not parsed.overlaps(start, end):
            continue
        source = join(folder, name)
        for row in _read_rows(fileio, paths, name, _COLUMNS):
            ts = row.get("instantTime")
            if not isinstance(ts, str) or not _in_range(ts, start, end):
                continue
            if normalize(ts) not in seen:
                seen[normalize(ts)] = _row_to_instant(row, source, table_version)
    log.debug("read %d archived instants from snapshot %d of %s", len(seen), version, folder)
    return sorted(seen.values(), key=lambda i: i.sort_key)


def load_completion_times(fileio: FileIO, paths: TablePaths, start: str | None = None) -> dict[str, str]:
    """Requested time -> completion time of every archived instant requested at or after ``start``.

    Reads only the two time columns (Hudi's ``LoadMode.TIME``).
    """
    _require_layout2(paths)
    _, manifest = latest_manifest(fileio, paths)
    out: dict[str, str] = {}
    for name in manifest.file_names():
        parsed = HistoryFile.parse(name)
        if parsed is None or not parsed.overlaps(start, None):
            continue
        for row in _read_rows(fileio, paths, name, ("instantTime", "completionTime")):
            ts, done = row.get("instantTime"), row.get("completionTime")
            if isinstance(ts, str) and isinstance(done, str) and _in_range(ts, start, None):
                out.setdefault(normalize(ts), done)
    return out


def archived_completion_time(fileio: FileIO, paths: TablePaths, requested_time: str) -> str | None:
    """The completion time of the archived instant ``requested_time`` (one lookup; reads the files
    that can hold it). For many lookups use :class:`CompletionTimeLookup`."""
    return load_completion_times(fileio, paths, requested_time).get(normalize(requested_time))


class CompletionTimeLookup:
    """A callable ``archived_completion_time(ts) -> str | None`` that loads the history once, lazily."""

    __slots__ = ("_fileio", "_paths", "_times")

    def __init__(self, fileio: FileIO, paths: TablePaths) -> None:
        self._fileio = fileio
        self._paths = paths
        self._times: dict[str, str] | None = None

    def __call__(self, requested_time: str) -> str | None:
        if self._times is None:
            self._times = load_completion_times(self._fileio, self._paths)
        return self._times.get(normalize(requested_time))


# ------------------------------------------------------------------------------------------------
# writing


def _nonempty(data: bytes | None) -> bytes | None:
    return data if data else None


def lsm_row(files: InstantFiles) -> LSMTimelineInstant:
    """The ``HoodieLSMTimelineInstant`` Hudi's archiver builds for one completed instant.

    ``metadata`` is the completed file (None if empty). ``plan`` depends on the pending action:
    a clean's requested (else inflight) file; a compaction's or log compaction's requested file;
    for replace commits and clusterings the requested file, replaced by the inflight file when that
    is non-empty (Hudi's own precedence). Other actions store no plan.
    """
    instant = files.instant
    if not instant.is_completed or not instant.completion_time:
        raise TimelineError(f"{instant} cannot be archived: it is not completed with a completion time")
    pending = files.pending_action
    plan: bytes | None = None
    if pending is Action.CLEAN:
        plan = _nonempty(files.requested) or _nonempty(files.inflight)
    elif pending in (Action.COMPACTION, Action.LOG_COMPACTION):
        plan = _nonempty(files.requested)
        if plan is None:
            raise TimelineError(f"{instant}: the {pending.value} plan (requested file) is missing or empty")
    elif pending in (Action.REPLACE_COMMIT, Action.CLUSTERING):
        plan = _nonempty(files.inflight) or _nonempty(files.requested)
    return LSMTimelineInstant(
        instant_time=instant.requested_time,
        completion_time=instant.completion_time,
        action=instant.action.completed_action.value,
        metadata=_nonempty(files.completed),
        plan=plan,
        version=LSM_INSTANT_VERSION,
    )


def _parquet_bytes(rows: Sequence[Mapping[str, Any]]) -> bytes:
    """An archived timeline Parquet file as Hudi's Avro Parquet writer lays it out."""
    columns = {name: [row.get(name) for row in rows] for name in _COLUMNS}
    columns["version"] = [LSM_INSTANT_VERSION if v is None else v for v in columns["version"]]
    table = pa.table(columns, schema=_ARROW_SCHEMA)
    avro_schema = json.dumps(codec.load_schema(_ROW_NAME, 8), separators=(",", ":"))
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, _ARROW_SCHEMA, compression=PARQUET_COMPRESSION, store_schema=False) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"parquet.avro.schema": avro_schema, "writer.model.name": "avro"})
    return sink.getvalue()


def _write_snapshot(fileio: FileIO, paths: TablePaths, manifest: Manifest, current: int) -> int:
    """Write ``manifest`` as the next snapshot version and point ``_version_`` at it."""
    folder = paths.history
    version = 1 if current < 0 else current + 1
    path = join(folder, f"{MANIFEST_PREFIX}{version}")
    fileio.delete(path)  # a manifest left by a write that failed before updating _version_
    fileio.create_new(path, manifest.to_json().encode("utf-8"))
    fileio.write_bytes(join(folder, VERSION_FILE), str(version).encode("utf-8"))
    return version


def _entry(fileio: FileIO, paths: TablePaths, name: str) -> ManifestEntry:
    info = fileio.info(join(paths.history, name))
    if info is None:
        raise CorruptFileError(f"{join(paths.history, name)}: just written but not found")
    return ManifestEntry(name, info.size)


def append_to_history(
    fileio: FileIO,
    paths: TablePaths,
    instants: Sequence[InstantFiles],
    *,
    compact: bool = True,
    batch_size: int = DEFAULT_COMPACTION_BATCH_SIZE,
    max_compaction_bytes: int = DEFAULT_COMPACTION_MAX_BYTES,
) -> str:
    """Archive completed instants as a new level-0 file plus a new snapshot; returns the file name.

    Instants are written in requested-time order and the file is named after the first and last.
    A file of that name that a previous snapshot already lists means the archival already
    happened (nothing is written); an unlisted one is a leftover of a failed write and is replaced.
    With ``compact`` the merge of full levels and the cleaning of old snapshots follow
    (:func:`compact_and_clean`); Hudi runs them after deleting the archived instants from the
    active timeline, which a caller can mirror with ``compact=False``.
    """
    folder = _require_layout2(paths)
    if not instants:
        raise TimelineError(f"{folder}: nothing to archive")
    ordered = sorted(instants, key=lambda f: normalize(f.requested_time))
    rows = [lsm_row(f).to_avro() for f in ordered]
    name = HistoryFile(ordered[0].requested_time, ordered[-1].requested_time, 0).name
    path = join(folder, name)
    version, manifest = latest_manifest(fileio, paths)
    if fileio.exists(path) and name in manifest.file_names():
        log.info("%s is already part of the archived timeline; not writing it again", path)
    else:
        fileio.delete(path)  # a leftover of a failed write, never listed by a snapshot
        fileio.makedirs(folder)
        fileio.write_bytes(path, _parquet_bytes(rows))
        _write_snapshot(fileio, paths, manifest.with_file(_entry(fileio, paths, name)), version)
        log.info("archived %d instants into %s", len(rows), path)
    if compact:
        compact_and_clean(fileio, paths, batch_size=batch_size, max_compaction_bytes=max_compaction_bytes)
    return name


def _candidates(files: list[ManifestEntry], batch_size: int, max_bytes: int) -> list[ManifestEntry]:
    """At most ``batch_size`` consecutive oldest files whose total size stays within ``max_bytes``
    (a file too large on its own is skipped, since merging needs at least two)."""
    chosen: list[ManifestEntry] = []
    total = 0
    for entry in files:
        total += entry.file_len
        chosen.append(entry)
        if len(chosen) >= batch_size:
            break
        if total > max_bytes:
            if len(chosen) < 2:
                chosen, total = [], 0
            else:
                break
    return chosen


def _compact_level(
    fileio: FileIO, paths: TablePaths, level: int, batch_size: int, max_bytes: int
) -> str | None:
    version, manifest = latest_manifest(fileio, paths)
    files = [e for e in manifest.files if (p := HistoryFile.parse(e.file_name)) and p.level == level]
    if len(files) < batch_size:
        return None
    files.sort(key=lambda e: e.file_name)
    chosen = _candidates(files, batch_size, max_bytes)
    if len(chosen) < 2:
        return None
    parsed = [HistoryFile.parse(e.file_name) for e in chosen]
    merged = HistoryFile(
        min(p.min_time for p in parsed if p), max(p.max_time for p in parsed if p), level + 1
    ).name
    rows: list[dict[str, Any]] = []
    for entry in chosen:
        rows.extend(_read_rows(fileio, paths, entry.file_name, _COLUMNS))
    path = join(paths.history, merged)
    fileio.delete(path)
    fileio.write_bytes(path, _parquet_bytes(rows))
    names = [e.file_name for e in chosen]
    _write_snapshot(fileio, paths, manifest.without(names).with_file(_entry(fileio, paths, merged)), version)
    log.info("merged %d level-%d archived timeline files into %s", len(chosen), level, path)
    return merged


def compact_and_clean(
    fileio: FileIO,
    paths: TablePaths,
    *,
    batch_size: int = DEFAULT_COMPACTION_BATCH_SIZE,
    max_compaction_bytes: int = DEFAULT_COMPACTION_MAX_BYTES,
) -> list[str]:
    """Merge full levels upwards (level 0 first), then clean old snapshots; returns merged files."""
    _require_layout2(paths)
    if batch_size < 2:
        raise ValueError(f"timeline compaction batch size must be at least 2, got {batch_size}")
    merged: list[str] = []
    level = 0
    while (name := _compact_level(fileio, paths, level, batch_size, max_compaction_bytes)) is not None:
        merged.append(name)
        level += 1
    clean_snapshots(fileio, paths, SNAPSHOTS_TO_KEEP + len(merged))
    return merged


def clean_snapshots(fileio: FileIO, paths: TablePaths, keep: int = SNAPSHOTS_TO_KEEP) -> list[str]:
    """Delete manifests older than the newest ``keep`` and data files no kept manifest lists."""
    folder = _require_layout2(paths)
    versions = sorted(_manifest_versions(fileio, folder), reverse=True)
    if len(versions) <= keep:
        return []
    kept = versions[:keep]
    live = {name for v in kept for name in read_manifest(fileio, paths, v).file_names()}
    deleted: list[str] = []
    for entry in fileio.list_dir(folder):
        m = _MANIFEST_RE.match(entry.name)
        stale_manifest = m is not None and int(m.group(1)) not in kept
        stale_data = entry.name.endswith(".parquet") and entry.name not in live
        if (stale_manifest or stale_data) and not entry.is_dir and fileio.delete(entry.path):
            deleted.append(entry.name)
    return sorted(deleted)
