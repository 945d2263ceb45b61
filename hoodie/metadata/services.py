"""The metadata table's own table services: compaction, clean and archival, by Apache Hudi 1.x's rules.

Hudi runs them on the metadata table (MDT) after a data-table commit, in this order
(``HoodieBackedTableMetadataWriter.performTableServices``): finish a pending MDT compaction, clean,
schedule and run a compaction when due, archive. The MDT shares the data table's lock and instant
times. Compaction is in :mod:`hoodie.metadata.compaction`, the policy in
:mod:`hoodie.metadata.policy`; clean and archival here, by these rules:

* **Clean** (``cleanIfNecessary``, ``HoodieMetadataWriteUtils.createMetadataWriteConfig``): not
  before three MDT instants completed after the latest compaction (readers may still be on the
  old slice); the data table's cleaner policy with more retention: KEEP_LATEST_COMMITS keeps
  ``max(20, 1.2 x commits)``, KEEP_LATEST_FILE_VERSIONS ``ceil(1.2 x versions)``, KEEP_LATEST_BY_HOURS
  ``ceil(1.2 x hours)``; it runs whenever a commit completed since the last clean.
* **Archival** (``TimelineArchiverV2``, ``TimelineUtils.getEarliestInstantForMetadataArchival``):
  the data table's ``hoodie.keep.min/max.commits`` plus one, the MDT compaction trigger, and
  nothing at or after the data table's earliest active commit (of any state) or earliest pending
  instant of any action: MDT readers check log blocks against the data table's active timeline.

Each function opens the MDT itself and takes the table lock for short sections only: call them
without holding it.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from hoodie.errors import HoodieError
from hoodie.metadata.compaction import compact_metadata_table
from hoodie.metadata.context import metadata_service_context
from hoodie.metadata.partitions import has_metadata_table
from hoodie.metadata.policy import MetadataTablePolicy
from hoodie.services.archival import execute_archival, plan_archival
from hoodie.services.base import (
    ExecutionResult,
    LocalRunner,
    Runner,
    ServiceContext,
)
from hoodie.services.clean import execute_clean, schedule_clean
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.instant_time import normalize
from hoodie.timeline.timeline import Timeline
from hoodie.transaction.lock import locked

log = logging.getLogger(__name__)


# -- clean --------------------------------------------------------------------------------------


def clean_metadata_table(
    data_table: HoodieTable,
    ctx: ServiceContext,
    *,
    force: bool = False,
    policy: MetadataTablePolicy | None = None,
    runner: Runner | None = None,
    mctx: ServiceContext | None = None,
) -> ExecutionResult | None:
    """Delete MDT file slices outside the MDT cleaner's retention (``hoodie.services.clean`` on the MDT).

    A pending MDT clean runs first. Otherwise nothing happens until three MDT instants completed
    after the latest compaction; ``force`` skips that wait and the commit trigger.
    """
    if not has_metadata_table(data_table):
        return None
    mctx = mctx or metadata_service_context(data_table, ctx)
    policy = policy or MetadataTablePolicy.from_options(ctx.options)
    runner = runner or LocalRunner()
    mdt = mctx.table
    timeline = mdt.reload()
    pending = timeline.pending().actions(Action.CLEAN).first()
    if pending is not None:
        return execute_clean(mctx, pending.requested_time, runner)
    clean_policy = dataclasses.replace(policy.clean, trigger=None) if force else policy.clean
    last = timeline.completed().actions(Action.COMMIT).last()
    since = len(timeline.completed().after(last.requested_time)) if last is not None else None
    if not force and since is not None and since < policy.instants_before_clean:
        log.debug("%s: not cleaning: %d instant(s) since compaction %s", mdt.base_path, since, last)
        return None
    scheduled = schedule_clean(mctx, clean_policy)
    if scheduled is None or scheduled.instant_time is None:
        return None
    return execute_clean(mctx, scheduled.instant_time, runner)


# -- archival -----------------------------------------------------------------------------------


_DATA_COMMITS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING)


def earliest_data_instant_to_keep(
    data_timeline: Timeline, *, beyond_savepoint: bool = False
) -> Instant | None:
    """The earlier of the data table's first commit (any state; with ``beyond_savepoint`` the first
    that is not savepointed) and its first pending instant of any action: MDT instants at or after
    it stay on the active timeline."""
    commits = data_timeline.actions(*_DATA_COMMITS)
    if beyond_savepoint:
        saved = {i.requested_time for i in data_timeline.actions(Action.SAVEPOINT)}
        commits = commits.filter(lambda i: i.requested_time not in saved)
    candidates = [i for i in (commits.first(), data_timeline.pending().first()) if i is not None]
    return min(candidates, key=lambda i: normalize(i.requested_time), default=None)


def archive_metadata_table(
    data_table: HoodieTable,
    ctx: ServiceContext,
    *,
    policy: MetadataTablePolicy | None = None,
    mctx: ServiceContext | None = None,
) -> ExecutionResult | None:
    """Archive MDT instants (``hoodie.services.archival`` on the MDT) that lie before the data
    table's :func:`earliest_data_instant_to_keep`. Returns what was archived, or None."""
    if not has_metadata_table(data_table):
        return None
    mctx = mctx or metadata_service_context(data_table, ctx)
    policy = policy or MetadataTablePolicy.from_options(ctx.options)
    mdt = mctx.table
    with locked(ctx.table_lock, ctx.lock_timeout_s):
        keep_from = earliest_data_instant_to_keep(
            data_table.reload(), beyond_savepoint=policy.archival.beyond_savepoint
        )
        plan = plan_archival(mdt, policy.archival, mdt.reload())
    if plan is None:
        return None
    commits = [
        i
        for i in plan.instants
        if Action(i.action) in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
        and (keep_from is None or normalize(i.requested_time) < normalize(keep_from.requested_time))
    ]
    if not commits:
        log.debug(
            "%s: nothing to archive before the data table's earliest instant %s", mdt.base_path, keep_from
        )
        return None
    # The bound only moves forward (new data instants are later), so re-planning under the lock
    # inside execute_archival archives exactly these commits and the cleans and rollbacks before them.
    return execute_archival(mctx, commits[-1].requested_time, policy.archival)


# -- all of them --------------------------------------------------------------------------------


def maintain_metadata_table(
    ctx: ServiceContext, *, policy: MetadataTablePolicy | None = None, runner: Runner | None = None
) -> dict[str, Any]:
    """Run the MDT services of ``ctx.table`` that are due, in Hudi's order: a pending compaction,
    clean, compaction, archival. Returns ``{"compaction": T | None, "clean": T | None,
    "archived": [T, ...]}`` (empty when the table has no metadata table)."""
    data_table = ctx.table
    if not has_metadata_table(data_table):
        return {}
    policy = policy or MetadataTablePolicy.from_options(ctx.options)
    runner = runner or LocalRunner()
    mctx = metadata_service_context(data_table, ctx)  # opened once for the four steps
    compacted: Instant | None = None
    if mctx.table.reload().pending_compaction():
        compacted = compact_metadata_table(data_table, ctx, policy=policy, runner=runner, mctx=mctx)
    cleaned = clean_metadata_table(data_table, ctx, policy=policy, runner=runner, mctx=mctx)
    compacted = compact_metadata_table(data_table, ctx, policy=policy, runner=runner, mctx=mctx) or compacted
    archived = archive_metadata_table(data_table, ctx, policy=policy, mctx=mctx)
    return {
        "compaction": compacted.requested_time if compacted else None,
        "clean": cleaned.instant.requested_time if cleaned else None,
        "archived": list(archived.details.get("archived_instants", [])) if archived else [],
    }


def maintain_after_commit(ctx: ServiceContext) -> dict[str, Any]:
    """:func:`maintain_metadata_table` right after a data-table commit, as Apache Hudi runs the MDT
    services inline. The commit already stands: storage and table errors are logged, not raised,
    and the next commit (or ``hts run metadata``) tries again."""
    table = ctx.table
    if table.is_metadata_table or not has_metadata_table(table):
        return {}
    try:
        return maintain_metadata_table(ctx)
    except (HoodieError, OSError) as e:
        log.error(
            "%s: metadata-table services failed after a commit; the commit stands, the next one "
            "retries: %s: %s",
            table.base_path,
            type(e).__name__,
            e,
        )
        return {"error": f"{type(e).__name__}: {e}"}
