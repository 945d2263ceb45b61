"""The service registry: one spec per service, and every list of services derived from it."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.services import registry
from hoodie.services.base import (
    KNOWN_SERVICES,
    SERVICES,
    UPKEEP_SERVICE,
    ExecutionResult,
    Runner,
    Scheduled,
    ServiceContext,
    pending_work,
    register_service,
    service_named,
)
from hoodie.services.registry import SPECS, PendingWork, ServiceKind, names, owner_of, spec_of
from hoodie.shape.matrix import README_COLUMNS, SERVICE_OPERATIONS
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant
from hoodie.timeline.timeline import ActiveTimeline
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from service import cli, operations, settings, watcher
from tests.tables import Killed, KilledWriter, new_table, rows


def test_every_kind_has_one_spec_and_one_implementation() -> None:
    assert list(SPECS) == list(ServiceKind)
    for kind, spec in SPECS.items():
        assert spec.kind is kind
        service = service_named(kind.value)
        assert service.name == kind.value
    assert set(SERVICES) == set(KNOWN_SERVICES) == {k.value for k in ServiceKind}
    assert UPKEEP_SERVICE == ServiceKind.METADATA


def test_no_action_has_two_owners() -> None:
    owned = [a for spec in SPECS.values() for a in spec.actions]
    assert len(owned) == len(set(owned))
    for spec in SPECS.values():
        assert all(owner_of(a) is spec.kind for a in spec.actions)
        assert spec.plans_on_timeline == bool(spec.actions) or spec.pending is PendingWork.NONE
    for write in (Action.COMMIT, Action.DELTA_COMMIT):
        assert owner_of(write) is None


def test_an_unknown_service_is_refused_naming_it() -> None:
    with pytest.raises(TableServiceError, match=r"unknown table service 'vacuum' \(known: compaction, "):
        spec_of("vacuum")

    class Vacuum:
        name = "vacuum"

        def schedule(self, ctx: ServiceContext, *, dry_run: bool = False) -> Scheduled | None:
            return None

        def pending(self, table: HoodieTable, timeline: ActiveTimeline) -> list[Instant]:
            return []

        def execute(self, ctx: ServiceContext, instant_time: str, runner: Runner) -> ExecutionResult:
            raise AssertionError("never registered")

    with pytest.raises(TableServiceError, match="'vacuum'"):
        register_service(Vacuum())
    assert "vacuum" not in SERVICES


def _choices(parser: argparse.ArgumentParser, command: str) -> tuple[str, ...]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    service = next(a for a in sub.choices[command]._actions if a.dest == "service")
    assert service.choices is not None
    return tuple(service.choices)


def test_every_list_of_services_is_the_registrys() -> None:
    parser = cli.build_parser()
    for verb in ("schedule", "execute", "run"):
        assert _choices(parser, verb) == registry.ALL
    assert _choices(parser, "request") == names(requestable=True)
    assert names(requestable=True) == ("compaction", "logcompaction", "clustering", "clean", "indexing")
    assert names(self_scheduled=True) == settings.SERVICES
    assert names(daemon_runs=True) == settings.RUN_BY_DAEMON
    assert set(names(daemon_executes=True)) == watcher.EXECUTABLE
    assert names(triggerable=True) == operations.TRIGGERABLE
    assert operations.RUN_NOW == ("archival", "metadata", "ttl") == names(plans_on_timeline=False)
    assert SERVICE_OPERATIONS == registry.ALL
    assert README_COLUMNS[2:] == tuple(k for k in registry.ALL if k != ServiceKind.METADATA)


def test_settings_name_the_known_services_on_a_mistake() -> None:
    from service.errors import ConfigError

    with pytest.raises(ConfigError, match=r"unknown service 'vacuum' \(known: compaction, logcompaction"):
        settings.load_settings(
            overrides={"defaults": {"policies": {"vacuum": {"enabled": True}}}}, environ={}
        )
    with pytest.raises(ConfigError, match=r"limits.per_service: unknown service 'restore'"):
        settings.load_settings(overrides={"limits": {"per_service": {"restore": 1}}}, environ={})
    loaded = settings.load_settings(
        overrides={"limits": {"per_service": {"rollback": 1, "indexing": 2}}}, environ={}
    )
    assert loaded.limits.per_service == {"rollback": 1, "indexing": 2}


def _table(path: Path, version: TableVersion, table_type: TableType, batches: int) -> HoodieTable:
    table = new_table(path, table_type=table_type, version=version)
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    for b in range(batches):
        writer.insert(rows(range(b * 30, (b + 1) * 30), b + 1))
    writer.upsert(rows(range(0, batches * 30, 3), 50))
    writer.upsert(rows(range(0, batches * 30, 5), 60))
    return HoodieTable.open(str(path))


PLANNED = [
    (ServiceKind.COMPACTION, TableVersion.EIGHT, TableType.MERGE_ON_READ, {}),
    (ServiceKind.LOG_COMPACTION, TableVersion.EIGHT, TableType.MERGE_ON_READ, {}),
    (ServiceKind.CLUSTERING, TableVersion.SIX, TableType.COPY_ON_WRITE, {}),
    (ServiceKind.CLUSTERING, TableVersion.EIGHT, TableType.MERGE_ON_READ, {}),
    (ServiceKind.CLEAN, TableVersion.EIGHT, TableType.COPY_ON_WRITE, {"hoodie.clean.commits.retained": "1"}),
]


@pytest.mark.parametrize(("kind", "version", "table_type", "options"), PLANNED)
def test_a_plan_is_pending_work_of_an_action_its_spec_owns(
    tmp_path: Path, kind: ServiceKind, version: TableVersion, table_type: TableType, options: dict[str, str]
) -> None:
    table = _table(tmp_path / "t", version, table_type, batches=2)
    service = service_named(kind.value)
    scheduled = service.schedule(ServiceContext(table, options=options))
    assert scheduled is not None and scheduled.instant_time is not None
    pending = pending_work(service, table, table.reload(), HeartbeatConfig())
    assert [i.requested_time for i in pending] == [scheduled.instant_time]
    (instant,) = pending
    assert instant.action in spec_of(kind).actions and owner_of(instant.action) is kind


def test_services_that_plan_nothing_on_the_timeline_have_no_pending_work(tmp_path: Path) -> None:
    table = _table(tmp_path / "t", TableVersion.EIGHT, TableType.MERGE_ON_READ, batches=1)
    for kind in names(plans_on_timeline=False):
        assert pending_work(service_named(kind), table, table.reload(), HeartbeatConfig()) == []


def test_rollback_judges_failed_writes_by_the_heartbeat_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path, TableVersion.EIGHT, TableType.MERGE_ON_READ, batches=1)
    with pytest.raises(Killed):
        KilledWriter(table).upsert(rows([1, 2], 70))
    table = HoodieTable.open(str(path))
    (write,) = table.reload().pending().writes()
    Heartbeat(table.fileio, table.paths, write.requested_time, HeartbeatConfig()).beat()  # its last beat
    time.sleep(0.05)
    service = service_named(ServiceKind.ROLLBACK.value)
    assert pending_work(service, table, table.reload(), HeartbeatConfig()) == []  # its beat is recent
    (failed,) = pending_work(
        service, table, table.reload(), HeartbeatConfig(interval_ms=1, tolerable_misses=1)
    )
    assert failed == write and failed.action is Action.DELTA_COMMIT and failed.is_inflight
    assert owner_of(failed.action) is None  # a write: rollback finds it by its heartbeat, not its action
