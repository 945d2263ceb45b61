"""Clean planning: which files a clean deletes, decided by Apache Hudi's cleaner rules.

The planner is pure: it reads the timeline (through :class:`TimelineFacts`, gathered once per plan)
and a listing of file names per partition, and returns a ``HoodieCleanerPlan`` (version 2). It
never touches data files. The rules it applies:

* **Earliest commit to retain** (KEEP_LATEST_COMMITS): with ``N`` retained commits and more than
  ``N`` completed commits, the ``N``-th newest completed commit, moved back to before the oldest
  pending write if that one is older. KEEP_LATEST_BY_HOURS: the oldest completed commit requested
  within the last ``hours`` (in the table's timeline time zone). KEEP_LATEST_FILE_VERSIONS has none.
* **Per file group** (commits/hours): keep the latest slice, the newest slice older than the
  earliest retained commit (a query or time travel at that instant reads it), every slice at or
  after that commit, and every slice a savepoint names or a pending compaction / log compaction /
  clustering needs; delete the rest. File versions: keep the newest ``N`` slices (a pending
  compaction's base slice counts as one), never a slice a pending compaction or a savepoint needs.
* **Replaced file groups** (named by completed replace commits requested before the earliest
  retained commit; all of them under file versions) lose every slice a savepoint does not name.
* **Partitions to delete**: every data file in it belongs to a replaced group, none replaced at or
  after the earliest retained commit, and no savepoint names a file in it.
* **Incremental mode** (commits/hours): after a clean, only partitions written by commits requested
  between that clean's earliest retained commit and the new one are scanned, plus partitions of
  savepoints deleted since (table version 6), or every partition when one was deleted (8+).

Listing and planning are separate steps (:func:`list_partitions`, then :func:`plan_clean` with
``listing=``) so each can be timed. File names are parsed with two regular expressions into plain
dicts of strings; no per-file objects are built. The policy (Hudi's cleaner keys) is
:mod:`hoodie.services.clean_policy`.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from hoodie.file_group.file_index import paused_gc
from hoodie.file_group.view import PARTITION_METAFILE
from hoodie.io.fileio import FileIO, join
from hoodie.models.clean import ActionInstant, CleanerPlan, CleanFileInfo, CleaningPolicy, CleanMetadata
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.models.savepoint import SavepointMetadata
from hoodie.services.clean_candidates import files_worth_planning
from hoodie.services.clean_policy import CleanPolicy
from hoodie.services.planning import metadata_files
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import format_instant_time, normalize
from hoodie.timeline.timeline import ActiveTimeline

log = logging.getLogger(__name__)

SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"
"""``extraMetadata`` key of plans and clean metadata: the savepoints present when the plan was made."""

TableListing = dict[str, list[str]]
"""Partition path ("" for a non-partitioned table) -> names of the files directly in it."""


# -- listing ----------------------------------------------------------------------------------

_PARTITION_METAFILES = frozenset(
    {PARTITION_METAFILE, PARTITION_METAFILE + ".parquet", PARTITION_METAFILE + ".orc"}
)


def list_partitions(fileio: FileIO, base_path: str, partitions: Iterable[str] | None = None) -> TableListing:
    """File names per partition: every partition of the table (one walk), or just ``partitions``.

    A partition is a folder holding ``.hoodie_partition_metadata``; the table root is partition ""
    of a non-partitioned table. Each folder is listed exactly once. A named partition that does
    not exist lists as empty.
    """
    out: TableListing = {}
    if partitions is not None:
        for partition in partitions:
            out[partition] = [e.name for e in fileio.list_dir(join(base_path, partition)) if not e.is_dir]
        return out

    def walk(path: str, rel: str) -> None:
        entries = fileio.list_dir(path)
        files = [e.name for e in entries if not e.is_dir]
        if not _PARTITION_METAFILES.isdisjoint(files):
            out[rel] = files
        for e in entries:
            if e.is_dir and not e.name.startswith("."):
                walk(e.path, f"{rel}/{e.name}" if rel else e.name)

    walk(base_path, "")
    return dict(sorted(out.items()))


# -- what the timeline says -------------------------------------------------------------------


_COMPACTIONS = frozenset({Action.COMPACTION, Action.LOG_COMPACTION})


def _base_instant_of_slice(data_file: str | None, delta_files: Sequence[str] | None) -> str | None:
    """The base instant of a plan's input slice, from its base file name or else its first log."""
    if data_file:
        m = _BASE_RE.match(data_file.rsplit("/", 1)[-1])
        if m:
            return normalize(m.group(3))
    instants = []
    for path in delta_files or ():
        m = _LOG_RE.match(path.rsplit("/", 1)[-1])
        if m:
            instants.append(normalize(m.group(2)))
    return min(instants) if instants else None


@dataclass
class TimelineFacts:
    """Everything clean planning needs from one timeline snapshot, each payload read once."""

    table_version: int
    completed_commits: list[Instant]
    """Completed commits, delta commits and replace commits, oldest first."""
    visible: set[str]
    """Normalized times whose base files count: completed writes and pending (log) compactions."""
    timeline_start: str | None
    completion: dict[str, str]
    """Normalized requested time -> normalized completion time of completed writes."""
    pending_compaction_slices: dict[tuple[str, str], str]
    """(partition, fileId) -> normalized instant of a pending compaction (opens an empty slice)."""
    needed_from: dict[tuple[str, str], str]
    """(partition, fileId) -> normalized base instant from which pending (log) compaction needs slices."""
    clustering_from: dict[tuple[str, str], str]
    """(partition, fileId) -> normalized base instant of a pending clustering's input slice."""
    replaced: dict[str, dict[str, str]]
    """partition -> fileId -> normalized instant of the completed replace commit that replaced it."""
    savepoint_times: list[str]
    savepointed_files: set[str]

    @classmethod
    def gather(cls, table: HoodieTable, timeline: ActiveTimeline) -> TimelineFacts:
        writes = timeline.writes()
        completed = writes.completed()
        visible_instants = [i for i in writes if i.is_completed or i.action in _COMPACTIONS]
        pending_slices: dict[tuple[str, str], str] = {}
        needed: dict[tuple[str, str], str] = {}
        for instant in writes.pending():
            if instant.action not in _COMPACTIONS:
                continue
            plan = table.compaction_plan(instant.requested_time, timeline)
            for op in plan.operations or ():
                key = (op.partition_path or "", op.file_id or "")
                base = normalize(op.base_instant_time or "")
                needed[key] = min(base, needed.get(key, base))
                if instant.action is Action.COMPACTION:
                    pending_slices[key] = normalize(instant.requested_time)
        clustering: dict[tuple[str, str], str] = {}
        for instant in writes.pending():
            if not table.is_clustering(instant, timeline):
                continue
            requested = table.clustering_plan(instant.requested_time, timeline)
            for group in (
                requested.clustering_plan.input_groups if requested.clustering_plan else None
            ) or ():
                for piece in group.slices or ():
                    first = _base_instant_of_slice(piece.data_file_path, piece.delta_file_paths)
                    if first is not None:
                        key = (piece.partition_path or "", piece.file_id or "")
                        clustering[key] = min(first, clustering.get(key, first))
        replaced: dict[str, dict[str, str]] = {}
        for fg, ts in table.replaced_file_groups(timeline).items():
            replaced.setdefault(fg.partition_path, {})[fg.file_id] = normalize(ts)
        savepoints = timeline.completed().actions(Action.SAVEPOINT)
        savepointed: set[str] = set()
        for sp in savepoints:
            data = timeline.read_state(sp.requested_time, State.COMPLETED, Action.SAVEPOINT)
            meta = SavepointMetadata.from_bytes(data, table.table_version, sp.requested_time)
            savepointed.update(name for _, name in meta.savepointed_files())
        return cls(
            table_version=table.table_version,
            completed_commits=list(completed),
            visible={normalize(i.requested_time) for i in visible_instants},
            timeline_start=normalize(visible_instants[0].requested_time) if visible_instants else None,
            completion={
                normalize(i.requested_time): normalize(i.completion_time or i.requested_time)
                for i in completed
            },
            pending_compaction_slices=pending_slices,
            needed_from=needed,
            clustering_from=clustering,
            replaced=replaced,
            savepoint_times=[i.requested_time for i in savepoints],
            savepointed_files=savepointed,
        )


def earliest_commit_to_retain(
    timeline: ActiveTimeline, policy: CleanPolicy, tz: dt.tzinfo, now: dt.datetime
) -> Instant | None:
    """The oldest commit whose files (and the slices it reads) a clean must keep; None to keep all."""
    writes = timeline.writes()
    completed = list(writes.completed())
    if policy.policy is CleaningPolicy.KEEP_LATEST_COMMITS:
        if len(completed) <= policy.commits_retained or policy.commits_retained == 0:
            return None  # Hudi's nth instant past the end: nothing to retain from, nothing cleaned
        nth = completed[len(completed) - policy.commits_retained]
        pending = writes.pending().first()
        if pending is None or normalize(nth.requested_time) <= normalize(pending.requested_time):
            return nth
        # Never past the oldest pending write: its files may still land in older slices.
        cut = normalize(pending.requested_time)
        older = [i for i in completed if normalize(i.requested_time) < cut]
        return older[-1] if older else None
    if policy.policy is CleaningPolicy.KEEP_LATEST_BY_HOURS:
        cutoff = format_instant_time(now - dt.timedelta(hours=policy.hours_retained), tz)
        return next((i for i in completed if normalize(i.requested_time) >= cutoff), None)
    return None


def bounded_earliest_commit_to_retain(
    timeline: ActiveTimeline, policy: CleanPolicy, earliest: Instant | None, previous: str | None
) -> Instant | None:
    """``earliest`` moved back so that one clean passes at most ``max.commits.to.clean`` commits.

    Hudi (``hoodie.clean.max.commits.to.clean``, 1.2, read by ``CleanPlanner`` /
    ``CleanerUtils.getEarliestCommitToRetain``) bounds KEEP_LATEST_COMMITS and KEEP_LATEST_BY_HOURS
    from the previous clean's earliest commit to retain (``previous``): when more than N completed
    commits lie from it up to ``earliest``, the N-th commit after it (counting it as the 0th) is
    retained instead, and the next clean goes on from there. Without a previous clean nothing is bounded.
    """
    cap = policy.max_commits_to_clean
    if (
        cap is None
        or earliest is None
        or not previous
        or policy.policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS
    ):
        return earliest
    start = normalize(previous)
    upto = normalize(earliest.requested_time)
    after = [i for i in timeline.writes().completed() if normalize(i.requested_time) >= start]
    passed = sum(1 for i in after if normalize(i.requested_time) < upto)
    return after[cap] if passed > cap else earliest


def last_clean_metadata(table: HoodieTable, timeline: ActiveTimeline) -> CleanMetadata | None:
    """The metadata of the newest completed clean (None if there is none, or its file is empty)."""
    last = timeline.completed().actions(Action.CLEAN).last()
    if last is None:
        return None
    data = timeline.read_state(last.requested_time, State.COMPLETED, Action.CLEAN)
    if not data:
        return None
    return CleanMetadata.from_bytes(data, table.table_version, last.requested_time)


def _partitions_of(table: HoodieTable, instant: Instant, timeline: ActiveTimeline) -> list[str]:
    meta = table.commit_metadata(instant, timeline)
    out = meta.partitions()
    if isinstance(meta, ReplaceCommitMetadata):
        out += list(meta.partition_to_replace_file_ids or {})
    return out


def partitions_to_clean(
    table: HoodieTable,
    policy: CleanPolicy,
    timeline: ActiveTimeline,
    earliest: Instant | None,
    facts: TimelineFacts,
) -> list[str] | None:
    """The partitions to scan: None for all of them, else (incremental mode) those written since
    the last clean's earliest retained commit, up to the new one."""
    if policy.policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS:
        return None
    if earliest is None:
        return []
    if not policy.incremental:
        return None
    last = last_clean_metadata(table, timeline)
    if last is None or not last.earliest_commit_to_retain.strip():
        return None
    previous = normalize(last.earliest_commit_to_retain)
    first = timeline.writes().filter(lambda i: i.action not in _COMPACTIONS).first()
    if first is not None and previous < normalize(first.requested_time):
        return None  # commits since the last clean were archived: their partitions are unknown
    partitioned = table.config.is_partitioned
    before = set((last.extra_metadata or {}).get(SAVEPOINTED_TIMESTAMPS, "").split(",")) - {""}
    removed = before - set(facts.savepoint_times) if partitioned else set()
    if removed and table.table_version >= 8:
        return None  # Hudi 1.x rescans everything once a savepoint is gone
    upto = normalize(earliest.requested_time)
    found: dict[str, None] = {}
    for instant in facts.completed_commits:
        if previous <= normalize(instant.requested_time) < upto:
            found.update(dict.fromkeys(_partitions_of(table, instant, timeline)))
    for ts in sorted(removed):  # Hudi 0.14/0.15: add the partitions the deleted savepoints held
        commit = next((i for i in facts.completed_commits if i.requested_time == ts), None)
        if commit is None:
            log.warning(
                "%s: savepointed commit %s was archived; its partitions are skipped", table.base_path, ts
            )
            continue
        found.update(dict.fromkeys(_partitions_of(table, commit, timeline)))
    return list(found)


# -- per partition ----------------------------------------------------------------------------

_BASE_RE = re.compile(r"^([^_/]+)_(\d+-\d+-\d+)_(\d+)\.(?:parquet|orc|hfile|lance)$")
_LOG_RE = re.compile(r"^\.([^._][^_]*?)_([^._]*)\.(log|archive)\.(\d+)(?:_(\d+-\d+-\d+))?(\.cdc)?$")


@dataclass
class _Planner:
    """Decides, partition by partition, which slices go (one instance per plan)."""

    table: HoodieTable
    policy: CleanPolicy
    facts: TimelineFacts
    earliest: str | None
    _slice_keys: dict[str, str] = field(default_factory=dict)
    _completion_cache: dict[str, str | None] = field(default_factory=dict)

    def slice_key(self, ts: str) -> str:
        """The normalized slice key for files based at ``ts``; "" when ``ts`` is not committed
        (committed: a completed write, a pending compaction, or older than the active timeline)."""
        key = self._slice_keys.get(ts)
        if key is None:
            norm = normalize(ts)
            start = self.facts.timeline_start
            visible = norm in self.facts.visible or (start is not None and norm < start)
            key = self._slice_keys[ts] = norm if visible else ""
        return key

    def completion(self, ts: str) -> str | None:
        """Normalized completion time of a delta commit; None while it is pending or failed."""
        if ts in self._completion_cache:
            return self._completion_cache[ts]
        norm = normalize(ts)
        found = self.facts.completion.get(norm)
        start = self.facts.timeline_start
        if found is None and start is not None and norm < start:
            archived = self.table.archived_completion_time(ts)
            found = normalize(archived) if archived else norm
        self._completion_cache[ts] = found
        return found

    def slices(
        self, partition: str, names: Sequence[str]
    ) -> tuple[dict[str, dict[str, list[str]]], set[str]]:
        """Committed slices per file group (slice key -> file names), and every file id with files."""
        groups: dict[str, dict[str, list[str]]] = {}
        logs: dict[str, list[tuple[str, int, str, str]]] = {}
        seen: set[str] = set()
        base_match = _BASE_RE.match
        log_match = _LOG_RE.match
        keys = self._slice_keys
        for name in names:
            if name[:1] == ".":
                m = log_match(name)
                if m is None:
                    continue
                fid, instant, ext, version, token, _ = m.groups()
                if ext != "log":
                    continue
                seen.add(fid)
                logs.setdefault(fid, []).append((instant, int(version), token or "", name))
            else:
                m = base_match(name)
                if m is None:
                    continue
                fid, _, ts = m.groups()
                seen.add(fid)
                key = keys.get(ts)
                if key is None:
                    key = self.slice_key(ts)
                if key:
                    groups.setdefault(fid, {})[key] = [name]
        for fid in seen:
            pending = self.facts.pending_compaction_slices.get((partition, fid))
            if pending is not None:
                groups.setdefault(fid, {}).setdefault(pending, [])
        by_completion = self.facts.table_version >= 8
        for fid, entries in logs.items():
            entries.sort()
            group = groups.setdefault(fid, {})
            for instant, _, _, name in entries:
                if not by_completion:
                    # Layout 1: the log names its slice's base instant.
                    key = self.slice_key(instant)
                    if key:
                        group.setdefault(key, []).append(name)
                    continue
                done = self.completion(instant)
                if done is None:
                    continue  # pending or failed: never part of a slice a clean may delete
                key = max((k for k in group if k <= done), default=None)
                group.setdefault(key if key is not None else normalize(instant), []).append(name)
            if not group:
                del groups[fid]
        return groups, seen

    def files_to_delete(self, partition: str, names: Sequence[str]) -> tuple[list[str], bool]:
        """File names to delete in ``partition``, and whether the partition itself goes."""
        groups, seen = self.slices(partition, names)
        replaced = self.facts.replaced.get(partition, {})
        saved = self.facts.savepointed_files
        by_versions = self.policy.policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS
        earliest = self.earliest
        if not by_versions:
            if earliest is None:
                return [], False
            retained = (
                self.policy.commits_retained
                if self.policy.policy is CleaningPolicy.KEEP_LATEST_COMMITS
                else 0
            )
            if len(self.facts.completed_commits) <= retained:
                return [], False
        out: list[str] = []
        for fid in sorted(groups):
            slices = groups[fid]
            keys = sorted(slices, reverse=True)
            replaced_at = replaced.get(fid)
            if replaced_at is not None:
                if by_versions or (earliest is not None and replaced_at < earliest):
                    for key in keys:
                        if saved.isdisjoint(slices[key]):
                            out.extend(slices[key])
                continue
            needed = self.facts.needed_from.get((partition, fid))
            clustering = self.facts.clustering_from.get((partition, fid))

            def protected(key: str, needed: str | None = needed, clustering: str | None = clustering) -> bool:
                return (needed is not None and key >= needed) or (
                    clustering is not None and key >= clustering
                )

            if by_versions:
                keep = self.policy.file_versions_retained - (1 if needed is not None else 0)
                candidates = [k for k in keys if not protected(k)]
                for key in candidates[max(keep, 0) :]:
                    if saved.isdisjoint(slices[key]):
                        out.extend(slices[key])
                continue
            assert earliest is not None
            latest = keys[0]
            before = next((k for k in keys if k < earliest), None)
            for key in keys:
                if key in (latest, before) or key >= earliest or protected(key):
                    continue
                if saved.isdisjoint(slices[key]):
                    out.extend(slices[key])
        # The partition folder goes when it has data files, all of them in replaced groups that are
        # cleaned now, and no savepoint names a file in it.
        delete_partition = (
            bool(self.table.config.is_partitioned)
            and bool(seen)
            and all(fid in replaced for fid in seen)
            and (by_versions or all(replaced[fid] < (earliest or "") for fid in seen))
            and saved.isdisjoint(names)
        )
        return out, delete_partition


def _lister(table: HoodieTable, timeline: ActiveTimeline) -> Callable[[Sequence[str] | None], TableListing]:
    """File names per partition: from the metadata table's ``files`` partition when the table has
    one (Hudi's clean planner reads its metadata-backed file-system view), else from storage."""
    files = metadata_files(table, timeline)
    if files is None:
        return lambda partitions: list_partitions(table.fileio, table.base_path, partitions)
    return lambda partitions: files(partitions).names_by_partition()


@dataclass(frozen=True)
class CleanPlanning:
    """A plan (None when nothing is due) and the partitions scanned to make it."""

    plan: CleanerPlan | None
    earliest: Instant | None
    partitions_scanned: list[str]


def plan_clean(
    table: HoodieTable,
    policy: CleanPolicy,
    *,
    timeline: ActiveTimeline | None = None,
    listing: Mapping[str, Sequence[str]] | None = None,
    now: dt.datetime | None = None,
) -> CleanPlanning:
    """Plan a clean over ``timeline`` (default: a fresh one) and ``listing`` (default: list now).

    ``listing`` may hold more or fewer partitions than are scanned: missing ones are listed, extra
    ones ignored; when it is given, its keys are taken as the table's full partition list.
    """
    tl = timeline or table.reload()
    facts = TimelineFacts.gather(table, tl)
    moment = now or dt.datetime.now(dt.UTC)
    earliest = earliest_commit_to_retain(tl, policy, table.tz, moment)
    if policy.max_commits_to_clean is not None:
        last = last_clean_metadata(table, tl)
        previous = last.earliest_commit_to_retain.strip() if last is not None else None
        earliest = bounded_earliest_commit_to_retain(tl, policy, earliest, previous)
    listed: dict[str, Sequence[str]] = dict(listing) if listing is not None else {}
    chosen = partitions_to_clean(table, policy, tl, earliest, facts)
    lister = _lister(table, tl)
    if chosen is None:
        if listing is None:
            listed = dict(lister(None))
        partitions = list(listed)
    else:
        partitions = chosen
        missing = [p for p in partitions if p not in listed]
        if missing:
            listed.update(lister(missing))
    planner = _Planner(table, policy, facts, normalize(earliest.requested_time) if earliest else None)
    candidates: Mapping[str, Sequence[str]] = listed
    if policy.policy is not CleaningPolicy.KEEP_LATEST_FILE_VERSIONS or policy.file_versions_retained > 0:
        pinned = {**facts.pending_compaction_slices, **facts.needed_from, **facts.clustering_from}
        candidates = files_worth_planning(facts.table_version, partitions, listed, facts.replaced, pinned)
    to_delete: dict[str, list[CleanFileInfo]] = {}
    partitions_to_delete: list[str] = []
    with paused_gc():  # per-group dicts for every partition: no heap walks while they come and go
        for partition in partitions:
            names, drop = planner.files_to_delete(partition, candidates[partition])
            if names:
                prefix = table.fileio.to_uri(join(table.base_path, partition)) + "/"
                to_delete[partition] = [
                    CleanFileInfo(file_path=prefix + n, is_bootstrap_base_file=False) for n in names
                ]
            if drop:
                partitions_to_delete.append(partition)
    if not to_delete:
        return CleanPlanning(None, earliest, partitions)
    last_commit = facts.completed_commits[-1].requested_time if facts.completed_commits else ""
    extra = {}
    if facts.savepoint_times and table.config.is_partitioned:
        extra[SAVEPOINTED_TIMESTAMPS] = ",".join(facts.savepoint_times)
    plan = CleanerPlan(
        earliest_instant_to_retain=ActionInstant(
            timestamp=earliest.requested_time, action=earliest.action.value, state=State.COMPLETED.name
        )
        if earliest is not None
        else None,
        last_completed_commit_timestamp=last_commit,
        policy=policy.policy.value,
        files_to_be_deleted_per_partition={},
        file_paths_to_be_deleted_per_partition=to_delete,
        partitions_to_be_deleted=partitions_to_delete,
        extra_metadata=extra,
    )
    return CleanPlanning(plan, earliest, partitions)
