"""Watching timelines cheaply: notice REQUESTED table services and abandoned attempts.

One look at a table costs a directory listing of its active timeline (on local storage, only a
``stat`` of the folder while its modification time is unchanged). The timeline is re-read only
when the listing changed; the heartbeats of pending table services are checked on every look
(one listing of the heartbeat folder for all of them), since an attempt becomes abandoned without
anything on the timeline changing.

What is found, per table, is a list of :class:`PendingInstant`: each pending compaction, log
compaction, clustering, clean, indexing or rollback with its age, whether another process beats
for it, and whether the daemon should run it now (``runnable``). Failed *writes* (an inflight
commit whose heartbeat expired) are rolled back only when the table's writers use Hudi's LAZY
failed-writes policy (``hoodie.clean.failed.writes.policy=LAZY``): with the default EAGER policy
writers keep no heartbeat and roll back their own failures, so a missing heartbeat proves nothing.

How often a table is looked at is decided per table (:class:`PollPlan`): every
``watch.poll_interval_s`` while its timeline changed within ``watch.idle_after_s``, then twice as
long after each unchanged look up to ``watch.max_poll_interval_s``; any change, or an event
notification for the table, brings it back to the short interval. A look costs one listing (on
local storage one ``stat``), so an idle table costs ``3600 / max_poll_interval_s`` requests an hour.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from hoodie.errors import HoodieError
from hoodie.io.fileio import FileInfo
from hoodie.services.clustering import pending_clustering
from hoodie.services.recovery import FAILED_WRITES_KEYS, lazy_failed_writes, pending_rollbacks
from hoodie.services.registry import PendingWork, ServiceKind, names, owner_of, spec_of
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.heartbeat import HeartbeatConfig
from service.clock import SYSTEM, Clock
from service.settings import WatchSettings

log = logging.getLogger(__name__)

__all__ = ["FAILED_WRITES_KEYS", "PendingInstant", "PollPlan", "TableWatch", "lazy_failed_writes", "look"]

EXECUTABLE = frozenset(names(daemon_executes=True))
ROLLBACK = ServiceKind.ROLLBACK.value


@dataclass(frozen=True)
class PendingInstant:
    """A pending instant the daemon cares about."""

    service: str
    instant: Instant
    age_s: float
    beating: bool
    """Another process (or we) keeps its heartbeat alive."""
    abandoned: bool
    """An attempt that died: INFLIGHT with an expired heartbeat (a failed write: any state)."""
    blocked: str | None = None
    """Why the daemon will not run it (a pending restore owns it, no executor for the action)."""

    @property
    def runnable(self) -> bool:
        if self.blocked or self.service not in EXECUTABLE or self.beating:
            return False
        return self.abandoned or (self.instant.is_requested and self.service != ROLLBACK)

    def as_json(self) -> dict[str, object]:
        return {
            "service": self.service,
            "instant": self.instant.requested_time,
            "action": self.instant.action.value,
            "state": self.instant.state.name,
            "age_seconds": round(self.age_s, 3),
            "running_elsewhere": self.beating,
            "abandoned": self.abandoned,
            "blocked": self.blocked,
        }


@dataclass(frozen=True)
class PollPlan:
    """How often tables are looked at (``watch.*`` settings)."""

    poll_interval_s: float = 5.0
    """Between looks at an active table (one whose timeline changed within ``idle_after_s``)."""
    max_poll_interval_s: float = 60.0
    """The back-off ceiling: the longest time between two looks at an idle table."""
    idle_after_s: float = 120.0
    """A table whose timeline has not changed for this long backs off."""

    @classmethod
    def of(cls, watch: WatchSettings) -> PollPlan:
        """From the settings; with event notifications, only a slow safety poll (no active phase)."""
        if watch.events.sqs_queue_url:
            return cls(watch.poll_interval_s, watch.events.safety_poll_s, idle_after_s=0.0)
        return cls(watch.poll_interval_s, watch.max_poll_interval_s, watch.idle_after_s)

    def next_interval(self, watch: TableWatch, now: float, changed: bool) -> float:
        """The wait before the next look at ``watch``'s table, after a look at ``now``."""
        if changed or watch.active_at is None:
            watch.active_at = now
        if now - watch.active_at < self.idle_after_s:
            return self.poll_interval_s
        return min(self.max_poll_interval_s, max(self.poll_interval_s, watch.interval_s) * 2)


@dataclass
class TableWatch:
    """What the last look at one table found, and when to look again."""

    signature: frozenset[str] | None = None
    dir_mtime_ms: int | None = None
    timeline: ActiveTimeline | None = None
    candidates: list[tuple[str, Instant]] = field(default_factory=list)
    restoring: bool = False
    pending: list[PendingInstant] = field(default_factory=list)
    reloads: int = 0
    looks: int = 0
    interval_s: float = 0.0
    """The wait chosen after the last look (0 before the first)."""
    next_look_at: float = 0.0
    """When the table is due to be looked at again (the clock's monotonic seconds)."""
    active_at: float | None = None
    """When the timeline was last seen changing (monotonic seconds)."""

    def due(self, now: float, slack_s: float = 0.0) -> bool:
        return now + slack_s >= self.next_look_at

    def poke(self) -> None:
        """Look at the table at the next tick (an event says something changed there)."""
        self.next_look_at = 0.0

    def planned(self, plan: PollPlan, now: float, changed: bool) -> float:
        """Set the time of the next look after a look at ``now``; return the wait."""
        self.interval_s = plan.next_interval(self, now, changed)
        self.next_look_at = now + self.interval_s
        return self.interval_s


def _age_s(table: HoodieTable, instant: Instant, now: float) -> float:
    try:
        return max(0.0, now - parse_instant_time(instant.requested_time, table.tz).timestamp())
    except HoodieError:
        return 0.0


def _service_of(instant: Instant, clustering: set[str]) -> str | None:
    """The watched service that owns ``instant`` (``hoodie.services.registry``), or None."""
    kind = owner_of(instant.action)
    if kind is None:
        return None
    spec = spec_of(kind)
    if not spec.watched:
        return None
    if spec.pending is PendingWork.CLUSTERING_PLANS and instant.requested_time not in clustering:
        return None  # a pending replacecommit that is a write (insert_overwrite), not clustering
    return kind.value


def _candidates(table: HoodieTable, timeline: ActiveTimeline, lazy: bool) -> list[tuple[str, Instant]]:
    """The pending instants a service of ours owns (from the timeline alone; no heartbeats)."""
    clustering = {i.requested_time for i in pending_clustering(table, timeline)}
    planned: set[str] = set()
    if timeline.pending().actions(Action.ROLLBACK):
        planned = set(pending_rollbacks(table, timeline))
    out: list[tuple[str, Instant]] = []
    for instant in timeline.pending():
        service = _service_of(instant, clustering)
        if service is not None:
            out.append((service, instant))
        elif lazy and instant.action.is_write and instant.requested_time not in planned:
            out.append((ROLLBACK, instant))  # a write; failed once its heartbeat expired
    return out


def _heartbeats(table: HoodieTable) -> dict[str, int]:
    """Instant -> its heartbeat's last beat (ms), from one listing of ``.hoodie/.heartbeat``.

    One request however many instants are pending; looking each file up would cost one per
    instant, and on S3 two for a missing one (pyarrow follows a 404 with a listing, in case the
    key is a folder). A heartbeat's beat is its file's modification time, which a listing carries.
    """
    return {e.name: e.mtime_ms for e in table.fileio.list_dir(table.paths.heartbeat) if not e.is_dir}


def _classify(
    table: HoodieTable, watch: TableWatch, heartbeat: HeartbeatConfig, now: float
) -> list[PendingInstant]:
    assert watch.timeline is not None
    now_ms = int(now * 1000)
    out: list[PendingInstant] = []
    beats = _heartbeats(table) if watch.candidates else {}
    for service, instant in watch.candidates:
        ts = instant.requested_time
        last = beats.get(ts)
        beating = last is not None and now_ms - last <= heartbeat.expiry_ms
        if service == ROLLBACK and instant.action is not Action.ROLLBACK:
            abandoned = not beating  # a failed write
        elif instant.is_inflight and not beating:
            # Older Hudi executors start beating just after writing the inflight file.
            since = watch.timeline.state_file_mtime_ms(ts, State.INFLIGHT, instant.action)
            abandoned = since is not None and now_ms - since > heartbeat.expiry_ms
        else:
            abandoned = False
        blocked = None
        if watch.restoring and instant.action is not Action.RESTORE:
            blocked = "a restore is pending; it owns the table's pending instants"
        elif service not in EXECUTABLE:
            blocked = f"hts does not execute {service} yet"
        out.append(PendingInstant(service, instant, _age_s(table, instant, now), beating, abandoned, blocked))
    return out


def look(
    table: HoodieTable, watch: TableWatch, heartbeat: HeartbeatConfig, lazy: bool, clock: Clock = SYSTEM
) -> bool:
    """Look at ``table``'s timeline; update ``watch``; True when the timeline changed."""
    watch.looks += 1
    now = clock.time()
    folder = table.paths.timeline
    changed = True
    if table.fileio.scheme == "file":
        info = table.fileio.info(folder)
        mtime = info.mtime_ms if info is not None else None
        # A folder touched within the last second may change again within the same tick of its
        # clock: only trust an unchanged, settled modification time. The folder's time is the
        # filesystem's, so it is compared with the machine's clock, never a simulated one.
        settled = mtime is not None and (time.time_ns() // 1_000_000 - mtime) > 1_000
        if settled and mtime == watch.dir_mtime_ms and watch.timeline is not None:
            changed = False
        watch.dir_mtime_ms = mtime if settled else None
    listing: list[FileInfo] | None = None
    if changed:
        listing = table.fileio.list_dir(folder)
        names = frozenset(e.name for e in listing)
        changed = names != watch.signature or watch.timeline is None
        watch.signature = names
    if changed:
        watch.timeline = table.reload(listing)
        watch.candidates = _candidates(table, watch.timeline, lazy)
        watch.restoring = bool(watch.timeline.pending().actions(Action.RESTORE))
        watch.reloads += 1
    watch.pending = _classify(table, watch, heartbeat, now)
    return changed
