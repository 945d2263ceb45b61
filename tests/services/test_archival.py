"""Archival: the active timeline shrinks to Hudi's keep window, the archived instants read back with
their original payloads, and every reader (ours and hudi-rs, snapshot and time travel, file slicing)
sees the same table as before. Pending instants, the last clean's retained commits and savepoints
bound what is archived, and so does the metadata table's latest compaction; a dry run writes
nothing.

The tables come from ``tests/services/archival_support.py``.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.models.clean import ActionInstant, CleanerPlan, CleanMetadata
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.commit import CommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.models.index import IndexPlan
from hoodie.models.rollback import InstantInfo, RollbackMetadata, RollbackPlan
from hoodie.models.savepoint import SavepointMetadata
from hoodie.services.archival import (
    ArchivalPolicy,
    ArchivalService,
    execute_archival,
    keep_window,
    plan_archival,
    schedule_archival,
)
from hoodie.services.base import ServiceContext, service_named
from hoodie.timeline.archived_instant import InstantFiles
from hoodie.timeline.history import latest_manifest
from hoodie.timeline.instant import Action, Instant, State
from tests.conftest import hudi_rs_rows
from tests.services.archival_support import (
    COMPACT_AFTER,
    OPTIONS,
    UPSERTS,
    Maker,
    ReaderState,
    archival_context,
    archived_timeline,
    commit_times,
    file_slices,
    open_table,
    our_rows,
    run_archival,
)

VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]
TYPES = [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ]


def _timeline_names(path: Path) -> list[str]:
    table = open_table(path)
    return sorted(e.name for e in table.fileio.list_dir(table.paths.timeline) if not e.is_dir)


def _new_time(path: Path) -> str:
    return ServiceContext(open_table(path)).new_instant_time()


def _after(ts: str, millis: int = 1) -> str:
    return str(int(ts) + millis)


def _complete_instant(path: Path, instant: Instant, plan: bytes, metadata: bytes) -> None:
    """Write requested (unless a savepoint), inflight and completed files of ``instant``."""
    table = open_table(path)
    tl = table.timeline
    if instant.action is Action.SAVEPOINT:
        pending = tl.create_inflight(Instant(instant.requested_time, instant.action, State.INFLIGHT))
    else:
        pending = tl.transition_to_inflight(tl.create_requested(instant, plan))
    completion = _after(instant.requested_time, 2) if table.paths.layout >= 2 else None
    table.reload().complete(pending, metadata, completion)


def _clean(path: Path, at: str, retain: str) -> tuple[CleanerPlan, CleanMetadata]:
    version = open_table(path).table_version
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
    version = open_table(path).table_version
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
    version = open_table(path).table_version
    _complete_instant(path, Instant(commit, Action.SAVEPOINT, State.INFLIGHT), b"", meta.to_bytes(version))


# -- the keep window; payloads; readers ---------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", TYPES)
def test_archival_keeps_the_window_and_every_reader_sees_the_same_table(
    table_of: Maker, table_type: TableType, version: TableVersion
) -> None:
    path = table_of(table_type, version)
    table = open_table(path)
    tl = table.timeline
    commits = commit_times(path)
    assert len(commits) == UPSERTS + 1 + (table_type is TableType.MERGE_ON_READ)
    originals = {ts: InstantFiles.read(tl, ts) for ts in commits}
    metadata = {ts: table.commit_metadata(tl.get(ts)) for ts in commits}  # type: ignore[arg-type]
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0], keep[4], keep[-1]])

    archived = run_archival(path)

    assert archived == commits[:-10]
    assert commit_times(path) == keep
    names = _timeline_names(path)
    assert not [n for n in names if n[:17] in set(archived)]  # every state file went
    assert ReaderState.of(path, [keep[0], keep[4], keep[-1]]) == before
    history = archived_timeline(path)
    assert history.requested_times() == archived
    for ts in archived:
        got, original = history.get(ts), originals[ts]
        assert got is not None and got.action is original.instant.action
        if version >= TableVersion.EIGHT:
            assert got.completion_time == original.instant.completion_time
            assert open_table(path).archived_completion_time(ts) == original.instant.completion_time
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
    assert schedule_archival(archival_context(path), ArchivalPolicy.from_options(OPTIONS)) is None
    assert ArchivalService().pending(open_table(path), open_table(path).timeline) == []


@pytest.mark.parametrize("version", [TableVersion.EIGHT, TableVersion.NINE])
def test_completion_times_from_the_history_keep_slicing_by_completion_time(
    table_of: Maker, version: TableVersion
) -> None:
    path = table_of(TableType.MERGE_ON_READ, version)
    table = open_table(path)
    commits = commit_times(path)
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
    slices = file_slices(path)
    assert any(
        s[2] == compaction.requested_time and any(late.requested_time in n for n in s[4]) for s in slices
    )
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0]])

    archived = run_archival(path)

    assert late.requested_time in archived and compaction.requested_time in archived
    assert open_table(path).archived_completion_time(late.requested_time) == finished
    assert file_slices(path) == slices
    assert ReaderState.of(path, [keep[0]]) == before


def test_dry_run_writes_nothing(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)

    def listing() -> list[tuple[str, int, int]]:
        return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in (path / ".hoodie").rglob("*"))

    before = listing()
    commits = commit_times(path)
    dry = service_named("archival").schedule(archival_context(path), dry_run=True)
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
    commits = commit_times(path)
    scheduled = schedule_archival(archival_context(path), ArchivalPolicy.from_options(OPTIONS))
    assert scheduled is not None and scheduled.instant_time == commits[25]
    first = execute_archival(archival_context(path), commits[9])
    assert first.details["archived_instants"] == commits[:10]
    second = execute_archival(archival_context(path))  # 26 commits > 15: down to 10 again
    assert second.details["archived_instants"] == commits[10:26]
    assert archived_timeline(path).requested_times() == commits[:26]
    with pytest.raises(TableServiceError, match="nothing to archive"):
        execute_archival(archival_context(path))


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
    version = open_table(path).table_version
    payload = {
        Action.COMPACTION: CompactionPlan(operations=[]).to_bytes(version),
        Action.LOG_COMPACTION: CompactionPlan(operations=[]).to_bytes(version),
        Action.CLUSTERING: RequestedReplaceMetadata(operation_type="CLUSTER").to_bytes(version),
        Action.REPLACE_COMMIT: RequestedReplaceMetadata().to_bytes(version),
        Action.INDEXING: IndexPlan().to_bytes(version),
    }.get(action, b"")
    tl = open_table(path).timeline
    requested = tl.create_requested(Instant(at, action, State.REQUESTED), payload)
    if state is State.INFLIGHT:
        tl.transition_to_inflight(requested)


@pytest.mark.parametrize(("table_type", "version", "action", "state"), PENDING)
def test_pending_instants_and_what_follows_them_stay(
    table_of: Maker, table_type: TableType, version: TableVersion, action: Action, state: State
) -> None:
    path = table_of(table_type, version)
    commits = commit_times(path)
    pending_at = _after(commits[5])
    _add_pending(path, pending_at, action, state)
    before = _timeline_names(path)

    # Without a commit-retaining cleaner policy the window stays 10..15 (see the next test).
    archived = run_archival(path, **{"hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS"})

    if action is Action.INDEXING:  # hts's guard: nothing at or after any pending instant
        assert archived == commits[:6]
    else:  # Hudi: the last completed commit before the earliest pending write stays too
        assert archived == commits[:5]
    after = _timeline_names(path)
    assert [n for n in before if n.startswith(pending_at)] == [n for n in after if n.startswith(pending_at)]
    assert commit_times(path) == commits[len(archived) :]


def test_a_pending_write_holds_back_the_cleaners_retained_commit(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)
    commits = commit_times(path)
    _add_pending(path, _after(commits[5]), Action.DELTA_COMMIT, State.INFLIGHT)
    table = open_table(path)
    # KEEP_LATEST_COMMITS cannot retain past a pending write: it retains from commits[5], so the
    # 31 commits after it plus 2 stay, and the window grows to 33..38; nothing is archived.
    assert keep_window(table, table.timeline, ArchivalPolicy.from_options(OPTIONS)) == (33, 38)
    assert service_named("archival").schedule(archival_context(path)) is None


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_cleans_and_rollbacks_follow_hudis_rule_per_layout(table_of: Maker, version: TableVersion) -> None:
    path = table_of(TableType.COPY_ON_WRITE, version)
    commits = commit_times(path)
    early_plan, early_meta = _clean(path, _after(commits[2]), commits[1])
    rollback_meta = _rollback(path, _after(commits[9], 2), _after(commits[9]))
    _clean(path, _new_time(path), commits[30])
    before = hudi_rs_rows(path)

    archived = run_archival(path)

    history = archived_timeline(path)
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
    commits = commit_times(path)
    _clean(path, _after(commits[2]), commits[1])
    _clean(path, _new_time(path), commits[7])
    archived = run_archival(path)
    if version >= TableVersion.EIGHT:
        assert archived == sorted([*commits[:7], _after(commits[2])])
    else:
        assert archived == commits[:7]
    plan = plan_archival(open_table(path), ArchivalPolicy.from_options(OPTIONS))
    assert plan is None  # blocked until the next clean moves its retained commit on


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_savepoints_stop_archival_unless_archiving_beyond_them(
    table_of: Maker, version: TableVersion
) -> None:
    path = table_of(TableType.COPY_ON_WRITE, version)
    commits = commit_times(path)
    _savepoint(path, commits[5])
    shutil.copytree(path, path.with_name("beyond"))
    beyond = path.with_name("beyond")

    assert run_archival(path) == commits[:5]
    assert commit_times(path) == commits[5:]
    assert any(".savepoint" in n for n in _timeline_names(path))

    latest = hudi_rs_rows(beyond), our_rows(beyond)
    archived = run_archival(beyond, **{"hoodie.archive.beyond.savepoint": "true"})
    assert archived == commits[:5] + commits[6:27]
    assert commit_times(beyond) == [commits[5], *commits[27:]]
    assert (hudi_rs_rows(beyond), our_rows(beyond)) == latest


def test_a_write_completed_after_the_metadata_tables_latest_compaction_stays(table_of: Maker) -> None:
    """Hudi keeps every data write that completed after the metadata table's latest compaction
    was requested, and all that follows it, although it was requested before that compaction."""
    import datetime as dt

    from hoodie.metadata.table import open_metadata_table
    from hoodie.timeline.instant_time import format_instant_time, parse_instant_time

    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)
    policy = ArchivalPolicy.from_options(OPTIONS)
    table = open_table(path)
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

    plan = plan_archival(open_table(path), policy)
    assert plan is not None
    writes = [i.requested_time for i in plan.instants if i.action in ("commit", "deltacommit")]
    assert writes == archivable[:-1]
    assert plan.retained_from["metadataTableLatestCompaction"] == late
