"""The archived timeline of timeline layout 1 (table version 6): ``.hoodie/archived/``, and a facade
over both layouts.

Hudi 0.14/0.15 archives by appending Avro data blocks to log files named
``.commits_.archive.<version>_<writeToken>`` (file id ``commits``, empty base instant, extension
``archive``). On storage without append (local disks, object stores) every archival run writes the
next version with write token ``1-0-1``; that is what :func:`write_archive_file` does. A block
carries only the SCHEMA header (``HoodieArchivedMetaEntry``) and at most
``hoodie.commits.archival.batch`` (10) records.

Each *state file* of an archived instant becomes one record: ``commitTime``, ``actionType`` (the
action of that state's file: ``compaction`` while requested, ``commit`` once completed),
``actionState``, ``stateTransitionTime`` (the file's modification time as an instant time) and the
payload of that state in the field matching the action (commit metadata converted from its JSON
form for commits, delta commits and replace commits). :func:`read_archived` folds the records of
one instant into a single :class:`~hoodie.timeline.history.ArchivedInstant`.

:class:`ArchivedTimeline` loads either layout into the same records.
"""

from __future__ import annotations

import io
import json
import logging
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import fastavro

from hoodie.errors import CorruptFileError, CorruptLogBlockError, MalformedPlanError, TimelineError
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import iter_blocks
from hoodie.io.fileio import FileInfo, FileIO, join
from hoodie.models import codec
from hoodie.models.archived import ArchivedMetaEntry, CompactionMetadata
from hoodie.models.base import AvroRecord
from hoodie.models.clean import CleanerPlan, CleanMetadata
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexCommitMetadata
from hoodie.models.rollback import RollbackMetadata
from hoodie.models.savepoint import SavepointMetadata
from hoodie.timeline.archived_instant import ArchivedInstant, InstantFiles, Payload
from hoodie.timeline.history import read_history
from hoodie.timeline.instant import Action, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.layout import TablePaths

__all__ = [
    "ARCHIVE_BATCH_SIZE",
    "ARCHIVE_WRITE_TOKEN",
    "ArchivedTimeline",
    "archive_entries",
    "archive_files",
    "read_archived",
    "write_archive_file",
]

log = logging.getLogger(__name__)

ARCHIVE_FILE_ID = "commits"
ARCHIVE_EXTENSION = "archive"
ARCHIVE_WRITE_TOKEN = "1-0-1"
"""``HoodieLogFormat.UNKNOWN_WRITE_TOKEN``: the token of every rolled-over archive file."""
ARCHIVE_BATCH_SIZE = 10
"""``hoodie.commits.archival.batch``: records per Avro data block."""
MERGE_PLAN_NAME = "mergeArchivePlan"
AVRO_BLOCK_VERSION = 3
TABLE_VERSION = 6

_ARCHIVE_RE = re.compile(r"^\.commits_\.archive\.(\d+)")
_I32 = struct.Struct(">i")
_ENTRY_NAME = ArchivedMetaEntry.AVRO_NAME
_STATE_ORDER = (State.REQUESTED, State.INFLIGHT, State.COMPLETED)

# Archive-entry field holding the payload of a completed instant, and its record name.
_COMPLETED_FIELD: dict[Action, tuple[str, str]] = {
    Action.COMMIT: ("hoodieCommitMetadata", CommitMetadata.AVRO_NAME),
    Action.DELTA_COMMIT: ("hoodieCommitMetadata", CommitMetadata.AVRO_NAME),
    Action.REPLACE_COMMIT: ("hoodieReplaceCommitMetadata", ReplaceCommitMetadata.AVRO_NAME),
    Action.CLEAN: ("hoodieCleanMetadata", CleanMetadata.AVRO_NAME),
    Action.ROLLBACK: ("hoodieRollbackMetadata", RollbackMetadata.AVRO_NAME),
    Action.SAVEPOINT: ("hoodieSavePointMetadata", SavepointMetadata.AVRO_NAME),
    Action.INDEXING: ("hoodieIndexCommitMetadata", IndexCommitMetadata.AVRO_NAME),
    Action.COMPACTION: ("hoodieCompactionMetadata", CompactionMetadata.AVRO_NAME),
}
# ... of a requested (or, for cleans, inflight) instant: the plan.
_PLAN_FIELD: dict[Action, tuple[str, str]] = {
    Action.COMPACTION: ("hoodieCompactionPlan", CompactionPlan.AVRO_NAME),
    Action.LOG_COMPACTION: ("hoodieCompactionPlan", CompactionPlan.AVRO_NAME),
    Action.CLEAN: ("hoodieCleanerPlan", CleanerPlan.AVRO_NAME),
    Action.REPLACE_COMMIT: ("hoodieRequestedReplaceMetadata", RequestedReplaceMetadata.AVRO_NAME),
    Action.CLUSTERING: ("hoodieRequestedReplaceMetadata", RequestedReplaceMetadata.AVRO_NAME),
}
# ... of an inflight instant: the workload profile of commits and replace commits.
_INFLIGHT_FIELDS = (
    ("HoodieInflightReplaceMetadata", CommitMetadata.AVRO_NAME),
    ("hoodieCommitMetadata", CommitMetadata.AVRO_NAME),
)


# ------------------------------------------------------------------------------------------------
# files


def archive_files(fileio: FileIO, paths: TablePaths) -> list[FileInfo]:
    """The ``.commits_.archive.*`` files of the archive folder, by ascending version."""
    found: list[tuple[int, FileInfo]] = []
    for entry in fileio.list_dir(paths.archived):
        m = _ARCHIVE_RE.match(entry.name)
        if m is not None and not entry.is_dir:
            found.append((int(m.group(1)), entry))
    return [entry for _, entry in sorted(found, key=lambda pair: (pair[0], pair[1].name))]


def _next_archive_file(fileio: FileIO, paths: TablePaths) -> LogFile:
    versions = [
        parsed.version
        for entry in archive_files(fileio, paths)
        if (parsed := LogFile.parse(entry.name)) is not None
    ]
    return LogFile(ARCHIVE_FILE_ID, "", max(versions, default=0) + 1, ARCHIVE_WRITE_TOKEN, ARCHIVE_EXTENSION)


def _merge_in_progress(fileio: FileIO, paths: TablePaths) -> str | None:
    """The archive file an unfinished merge of small archive files was writing, if any."""
    path = join(paths.archived, MERGE_PLAN_NAME)
    if not fileio.exists(path):
        return None
    try:
        record = next(iter(fastavro.reader(io.BytesIO(fileio.read_bytes(path)))), None)
    except Exception:  # an unreadable plan: Hudi then reports the original error
        return None
    name = record.get("mergedArchiveFileName") if isinstance(record, dict) else None
    return name if isinstance(name, str) and name else None


# ------------------------------------------------------------------------------------------------
# reading


@cache
def _parsed_schema(text: str) -> Any:
    return fastavro.parse_schema(json.loads(text))


def _block_records(content: bytes, schema_text: str, source: str) -> Iterator[dict[str, Any]]:
    """The records of an AVRO_DATA block (content version 3) decoded with its writer schema."""
    try:
        version, count = struct.unpack_from(">ii", content, 0)
    except struct.error as exc:
        raise CorruptLogBlockError(
            f"{source}: Avro block content of {len(content)} bytes has no header"
        ) from exc
    if version != AVRO_BLOCK_VERSION:
        raise CorruptLogBlockError(f"{source}: Avro block content version {version} is not supported")
    try:
        schema = _parsed_schema(schema_text)
    except (ValueError, TypeError, fastavro.schema.SchemaParseException) as exc:
        raise CorruptLogBlockError(f"{source}: invalid SCHEMA header: {exc}") from exc
    pos = 8
    for index in range(count):
        try:
            (length,) = _I32.unpack_from(content, pos)
        except struct.error as exc:
            raise CorruptLogBlockError(f"{source}: record {index} of {count} is truncated") from exc
        datum = content[pos + 4 : pos + 4 + length]
        if length < 0 or len(datum) != length:
            raise CorruptLogBlockError(f"{source}: record {index} of {count} runs past the block")
        pos += 4 + length
        try:
            record = fastavro.schemaless_reader(io.BytesIO(datum), schema, None)
        except Exception as exc:  # fastavro raises many types on corrupt input
            raise CorruptLogBlockError(f"{source}: undecodable archived record {index}: {exc!r}") from exc
        if not isinstance(record, dict):
            raise CorruptLogBlockError(f"{source}: archived record {index} is not a record")
        yield record


def _file_records(fileio: FileIO, entry: FileInfo, merging: str | None) -> Iterator[dict[str, Any]]:
    data = fileio.read_bytes(entry.path)
    for block in iter_blocks(data, entry.path):
        if block.is_corrupt:
            if entry.name == merging:
                log.warning("%s: skipping the file an unfinished archive merge left behind", entry.path)
                return
            raise CorruptLogBlockError(
                f"{entry.path}: corrupt or truncated archive block at offset {block.offset} "
                f"({block.size} bytes); archived instants would be lost"
            )
        if block.block_type is not BlockType.AVRO_DATA:
            continue
        schema_text = block.header.get(HeaderKey.SCHEMA)
        source = f"{entry.path}@{block.offset}"
        if not schema_text:
            raise CorruptLogBlockError(f"{source}: archive block without a SCHEMA header")
        yield from _block_records(block.content, schema_text, source)


@dataclass(slots=True)
class _Entry:
    state: State
    action: Action
    record: Mapping[str, Any]
    source: str


def _entry_of(record: Mapping[str, Any], source: str) -> _Entry:
    action_name = record.get("actionType")
    try:
        action = Action(str(action_name))
    except ValueError as exc:
        raise CorruptFileError(f"{source}: archived record with unknown actionType {action_name!r}") from exc
    state_name = record.get("actionState")
    try:
        state = State[str(state_name)] if state_name is not None else State.COMPLETED  # very old entries
    except KeyError as exc:
        raise CorruptFileError(f"{source}: archived record with unknown actionState {state_name!r}") from exc
    return _Entry(state, action, record, source)


def _payload(entry: _Entry | None, fields: Iterable[tuple[str, str]]) -> Payload | None:
    if entry is None:
        return None
    for field_name, kind in fields:
        value = entry.record.get(field_name)
        if isinstance(value, Mapping):
            return Payload(kind, None, value, TABLE_VERSION, entry.source)
    return None


def _fold(time: str, entries: list[_Entry]) -> ArchivedInstant:
    by_state = {e.state: e for e in entries}
    latest = by_state[max(by_state)]
    pending = by_state.get(State.REQUESTED) or by_state.get(State.INFLIGHT)
    completed = by_state.get(State.COMPLETED)
    plan_fields = _PLAN_FIELD.get(pending.action if pending else latest.action)
    plan = None
    if plan_fields is not None:
        plan = _payload(by_state.get(State.REQUESTED), [plan_fields]) or _payload(
            by_state.get(State.INFLIGHT), [plan_fields]
        )
    completed_field = _COMPLETED_FIELD.get(completed.action) if completed else None
    transition = completed.record.get("stateTransitionTime") if completed else None
    return ArchivedInstant(
        requested_time=time,
        action=latest.action,
        completion_time=transition if isinstance(transition, str) else None,
        state=latest.state,
        pending_action=pending.action if pending else latest.action,
        metadata_payload=_payload(completed, [completed_field]) if completed_field else None,
        plan_payload=plan,
        inflight_payload=_payload(by_state.get(State.INFLIGHT), _INFLIGHT_FIELDS),
        source=latest.source,
    )


def read_archived(
    fileio: FileIO, paths: TablePaths, start: str | None = None, end: str | None = None
) -> list[ArchivedInstant]:
    """The instants of the layout-1 archive requested in ``[start, end]``, one per requested time.

    A corrupt or truncated block raises ``CorruptLogBlockError`` naming the file, except in the
    file an unfinished merge of small archive files was writing (which Hudi ignores as well).
    """
    merging = _merge_in_progress(fileio, paths)
    grouped: dict[str, list[_Entry]] = {}
    seen: set[tuple[str, Action, State]] = set()
    for entry in archive_files(fileio, paths):
        for record in _file_records(fileio, entry, merging):
            time = record.get("commitTime")
            if not isinstance(time, str):
                raise CorruptFileError(f"{entry.path}: archived record without commitTime")
            key = normalize(time)
            if (start is not None and key < normalize(start)) or (end is not None and key > normalize(end)):
                continue
            parsed = _entry_of(record, entry.path)
            if (key, parsed.action, parsed.state) in seen:
                continue  # the same state archived twice (e.g. by a merge): keep the first
            seen.add((key, parsed.action, parsed.state))
            grouped.setdefault(time, []).append(parsed)
    instants = [_fold(time, entries) for time, entries in grouped.items()]
    return sorted(instants, key=lambda i: i.sort_key)


# ------------------------------------------------------------------------------------------------
# writing


def _empty_commit_record() -> dict[str, Any]:
    """What Hudi archives for an empty commit file: a default ``HoodieCommitMetadata`` POJO."""
    return {
        "partitionToWriteStats": {},
        "compacted": False,
        "extraMetadata": {},
        "version": None,
        "operationType": "UNKNOWN",
    }


def _commit_record(data: bytes, replace: bool, source: str) -> dict[str, Any]:
    """Commit metadata as the Avro record Hudi converts its JSON (or Avro) form into."""
    model: type[CommitMetadata] = ReplaceCommitMetadata if replace else CommitMetadata
    if not data:
        return _empty_commit_record()
    if codec.is_avro_container(data):
        return model.from_bytes(data, TABLE_VERSION, source).to_avro()
    parsed = codec.decode_commit_json(data, source)
    record = model.from_payload(parsed, source).to_avro()
    record["version"] = parsed.get("version")  # the POJO has no version: Hudi leaves it null
    return record


def _avro(model: type[AvroRecord], data: bytes, source: str) -> dict[str, Any]:
    return model.from_bytes(data, TABLE_VERSION, source).to_avro()


def _state_payload(
    action: Action, state: State, data: bytes, source: str
) -> tuple[str, dict[str, Any]] | None:
    """The archive-entry field and record Hudi's archiver fills for one state file."""
    done = state is State.COMPLETED
    if action is Action.CLEAN:
        if done:
            return "hoodieCleanMetadata", _avro(CleanMetadata, data, source)
        return ("hoodieCleanerPlan", _avro(CleanerPlan, data, source)) if data else None
    if action in (Action.COMMIT, Action.DELTA_COMMIT):
        return "hoodieCommitMetadata", _commit_record(data, False, source)
    if action in (Action.REPLACE_COMMIT, Action.CLUSTERING):
        if done:
            return "hoodieReplaceCommitMetadata", _commit_record(data, True, source)
        if not data:
            return None
        if state is State.INFLIGHT:
            return "HoodieInflightReplaceMetadata", _commit_record(data, False, source)
        return "hoodieRequestedReplaceMetadata", _avro(RequestedReplaceMetadata, data, source)
    if action is Action.ROLLBACK:
        return ("hoodieRollbackMetadata", _avro(RollbackMetadata, data, source)) if done else None
    if action is Action.SAVEPOINT:
        return ("hoodieSavePointMetadata", _avro(SavepointMetadata, data, source)) if data else None
    if action in (Action.COMPACTION, Action.LOG_COMPACTION):
        if state is State.REQUESTED:
            return "hoodieCompactionPlan", _avro(CompactionPlan, data, source)
        return None
    raise TimelineError(f"{source}: Hudi 0.14/0.15 does not archive {action.value} instants")


def archive_entries(files: InstantFiles) -> list[dict[str, Any]]:
    """The ``HoodieArchivedMetaEntry`` records Hudi 0.14/0.15 writes for one instant's state files.

    One record per existing state file, requested first. ``version`` stays null (Hudi builds the
    record without its schema defaults); a completed file that is empty gets a record without payload.
    """
    instant = files.instant
    contents = {
        State.REQUESTED: files.requested,
        State.INFLIGHT: files.inflight,
        State.COMPLETED: files.completed,
    }
    out: list[dict[str, Any]] = []
    for state in _STATE_ORDER:
        data = contents[state]
        if data is None:
            continue
        action = instant.action if state is State.COMPLETED else files.pending_action
        if state is State.COMPLETED:
            action = action.completed_action
        source = f"{instant.requested_time}.{action.value} ({state.name.lower()})"
        record = ArchivedMetaEntry(
            commit_time=instant.requested_time,
            action_type=action.value,
            action_state=state.name,
            state_transition_time=files.transition_times.get(state),
            version=None,
        ).to_avro()
        if data or state is not State.COMPLETED:
            payload = _state_payload(action, state, data, source)
            if payload is not None:
                record[payload[0]] = payload[1]
        out.append(record)
    return out


def _encode_block(records: Sequence[Mapping[str, Any]], schema_text: str) -> bytes:
    parsed = _parsed_schema(schema_text)
    parts = [struct.pack(">ii", AVRO_BLOCK_VERSION, len(records))]
    for record in records:
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, parsed, dict(record))
        except (TypeError, ValueError, AttributeError, KeyError, OverflowError) as exc:
            raise MalformedPlanError(
                f"cannot encode the archive entry of {record.get('commitTime')}: {exc}"
            ) from exc
        datum = buf.getvalue()
        parts.append(_I32.pack(len(datum)))
        parts.append(datum)
    header = {HeaderKey.SCHEMA: schema_text}
    return encode_block(BlockType.AVRO_DATA, header, b"".join(parts))


def write_archive_file(
    fileio: FileIO,
    paths: TablePaths,
    instants: Sequence[InstantFiles],
    *,
    batch_size: int = ARCHIVE_BATCH_SIZE,
) -> str:
    """Write the next ``.commits_.archive.<N>_1-0-1`` file holding ``instants``; returns its name.

    Records follow the order of ``instants`` (Hudi's archiver lists cleans and rollbacks before
    commits; readers do not depend on the order), each instant's states requested first.
    """
    if not instants:
        raise TimelineError(f"{paths.archived}: nothing to archive")
    if batch_size < 1:
        raise ValueError(f"archival batch size must be positive, got {batch_size}")
    schema = json.dumps(codec.load_schema(_ENTRY_NAME, TABLE_VERSION), separators=(",", ":"))
    records = [record for files in instants for record in archive_entries(files)]
    blocks = [_encode_block(records[i : i + batch_size], schema) for i in range(0, len(records), batch_size)]
    log_file = _next_archive_file(fileio, paths)
    path = join(paths.archived, log_file.name)
    fileio.makedirs(paths.archived)
    try:
        fileio.create_new(path, b"".join(blocks))
    except FileExistsError as exc:
        raise TimelineError(f"{path} already exists; another archiver wrote it concurrently") from exc
    log.info("archived %d instants (%d records) into %s", len(instants), len(records), path)
    return log_file.name


# ------------------------------------------------------------------------------------------------
# the facade


class ArchivedTimeline:
    """The archived instants of a table (either layout), ordered by requested time."""

    __slots__ = ("_by_time", "instants", "layout")

    def __init__(self, instants: Iterable[ArchivedInstant], layout: int) -> None:
        self.instants: tuple[ArchivedInstant, ...] = tuple(sorted(instants, key=lambda i: i.sort_key))
        self._by_time = {normalize(i.requested_time): i for i in self.instants}
        self.layout = layout

    @classmethod
    def load(
        cls,
        fileio: FileIO,
        paths: TablePaths,
        layout: int,
        start: str | None = None,
        end: str | None = None,
        *,
        table_version: int | None = None,
    ) -> ArchivedTimeline:
        """Instants archived with a requested time in ``[start, end]`` (open where None).

        Layout 2 reads the LSM history (payloads decoded with ``table_version``'s schemas, 8 by
        default), layout 1 the ``.commits_.archive.*`` log files.
        """
        if layout >= 2:
            found = read_history(fileio, paths, start, end, table_version=table_version or 8)
        else:
            found = read_archived(fileio, paths, start, end)
        return cls(found, layout)

    def __iter__(self) -> Iterator[ArchivedInstant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def __bool__(self) -> bool:
        return bool(self.instants)

    def __contains__(self, requested_time: object) -> bool:
        return isinstance(requested_time, str) and normalize(requested_time) in self._by_time

    def get(self, requested_time: str) -> ArchivedInstant | None:
        return self._by_time.get(normalize(requested_time))

    def requested_times(self) -> list[str]:
        return [i.requested_time for i in self.instants]

    def completion_time(self, requested_time: str) -> str | None:
        """The archived completion time (layout 2; layout 1 archives the completed file's mtime)."""
        instant = self.get(requested_time)
        return None if instant is None else instant.completion_time

    def actions(self, *actions: Action) -> list[ArchivedInstant]:
        wanted = set(actions)
        return [i for i in self.instants if i.action in wanted]
