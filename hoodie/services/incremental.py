"""Incremental table-service planning: which partitions compaction and clustering look at.

Apache Hudi (``hoodie.table.services.incremental.enabled``, on by default since 1.0; the key is
read by ``BaseTableServicePlanActionExecutor.getPartitions``) plans compaction and clustering over
the partitions written since the last *completed* instant of that service, plus the partitions the
plan of that instant recorded as left out (``missingSchedulePartitions``):

* the left boundary is the requested time of that instant; a completed ``commit``
  (``deltacommit`` and ``replacecommit`` on MERGE_ON_READ) counts when its *completion* time is at
  or after it, the instant itself excepted; the partitions are those of its write stats;
* with such an instant and no partition written since, nothing is planned (empty commits only);
* with no such instant on the active timeline (never run, or archived), or when its plan cannot be
  read, every partition of the table is looked at (a full listing).

For compaction the last instant is the newest completed ``commit`` action (on a MERGE_ON_READ
table only compaction completes as ``commit``) and its plan is its ``T.compaction.requested``.
Log compaction reads a ``logcompaction`` plan at that same instant time, which cannot exist, so
Hudi falls back to a full listing for it every time: hts plans log compaction over all partitions.
"""

from __future__ import annotations

from collections.abc import Mapping

from hoodie.errors import HoodieError
from hoodie.services.options import bool_option
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import ActiveTimeline

INCREMENTAL_KEY = "hoodie.table.services.incremental.enabled"


def incremental_option(options: Mapping[str, str]) -> bool | None:
    """The key's value when given, else None (the default, which depends on the table version)."""
    return bool_option(options, INCREMENTAL_KEY, True) if INCREMENTAL_KEY in options else None


def incremental_enabled(flag: bool | None, table_version: int) -> bool:
    """Incremental planning exists from table version 8 (Hudi 1.0), where it is on by default."""
    if table_version < 8:
        return False
    return True if flag is None else flag


def partitions_written_since(table: HoodieTable, timeline: ActiveTimeline, last: Instant) -> set[str]:
    """Partitions of completed writes that completed at or after ``last`` was requested."""
    wanted = (
        (Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
        if table.config.is_mor
        else (Action.COMMIT, Action.REPLACE_COMMIT)
    )
    left = normalize(last.requested_time)
    touched: set[str] = set()
    for instant in timeline.completed().actions(*wanted):
        if instant.requested_time == last.requested_time:
            continue
        completed_at = instant.completion_time or instant.requested_time
        if normalize(completed_at) < left:
            continue
        meta = table.commit_metadata(instant, timeline)
        touched.update(s.partition_path or "" for s in meta.write_stats())
    return touched


def compaction_partitions(table: HoodieTable, timeline: ActiveTimeline, enabled: bool) -> list[str] | None:
    """The partitions an incremental compaction plan looks at (sorted), or None for all of them."""
    if not enabled:
        return None
    last = timeline.completed().actions(Action.COMMIT).last()
    if last is None:
        return None
    try:
        plan = table.compaction_plan(last.requested_time, timeline)
    except (HoodieError, OSError):
        return None  # Hudi logs the failure and falls back to listing every partition
    missing = plan.missing_schedule_partitions or []
    return sorted(partitions_written_since(table, timeline, last) | set(missing))
