"""A table's health score: 100 minus a penalty for each thing that is falling behind, with its reasons.

``health`` (ok/paused/error/...) says whether the daemon can serve a table; ``health_score`` says
how well the table is kept: 100 is a table whose table services keep up, 0 one that cannot be
served. Each :class:`Reason` names what it measured, against which threshold, and what it costs:

- ``compaction_backlog``: completed delta commits since the last completed compaction, against
  ``hoodie.compact.inline.max.delta.commits`` (MERGE_ON_READ; Hudi's NUM_COMMITS trigger);
- ``log_files_per_slice``: log files written to one file slice since that compaction (from the delta
  commits' write stats), against ``hoodie.compaction.logfile.num.threshold`` (or the delta commits
  trigger when that is unset);
- ``clean_lag``: completed commits since the last clean, against ``hoodie.clean.commits.retained``
  plus ``hoodie.clean.max.commits`` (the cleaner's NUM_COMMITS trigger); with
  ``KEEP_LATEST_FILE_VERSIONS``, against ``hoodie.clean.fileversions.retained`` plus the trigger;
  with ``KEEP_LATEST_BY_HOURS``, the commits older than ``hoodie.clean.hours.retained`` not cleaned;
- ``archival_lag``: completed commits on the active timeline, against ``hoodie.keep.max.commits``;
- ``savepoint_holds_clean`` / ``savepoint_holds_archival``: a savepoint older than what the cleaner
  retains (its files are kept) or than the archival window (the timeline cannot be archived past it);
- ``dead_heartbeat``: a pending table service whose attempt died (its heartbeat expired);
- ``gave_up``: an instant given up on after ``retry.max_attempts``;
- ``repeated_failures`` / ``suspended``: a service's consecutive failed runs, and its auto-suspension;
- ``table_error``: the table cannot be opened or read (score 0).

Everything comes from what the daemon already holds: the watcher's last timeline (commit metadata
is read once per instant and cached by the table), its pending instants, and the run history's
failure streaks; nothing is listed. The timeline part is computed again only when the watcher
reloaded the timeline (so an hours-based clean lag is as of that reload).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hoodie.errors import HoodieError
from hoodie.models.clean import CleaningPolicy
from hoodie.services.archival import ArchivalPolicy
from hoodie.services.clean_policy import CleanPolicy
from hoodie.services.compaction import CompactionPolicy
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.timeline import ActiveTimeline
from service.registry import TableEntry
from service.store import ServiceStreak

FULL = 100
REASONS = (
    "table_error",
    "compaction_backlog",
    "log_files_per_slice",
    "clean_lag",
    "archival_lag",
    "savepoint_holds_clean",
    "savepoint_holds_archival",
    "dead_heartbeat",
    "gave_up",
    "repeated_failures",
    "suspended",
)
"""Every reason code (the ``reason`` label of ``hts_table_health_penalty``)."""

_CLEANED = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass(frozen=True)
class Reason:
    code: str
    penalty: int
    message: str
    value: float | None = None
    threshold: float | None = None
    service: str | None = None
    instant: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "penalty": self.penalty,
            "message": self.message,
            "value": self.value,
            "threshold": self.threshold,
            "service": self.service,
            "instant": self.instant,
        }


@dataclass(frozen=True)
class Health:
    score: int
    reasons: tuple[Reason, ...]

    def penalties(self) -> dict[str, int]:
        """Penalty per reason code (summed over services and instants)."""
        out: dict[str, int] = {}
        for r in self.reasons:
            out[r.code] = out.get(r.code, 0) + r.penalty
        return out


def score_of(reasons: Iterable[Reason]) -> Health:
    found = tuple(sorted(reasons, key=lambda r: (-r.penalty, r.code, r.service or "", r.instant or "")))
    return Health(max(0, FULL - sum(r.penalty for r in found)), found)


def _over(value: int, threshold: int, cap: int) -> int:
    """10 once ``value`` passes ``threshold``, 10 more per further multiple of it, up to ``cap``."""
    if value <= threshold:
        return 0
    return min(cap, 10 + 10 * ((value - threshold) // max(1, threshold)))


def _last_compaction(table: HoodieTable, timeline: ActiveTimeline) -> Instant | None:
    """The newest completed compaction: a ``commit`` on a MERGE_ON_READ table (compacted=true)."""
    for instant in reversed(timeline.instants):
        if (
            instant.action is Action.COMMIT
            and instant.is_completed
            and table.commit_metadata(instant, timeline).compacted
        ):
            return instant
    return None


def _compaction(table: HoodieTable, timeline: ActiveTimeline, options: Mapping[str, str]) -> list[Reason]:
    policy = CompactionPolicy.from_options(options)
    last = _last_compaction(table, timeline)
    deltas = timeline.completed().actions(Action.DELTA_COMMIT)
    if last is not None:
        deltas = deltas.after(last.requested_time)
    out: list[Reason] = []
    count, limit = len(deltas), policy.max_delta_commits
    penalty = _over(count, limit, 30)
    if penalty:
        out.append(
            Reason(
                "compaction_backlog",
                penalty,
                f"{count} delta commits since the last compaction "
                f"(hoodie.compact.inline.max.delta.commits={limit})",
                count,
                limit,
                "compaction",
            )
        )
    logs: dict[str, set[str]] = {}
    for instant in deltas:
        for stat in table.commit_metadata(instant, timeline).write_stats():
            if stat.file_id and stat.path and stat.is_log_write:
                logs.setdefault(stat.file_id, set()).add(stat.path)
    most = max((len(v) for v in logs.values()), default=0)
    key = "hoodie.compaction.logfile.num.threshold"
    per_slice = policy.log_file_num_threshold or limit
    penalty = _over(most, per_slice, 20)
    if penalty:
        group = max(logs, key=lambda g: len(logs[g]))
        setting = (
            f"{key}={per_slice}" if policy.log_file_num_threshold else f"no {key}: the delta commits trigger"
        )
        out.append(
            Reason(
                "log_files_per_slice",
                penalty,
                f"file group {group} has {most} log files since the last compaction ({setting})",
                most,
                per_slice,
                "compaction",
            )
        )
    return out


def _clean(
    table: HoodieTable, timeline: ActiveTimeline, options: Mapping[str, str], now: float
) -> tuple[list[Reason], Instant | None]:
    """The clean lag, and the earliest commit the cleaner retains (None when it cannot tell: all are
    retained, or the policy keeps file versions rather than commits)."""
    policy = CleanPolicy.from_options(options)
    commits = timeline.completed().actions(*_CLEANED)
    last_clean = timeline.completed().actions(Action.CLEAN).last()
    since = commits.after(last_clean.requested_time) if last_clean is not None else commits
    where = "the last clean" if last_clean is not None else "the first commit (never cleaned)"
    retained_from = None
    if policy.policy is CleaningPolicy.KEEP_LATEST_BY_HOURS:
        # Commits not cleaned since they left the retention window (CleanPlanner: by hours).
        cutoff = now - policy.hours_retained * 3600
        expired = [i for i in since if _epoch(i, table) < cutoff]
        retained_from = next((i for i in commits if _epoch(i, table) >= cutoff), None)
        value, allowed = len(expired), max(1, policy.max_commits)
        what = (
            f"{value} commits older than hoodie.clean.hours.retained={policy.hours_retained} not cleaned "
            f"since {where} (hoodie.clean.max.commits={policy.max_commits})"
        )
    elif policy.policy is CleaningPolicy.KEEP_LATEST_FILE_VERSIONS:
        value, allowed = len(since), policy.file_versions_retained + max(1, policy.max_commits)
        what = (
            f"{value} commits since {where}, each a possible new file version "
            f"(hoodie.clean.fileversions.retained={policy.file_versions_retained}, "
            f"hoodie.clean.max.commits={policy.max_commits})"
        )
    else:
        if len(commits) > policy.commits_retained:
            retained_from = commits.instants[len(commits) - max(1, policy.commits_retained)]
        value, allowed = len(since), policy.commits_retained + max(1, policy.max_commits)
        what = (
            f"{value} commits since {where} (hoodie.clean.commits.retained={policy.commits_retained}, "
            f"hoodie.clean.max.commits={policy.max_commits})"
        )
    penalty = _over(value, allowed, 20)
    if not penalty:
        return [], retained_from
    return [Reason("clean_lag", penalty, what, value, allowed, "clean")], retained_from


def _epoch(instant: Instant, table: HoodieTable) -> float:
    try:
        return parse_instant_time(instant.requested_time, table.tz).timestamp()
    except HoodieError:
        return 0.0


def _archival(timeline: ActiveTimeline, options: Mapping[str, str]) -> tuple[list[Reason], Instant | None]:
    """The archival lag, and the oldest commit archival keeps (None when it keeps them all, or when
    it archives beyond savepoints)."""
    policy = ArchivalPolicy.from_options(options)
    commits = timeline.completed().actions(*_CLEANED)
    kept_from = None
    if len(commits) > policy.min_commits and not policy.beyond_savepoint:  # hoodie.archive.beyond.savepoint
        kept_from = commits.instants[len(commits) - policy.min_commits]
    penalty = _over(len(commits), policy.max_commits, 20)
    if not penalty:
        return [], kept_from
    return [
        Reason(
            "archival_lag",
            penalty,
            f"{len(commits)} completed commits on the active timeline "
            f"(hoodie.keep.max.commits={policy.max_commits})",
            len(commits),
            policy.max_commits,
            "archival",
        )
    ], kept_from


def _savepoints(
    timeline: ActiveTimeline, retained_from: Instant | None, kept_from: Instant | None
) -> list[Reason]:
    out: list[Reason] = []
    for sp in timeline.completed().actions(Action.SAVEPOINT):
        ts = sp.requested_time
        if retained_from is not None and ts < retained_from.requested_time:
            out.append(
                Reason(
                    "savepoint_holds_clean",
                    5,
                    f"savepoint {ts} keeps files the cleaner would remove "
                    f"(it retains from {retained_from.requested_time})",
                    service="clean",
                    instant=ts,
                )
            )
        if kept_from is not None and ts < kept_from.requested_time:
            out.append(
                Reason(
                    "savepoint_holds_archival",
                    5,
                    f"savepoint {ts} stops archival (it would keep from {kept_from.requested_time})",
                    service="archival",
                    instant=ts,
                )
            )
    return out


def timeline_reasons(
    table: HoodieTable, timeline: ActiveTimeline, options: Mapping[str, str], now: float | None = None
) -> list[Reason]:
    """What the timeline alone says: backlogs against the triggers, lags and savepoints (as of
    ``now``: the hours a KEEP_LATEST_BY_HOURS cleaner retains)."""
    out = _compaction(table, timeline, options) if table.config.is_mor else []
    clean, retained_from = _clean(table, timeline, options, time.time() if now is None else now)
    archival, kept_from = _archival(timeline, options)
    return [*out, *clean, *archival, *_savepoints(timeline, retained_from, kept_from)]


def run_reasons(
    entry: TableEntry, streaks: Iterable[ServiceStreak], gave_up: Mapping[str, str]
) -> list[Reason]:
    """What the daemon's own bookkeeping says: dead attempts, given-up instants, failing services."""
    out: list[Reason] = []
    for p in entry.watch.pending if entry.watch is not None else ():
        ts = p.instant.requested_time
        if p.abandoned:
            out.append(
                Reason(
                    "dead_heartbeat",
                    10,
                    f"{p.instant.action.value} {ts} is inflight and its heartbeat expired",
                    p.age_s,
                    service=p.service,
                    instant=ts,
                )
            )
        if ts in gave_up:
            out.append(Reason("gave_up", 10, gave_up[ts], service=p.service, instant=ts))
    for s in streaks:
        if s.suspended:
            out.append(
                Reason(
                    "suspended",
                    30,
                    f"{s.service} suspended after {s.consecutive_failures} consecutive failed runs "
                    f"(last: run {s.last_run}: {s.last_error})",
                    s.consecutive_failures,
                    service=s.service,
                )
            )
        elif s.consecutive_failures:
            out.append(
                Reason(
                    "repeated_failures",
                    min(20, 5 * s.consecutive_failures),
                    f"{s.service}: {s.consecutive_failures} consecutive failed runs "
                    f"(last: run {s.last_run}: {s.last_error})",
                    s.consecutive_failures,
                    service=s.service,
                )
            )
    return out


class HealthBook:
    """Each table's timeline reasons, kept until the watcher reloads that table's timeline."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[ActiveTimeline, list[Reason]]] = {}
        self._guard = threading.Lock()

    def _timeline_part(self, entry: TableEntry) -> list[Reason]:
        table, watch = entry.table, entry.watch
        if table is None or watch is None or watch.timeline is None:
            return []
        timeline = watch.timeline
        with self._guard:
            cached = self._cache.get(entry.id)
        if cached is not None and cached[0] is timeline:
            return cached[1]
        try:
            reasons = timeline_reasons(table, timeline, entry.config.options)
        except (HoodieError, OSError, ValueError) as e:
            reasons = [Reason("table_error", FULL, f"the timeline cannot be scored: {type(e).__name__}: {e}")]
        with self._guard:
            self._cache[entry.id] = (timeline, reasons)
        return reasons

    def health(
        self, entry: TableEntry, streaks: Iterable[ServiceStreak], gave_up: Mapping[str, str]
    ) -> Health:
        if entry.error is not None or entry.removed:
            return score_of([Reason("table_error", FULL, entry.error or "the table was removed")])
        return score_of([*self._timeline_part(entry), *run_reasons(entry, streaks, gave_up)])

    def forget(self, keep: Iterable[str]) -> None:
        kept = set(keep)
        with self._guard:
            for table_id in [t for t in self._cache if t not in kept]:
                del self._cache[table_id]
