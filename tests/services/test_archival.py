"""Archival: the active timeline shrinks to Hudi's keep window, the archived instants read back with
their original payloads, and every reader (ours and hudi-rs, snapshot and time travel, file slicing)
sees the same table as before. Pending instants, the last clean's retained commits and savepoints
bound what is archived, and so does the metadata table's latest compaction; a dry run writes
nothing.

Tables are written by our writer (one insert and 35 upserts, plus a compaction for MERGE_ON_READ)
once per session and copied per test; the keep window is 10..15 commits instead of 20..30 so that
each table stays small.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.models.clean import ActionInstant, CleanerPlan, CleanMetadata
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexPlan
from hoodie.models.rollback import InstantInfo, RollbackMetadata, RollbackPlan
from hoodie.models.savepoint import SavepointMetadata
from hoodie.read.reader import TableReader
from hoodie.services.archival import (
    ArchivalPolicy,
    ArchivalService,
    execute_archival,
    keep_window,
    plan_archival,
    schedule_archival,
)
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.archived import ArchivedTimeline
from hoodie.timeline.archived_instant import InstantFiles
from hoodie.timeline.history import latest_manifest
from hoodie.timeline.instant import Action, Instant, State
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import new_table, rows

OPTIONS = {
    "hoodie.keep.min.commits": "10",
    "hoodie.keep.max.commits": "15",
    "hoodie.cleaner.commits.retained": "5",
}
UPSERTS = 35
COMPACT_AFTER = 15  # MERGE_ON_READ: compact after this many upserts
VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]
TYPES = [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ]
REPO = Path(__file__).resolve().parents[2]

Maker = Callable[[TableType, TableVersion], Path]


def _rows(ids: list[int], ts: int) -> pa.Table:
    return rows(ids, ts, partitions=2)


def _build(path: Path, table_type: TableType, version: TableVersion) -> None:
    table = new_table(path, table_type=table_type, version=version)
    writer = HoodieWriter(table)
    writer.insert(_rows(list(range(12)), 0))
    for n in range(1, UPSERTS + 1):
        writer.upsert(_rows([n % 12, (n * 5) % 12], n))
        if table_type is TableType.MERGE_ON_READ and n == COMPACT_AFTER:
            ctx = ServiceContext(HoodieTable.open(str(path)))
            scheduled = schedule_compaction(ctx, CompactionPolicy())
            assert scheduled is not None and scheduled.instant_time is not None
            execute_compaction(ctx, scheduled.instant_time, LocalRunner())


@pytest.fixture(scope="session")
def _templates(tmp_path_factory: pytest.TempPathFactory) -> Maker:
    built: dict[tuple[TableType, TableVersion], Path] = {}

    def get(table_type: TableType, version: TableVersion) -> Path:
        key = (table_type, version)
        if key not in built:
            path = tmp_path_factory.mktemp("archival") / f"{table_type.value}_{version.value}"
            _build(path, table_type, version)
            built[key] = path
        return built[key]

    return get


@pytest.fixture()
def table_of(_templates: Maker, tmp_path: Path) -> Maker:
    """A private copy of a session-wide table with 36 (COW) or 37 (MOR) completed commits."""

    def make(table_type: TableType, version: TableVersion) -> Path:
        dst = tmp_path / f"{table_type.value}_{version.value}"
        shutil.copytree(_templates(table_type, version), dst)
        return dst

    return make


# -- helpers ------------------------------------------------------------------------------------


def _open(path: Path) -> HoodieTable:
    return HoodieTable.open(str(path))


def _commits(path: Path) -> list[str]:
    return [i.requested_time for i in _open(path).timeline.completed().writes()]


def _ours(path: Path, as_of: str | None = None) -> list[str]:
    data = TableReader(_open(path)).snapshot(as_of=as_of)
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _hudi_rs(path: Path, as_of: str) -> list[str]:
    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false").build()
    )
    batches = table.read(HudiReadOptions().with_as_of_timestamp(as_of))
    data = pa.Table.from_batches(batches).drop_columns(["_hoodie_file_name"])
    return sorted(str(r) for r in data.to_pylist())


def _slices(path: Path, as_of: str | None = None) -> list[tuple[Any, ...]]:
    """(partition, file id, base instant, base file, log files) of every slice."""
    view = _open(path).file_system_view(as_of=as_of)
    slices = view.all_file_slices()
    return sorted(
        (
            s.partition_path,
            s.file_id,
            s.base_instant_time,
            s.base_file and s.base_file.name,
            tuple(lf.name for lf in s.log_files),
        )
        for s in slices
    )


@dataclasses.dataclass
class ReaderState:
    """What every reader sees: latest snapshot, time travel, file slices."""

    hudi_rs: list[str]
    ours: list[str]
    slices: list[tuple[Any, ...]]
    travel: dict[str, tuple[list[str], list[str], list[tuple[Any, ...]]]]

    @classmethod
    def of(cls, path: Path, as_of: list[str]) -> ReaderState:
        return cls(
            hudi_rs_rows(path),
            _ours(path),
            _slices(path),
            {ts: (_ours(path, ts), _hudi_rs(path, ts), _slices(path, ts)) for ts in as_of},
        )


def _timeline_names(path: Path) -> list[str]:
    table = _open(path)
    return sorted(e.name for e in table.fileio.list_dir(table.paths.timeline) if not e.is_dir)


def _archived(path: Path) -> ArchivedTimeline:
    table = _open(path)
    return ArchivedTimeline.load(
        table.fileio, table.paths, table.paths.layout, table_version=table.table_version
    )


def _ctx(path: Path, **extra: str) -> ServiceContext:
    return ServiceContext(_open(path), options={**OPTIONS, **extra})


def _archive(path: Path, **extra: str) -> list[str]:
    """Schedule and execute through the service protocol; returns the archived requested times."""
    service = service_named("archival")
    ctx = _ctx(path, **extra)
    scheduled = service.schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    result = service.execute(ctx, scheduled.instant_time, LocalRunner())
    archived: list[str] = result.details["archived_instants"]
    assert archived == [i["requestedTime"] for i in scheduled.plan_json()["instants"]]
    assert result.instant.requested_time == archived[-1] == scheduled.instant_time
    return archived


def _new_time(path: Path) -> str:
    return ServiceContext(_open(path)).new_instant_time()


def _after(ts: str, millis: int = 1) -> str:
    return str(int(ts) + millis)


def _complete_instant(path: Path, instant: Instant, plan: bytes, metadata: bytes) -> None:
    """Write requested (unless a savepoint), inflight and completed files of ``instant``."""
    table = _open(path)
    tl = table.timeline
    if instant.action is Action.SAVEPOINT:
        pending = tl.create_inflight(Instant(instant.requested_time, instant.action, State.INFLIGHT))
    else:
        pending = tl.transition_to_inflight(tl.create_requested(instant, plan))
    completion = _after(instant.requested_time, 2) if table.paths.layout >= 2 else None
    table.reload().complete(pending, metadata, completion)


def _clean(path: Path, at: str, retain: str) -> tuple[CleanerPlan, CleanMetadata]:
    version = _open(path).table_version
    plan = CleanerPlan(
        earliest_instant_to_retain=ActionInstant(timestamp=retain, action="commit", state="COMPLETED"),
        last_completed_commit_timestamp=retain,
        policy="KEEP_LATEST_COMMITS",
        files_to_be_deleted_per_partition={},
        file_paths_to_be_deleted_per_partition={},
        partitions_to_be_deleted=[],
        extra_metadata={},
    )
    meta = CleanMetadata(
        start_clean_time=at,
        time_taken_in_millis=3,
        total_files_deleted=0,
        earliest_commit_to_retain=retain,
        last_completed_commit_timestamp=retain,
        partition_metadata={},
        bootstrap_partition_metadata={},
        extra_metadata={},
    )
    _complete_instant(
        path, Instant(at, Action.CLEAN, State.REQUESTED), plan.to_bytes(version), meta.to_bytes(version)
    )
    return plan, meta


def _rollback(path: Path, at: str, failed: str) -> RollbackMetadata:
    version = _open(path).table_version
    plan = RollbackPlan(
        instant_to_rollback=InstantInfo(commit_time=failed, action="commit"), rollback_requests=[]
    )
    meta = RollbackMetadata(
        start_rollback_time=at,
        time_taken_in_millis=5,
        total_files_deleted=0,
        commits_rollback=[failed],
        partition_metadata={},
        instants_rollback=[InstantInfo(commit_time=failed, action="commit")],
    )
    _complete_instant(
        path, Instant(at, Action.ROLLBACK, State.REQUESTED), plan.to_bytes(version), meta.to_bytes(version)
    )
    return meta


def _savepoint(path: Path, commit: str) -> None:
    meta = SavepointMetadata(savepointed_by="hts", savepointed_at=1, comments="test", partition_metadata={})
    version = _open(path).table_version
    _complete_instant(path, Instant(commit, Action.SAVEPOINT, State.INFLIGHT), b"", meta.to_bytes(version))


# -- the keep window; payloads; readers ---------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", TYPES)
def test_archival_keeps_the_window_and_every_reader_sees_the_same_table(
    table_of: Maker, table_type: TableType, version: TableVersion
) -> None:
    path = table_of(table_type, version)
    table = _open(path)
    tl = table.timeline
    commits = _commits(path)
    assert len(commits) == UPSERTS + 1 + (table_type is TableType.MERGE_ON_READ)
    originals = {ts: InstantFiles.read(tl, ts) for ts in commits}
    metadata = {ts: table.commit_metadata(tl.get(ts)) for ts in commits}  # type: ignore[arg-type]
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0], keep[4], keep[-1]])

    archived = _archive(path)

    assert archived == commits[:-10]
    assert _commits(path) == keep
    names = _timeline_names(path)
    assert not [n for n in names if n[:17] in set(archived)]  # every state file went
    assert ReaderState.of(path, [keep[0], keep[4], keep[-1]]) == before
    history = _archived(path)
    assert history.requested_times() == archived
    for ts in archived:
        got, original = history.get(ts), originals[ts]
        assert got is not None and got.action is original.instant.action
        if version >= TableVersion.EIGHT:
            assert got.completion_time == original.instant.completion_time
            assert _open(path).archived_completion_time(ts) == original.instant.completion_time
            assert got.metadata_as(CommitMetadata) == metadata[ts]
        else:
            assert got.completion_time == original.transition_times[State.COMPLETED]
            assert got.metadata_as(CommitMetadata) == dataclasses.replace(metadata[ts], version=None)
        if original.pending_action is Action.COMPACTION:
            assert got.plan_as(CompactionPlan) == CompactionPlan.from_bytes(
                original.requested or b"", version
            )
    if table_type is TableType.MERGE_ON_READ:  # the compaction is among the archived instants
        assert any(history.get(ts).pending_action is Action.COMPACTION for ts in archived)  # type: ignore[union-attr]
    if version >= TableVersion.EIGHT:
        _, manifest = latest_manifest(table.fileio, table.paths)
        assert manifest.file_names() == [f"{archived[0]}_{archived[-1]}_0.parquet"]
    else:
        assert sorted(p.name for p in Path(table.paths.archived).iterdir()) == [".commits_.archive.1_1-0-1"]
    # Within the window now: nothing more to archive, and archival never has pending instants.
    assert schedule_archival(_ctx(path), ArchivalPolicy.from_options(OPTIONS)) is None
    assert ArchivalService().pending(_open(path), _open(path).timeline) == []


@pytest.mark.parametrize("version", [TableVersion.EIGHT, TableVersion.NINE])
def test_completion_times_from_the_history_keep_slicing_by_completion_time(
    table_of: Maker, version: TableVersion
) -> None:
    path = table_of(TableType.MERGE_ON_READ, version)
    table = _open(path)
    commits = _commits(path)
    late, compaction = (
        table.timeline.get(commits[COMPACT_AFTER]),
        table.timeline.get(commits[COMPACT_AFTER + 1]),
    )
    assert late is not None and late.action is Action.DELTA_COMMIT and late.completion_time is not None
    assert (
        compaction is not None
        and compaction.action is Action.COMMIT
        and compaction.completion_time is not None
    )
    # Let the last delta commit before the compaction complete after it: its log files then
    # belong to the compaction's slice, which only its completion time tells.
    finished = _after(compaction.completion_time)
    timeline_dir = Path(table.paths.timeline)
    (timeline_dir / f"{late.requested_time}_{late.completion_time}.deltacommit").rename(
        timeline_dir / f"{late.requested_time}_{finished}.deltacommit"
    )
    slices = _slices(path)
    assert any(
        s[2] == compaction.requested_time and any(late.requested_time in n for n in s[4]) for s in slices
    )
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0]])

    archived = _archive(path)

    assert late.requested_time in archived and compaction.requested_time in archived
    assert _open(path).archived_completion_time(late.requested_time) == finished
    assert _slices(path) == slices
    assert ReaderState.of(path, [keep[0]]) == before


def test_dry_run_writes_nothing(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)

    def listing() -> list[tuple[str, int, int]]:
        return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in (path / ".hoodie").rglob("*"))

    before = listing()
    commits = _commits(path)
    dry = service_named("archival").schedule(_ctx(path), dry_run=True)
    assert dry is not None and dry.instant_time is None
    printed = dry.plan_json()
    assert [i["requestedTime"] for i in printed["instants"]] == commits[:-10]
    assert printed["instants"][0]["states"] == ["REQUESTED", "INFLIGHT", "COMPLETED"]
    assert printed["archiveFormat"] == "lsm-history" and printed["minInstantsToKeep"] == 10
    assert "archive 27 instants" in dry.reason
    assert listing() == before
    with pytest.raises(TableServiceError, match="never written"):
        dry.plan.to_bytes(8)


def test_execute_archives_only_up_to_the_scheduled_bound(table_of: Maker) -> None:
    path = table_of(TableType.COPY_ON_WRITE, TableVersion.NINE)
    commits = _commits(path)
    scheduled = schedule_archival(_ctx(path), ArchivalPolicy.from_options(OPTIONS))
    assert scheduled is not None and scheduled.instant_time == commits[25]
    first = execute_archival(_ctx(path), commits[9])
    assert first.details["archived_instants"] == commits[:10]
    second = execute_archival(_ctx(path))  # 26 commits > 15: down to 10 again
    assert second.details["archived_instants"] == commits[10:26]
    assert _archived(path).requested_times() == commits[:26]
    with pytest.raises(TableServiceError, match="nothing to archive"):
        execute_archival(_ctx(path))


# -- what bounds the selection ------------------------------------------------------------------

PENDING = [
    (TableType.MERGE_ON_READ, TableVersion.EIGHT, Action.DELTA_COMMIT, State.REQUESTED),
    (TableType.MERGE_ON_READ, TableVersion.EIGHT, Action.DELTA_COMMIT, State.INFLIGHT),
    (TableType.MERGE_ON_READ, TableVersion.EIGHT, Action.COMPACTION, State.REQUESTED),
    (TableType.MERGE_ON_READ, TableVersion.EIGHT, Action.LOG_COMPACTION, State.INFLIGHT),
    (TableType.MERGE_ON_READ, TableVersion.NINE, Action.CLUSTERING, State.REQUESTED),
    (TableType.COPY_ON_WRITE, TableVersion.SIX, Action.COMMIT, State.INFLIGHT),
    (TableType.COPY_ON_WRITE, TableVersion.SIX, Action.REPLACE_COMMIT, State.REQUESTED),
    (TableType.MERGE_ON_READ, TableVersion.EIGHT, Action.INDEXING, State.REQUESTED),
]


def _add_pending(path: Path, at: str, action: Action, state: State) -> None:
    version = _open(path).table_version
    payload = {
        Action.COMPACTION: CompactionPlan(operations=[]).to_bytes(version),
        Action.LOG_COMPACTION: CompactionPlan(operations=[]).to_bytes(version),
        Action.CLUSTERING: RequestedReplaceMetadata(operation_type="CLUSTER").to_bytes(version),
        Action.REPLACE_COMMIT: RequestedReplaceMetadata().to_bytes(version),
        Action.INDEXING: IndexPlan().to_bytes(version),
    }.get(action, b"")
    tl = _open(path).timeline
    requested = tl.create_requested(Instant(at, action, State.REQUESTED), payload)
    if state is State.INFLIGHT:
        tl.transition_to_inflight(requested)


@pytest.mark.parametrize(("table_type", "version", "action", "state"), PENDING)
def test_pending_instants_and_what_follows_them_stay(
    table_of: Maker, table_type: TableType, version: TableVersion, action: Action, state: State
) -> None:
    path = table_of(table_type, version)
    commits = _commits(path)
    pending_at = _after(commits[5])
    _add_pending(path, pending_at, action, state)
    before = _timeline_names(path)

    # Without a commit-retaining cleaner policy the window stays 10..15 (see the next test).
    archived = _archive(path, **{"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"})

    if action is Action.INDEXING:  # hts's guard: nothing at or after any pending instant
        assert archived == commits[:6]
    else:  # Hudi: the last completed commit before the earliest pending write stays too
        assert archived == commits[:5]
    after = _timeline_names(path)
    assert [n for n in before if n.startswith(pending_at)] == [n for n in after if n.startswith(pending_at)]
    assert _commits(path) == commits[len(archived) :]


def test_a_pending_write_holds_back_the_cleaners_retained_commit(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)
    commits = _commits(path)
    _add_pending(path, _after(commits[5]), Action.DELTA_COMMIT, State.INFLIGHT)
    table = _open(path)
    # KEEP_LATEST_COMMITS cannot retain past a pending write: it retains from commits[5], so the
    # 31 commits after it plus 2 stay, and the window grows to 33..38; nothing is archived.
    assert keep_window(table, table.timeline, ArchivalPolicy.from_options(OPTIONS)) == (33, 38)
    assert service_named("archival").schedule(_ctx(path)) is None


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_cleans_and_rollbacks_follow_hudis_rule_per_layout(table_of: Maker, version: TableVersion) -> None:
    path = table_of(TableType.COPY_ON_WRITE, version)
    commits = _commits(path)
    early_plan, early_meta = _clean(path, _after(commits[2]), commits[1])
    rollback_meta = _rollback(path, _after(commits[9], 2), _after(commits[9]))
    _clean(path, _new_time(path), commits[30])
    before = hudi_rs_rows(path)

    archived = _archive(path)

    history = _archived(path)
    if version >= TableVersion.EIGHT:  # layout 2: cleans and rollbacks before the newest archived commit
        assert archived == sorted([*commits[:26], _after(commits[2]), _after(commits[9], 2)])
        clean = history.get(_after(commits[2]))
        assert clean is not None and clean.action is Action.CLEAN
        assert clean.metadata_as(CleanMetadata) == early_meta and clean.plan_as(CleanerPlan) == early_plan
        rollback = history.get(_after(commits[9], 2))
        assert rollback is not None and rollback.metadata_as(RollbackMetadata) == rollback_meta
    else:  # layout 1: by their own count, and two cleans and a rollback are within 15
        assert archived == commits[:26]
    assert hudi_rs_rows(path) == before


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_nothing_at_or_after_the_last_cleans_earliest_commit_to_retain(
    table_of: Maker, version: TableVersion
) -> None:
    path = table_of(TableType.MERGE_ON_READ, version)
    commits = _commits(path)
    _clean(path, _after(commits[2]), commits[1])
    _clean(path, _new_time(path), commits[7])
    archived = _archive(path)
    if version >= TableVersion.EIGHT:
        assert archived == sorted([*commits[:7], _after(commits[2])])
    else:
        assert archived == commits[:7]
    plan = plan_archival(_open(path), ArchivalPolicy.from_options(OPTIONS))
    assert plan is None  # blocked until the next clean moves its retained commit on


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_savepoints_stop_archival_unless_archiving_beyond_them(
    table_of: Maker, version: TableVersion
) -> None:
    path = table_of(TableType.COPY_ON_WRITE, version)
    commits = _commits(path)
    _savepoint(path, commits[5])
    shutil.copytree(path, path.with_name("beyond"))
    beyond = path.with_name("beyond")

    assert _archive(path) == commits[:5]
    assert _commits(path) == commits[5:]
    assert any(".savepoint" in n for n in _timeline_names(path))

    latest = hudi_rs_rows(beyond), _ours(beyond)
    archived = _archive(beyond, **{"hoodie.archive.beyond.savepoint": "true"})
    assert archived == commits[:5] + commits[6:27]
    assert _commits(beyond) == [commits[5], *commits[27:]]
    assert (hudi_rs_rows(beyond), _ours(beyond)) == latest


# -- tables Apache Hudi wrote -------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["sample_table/cow/v9_txns_simple_nometa", "sample_table/mor/avro/v9_txns_simple_nometa"]
)
def test_hudi_written_tables_archive_up_to_their_first_replace_commit(table_copy: Any, name: str) -> None:
    path: Path = table_copy(name)
    table = _open(path)
    commits = _commits(path)
    originals = {ts: InstantFiles.read(table.timeline, ts) for ts in commits}
    first_replace = next(i for i in table.timeline if i.action is Action.REPLACE_COMMIT)
    kept = [ts for ts in commits if ts >= first_replace.requested_time]
    before = ReaderState.of(path, kept)
    options = {
        "hoodie.keep.min.commits": "1",
        "hoodie.keep.max.commits": "2",
        "hoodie.cleaner.commits.retained": "1",
    }
    plan = plan_archival(table, ArchivalPolicy.from_options(options))
    assert plan is not None and plan.retained_from["clustering"] == first_replace.requested_time
    # The cleaner keeps its last commit and one before it: the window widens from 1..2 to 2..3.
    assert (plan.min_instants_to_keep, plan.max_instants_to_keep) == (2, 3)

    archived = execute_archival(ServiceContext(table, options=options)).details["archived_instants"]

    assert archived == [ts for ts in commits if ts < first_replace.requested_time]
    assert ReaderState.of(path, kept) == before
    history = _archived(path)
    assert history.requested_times() == archived
    for ts in archived:  # Hudi's own bytes, verbatim
        got = history.get(ts)
        assert got is not None and got.metadata_payload is not None
        assert got.metadata_payload.raw == originals[ts].completed
    reopened = _open(path)
    kept_replace = reopened.timeline.get(first_replace.requested_time)
    assert kept_replace is not None
    assert isinstance(reopened.commit_metadata(kept_replace), ReplaceCommitMetadata)


def test_policy_keys_defaults_and_errors_name_the_value() -> None:
    default = ArchivalPolicy.from_options({})
    assert (default.min_commits, default.max_commits, default.archival_batch) == (20, 30, 10)
    assert default.beyond_savepoint is False and default.history_compaction_batch == 10
    with pytest.raises(TableServiceError, match=r"hoodie.keep.max.commits=20 must be greater than"):
        ArchivalPolicy.from_options({"hoodie.keep.min.commits": "20", "hoodie.keep.max.commits": "20"})
    with pytest.raises(TableServiceError, match=r"hoodie.keep.min.commits='ten'"):
        ArchivalPolicy.from_options({"hoodie.keep.min.commits": "ten"})
    with pytest.raises(TableServiceError, match=r"hoodie.archive.beyond.savepoint='yes'"):
        ArchivalPolicy.from_options({"hoodie.archive.beyond.savepoint": "yes"})
    with pytest.raises(TableServiceError, match=r"hoodie.cleaner.policy='KEEP_ALL'"):
        ArchivalPolicy.from_options({"hoodie.cleaner.policy": "KEEP_ALL"})
    # The cleaner settings are read under both spellings, the current one first.
    both = {"hoodie.clean.commits.retained": "7", "hoodie.cleaner.commits.retained": "3"}
    assert ArchivalPolicy.from_options(both).cleaner_commits_retained == 7
    legacy = ArchivalPolicy.from_options({"hoodie.cleaner.policy": "keep_latest_by_hours"})
    assert legacy.cleaner_policy.value == "KEEP_LATEST_BY_HOURS"


def test_the_cleaner_configuration_widens_the_window(table_of: Maker) -> None:
    path = table_of(TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    table = _open(path)
    # 12 retained commits: the cleaner keeps commits[24:], so 11 after it plus 2 stay: 13..18.
    wide = plan_archival(
        table, ArchivalPolicy.from_options({**OPTIONS, "hoodie.cleaner.commits.retained": "12"})
    )
    assert wide is not None and (wide.min_instants_to_keep, wide.max_instants_to_keep) == (13, 18)
    assert len(wide.instants) == 36 - 13
    by_hours = {
        **OPTIONS,
        "hoodie.cleaner.policy": "KEEP_LATEST_BY_HOURS",
        "hoodie.cleaner.hours.retained": "24",
    }
    assert plan_archival(table, ArchivalPolicy.from_options(by_hours)) is None  # every commit is recent
    recent = {**by_hours, "hoodie.cleaner.hours.retained": "0"}
    plan = plan_archival(table, ArchivalPolicy.from_options(recent))
    assert plan is not None and len(plan.instants) == 26


def test_compaction_trigger_keeps_the_delta_commits_it_counts(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.NINE)
    commits = _commits(path)
    compaction = commits[COMPACT_AFTER + 1]
    # 20 delta commits since the compaction, fewer than a trigger of 21: the compaction stays.
    options = {**OPTIONS, "hoodie.compact.inline.max.delta.commits": "21"}
    plan = plan_archival(_open(path), ArchivalPolicy.from_options(options))
    assert plan is not None and plan.requested_times == commits[: COMPACT_AFTER + 1]
    assert plan.retained_from["compactionTrigger"] == compaction
    # A time-based trigger does not count delta commits.
    timed = {**options, "hoodie.compact.inline.trigger.strategy": "TIME_ELAPSED"}
    plan = plan_archival(_open(path), ArchivalPolicy.from_options(timed))
    assert plan is not None and len(plan.instants) == 27


# -- the LSM history over several runs; crash safety ---------------------------------------------


def test_repeated_archival_merges_history_levels(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)
    first = _archive(path, **{"hoodie.timeline.compaction.batch.size": "2"})
    writer = HoodieWriter(_open(path))
    for n in range(6):
        writer.upsert(_rows([n], 100 + n))
    commits = _commits(path)
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0], keep[-1]])
    second = _archive(path, **{"hoodie.timeline.compaction.batch.size": "2"})
    assert second == commits[:6]
    table = _open(path)
    _, manifest = latest_manifest(table.fileio, table.paths)
    assert manifest.file_names() == [f"{first[0]}_{second[-1]}_1.parquet"]
    assert _archived(path).requested_times() == first + second
    assert ReaderState.of(path, [keep[0], keep[-1]]) == before


def _crash(path: Path, point: str) -> None:
    script = (
        "import sys\n"
        "from hoodie.services.archival import execute_archival\n"
        "from hoodie.services.base import ServiceContext\n"
        "from hoodie.table import HoodieTable\n"
        f"execute_archival(ServiceContext(HoodieTable.open(sys.argv[1]), options={OPTIONS!r}))\n"
    )
    env = {**os.environ, "HTS_CRASH_AT": point, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script, str(path)], env=env, cwd=REPO, check=False)
    assert done.returncode == 97


@pytest.mark.parametrize(
    ("version", "point"),
    [
        (TableVersion.EIGHT, "archival.after_archive_write"),
        (TableVersion.EIGHT, "archival.mid_delete"),
        (TableVersion.NINE, "archival.before_history_compaction"),
        (TableVersion.SIX, "archival.after_archive_write"),
        (TableVersion.SIX, "archival.mid_delete"),
    ],
)
def test_a_crashed_archival_reads_the_same_and_the_next_run_finishes(
    table_of: Maker, version: TableVersion, point: str
) -> None:
    path = table_of(TableType.MERGE_ON_READ, version)
    commits = _commits(path)
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0]])
    _crash(path, point)
    assert ReaderState.of(path, [keep[0]]) == before
    if point != "archival.before_history_compaction":
        execute_archival(_ctx(path))
    assert _commits(path) == keep
    assert _archived(path).requested_times() == commits[:-10]  # each archived instant once
    assert ReaderState.of(path, [keep[0]]) == before


def test_a_write_completed_after_the_metadata_tables_latest_compaction_stays(table_of: Maker) -> None:
    """Hudi keeps every data write that completed after the metadata table's latest compaction
    was requested, and all that follows it, although it was requested before that compaction."""
    import datetime as dt

    from hoodie.metadata.table import open_metadata_table
    from hoodie.timeline.instant_time import format_instant_time, parse_instant_time

    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)
    policy = ArchivalPolicy.from_options(OPTIONS)
    table = _open(path)
    baseline = plan_archival(table, policy)
    assert baseline is not None
    archivable = [i.requested_time for i in baseline.instants if i.action in ("commit", "deltacommit")]
    mdt = open_metadata_table(table).reload()
    compacted_at = [i.requested_time for i in mdt.completed() if i.action is Action.COMMIT][-1]
    late = archivable[-1]
    assert late < compacted_at  # the window, not the metadata table, bounded the plan before
    (done,) = (path / ".hoodie" / "timeline").glob(f"{late}_*.deltacommit")
    moment = parse_instant_time(compacted_at, table.tz) + dt.timedelta(milliseconds=1)
    after = format_instant_time(moment, table.tz)
    done.rename(done.with_name(f"{late}_{after}.deltacommit"))

    plan = plan_archival(_open(path), policy)
    assert plan is not None
    writes = [i.requested_time for i in plan.instants if i.action in ("commit", "deltacommit")]
    assert writes == archivable[:-1]
    assert plan.retained_from["metadataTableLatestCompaction"] == late
