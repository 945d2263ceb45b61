"""The metadata table's own services as one table service, ``metadata``, for the daemon and CLI.

hts runs them after every commit it makes (:func:`hoodie.metadata.services.maintain_after_commit`),
as Apache Hudi's writers do. This service runs the same thing on demand or by policy
(``hts run metadata TABLE``, a daemon policy, ``POST /v1/tables/{id}/metadata``): it catches up
after a failed inline run, or on a table whose own writers left the metadata table behind.

``schedule`` only looks: it reports what is due (a pending compaction, a compaction by the delta
commit count, a clean, archival) and writes nothing, like archival's plan; ``execute`` runs the
services in Hudi's order with the table lock taken per step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, NoReturn

from hoodie.errors import TableServiceError
from hoodie.metadata.compaction import deltacommits_since_last_compaction
from hoodie.metadata.context import metadata_service_context
from hoodie.metadata.partitions import has_metadata_table
from hoodie.metadata.policy import MetadataTablePolicy
from hoodie.metadata.services import maintain_after_commit, maintain_metadata_table
from hoodie.models.base import AvroRecord
from hoodie.services.archival import plan_archival
from hoodie.services.base import ExecutionResult, Runner, Scheduled, ServiceContext, register_service
from hoodie.services.clean import schedule_clean
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Instant
from hoodie.timeline.timeline import ActiveTimeline

__all__ = ["MetadataServicesPlan", "MetadataTableService"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataServicesPlan(AvroRecord):
    """What is due on a table's metadata table (never written: the services plan for themselves)."""

    AVRO_NAME: ClassVar[str] = "HtsMetadataServicesPlan"

    pending_compaction: str | None
    delta_commits_since_compaction: int
    max_delta_commits: int
    clean_due: bool
    instants_to_archive: int

    def to_bytes(self, table_version: int) -> NoReturn:
        raise TableServiceError("the metadata services' plan is never written to the timeline")

    @property
    def due(self) -> list[str]:
        out = []
        if self.pending_compaction:
            out.append(f"finish compaction {self.pending_compaction}")
        if self.delta_commits_since_compaction >= self.max_delta_commits:
            out.append(f"compact after {self.delta_commits_since_compaction} delta commits")
        if self.clean_due:
            out.append("clean")
        if self.instants_to_archive:
            out.append(f"archive up to {self.instants_to_archive} instants")
        return out


def plan_metadata_services(ctx: ServiceContext) -> MetadataServicesPlan | None:
    """What :func:`maintain_metadata_table` would do now; None when the table has no metadata table."""
    table = ctx.table
    if not has_metadata_table(table):
        return None
    policy = MetadataTablePolicy.from_options(ctx.options)
    mctx = metadata_service_context(table, ctx)
    timeline = mctx.table.reload()
    pending = timeline.pending_compaction().first()
    clean = schedule_clean(mctx, dataclasses.replace(policy.clean, trigger=None), dry_run=True)
    archival = plan_archival(mctx.table, policy.archival, timeline)
    return MetadataServicesPlan(
        pending_compaction=pending.requested_time if pending else None,
        delta_commits_since_compaction=deltacommits_since_last_compaction(timeline),
        max_delta_commits=policy.max_delta_commits,
        clean_due=clean is not None,
        instants_to_archive=len(archival.instants) if archival else 0,
    )


class MetadataTableService:
    """The metadata table's compaction, clean and archival as a :class:`TableService`."""

    name = "metadata"

    def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
        plan = plan_metadata_services(ctx)
        if plan is None or not plan.due:
            return None
        return Scheduled(None if dry_run else _latest_instant_time(ctx), plan, "; ".join(plan.due))

    def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
        return []

    def after_commit(self, ctx: ServiceContext) -> None:
        """Right after a data-table commit, with its lock released (``ServiceContext.maintain_metadata``)."""
        maintain_after_commit(ctx)

    def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
        done = maintain_metadata_table(ctx, runner=runner)
        mdt = metadata_service_context(ctx.table, ctx).table
        latest = mdt.reload().completed().last()
        if latest is None:
            raise TableServiceError(f"{ctx.table.base_path}: the metadata table has no completed instant")
        return ExecutionResult(latest, [], {**done, "archived": len(done.get("archived", []))})


def _latest_instant_time(ctx: ServiceContext) -> str:
    """The metadata table's latest instant time (what a run is named by)."""
    latest = metadata_service_context(ctx.table, ctx).table.reload().last()
    return latest.requested_time if latest else "00000000000000000"


register_service(MetadataTableService())
