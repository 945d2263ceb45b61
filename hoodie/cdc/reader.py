"""The CDC query: a table's changes in ``(begin, end]`` as Hudi's CDC readers return them.

Each row has ``op`` (``i``/``u``/``d``), ``ts_ms`` (the requested time of the instant that made
the change), and ``before``/``after`` images as JSON text (:mod:`hoodie.cdc.json_text`).

Spark's semantics (``CDCRelation``: ``HoodieCDCExtractor(..., consumeChangesFromCompaction=false)``):
completed commits, delta commits and replace commits whose requested time is in the range and
whose ``operationType`` yields changes (``WriteOperationType.yieldChanges``: not clustering, log
compaction or compaction).

Flink's semantics (``from_compaction``; Flink's default ``read.cdc.from.changelog=true``):
``IncrementalQueryAnalyzer`` picks the instants by completion time on a layout-2 timeline (by
requested time on layout 1) and, for a MERGE_ON_READ table, drops the delta commits ("only
compaction yields changelog file"); the extractor then also takes compaction commits.

Each write stat is one split:

- with ``cdcStats``: AS_IS, the CDC log; ``DATA_BEFORE_AFTER`` gives every column from the log,
  ``DATA_BEFORE`` takes the after image from the new base file, ``OP_KEY_ONLY`` both images from
  the previous and the new base file;
- a base file without: BASE_FILE_DELETE (a delete that emptied the group: every row of the
  previous base file deleted) or BASE_FILE_INSERT (every row of the file inserted), otherwise
  Hudi's "There should be a cdc log file." error;
- a log file: LOG_FILE, the log's records against the slice before it (the stat's base and
  other logs, and the files of a compaction pending before the instant);
- every file group a replace commit replaced: REPLACE_COMMIT, every row of its latest slice deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pyarrow as pa

from hoodie.cdc.json_text import avro_text, image_values, jackson_text, struct_values
from hoodie.cdc.logger import Changes, data_fields, diff_by_key, read_cdc_records
from hoodie.cdc.schemas import (
    AFTER,
    BEFORE,
    OP,
    RECORD_KEY,
    TS_MS,
    CDCOperation,
    SupplementalLoggingMode,
    cdc_enabled,
    cdc_schema,
    logging_mode,
)
from hoodie.errors import HoodieError, InvalidInputError, UnsupportedTableError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileGroupId, FileSlice
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.view import list_partition
from hoodie.io.fileio import join
from hoodie.merge.resolve import resolve_merge_config
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata, WriteStat
from hoodie.read.reader import TableReader, schema_on_read, table_schema
from hoodie.read.slice_reader import SliceReadOptions, read_parquet, read_slice
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline

CDC_COLUMNS = pa.schema(
    [(OP, pa.string()), (TS_MS, pa.string()), (BEFORE, pa.string()), (AFTER, pa.string())]
)

YIELDS_CHANGES = frozenset(
    {
        "INSERT",
        "INSERT_PREPPED",
        "UPSERT",
        "UPSERT_PREPPED",
        "DELETE",
        "DELETE_PREPPED",
        "BULK_INSERT",
        "BULK_INSERT_PREPPED",
        "INSERT_OVERWRITE",
        "INSERT_OVERWRITE_TABLE",
        "DELETE_PARTITION",
        "BOOTSTRAP",
    }
)
"""``WriteOperationType.yieldChanges``."""
COMPACT = "COMPACT"
_ACTIONS = frozenset({Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING})


class InferenceCase(Enum):
    """``HoodieCDCInferenceCase``."""

    AS_IS = "AS_IS"
    BASE_FILE_INSERT = "BASE_FILE_INSERT"
    BASE_FILE_DELETE = "BASE_FILE_DELETE"
    LOG_FILE = "LOG_FILE"
    REPLACE_COMMIT = "REPLACE_COMMIT"


@dataclass(frozen=True)
class CDCSplit:
    """``HoodieCDCFileSplit``: one instant's change of one file group and where to read it."""

    instant: str
    case: InferenceCase
    group: FileGroupId
    stat: WriteStat | None = None
    before: FileSlice | None = None
    after: FileSlice | None = None
    cdc_files: tuple[str, ...] = field(default=())


def _is_base_file(path: str) -> bool:
    return BaseFile.parse(path.rsplit("/", 1)[-1]) is not None


class CDCExtractor:
    """The splits of a CDC query over one table."""

    def __init__(self, table: HoodieTable, begin: str, end: str | None, *, from_compaction: bool) -> None:
        if not cdc_enabled(table.config):
            raise InvalidInputError(
                f"{table.base_path} is not a CDC table (hoodie.table.cdc.enabled is not true)"
            )
        self.table = table
        self.mode = logging_mode(table.config)
        self.timeline: ActiveTimeline = table.reload()
        last = self.timeline.last()
        if end is None:
            if last is None:
                raise HoodieError(f"{table.base_path}: no valid instant in the active timeline")
            end = last.requested_time
            if from_compaction and table.paths.layout >= 2:  # Flink's range is by completion time
                end = max(
                    (i.completion_time or i.requested_time for i in self.timeline.completed()), default=end
                )
        if normalize(begin) > normalize(end):
            raise InvalidInputError(f"not a valid range: begin instant {begin} is after end instant {end}")
        first = self.timeline.first()
        if first is not None and normalize(begin) < normalize(first.requested_time) and self._has_archived():
            raise HoodieError(
                f"Start instant time {begin} for CDC query has to be in the active timeline. "
                f"Beginning of active timeline {first.requested_time}"
            )
        self.begin, self.end, self.from_compaction = begin, end, from_compaction
        self._listings: dict[str, list[BaseFile]] = {}

    def _has_archived(self) -> bool:
        """Whether instants were archived (layout 1: ``.hoodie/archived``, 2: the LSM history)."""
        paths = self.table.paths
        folder = paths.history if paths.layout >= 2 else paths.archived
        fileio = self.table.fileio
        if not fileio.exists(folder):
            return False
        if paths.layout >= 2:  # LSM history: parquet files of archived instants
            return any(e.name.endswith(".parquet") for e in fileio.list_dir(folder))
        return any(".archive." in e.name for e in fileio.list_dir(folder))  # .commits_.archive.N

    def commits(self) -> list[tuple[Instant, CommitMetadata]]:
        lo, hi = normalize(self.begin), normalize(self.end)
        flink = self.from_compaction
        by_completion = flink and self.table.paths.layout >= 2
        out = []
        for instant in self.timeline.completed():
            if instant.action not in _ACTIONS:
                continue
            if flink and self.table.config.is_mor and instant.action is Action.DELTA_COMMIT:
                continue
            at = (
                instant.completion_time
                if by_completion and instant.completion_time
                else instant.requested_time
            )
            if not lo < normalize(at) <= hi:
                continue
            meta = self.table.commit_metadata(instant, self.timeline)
            op = (meta.operation_type or "").upper()
            if op in YIELDS_CHANGES or (self.from_compaction and op == COMPACT):
                out.append((instant, meta))
        return out

    def splits(self) -> dict[FileGroupId, list[CDCSplit]]:
        out: dict[FileGroupId, list[CDCSplit]] = {}
        for instant, meta in self.commits():
            ts = instant.requested_time
            for stat in meta.write_stats():
                group = FileGroupId(stat.partition_path or "", stat.file_id or "")
                out.setdefault(group, []).append(self._parse(group, ts, stat, meta.operation_type or ""))
            if isinstance(meta, ReplaceCommitMetadata):
                for partition, file_id in meta.replaced_file_ids():
                    group = FileGroupId(partition, file_id)
                    latest = self._latest_slice(group)
                    if latest is not None:
                        out.setdefault(group, []).append(
                            CDCSplit(ts, InferenceCase.REPLACE_COMMIT, group, before=latest)
                        )
        for splits in out.values():
            splits.sort(key=lambda s: normalize(s.instant))
        return out

    def _parse(self, group: FileGroupId, ts: str, stat: WriteStat, operation: str) -> CDCSplit:
        path = stat.path or ""
        if stat.cdc_stats:
            files = tuple(stat.cdc_stats)
            if self.mode is SupplementalLoggingMode.DATA_BEFORE_AFTER:
                return CDCSplit(ts, InferenceCase.AS_IS, group, stat, cdc_files=files)
            current = self._slice_of(group, ts, path)
            before = None
            if self.mode is SupplementalLoggingMode.OP_KEY_ONLY:
                before = self._base_on(group, stat.prev_commit or "")
            return CDCSplit(
                ts, InferenceCase.AS_IS, group, stat, before=before, after=current, cdc_files=files
            )
        if _is_base_file(path):
            deletes_all = operation.upper().startswith("DELETE") and not stat.num_writes and stat.num_deletes
            if deletes_all:
                before = self._base_on(group, stat.prev_commit or "")
                return CDCSplit(ts, InferenceCase.BASE_FILE_DELETE, group, stat, before=before)
            if not stat.num_update_writes and stat.num_writes == stat.num_inserts:
                return CDCSplit(
                    ts, InferenceCase.BASE_FILE_INSERT, group, stat, after=self._slice_of(group, ts, path)
                )
            raise HoodieError(f"There should be a cdc log file. ({path} written by {ts} has no cdcStats)")
        return CDCSplit(ts, InferenceCase.LOG_FILE, group, stat, before=self._log_dependency(group, ts, stat))

    # -- file slices ------------------------------------------------------------------------------
    def _bases(self, partition: str) -> list[BaseFile]:
        found = self._listings.get(partition)
        if found is None:
            found = self._listings[partition] = list(
                list_partition(self.table.fileio, self.table.base_path, partition).base_files
            )
        return found

    def _base_on(self, group: FileGroupId, commit: str) -> FileSlice:
        for b in self._bases(group.partition_path):
            if b.file_id == group.file_id and b.commit_time == commit:
                return FileSlice(group.partition_path, group.file_id, commit, b)
        raise HoodieError(
            f"Can not get the previous version of the base file of {group} at {commit} (cleaned?)"
        )

    def _slice_of(self, group: FileGroupId, ts: str, path: str) -> FileSlice:
        base = BaseFile.parse(path.rsplit("/", 1)[-1])
        if base is None:
            raise HoodieError(f"{path} of instant {ts} is not a base file")
        return FileSlice(group.partition_path, group.file_id, ts, base)

    def _log_dependency(self, group: FileGroupId, ts: str, stat: WriteStat) -> FileSlice:
        current = (stat.path or "").rsplit("/", 1)[-1]
        base = BaseFile.parse(stat.base_file) if stat.base_file else None
        logs = [LogFile.parse(n) for n in stat.log_files or () if n != current]
        parsed = [lf for lf in logs if lf is not None]
        for pending in self.timeline.pending_compaction():
            if normalize(pending.requested_time) >= normalize(ts):
                continue
            for op in self.table.compaction_plan(pending.requested_time, self.timeline).operations or ():
                if (op.partition_path or "") != group.partition_path or op.file_id != group.file_id:
                    continue
                parsed.extend(
                    lf
                    for lf in (LogFile.parse(p.rsplit("/", 1)[-1]) for p in op.delta_file_paths or ())
                    if lf
                )
                if base is None and op.data_file_path:
                    base = BaseFile.parse(op.data_file_path.rsplit("/", 1)[-1])
        unique = {lf.name: lf for lf in parsed}
        ordered = tuple(sorted(unique.values(), key=lambda lf: lf.sort_key))
        return FileSlice(group.partition_path, group.file_id, base.commit_time if base else ts, base, ordered)

    def _latest_slice(self, group: FileGroupId) -> FileSlice | None:
        view = self.table.file_system_view(timeline=self.timeline)
        for fg in view.file_groups(group.partition_path):
            if fg.file_id == group.file_id:
                slices = fg.slices()
                return slices[0] if slices else None
        return None


@dataclass
class _Rows:
    op: list[str | None] = field(default_factory=list)
    ts: list[str] = field(default_factory=list)
    before: list[str | None] = field(default_factory=list)
    after: list[str | None] = field(default_factory=list)

    def add(self, op: str | None, ts: str, before: str | None, after: str | None) -> None:
        self.op.append(op)
        self.ts.append(ts)
        self.before.append(before)
        self.after.append(after)


class CDCReader:
    """Reads the changes of the splits of a :class:`CDCExtractor`."""

    def __init__(self, extractor: CDCExtractor) -> None:
        self.ex = extractor
        self.table = extractor.table
        self.schema = table_schema(self.table)
        self.columns = data_fields(self.schema)  # the meta fields out; a data column may start with _hoodie_
        self.cdc_schema = cdc_schema(extractor.mode, self.table.latest_schema_json() or {"fields": []})
        self.reader = TableReader(self.table)
        self.view = self.table.file_system_view(timeline=extractor.timeline)

    def read(self) -> pa.Table:
        rows = _Rows()
        for group in sorted(self.ex.splits().items(), key=lambda kv: (kv[0].partition_path, kv[0].file_id)):
            for split in group[1]:
                self._split(split, rows)
        return pa.table([rows.op, rows.ts, rows.before, rows.after], schema=CDC_COLUMNS)

    def _read_slice(self, s: FileSlice, upto: str | None = None, *, inclusive: bool = True) -> pa.Table:
        """The merged rows of ``s``; with ``upto``, only log blocks of instants up to it (a v6 log
        file can hold blocks of several delta commits)."""
        if not s.log_files and s.base_file is not None:
            path = join(self.table.base_path, s.partition_path, s.base_file.name)
            return read_parquet(self.table.fileio, path, self.schema)
        if s.is_empty:
            return self.schema.empty_table()
        if upto is None:
            return self.reader.read_file_slices([s])
        bound = normalize(upto)

        def visible(ts: str) -> bool:
            t = normalize(ts)
            return self.view.is_committed(ts) and (t <= bound if inclusive else t < bound)

        opts = SliceReadOptions(
            schema=self.schema,
            merge=resolve_merge_config(self.table.config),
            table_version=self.table.table_version,
            is_committed=visible,
            latest_instant=upto,
        )
        return read_slice(self.table.fileio, self.table.base_path, s, opts)

    def _json(self, table: pa.Table) -> list[str]:
        return [jackson_text(r) for r in image_values(table, self.columns)]

    def _split(self, split: CDCSplit, rows: _Rows) -> None:
        ts = split.instant
        case = split.case
        if case is InferenceCase.BASE_FILE_INSERT:
            assert split.after is not None
            for text in self._json(self._read_slice(split.after)):
                rows.add(CDCOperation.INSERT.value, ts, None, text)
        elif case in (InferenceCase.BASE_FILE_DELETE, InferenceCase.REPLACE_COMMIT):
            assert split.before is not None
            for text in self._json(self._read_slice(split.before)):
                rows.add(CDCOperation.DELETE.value, ts, text, None)
        elif case is InferenceCase.LOG_FILE:
            self._log_file(split, rows)
        else:
            self._as_is(split, rows)

    def _log_file(self, split: CDCSplit, rows: _Rows) -> None:
        assert split.before is not None and split.stat is not None
        current = LogFile.parse((split.stat.path or "").rsplit("/", 1)[-1])
        if current is None:
            raise HoodieError(f"{split.stat.path} is not a log file")
        before = self._read_slice(split.before, split.instant, inclusive=False)
        after_slice = FileSlice(
            split.before.partition_path,
            split.before.file_id,
            split.before.base_instant_time,
            split.before.base_file,
            tuple(sorted((*split.before.log_files, current), key=lambda lf: lf.sort_key)),
        )
        after = self._read_slice(after_slice, split.instant)
        self._emit_diff(diff_by_key(before, after), before, after, split.instant, rows)

    def _emit_diff(self, changes: Changes, before: pa.Table, after: pa.Table, ts: str, rows: _Rows) -> None:
        b_json = _lazy_json(self, before)
        a_json = _lazy_json(self, after)
        for op, bi, ai in zip(changes.ops.to_pylist(), changes.before, changes.after, strict=True):
            rows.add(op, ts, b_json(int(bi)) if bi >= 0 else None, a_json(int(ai)) if ai >= 0 else None)

    def _as_is(self, split: CDCSplit, rows: _Rows) -> None:
        ts = split.instant
        records = read_cdc_records(self.table.fileio, self.table.base_path, split.cdc_files, self.cdc_schema)
        ops = records[OP].to_pylist()
        mode = self.ex.mode
        if mode is SupplementalLoggingMode.DATA_BEFORE_AFTER:
            befores = struct_values(records[BEFORE].combine_chunks())
            afters = struct_values(records[AFTER].combine_chunks())
            for op, b, a in zip(ops, befores, afters, strict=True):
                rows.add(op, ts, avro_text(b), avro_text(a))
            return
        keys = records[RECORD_KEY].to_pylist()
        assert split.after is not None
        after_by_key = _by_key(self, self._read_slice(split.after))
        if mode is SupplementalLoggingMode.DATA_BEFORE:
            befores = struct_values(records[BEFORE].combine_chunks())
            for op, key, b in zip(ops, keys, befores, strict=True):
                after = after_by_key(key) if op in ("i", "u") else None
                rows.add(op, ts, avro_text(b), after)
            return
        assert split.before is not None
        before_by_key = _by_key(self, self._read_slice(split.before))
        for op, key in zip(ops, keys, strict=True):
            before = None if op == "i" else before_by_key(key)
            after = None if op == "d" else after_by_key(key)
            rows.add(op, ts, before, after)


def _lazy_json(reader: CDCReader, table: pa.Table) -> Callable[[int], str]:
    cache: dict[int, str] = {}
    values: list[dict[str, Any]] | None = None

    def get(i: int) -> str:
        nonlocal values
        if i not in cache:
            if values is None:
                values = image_values(table, reader.columns)
            cache[i] = jackson_text(values[i])
        return cache[i]

    return get


def _by_key(reader: CDCReader, table: pa.Table) -> Callable[[str | None], str | None]:
    keys = table[RECORD_KEY_METADATA_FIELD].to_pylist() if table.num_rows else []
    index = {str(k): i for i, k in enumerate(keys)}
    text = _lazy_json(reader, table)

    def get(key: str | None) -> str | None:
        i = index.get(str(key))
        return None if i is None else text(i)

    return get


def read_cdc(
    table: HoodieTable, begin: str, end: str | None = None, *, from_compaction: bool = False
) -> pa.Table:
    """The CDC query of ``table`` over ``(begin, end]`` (``end`` defaults to the latest instant).

    Refused on a schema-on-read table: its images would have to be read with each file's own
    InternalSchema, which this reader does not do.
    """
    if schema_on_read(table) is not None:
        raise UnsupportedTableError(
            f"{table.base_path}: a CDC query of a schema-on-read table (latest_schema in its commits) "
            "is not supported: the images would be read by column name, not by field id"
        )
    return CDCReader(CDCExtractor(table, begin, end, from_compaction=from_compaction)).read()
