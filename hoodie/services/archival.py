"""Archival: keep the active timeline within Hudi's keep-min/keep-max window, as Apache Hudi does.

The oldest completed instants move off the active timeline into the LSM history (table versions 8
and 9) or the ``.commits_.archive.*`` log (version 6). Archival has no instant of its own, so
``schedule`` only computes what to archive (what ``--dry-run`` prints) and ``execute`` archives it
under the table lock. The choice follows Hudi's ``TimelineArchiverV2`` (layout 2) and
``TimelineArchiverV1`` (layout 1):

* completed commits, delta commits and replace commits only once there are more than
  ``hoodie.keep.max.commits``, down to ``hoodie.keep.min.commits``; both grow when the cleaner
  policy retains more (its earliest retained commit and the one before it stay);
* nothing at or after: the last completed commit before the earliest pending write (commit,
  delta commit, compaction, log compaction, replace commit, clustering); for MERGE_ON_READ with a
  NUM_COMMITS / NUM_AND_TIME trigger, the delta commits the next compaction still counts; the
  first replace commit or clustering the last clean has not cleaned behind; the first savepoint
  (with ``hoodie.archive.beyond.savepoint`` only savepointed commits are skipped);
* layout 2 takes the completed cleans and rollbacks requested before the newest archived commit;
  layout 1 takes cleans and rollbacks by their own count and honours
  ``hoodie.archive.limit.instants``.

hts adds two guards that only ever archive less: nothing at or after the latest completed clean's
``earliestCommitToRetain`` (the next incremental clean lists the commits from there), and nothing
at or after a pending indexing instant or any bound above (layout 1's cleans included).

Every state file of a chosen instant goes with it, in Hudi's order: write the archive (history
level-0 file and manifest, or the next archive log file), delete requested and inflight files,
then completed files in ascending order, then merge full history levels and drop old manifests.
Tables with a metadata table are refused.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, NoReturn

from hoodie.config.table_config import TableType
from hoodie.errors import TableServiceError
from hoodie.models.base import AvroModel, AvroRecord
from hoodie.models.clean import CleanerPlan, CleaningPolicy, CleanMetadata
from hoodie.services.base import (
    ExecutionResult,
    Runner,
    Scheduled,
    ServiceContext,
    crash_point,
    register_service,
)
from hoodie.services.clean_policy import COMMITS_RETAINED_KEYS, HOURS_RETAINED_KEYS, POLICY_KEYS
from hoodie.services.compaction import TriggerStrategy
from hoodie.services.options import bool_option, enum_option, int_option
from hoodie.table import HoodieTable
from hoodie.timeline.archived import write_archive_file
from hoodie.timeline.archived_instant import InstantFiles
from hoodie.timeline.history import append_to_history, compact_and_clean
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import format_instant_time, normalize, parse_instant_time
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.commit import require_lock
from hoodie.transaction.lock import locked
from hoodie.write.markers import WriteMarkers

log = logging.getLogger(__name__)

SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"
"""Extra-metadata key of a cleaner plan listing the savepoints the clean had to keep."""

_COMMIT_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
_REPLACE_ACTIONS = (Action.REPLACE_COMMIT, Action.CLUSTERING)


# -- configuration ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchivalPolicy:
    """How much of the timeline to keep, with the Hudi keys each setting comes from."""

    min_commits: int = 20  # hoodie.keep.min.commits
    max_commits: int = 30  # hoodie.keep.max.commits
    archival_batch: int = 10  # hoodie.commits.archival.batch (records per archive-log block)
    beyond_savepoint: bool = False  # hoodie.archive.beyond.savepoint
    history_compaction_batch: int = 10  # hoodie.timeline.compaction.batch.size
    limit_instants: int | None = None  # hoodie.archive.limit.instants (layout 1 only)
    cleaner_policy: CleaningPolicy = CleaningPolicy.KEEP_LATEST_COMMITS  # hoodie.clean[er].policy
    cleaner_commits_retained: int = 10  # hoodie.clean[er].commits.retained
    cleaner_hours_retained: int = 24  # hoodie.clean[er].hours.retained
    # hoodie.compact.inline.trigger.strategy and hoodie.compact.inline.max.delta.commits
    compaction_trigger: TriggerStrategy = TriggerStrategy.NUM_COMMITS
    compaction_max_delta_commits: int = 5

    def __post_init__(self) -> None:
        if self.min_commits < 1:
            raise TableServiceError(f"hoodie.keep.min.commits={self.min_commits} must be at least 1")
        if self.max_commits <= self.min_commits:
            raise TableServiceError(
                f"hoodie.keep.max.commits={self.max_commits} must be greater than "
                f"hoodie.keep.min.commits={self.min_commits}"
            )

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ArchivalPolicy:
        if bool_option(options, "hoodie.archive.merge.enable", False):
            log.info("hoodie.archive.merge.enable is ignored: Hudi 1.x never merges archive files")
        limit = int_option(options, "hoodie.archive.limit.instants", 0, 1) or None
        return cls(
            min_commits=int_option(options, "hoodie.keep.min.commits", 20, 1),
            max_commits=int_option(options, "hoodie.keep.max.commits", 30, 1),
            archival_batch=int_option(options, "hoodie.commits.archival.batch", 10, 1),
            beyond_savepoint=bool_option(options, "hoodie.archive.beyond.savepoint", False),
            history_compaction_batch=int_option(options, "hoodie.timeline.compaction.batch.size", 10, 2),
            limit_instants=limit,
            cleaner_policy=enum_option(
                options, POLICY_KEYS, CleaningPolicy, CleaningPolicy.KEEP_LATEST_COMMITS
            ),
            cleaner_commits_retained=int_option(options, COMMITS_RETAINED_KEYS, 10, 0),
            cleaner_hours_retained=int_option(options, HOURS_RETAINED_KEYS, 24, 0),
            compaction_trigger=enum_option(
                options,
                "hoodie.compact.inline.trigger.strategy",
                TriggerStrategy,
                TriggerStrategy.NUM_COMMITS,
            ),
            compaction_max_delta_commits=int_option(options, "hoodie.compact.inline.max.delta.commits", 5, 1),
        )


# -- the plan (what a dry run prints; never written to the timeline) ---------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class InstantToArchive(AvroModel):
    """One instant archival moves: its completed action and every state file it has."""

    requested_time: str
    action: str
    completion_time: str | None
    states: list[str]

    @property
    def instant(self) -> Instant:
        return Instant(self.requested_time, Action(self.action), State.COMPLETED, self.completion_time)


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchivalPlan(AvroRecord):
    """The instants to archive, oldest first, and the bounds that decided them.

    ``retained_from`` maps each rule that bounded the selection (``earliestPendingWrite``,
    ``compactionTrigger``, ``clustering``, ``cleanEarliestCommitToRetain``, ``firstSavepoint``,
    ...) to the earliest instant it keeps. Archival has no plan on Hudi's timeline, so this record
    has no Hudi schema and is never written.
    """

    AVRO_NAME: ClassVar[str] = "HtsArchivalPlan"

    instants: list[InstantToArchive]
    completed_commits: int
    min_instants_to_keep: int
    max_instants_to_keep: int
    archive_format: str
    retained_from: dict[str, str]

    def to_bytes(self, table_version: int) -> NoReturn:
        raise TableServiceError("an archival plan is never written to the timeline")

    @property
    def requested_times(self) -> list[str]:
        return [i.requested_time for i in self.instants]


# -- choosing instants -------------------------------------------------------------------------


def _key(instant: Instant) -> str:
    return normalize(instant.requested_time)


def _completed_commits(timeline: ActiveTimeline) -> list[Instant]:
    return [i for i in timeline if i.is_completed and i.action in _COMMIT_ACTIONS]


def _cleaner_retains_from(timeline: ActiveTimeline, policy: ArchivalPolicy, tz: dt.tzinfo) -> Instant | None:
    """The earliest commit the configured cleaner policy retains right now (Hudi's CleanerUtils)."""
    commits = [i for i in timeline if i.action in (*_COMMIT_ACTIONS, Action.CLUSTERING)]
    completed = [i for i in commits if i.is_completed]
    if policy.cleaner_policy is CleaningPolicy.KEEP_LATEST_COMMITS:
        if len(completed) <= policy.cleaner_commits_retained:
            return None
        nth = completed[len(completed) - policy.cleaner_commits_retained]
        pending = next((i for i in commits if not i.is_completed), None)
        if pending is None or _key(nth) <= _key(pending):
            return nth
        before = [i for i in completed if _key(i) < _key(pending)]
        return before[-1] if before else None
    if policy.cleaner_policy is CleaningPolicy.KEEP_LATEST_BY_HOURS:
        if completed:
            latest = parse_instant_time(completed[-1].requested_time, tz)
        else:
            latest = dt.datetime.now(tz)
        cutoff = format_instant_time(latest - dt.timedelta(hours=policy.cleaner_hours_retained), tz)
        return next((i for i in completed if _key(i) >= cutoff), None)
    return None


def keep_window(table: HoodieTable, timeline: ActiveTimeline, policy: ArchivalPolicy) -> tuple[int, int]:
    """(min, max) completed commits to keep: the configured window, widened when the cleaner
    retains more (Hudi's ArchivalUtils: the commits after the cleaner's earliest retained commit
    plus two, with keep-max moved by the same amount)."""
    retained = _cleaner_retains_from(timeline, policy, table.tz)
    if retained is None:
        return policy.min_commits, policy.max_commits
    by_cleaning = sum(1 for i in _completed_commits(timeline) if _key(i) > _key(retained)) + 2
    if policy.min_commits >= by_cleaning:
        return policy.min_commits, policy.max_commits
    log.warning(
        "%s: hoodie.keep.min.commits=%d is more aggressive than the cleaner, which retains from %s; "
        "keeping %d..%d commits instead",
        table.base_path,
        policy.min_commits,
        retained.requested_time,
        by_cleaning,
        by_cleaning + policy.max_commits - policy.min_commits,
    )
    return by_cleaning, by_cleaning + policy.max_commits - policy.min_commits


def _compaction_retains_from(timeline: ActiveTimeline) -> list[Instant]:
    """Delta commits since the last completed compaction commit, led by that commit (or by the
    first delta commit when there was none): what Hudi's compaction trigger counts."""
    last_compaction = next(
        (i for i in reversed(timeline.instants) if i.action is Action.COMMIT and i.is_completed), None
    )
    deltas = [i for i in timeline if i.action is Action.DELTA_COMMIT]
    if last_compaction is not None:
        return [last_compaction, *(i for i in deltas if _key(i) > _key(last_compaction))]
    return [deltas[0], *deltas] if deltas else []


def _clean_plan(table: HoodieTable, timeline: ActiveTimeline, clean: Instant) -> CleanerPlan | None:
    for state in (State.REQUESTED, State.INFLIGHT):  # 0.x cleans copy the plan into the inflight file
        name = timeline.state_file(clean.requested_time, state, Action.CLEAN)
        data = timeline.read_state(clean.requested_time, state, Action.CLEAN) if name else b""
        if name and data:
            return CleanerPlan.from_bytes(data, table.table_version, timeline.path_of(name))
    return None


@dataclass(frozen=True)
class _LastClean:
    instant: Instant
    plan: CleanerPlan | None
    earliest_commit_to_retain: str | None


def _last_clean(table: HoodieTable, timeline: ActiveTimeline) -> _LastClean | None:
    cleans = [i for i in timeline if i.action is Action.CLEAN and i.is_completed]
    if not cleans:
        return None
    clean = cleans[-1]
    plan = _clean_plan(table, timeline, clean)
    retain = plan.earliest_instant_to_retain.timestamp if plan and plan.earliest_instant_to_retain else None
    name = timeline.state_file(clean.requested_time, State.COMPLETED, Action.CLEAN)
    if not retain and name is not None:
        data = timeline.read_state(clean.requested_time, State.COMPLETED, Action.CLEAN)
        if data:
            meta = CleanMetadata.from_bytes(data, table.table_version, timeline.path_of(name))
            retain = meta.earliest_commit_to_retain
    return _LastClean(clean, plan, retain or None)


def _replaced_savepoint_in_clean(
    timeline: ActiveTimeline, policy: ArchivalPolicy, plan: CleanerPlan
) -> str | None:
    """The earliest savepoint the last clean kept files for, if a completed replace commit lies
    between it and the clean's earliest retained commit (archiving that replace commit would
    resurrect the files it replaced)."""
    if policy.cleaner_policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS or plan.extra_metadata is None:
        return None
    retain = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else None
    savepoints = sorted(plan.extra_metadata.get(SAVEPOINTED_TIMESTAMPS, "").split(","))
    first = savepoints[0] if savepoints else ""
    if not retain or not first or normalize(retain) <= normalize(first):
        return None
    lo, hi = normalize(first), normalize(retain)
    replaced = [
        i for i in timeline if i.action is Action.REPLACE_COMMIT and i.is_completed and lo <= _key(i) <= hi
    ]
    return first if replaced else None


def _clustering_retains_from(
    timeline: ActiveTimeline, policy: ArchivalPolicy, last_clean: _LastClean | None
) -> Instant | None:
    """The first replace commit or clustering (any state) the last clean has not cleaned behind."""
    replaces = [i for i in timeline if i.action in _REPLACE_ACTIONS]
    if not replaces:
        return None
    if last_clean is None:
        return replaces[0]
    plan = last_clean.plan
    retain = plan.earliest_instant_to_retain.timestamp if plan and plan.earliest_instant_to_retain else None
    lower = (plan and _replaced_savepoint_in_clean(timeline, policy, plan)) or retain
    bound = normalize(lower or last_clean.instant.requested_time)
    return next((i for i in replaces if _key(i) >= bound), None)


def _commits_to_archive(
    table: HoodieTable,
    timeline: ActiveTimeline,
    policy: ArchivalPolicy,
    window: tuple[int, int],
    last_clean: _LastClean | None,
    horizon: str | None,
    retained_from: dict[str, str],
) -> list[Instant]:
    completed = _completed_commits(timeline)
    min_keep, max_keep = window
    if len(completed) <= max_keep:
        return []
    candidates: dict[str, Instant | None] = {}
    pending = next((i for i in timeline.writes() if not i.is_completed), None)
    if pending is not None:
        before = [i for i in completed if _key(i) < _key(pending)]
        candidates["earliestPendingWrite"] = before[-1] if before else pending
    if table.config.table_type is TableType.MERGE_ON_READ and policy.compaction_trigger in (
        TriggerStrategy.NUM_COMMITS,
        TriggerStrategy.NUM_AND_TIME,
    ):
        window_instants = _compaction_retains_from(timeline)
        if window_instants:
            anchor, deltas = window_instants[0], window_instants[1:]
            if len(deltas) < policy.compaction_max_delta_commits:
                candidates["compactionTrigger"] = anchor
            else:
                candidates["compactionTrigger"] = deltas[len(deltas) - policy.compaction_max_delta_commits]
    candidates["clustering"] = _clustering_retains_from(timeline, policy, last_clean)
    present = {rule: i for rule, i in candidates.items() if i is not None}
    retained_from.update({rule: i.requested_time for rule, i in present.items()})
    bound = min((_key(i) for i in present.values()), default=None)
    savepoints = [i for i in timeline if i.action is Action.SAVEPOINT and i.is_completed]
    savepointed = {normalize(i.requested_time) for i in savepoints}
    chosen: list[Instant] = []
    for instant in completed:
        if policy.beyond_savepoint:
            if _key(instant) in savepointed:
                continue
        elif savepoints and _key(instant) >= _key(savepoints[0]):
            continue
        if any(limit is not None and _key(instant) >= limit for limit in (bound, horizon)):
            continue
        chosen.append(instant)
    return chosen[: len(completed) - min_keep]


def _hts_horizon(
    timeline: ActiveTimeline,
    policy: ArchivalPolicy,
    last_clean: _LastClean | None,
    retained_from: dict[str, str],
) -> str | None:
    """The guards hts adds: nothing at or after this requested time is archived."""
    bounds: list[tuple[str, str]] = []
    pending = next(
        (i for i in timeline if not i.is_completed and (i.action.is_write or i.action is Action.INDEXING)),
        None,
    )
    if pending is not None:
        bounds.append(("earliestPendingInstant", pending.requested_time))
    if last_clean is not None and last_clean.earliest_commit_to_retain:
        bounds.append(("cleanEarliestCommitToRetain", last_clean.earliest_commit_to_retain))
    savepoints = [i for i in timeline if i.action is Action.SAVEPOINT and i.is_completed]
    if savepoints and not policy.beyond_savepoint:
        bounds.append(("firstSavepoint", savepoints[0].requested_time))
    for rule, ts in bounds:
        retained_from.setdefault(rule, ts)
    return min((normalize(ts) for _, ts in bounds), default=None)


def _metadata_compaction_bound(table: HoodieTable, timeline: ActiveTimeline) -> str | None:
    """With a metadata table, Hudi archives nothing before the metadata table's first compaction,
    then no data write that completed after the latest compaction was requested, nor anything
    after such a write (``findInstantsModifiedAfterByCompletionTime``): the metadata table's
    readers treat data instants older than the active timeline as complete, and its uncompacted
    log blocks must still be checkable against the active timeline.
    """
    if table.is_metadata_table or not table.has_metadata_table:
        return None
    from hoodie.metadata.table import open_metadata_table

    mdt = open_metadata_table(table).reload()
    compactions = [i for i in mdt.completed() if i.action is Action.COMMIT]
    if not compactions:
        return "0"
    since = normalize(compactions[-1].requested_time)
    later = [
        i.requested_time
        for i in timeline.completed().writes()
        if i.completion_time is None or normalize(i.completion_time) > since
    ]
    return min(later, key=normalize) if later else None


def _by_count(instants: Sequence[Instant], window: tuple[int, int]) -> list[Instant]:
    min_keep, max_keep = window
    return list(instants[: len(instants) - min_keep]) if len(instants) > max_keep else []


def plan_archival(
    table: HoodieTable, policy: ArchivalPolicy, timeline: ActiveTimeline | None = None
) -> ArchivalPlan | None:
    """The instants archival would move now, or None when the timeline is within its window."""
    tl = timeline or table.reload()
    window = keep_window(table, tl, policy)
    last_clean = _last_clean(table, tl)
    retained_from: dict[str, str] = {}
    horizon = _hts_horizon(tl, policy, last_clean, retained_from)
    mdt_bound = _metadata_compaction_bound(table, tl)
    if mdt_bound is not None:
        retained_from.setdefault("metadataTableLatestCompaction", mdt_bound)
        horizon = min(horizon, normalize(mdt_bound)) if horizon is not None else normalize(mdt_bound)
    commits = _commits_to_archive(table, tl, policy, window, last_clean, horizon, retained_from)
    completed_cleanup = [i for i in tl if i.is_completed and i.action in (Action.CLEAN, Action.ROLLBACK)]
    if tl.layout >= 2:
        newest = _key(commits[-1]) if commits else None
        cleanup = [i for i in completed_cleanup if newest is not None and _key(i) < newest]
    else:
        cleanup = []
        for action in (Action.CLEAN, Action.ROLLBACK):
            cleanup += _by_count([i for i in completed_cleanup if i.action is action], window)
    chosen = sorted(
        (i for i in (*commits, *cleanup) if horizon is None or _key(i) < horizon), key=lambda i: i.sort_key
    )
    if tl.layout < 2 and policy.limit_instants is not None:
        chosen = chosen[: policy.limit_instants]
    if not chosen:
        return None
    return ArchivalPlan(
        instants=[_to_archive(tl, i) for i in chosen],
        completed_commits=len(_completed_commits(tl)),
        min_instants_to_keep=window[0],
        max_instants_to_keep=window[1],
        archive_format="lsm-history" if tl.layout >= 2 else "archive-log",
        retained_from=retained_from,
    )


def _to_archive(timeline: ActiveTimeline, instant: Instant) -> InstantToArchive:
    states = timeline.states_of(instant.requested_time, instant.action)
    return InstantToArchive(
        requested_time=instant.requested_time,
        action=instant.action.value,
        completion_time=instant.completion_time,
        states=[s.name for s in states],
    )


# -- scheduling and execution ------------------------------------------------------------------


def _describe(plan: ArchivalPlan) -> str:
    actions = [i.action for i in plan.instants]
    what = ", ".join(f"{actions.count(a)} {a}" for a in sorted(set(actions)))
    return (
        f"{plan.completed_commits} completed commits (keep {plan.min_instants_to_keep}.."
        f"{plan.max_instants_to_keep}): archive {len(plan.instants)} instants ({what}) "
        f"up to {plan.instants[-1].requested_time}"
    )


def schedule_archival(
    ctx: ServiceContext, policy: ArchivalPolicy, *, dry_run: bool = False
) -> Scheduled | None:
    """Compute what to archive; None when nothing is due.

    Nothing is written either way. The returned ``instant_time`` is the newest instant to archive
    (the bound :func:`execute_archival` takes), or None for a dry run.
    """
    ctx.check_shape("archival")
    table = ctx.table
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        plan = plan_archival(table, policy, table.reload())
    if plan is None:
        return None
    reason = _describe(plan)
    log.info("%s: %s%s", table.base_path, "would " if dry_run else "", reason)
    return Scheduled(None if dry_run else plan.instants[-1].requested_time, plan, reason)


def _delete_from_active_timeline(timeline: ActiveTimeline, instants: Iterable[Instant]) -> int:
    """Requested and inflight files first, then completed files in ascending order."""
    ordered = sorted(instants, key=lambda i: i.sort_key)
    deleted = 0
    for states in ((State.REQUESTED, State.INFLIGHT), (State.COMPLETED,)):
        for instant in ordered:
            for state in states:
                name = timeline.state_file(instant.requested_time, state, instant.action)
                if name is not None and timeline.fileio.delete(timeline.path_of(name)):
                    deleted += 1
        if states[0] is State.REQUESTED:
            crash_point("archival.mid_delete")
    return deleted


def _warn_about_savepoint_gaps(
    table: HoodieTable, timeline: ActiveTimeline, due: Sequence[InstantToArchive]
) -> None:
    """Hudi's readers start the timeline at the first commit that is not savepointed; hudi-rs 0.5
    and hoodie's file-system view start it at the first commit and miss what lies behind it."""
    newest = max(normalize(i.requested_time) for i in due)
    kept = [i.requested_time for i in timeline if i.action is Action.SAVEPOINT and _key(i) < newest]
    if kept:
        log.warning(
            "%s: archiving beyond savepoint(s) %s; readers that take the first active commit as the "
            "start of the timeline will not see the files of the archived commits after it",
            table.base_path,
            ", ".join(kept),
        )


def execute_archival(
    ctx: ServiceContext, up_to: str | None = None, policy: ArchivalPolicy | None = None
) -> ExecutionResult:
    """Archive what is due now, at or before ``up_to`` (a bound from :func:`schedule_archival`).

    Everything happens under the table lock, on a timeline read after taking it.
    """
    ctx.check_shape("archival")
    table = ctx.table
    policy = policy or ArchivalPolicy.from_options(ctx.options)
    with ctx.transaction() as txn:
        timeline = table.reload()
        plan = plan_archival(table, policy, timeline)
        due = [] if plan is None else plan.instants
        if up_to is not None:
            due = [i for i in due if normalize(i.requested_time) <= normalize(up_to)]
        if not due or plan is None:
            raise TableServiceError(
                f"{table.base_path}: nothing to archive at or before {up_to or 'now'}; "
                "the timeline is within its keep window (or another archiver ran). Nothing was written."
            )
        _warn_about_savepoint_gaps(table, timeline, due)
        files = [InstantFiles.read(timeline, i.requested_time) for i in due]
        for f in files:
            WriteMarkers(table.fileio, table.paths, f.requested_time).delete_all()
        require_lock(txn, "archival wrote its archive", "nothing was archived")
        if timeline.layout >= 2:
            written = append_to_history(table.fileio, table.paths, files, compact=False)
        else:
            written = write_archive_file(table.fileio, table.paths, files, batch_size=policy.archival_batch)
        crash_point("archival.after_archive_write")
        require_lock(txn, "archival deleted archived instants", "they stay on the active timeline")
        deleted = _delete_from_active_timeline(timeline, (i.instant for i in due))
        merged: list[str] = []
        if timeline.layout >= 2:
            crash_point("archival.before_history_compaction")
            merged = compact_and_clean(table.fileio, table.paths, batch_size=policy.history_compaction_batch)
    table.reload()
    newest = due[-1].instant
    log.info(
        "%s: archived %d instants up to %s into %s (%d timeline files deleted)",
        table.base_path,
        len(due),
        newest.requested_time,
        written,
        deleted,
    )
    return ExecutionResult(
        newest,
        details={
            "archived": len(due),
            "archived_instants": [i.requested_time for i in due],
            "archive_file": written,
            "merged_history_files": merged,
            "timeline_files_deleted": deleted,
            "min_instants_to_keep": plan.min_instants_to_keep,
            "max_instants_to_keep": plan.max_instants_to_keep,
        },
    )


class ArchivalService:
    """Archival as a :class:`~hoodie.services.base.TableService`; it never has pending instants."""

    name = "archival"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        return schedule_archival(ctx, ArchivalPolicy.from_options(ctx.options), dry_run=dry_run)

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return []

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        return execute_archival(ctx, instant_time or None)


register_service(ArchivalService())
