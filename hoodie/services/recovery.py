"""What a failed or abandoned instant left behind, and how to undo it (the planning half of rollback).

A write or table service that dies leaves files named with its instant and, before each of them, a
marker. Apache Hudi rolls such an instant back from its markers when they exist
(``MarkerBasedRollbackStrategy``) and otherwise by listing every partition for files named with the
instant (``ListingBasedRollbackStrategy``). Table versions differ:

* 8+: every file the instant wrote is deleted, its log files included (``logBlocksToBeDeleted`` stays
  empty);
* 6: base files are deleted, but log files of existing file groups are named by the slice's base
  instant and may be shared, so each slice the instant appended to gets a ROLLBACK command block in a
  new log file instead (requests grouped per file group).

An instant counts as abandoned once its heartbeat expired (Hudi's LAZY failed-writes policy); an
instant whose heartbeat is alive is never rolled back. ``hoodie.services.rollback.recover_inflight``
puts an abandoned compaction, log compaction or clustering back to REQUESTED through a recorded
rollback, so that its immutable plan runs again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from hoodie.errors import TableServiceError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import iter_blocks
from hoodie.file_group.view import list_partition_paths
from hoodie.io.fileio import FileIO, join
from hoodie.models.commit import CommitMetadata, WriteStat
from hoodie.models.rollback import InstantInfo, RollbackPlan, RollbackRequest
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.heartbeat import HeartbeatConfig, is_heartbeat_expired
from hoodie.write.markers import MARKER_EXTENSION, IOType, WriteMarkers

log = logging.getLogger(__name__)

ROLLBACK_PLAN_VERSION = 1
_SERVICE_ACTIONS = frozenset({Action.COMPACTION, Action.LOG_COMPACTION, Action.CLUSTERING})
_TIMELINE_SERVER_MARKERS = "MARKERS"


# -- markers ----------------------------------------------------------------------------------


def marker_entries(table: HoodieTable, instant_time: str) -> list[tuple[str, str, IOType]] | None:
    """``(partition, file name, io type)`` of an instant's markers; None when it has no marker folder.

    Reads Hudi's DIRECT markers and the ``MARKERS<n>`` files of timeline-server-based markers.
    """
    markers = WriteMarkers(table.fileio, table.paths, instant_time)
    listing = table.fileio.list_files_recursive(markers.root)
    if not listing:
        return None
    found = set(markers.files())
    for info in listing:
        suffix = info.name[len(_TIMELINE_SERVER_MARKERS) :]
        if not info.name.startswith(_TIMELINE_SERVER_MARKERS) or not suffix.isdigit():
            continue
        for line in table.fileio.read_bytes(info.path).decode().splitlines():
            partition, _, name = line.strip().rpartition("/")
            stem, sep, kind = name.rpartition(MARKER_EXTENSION + ".")
            if sep and kind in IOType.__members__:
                found.add((partition, stem, IOType(kind)))
    return sorted(found)


# -- planning ---------------------------------------------------------------------------------


def _plan_path(fileio: FileIO, path: str) -> str:
    """A path as rollback plans name files to delete: absolute locally, a full URI elsewhere."""
    return path if fileio.scheme == "file" else fileio.to_uri(path)


def _delete(partition: str, paths: Iterable[str], file_id: str = "", base: str = "") -> list[RollbackRequest]:
    return [
        RollbackRequest(
            partition_path=partition,
            file_id=file_id,
            latest_base_instant=base,
            files_to_be_deleted=[p],
            log_blocks_to_be_deleted={},
        )
        for p in paths
    ]


def _marker_requests(
    table: HoodieTable, ts: str, entries: list[tuple[str, str, IOType]]
) -> list[RollbackRequest]:
    """Hudi's MarkerBasedRollbackStrategy: one request per marker (grouped per file group in v6)."""
    fileio, v8 = table.fileio, table.table_version >= 8
    out: list[RollbackRequest] = []
    for partition, name, io_type in entries:
        path = join(table.base_path, partition, name)
        base, lf = BaseFile.parse(name), LogFile.parse(name)
        file_id = base.file_id if base else lf.file_id if lf else None
        if file_id is None:
            raise TableServiceError(f"marker of {ts} names {path}, which is neither a base nor a log file")
        if v8:  # created base files and the instant's own log files are deleted
            out += _delete(partition, [_plan_path(fileio, path)], file_id, ts)
        elif io_type is not IOType.APPEND:
            if base is None:
                raise TableServiceError(f"marker of {ts}: log file {path} has a {io_type} marker, not APPEND")
            out += _delete(partition, [_plan_path(fileio, path)], file_id, base.commit_time)
        else:
            out.append(_append_request(table, ts, partition, path, base, lf))
    return out if v8 else group_by_file_group(out)


def _append_request(
    table: HoodieTable, ts: str, partition: str, path: str, base: BaseFile | None, lf: LogFile | None
) -> RollbackRequest:
    fileio = table.fileio
    if lf is None:  # a marker named after the base file (writers before HUDI-1517): its latest log
        assert base is not None
        logs = [
            x
            for e in fileio.list_dir(join(table.base_path, partition))
            if (x := LogFile.parse(e.name, e.size)) is not None
            and (x.file_id, x.instant_time, x.extension) == (base.file_id, base.commit_time, "log")
        ]
        if not logs:
            return RollbackRequest(
                partition_path=partition,
                file_id=base.file_id,
                latest_base_instant=base.commit_time,
                files_to_be_deleted=[],
                log_blocks_to_be_deleted={},
            )
        lf = max(logs, key=lambda x: x.sort_key)
        path = join(table.base_path, partition, lf.name)
    info = fileio.info(path)
    blocks: dict[str, int] = {}
    if info is not None:
        if lf.instant_time == ts:  # the log opened a new file group: delete it
            return _delete(partition, [_plan_path(fileio, path)])[0]
        blocks = {fileio.to_uri(path): info.size}
    return RollbackRequest(
        partition_path=partition,
        file_id=lf.file_id,
        latest_base_instant=lf.instant_time,
        files_to_be_deleted=[],
        log_blocks_to_be_deleted=blocks,
    )


def group_by_file_group(requests: list[RollbackRequest]) -> list[RollbackRequest]:
    """Table version 6: per file group, keep file deletions and merge every log-block request into one."""
    groups: dict[tuple[str, str | None], list[RollbackRequest]] = {}
    for r in requests:
        groups.setdefault((r.partition_path or "", r.file_id), []).append(r)
    out: list[RollbackRequest] = []
    for (partition, file_id), members in groups.items():
        blocks: dict[str, int] = {}
        for r in members:
            if not r.log_blocks_to_be_deleted:
                out.append(r)
                continue
            if r.files_to_be_deleted:
                out += _delete(partition, r.files_to_be_deleted, file_id or "", r.latest_base_instant or "")
            blocks.update(r.log_blocks_to_be_deleted)
        if blocks:
            out.append(
                RollbackRequest(
                    partition_path=partition,
                    file_id=file_id,
                    latest_base_instant=members[0].latest_base_instant,
                    files_to_be_deleted=[],
                    log_blocks_to_be_deleted=blocks,
                )
            )
    return out


def _commit_metadata(table: HoodieTable, instant: Instant, tl: ActiveTimeline) -> CommitMetadata | None:
    """The completed metadata, or an inflight write's workload profile (None for a plan-only state)."""
    if instant.is_completed:
        return table.commit_metadata(instant, tl)
    if instant.is_inflight and instant.action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
        data = tl.read_state(instant.requested_time, State.INFLIGHT, instant.action)
        return CommitMetadata.from_bytes(data, table.table_version) if data else None
    return None


def _named(table: HoodieTable, partition: str, ts: str, since: bool = False) -> list[str]:
    """Files of ``partition`` written at ``ts`` (or, with ``since``, at or after it)."""
    out = []
    for e in table.fileio.list_dir(join(table.base_path, partition)):
        base, lf = BaseFile.parse(e.name), LogFile.parse(e.name)
        stamp = base.commit_time if base else lf.instant_time if lf and lf.extension == "log" else None
        if stamp is not None and (stamp == ts or (since and normalize(stamp) >= normalize(ts))):
            out.append(e.path)
    return sorted(out)


def _sliced_since(table: HoodieTable, tl: ActiveTimeline, partition: str, ts: str) -> list[str]:
    """v8+ restore of a compaction: base files at or after it, and logs completed at or after it."""
    out = []
    for e in table.fileio.list_dir(join(table.base_path, partition)):
        base, lf = BaseFile.parse(e.name), LogFile.parse(e.name)
        if base is not None and normalize(base.commit_time) >= normalize(ts):
            out.append(e.path)
        elif lf is not None and lf.extension == "log":
            done = tl.completion_time(lf.instant_time) or table.archived_completion_time(lf.instant_time)
            if done is None or normalize(done) >= normalize(ts):
                out.append(e.path)
    return sorted(out)


def latest_slices_on_or_before(
    table: HoodieTable, tl: ActiveTimeline, partition: str, ts: str
) -> dict[str, FileSlice]:
    """Per file id, the newest slice whose base instant is at or before ``ts`` (pending compaction
    slices included), skipping file groups replaced at or before ``ts``."""
    view = table.file_system_view(timeline=tl)
    replaced = table.replaced_file_groups(tl)
    out: dict[str, FileSlice] = {}
    for group in view.file_groups(partition):
        at = replaced.get(group.group_id)
        if at is not None and normalize(at) <= normalize(ts):
            continue
        for s in group.slices():
            if normalize(s.base_instant_time) <= normalize(ts):
                out[group.file_id] = s
                break
    return out


def _logs_holding(table: HoodieTable, file_slice: FileSlice, ts: str) -> dict[str, int]:
    """Log files of ``file_slice`` that hold a block written at ``ts`` (full URI -> size)."""
    out: dict[str, int] = {}
    for path in file_slice.log_file_paths(table.base_path):
        data = table.fileio.read_bytes(path)
        if any(b.instant_time == ts for b in iter_blocks(data, path)):
            out[table.fileio.to_uri(path)] = len(data)
    return out


def _v6_append_requests(
    table: HoodieTable, tl: ActiveTimeline, partition: str, ts: str, stats: list[WriteStat]
) -> list[RollbackRequest]:
    """Updates of a v6 delta commit: a rollback block in the latest slice of each file group it wrote.

    A completed commit names the log file in each write stat. An inflight one only has its workload
    profile (no paths; Hudi fails there): the slice's log files holding its blocks are found instead.
    """
    slices = latest_slices_on_or_before(table, tl, partition, ts)
    out = []
    for stat in stats:
        fid, prev = stat.file_id, stat.prev_commit
        if not fid or prev in (None, "null") or fid not in slices:
            continue  # inserts go to new file groups, deleted as files named with the instant
        base = slices[fid].base_instant_time
        if normalize(base) >= normalize(ts):
            continue  # the instant opened the slice: its files are deleted instead
        if stat.path is not None:
            size = stat.total_write_bytes if stat.total_write_bytes and stat.total_write_bytes > 0 else 1
            blocks = {table.fileio.to_uri(join(table.base_path, stat.path)): size}
        else:
            blocks = _logs_holding(table, slices[fid], ts)
        if blocks:
            out.append(
                RollbackRequest(
                    partition_path=partition,
                    file_id=fid,
                    latest_base_instant=base,
                    files_to_be_deleted=[],
                    log_blocks_to_be_deleted=blocks,
                )
            )
    return out


def _written(
    table: HoodieTable, partition: str, ts: str, meta: CommitMetadata | None, from_metadata: bool
) -> list[str]:
    """Files of ``partition`` named with ``ts``; for a completed COW instant, those its metadata lists."""
    named = _named(table, partition, ts)
    if not from_metadata or meta is None or table.config.is_mor:
        return named
    stats = (meta.partition_to_write_stats or {}).get(partition) or []
    listed = {join(table.base_path, s.path) for s in stats if s.path}
    return [p for p in named if p in listed]


def _listing_requests(
    table: HoodieTable, instant: Instant, tl: ActiveTimeline, is_restore: bool
) -> list[RollbackRequest]:
    """Hudi's ListingBasedRollbackStrategy, per table version."""
    ts, fileio = instant.requested_time, table.fileio
    meta = _commit_metadata(table, instant, tl)
    action = instant.action
    if meta is not None and meta.operation_type == "COMPACT":
        action = Action.COMPACTION
    elif meta is not None and meta.operation_type == "LOG_COMPACT":
        action = Action.LOG_COMPACTION
    from_metadata = instant.is_completed and meta is not None and meta.operation_type != "UNKNOWN"
    v6, mor = table.table_version < 8, table.config.is_mor
    out: list[RollbackRequest] = []
    for partition in list_partition_paths(fileio, table.base_path):
        if mor and action is Action.COMPACTION and not is_restore:
            # Re-running a compaction: only its base files; logs written meanwhile belong to writers.
            paths = [p for p in _named(table, partition, ts) if BaseFile.parse(p.rsplit("/", 1)[-1])]
        elif mor and action is Action.COMPACTION and not v6:
            paths = _sliced_since(table, tl, partition, ts)  # restore: the whole slice it opened
        else:
            paths = _written(table, partition, ts, meta, from_metadata)
        out += _delete(partition, [_plan_path(fileio, p) for p in paths])
        if mor and v6 and action in (Action.DELTA_COMMIT, Action.LOG_COMPACTION) and meta is not None:
            stats = (meta.partition_to_write_stats or {}).get(partition)
            if stats is not None:
                out += _v6_append_requests(table, tl, partition, ts, stats)
    return out


def build_rollback_plan(
    table: HoodieTable, instant: Instant, tl: ActiveTimeline, *, is_restore: bool = False
) -> RollbackPlan:
    """The plan Hudi writes to roll back ``instant``: marker-based for a pending instant with markers,
    listing-based otherwise (and always for restore); no requests for a REQUESTED instant."""
    requests: list[RollbackRequest] = []
    if not instant.is_requested:
        entries = (
            None if instant.is_completed or is_restore else marker_entries(table, instant.requested_time)
        )
        if entries is not None:
            requests = _marker_requests(table, instant.requested_time, entries)
        else:
            requests = _listing_requests(table, instant, tl, is_restore)
    return RollbackPlan(
        instant_to_rollback=InstantInfo(commit_time=instant.requested_time, action=instant.action.value),
        rollback_requests=requests,
        version=ROLLBACK_PLAN_VERSION,
    )


# -- which instants are candidates ------------------------------------------------------------


def is_table_service(table: HoodieTable, instant: Instant, tl: ActiveTimeline) -> bool:
    """A pending compaction, log compaction or clustering (whose plan must survive a rollback)."""
    if instant.is_completed:
        return False
    return instant.action in _SERVICE_ACTIONS or table.is_clustering(instant, tl)


def read_plan(table: HoodieTable, tl: ActiveTimeline, rollback_time: str) -> RollbackPlan:
    """The ``HoodieRollbackPlan`` in ``R.rollback.requested``."""
    data = tl.read_state(rollback_time, State.REQUESTED, Action.ROLLBACK)
    name = tl.state_file(rollback_time, State.REQUESTED, Action.ROLLBACK) or rollback_time
    return RollbackPlan.from_bytes(data, table.table_version, tl.path_of(name))


def pending_rollbacks(table: HoodieTable, tl: ActiveTimeline) -> dict[str, tuple[Instant, RollbackPlan]]:
    """Pending rollback instants by the requested time of the instant each one rolls back."""
    out: dict[str, tuple[Instant, RollbackPlan]] = {}
    for rb in tl.pending().actions(Action.ROLLBACK):
        plan = read_plan(table, tl, rb.requested_time)
        if plan.instant_to_rollback is not None:
            out[plan.instant_to_rollback.commit_time] = (rb, plan)
    return out


def rollback_candidates(
    table: HoodieTable, tl: ActiveTimeline, heartbeat: HeartbeatConfig, now_ms: int | None = None
) -> list[Instant]:
    """Newest first: pending rollbacks to resume, failed writes, and abandoned table-service attempts.

    A write (commit, delta commit, replace commit) is failed once its heartbeat expired (Hudi's LAZY
    failed-writes policy). A compaction or clustering counts only when INFLIGHT, its heartbeat expired
    and its inflight file is older than the expiry (its executor starts beating just after writing
    it). Nothing is a candidate while a restore is pending: the restore owns those instants.
    """
    if tl.pending().actions(Action.RESTORE):
        return []
    now = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    fileio, paths = table.fileio, table.paths

    def expired(ts: str) -> bool:
        return is_heartbeat_expired(fileio, paths, ts, heartbeat, now)

    planned = pending_rollbacks(table, tl)
    out = [rb for rb, _ in planned.values() if expired(rb.requested_time)]
    for instant in tl.pending().writes():
        ts = instant.requested_time
        if ts in planned or not expired(ts):
            continue
        if is_table_service(table, instant, tl):
            since = tl.state_file_mtime_ms(ts, State.INFLIGHT, instant.action)
            if since is None or now - since <= heartbeat.expiry_ms:
                continue
        out.append(instant)
    return sorted(out, key=lambda i: i.sort_key, reverse=True)


FAILED_WRITES_KEYS = ("hoodie.clean.failed.writes.policy", "hoodie.cleaner.policy.failed.writes")
"""Hudi's failed-writes cleaning policy key and its older name (HoodieCleanConfig)."""


def lazy_failed_writes(options: Mapping[str, str]) -> bool:
    """The writers use the LAZY failed-writes policy: they keep heartbeats, and a write whose heartbeat
    expired is failed (with the default EAGER policy a missing heartbeat proves nothing)."""
    return any(options.get(k, "").strip().upper() == "LAZY" for k in FAILED_WRITES_KEYS)
