"""The table services hts knows: one :class:`ServiceSpec` per :class:`ServiceKind`.

Every list of services (the CLI's choices, the daemon's settings, watcher, triggers and policies,
the shape matrix's operations) is derived from :data:`SPECS`; adding a service is one spec here
plus its module ``hoodie.services.<kind>``, which registers the implementation
(``hoodie.services.base.register_service``).

This module is a leaf (it imports only the timeline's nouns and hoodie's errors), so that the shape
matrix and the daemon can read it without importing any service.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from types import MappingProxyType

from hoodie.errors import TableServiceError
from hoodie.timeline.instant import Action


class ServiceKind(StrEnum):
    """A table service, by the name the CLI, the API, the settings and the shape matrix use."""

    COMPACTION = "compaction"
    LOG_COMPACTION = "logcompaction"
    CLUSTERING = "clustering"
    CLEAN = "clean"
    ARCHIVAL = "archival"
    INDEXING = "indexing"
    ROLLBACK = "rollback"
    RESTORE = "restore"
    SAVEPOINT = "savepoint"
    METADATA = "metadata"
    TTL = "ttl"
    """Partition TTL (Hudi's ``HoodieTTLConfig``): expired partitions deleted by a replacecommit."""


class PendingWork(Enum):
    """How a service's pending work is found on a timeline."""

    NONE = "none"
    """Its plan never goes on the timeline (archival, the metadata table's services)."""
    ACTIONS = "actions"
    """The REQUESTED and INFLIGHT instants of its actions."""
    CLUSTERING_PLANS = "clustering plans"
    """Pending instants of its actions that carry its plan (a pending replacecommit may be a write)."""
    EXPIRED_HEARTBEATS = "expired heartbeats"
    """Its own pending instants plus the writes whose heartbeat expired (``hoodie.client.heartbeat.*``):
    ``pending`` is given the heartbeat configuration."""


@dataclass(frozen=True)
class ServiceSpec:
    """What hts knows about one table service, apart from its implementation."""

    kind: ServiceKind
    actions: tuple[Action, ...]
    """The timeline actions its instants have (empty: it plans nothing on the timeline)."""
    pending: PendingWork
    triggerable: bool
    """``POST /v1/tables/{id}/<service>`` plans (or picks) and executes it as one run."""
    self_scheduled: bool
    """The daemon's policies may schedule it (``policies.<service>`` in the settings)."""
    daemon_executes: bool
    """The daemon executes its pending instants when it finds them (requested, or abandoned)."""
    watched: bool
    """The daemon's watcher reports its pending instants (executed or not: see ``daemon_executes``)."""
    policy_defaults: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Hudi keys a policy run plans with unless the policy's options say otherwise (a REST trigger
    plans at once instead)."""
    reads_every_column: bool = False
    """It rewrites records (so needs every column's schema readable)."""
    runs_tasks: bool = True
    """Its execution runs tasks on the runner (else no runner, Spark or other, is started for it)."""

    @property
    def plans_on_timeline(self) -> bool:
        """Scheduling writes a REQUESTED instant; otherwise scheduling and executing are one run."""
        return self.pending is not PendingWork.NONE

    @property
    def requestable(self) -> bool:
        """``hts request`` may leave its plan for a daemon to execute."""
        return self.triggerable and self.plans_on_timeline and self.daemon_executes

    @property
    def daemon_runs(self) -> bool:
        """The daemon runs it at all (policy, trigger or the watcher): it has a per-service limit."""
        return self.triggerable or self.self_scheduled or self.daemon_executes


def _frozen(options: dict[str, str]) -> Mapping[str, str]:
    return MappingProxyType(options)


SPECS: Mapping[ServiceKind, ServiceSpec] = MappingProxyType(
    {
        spec.kind: spec
        for spec in (
            ServiceSpec(
                ServiceKind.COMPACTION,
                (Action.COMPACTION,),
                PendingWork.ACTIONS,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=True,
                watched=True,
                # Hudi's inline trigger default (CompactionTriggerStrategy), for self-scheduling.
                policy_defaults=_frozen({"hoodie.compact.inline.trigger.strategy": "NUM_COMMITS"}),
                reads_every_column=True,
            ),
            ServiceSpec(
                ServiceKind.LOG_COMPACTION,
                (Action.LOG_COMPACTION,),
                PendingWork.ACTIONS,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=True,
                watched=True,
                reads_every_column=True,
            ),
            ServiceSpec(
                ServiceKind.CLUSTERING,
                (Action.CLUSTERING, Action.REPLACE_COMMIT),
                PendingWork.CLUSTERING_PLANS,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=True,
                watched=True,
                policy_defaults=_frozen({"hoodie.clustering.async.max.commits": "4"}),
                reads_every_column=True,
            ),
            ServiceSpec(
                ServiceKind.CLEAN,
                (Action.CLEAN,),
                PendingWork.ACTIONS,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=True,
                watched=True,
                policy_defaults=_frozen({"hoodie.clean.max.commits": "1"}),
            ),
            ServiceSpec(
                ServiceKind.ARCHIVAL,
                (),
                PendingWork.NONE,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=False,
                watched=False,
                runs_tasks=False,
            ),
            ServiceSpec(
                ServiceKind.INDEXING,
                (Action.INDEXING,),
                PendingWork.ACTIONS,
                triggerable=True,
                self_scheduled=False,
                daemon_executes=True,
                watched=True,
            ),
            ServiceSpec(
                ServiceKind.ROLLBACK,
                (Action.ROLLBACK,),
                PendingWork.EXPIRED_HEARTBEATS,
                triggerable=False,
                self_scheduled=False,
                daemon_executes=True,
                watched=True,
            ),
            ServiceSpec(
                ServiceKind.RESTORE,
                (Action.RESTORE,),
                PendingWork.ACTIONS,
                triggerable=False,
                self_scheduled=False,
                daemon_executes=False,
                watched=True,
            ),
            ServiceSpec(
                ServiceKind.SAVEPOINT,
                (Action.SAVEPOINT,),
                PendingWork.ACTIONS,
                triggerable=False,
                self_scheduled=False,
                daemon_executes=False,
                watched=False,
                runs_tasks=False,
            ),
            ServiceSpec(
                ServiceKind.METADATA,
                (),
                PendingWork.NONE,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=False,
                watched=False,
            ),
            # Its replacecommit is requested, executed and completed in one run (Hudi's
            # managePartitionTTL): nothing stays pending for a daemon to find.
            ServiceSpec(
                ServiceKind.TTL,
                (),
                PendingWork.NONE,
                triggerable=True,
                self_scheduled=True,
                daemon_executes=False,
                watched=False,
                runs_tasks=False,
            ),
        )
    }
)

ALL: tuple[str, ...] = tuple(k.value for k in SPECS)
"""Every service's name, in :class:`ServiceKind` order."""


def spec_of(name: str | ServiceKind) -> ServiceSpec:
    """The spec of the service called ``name``; a clear error naming it when there is none."""
    try:
        return SPECS[ServiceKind(name)]
    except ValueError:
        raise TableServiceError(f"unknown table service {name!r} (known: {', '.join(ALL)})") from None


def names(
    *,
    triggerable: bool | None = None,
    self_scheduled: bool | None = None,
    daemon_executes: bool | None = None,
    watched: bool | None = None,
    requestable: bool | None = None,
    daemon_runs: bool | None = None,
    plans_on_timeline: bool | None = None,
) -> tuple[str, ...]:
    """The names of the services whose spec has every given value, in :class:`ServiceKind` order."""
    wanted = {
        "triggerable": triggerable,
        "self_scheduled": self_scheduled,
        "daemon_executes": daemon_executes,
        "watched": watched,
        "requestable": requestable,
        "daemon_runs": daemon_runs,
        "plans_on_timeline": plans_on_timeline,
    }
    return tuple(
        spec.kind.value
        for spec in SPECS.values()
        if all(getattr(spec, attr) == value for attr, value in wanted.items() if value is not None)
    )


def owner_of(action: Action) -> ServiceKind | None:
    """The service whose instants have ``action`` (None for writes and the services that plan nothing).

    A pending replacecommit is clustering only when it carries a clustering plan (``PendingWork``).
    """
    return _OWNERS.get(action)


_OWNERS: Mapping[Action, ServiceKind] = MappingProxyType(
    {action: spec.kind for spec in SPECS.values() for action in spec.actions}
)
