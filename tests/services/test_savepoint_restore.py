"""Savepoints list the files of the latest slices as Hudi does and protect them; restore rolls back
everything after a savepoint (completed and pending, newest first) and the table reads, for us and
for hudi-rs, exactly as it did at the savepoint."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import read_blocks
from hoodie.models.codec import load_schema
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.restore import execute_restore, restore_to_savepoint, schedule_restore
from hoodie.services.rollback import schedule_rollback
from hoodie.services.savepoint import (
    COMMENTS_OPTION,
    INSTANT_OPTION,
    USER_OPTION,
    create_savepoint,
    delete_savepoint,
    savepoint_metadata,
    savepointed_files,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.transaction.heartbeat import Heartbeat, HeartbeatConfig
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import Killed, KilledWriter, new_table, rows

VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]
TYPES = [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ]


def _table(path: Path, version: TableVersion, table_type: TableType) -> tuple[HoodieTable, list[str]]:
    """A table after an insert and an upsert; returns it and the two instants. Without a
    metadata table (v6 has none; restores with one: test_metadata_undo)."""
    table = new_table(path, table_type=table_type, version=version, metadata_table=False)
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(12), 1)).instant.requested_time
    second = writer.upsert(rows(range(0, 12, 2), 2)).instant.requested_time
    return HoodieTable.open(str(path)), [first, second]


def _snapshot(path: Path, as_of: str | None = None) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot(as_of)
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _data_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".hoodie" not in p.parts}


def _decode(table: HoodieTable, ts: str, state: State, action: Action, record: str) -> dict[str, Any]:
    tl = table.reload()
    name = tl.state_file(ts, state, action)
    assert name is not None
    data = Path(table.paths.timeline, name).read_bytes()
    (out,) = list(fastavro.reader(io.BytesIO(data), reader_schema=load_schema(record, table.table_version)))
    assert isinstance(out, dict)
    return out


def _latest_files(table: HoodieTable, as_of: str | None = None) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in table.file_system_view(as_of, table.reload()).latest_file_slices():
        names = out.setdefault(s.partition_path, set())
        names.update([s.base_file.name] if s.base_file else [])
        names.update(lf.name for lf in s.log_files)
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", TYPES)
def test_savepoint_lists_the_latest_slices(
    tmp_path: Path, version: TableVersion, table_type: TableType
) -> None:
    path = tmp_path / "t"
    table, (_, second) = _table(path, version, table_type)
    options = {USER_OPTION: "ops", COMMENTS_OPTION: "before the migration"}
    started_ms = time.time_ns() // 1_000_000
    scheduled = service_named("savepoint").schedule(ServiceContext(table, options=options))
    assert scheduled is not None and scheduled.instant_time == second
    meta = _decode(table, second, State.COMPLETED, Action.SAVEPOINT, "HoodieSavepointMetadata")
    assert meta["savepointedBy"] == "ops" and meta["comments"] == "before the migration"
    assert started_ms <= meta["savepointedAt"] <= time.time_ns() // 1_000_000  # epoch millis, as Hudi
    listed = {p: set(m["savepointDataFile"]) for p, m in meta["partitionMetadata"].items()}
    assert listed == _latest_files(table) and all(
        m["partitionPath"] == p for p, m in meta["partitionMetadata"].items()
    )
    tl = table.reload()
    assert tl.get(second).action.completed_action is not Action.SAVEPOINT  # type: ignore[union-attr]
    assert tl.states_of(second, Action.SAVEPOINT) == (State.INFLIGHT, State.COMPLETED)
    # Later writes do not change what the savepoint keeps; clean asks savepointed_files.
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(6), 3))
    kept = {(p, n) for p, names in listed.items() for n in names}
    assert savepointed_files(table) == kept and all((path / p / n).exists() for p, n in kept)
    assert service_named("savepoint").pending(table, table.reload()) == []
    assert delete_savepoint(ServiceContext(table), second) is True
    assert savepointed_files(table) == set() and table.reload().states_of(second, Action.SAVEPOINT) == ()
    assert table.reload().get(second).is_completed  # type: ignore[union-attr]
    assert delete_savepoint(ServiceContext(table), second) is False


def test_savepoint_of_an_earlier_commit_and_refusals(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, (first, _) = _table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE)
    ctx = ServiceContext(table, options={INSTANT_OPTION: first})
    service_named("savepoint").schedule(ctx)
    meta = savepoint_metadata(table, first)
    assert {p: set(m.savepoint_data_file) for p, m in meta.partition_metadata.items()} == _latest_files(
        table, first
    )
    with pytest.raises(TableServiceError, match="already has a savepoint"):
        create_savepoint(ctx, first)
    with pytest.raises(TableServiceError, match="not a completed commit"):
        create_savepoint(ctx, "20000101000000000")
    dry = create_savepoint(ServiceContext(table), dry_run=True)
    latest = table.reload().completed().writes().last()
    assert (
        latest is not None
        and dry.instant_time is None
        and dry.reason == f"savepoint of {latest.requested_time}"
    )
    assert table.reload().states_of(latest.requested_time, Action.SAVEPOINT) == ()


def test_an_inflight_savepoint_left_by_a_crash_is_completed(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, (_, second) = _table(path, TableVersion.NINE, TableType.MERGE_ON_READ)
    table.reload().create_inflight(Instant(second, Action.SAVEPOINT, State.INFLIGHT))
    service = service_named("savepoint")
    assert [i.requested_time for i in service.pending(table, table.reload())] == [second]
    done = service.execute(ServiceContext(table), second, LocalRunner())
    assert done.instant.is_completed and done.instant.completion_time is not None
    assert savepoint_metadata(table, second).savepointed_files() == {
        (p, n) for p, names in _latest_files(table).items() for n in names
    }


def _rolled_back_only(path: Path, name: str, rolled_back: set[str]) -> bool:
    """Whether a log file left by restore holds only blocks of rolled-back instants or rollback blocks."""
    data = (path / name).read_bytes()
    return all(
        (b.is_rollback and b.target_instant_time in rolled_back) or b.instant_time in rolled_back
        for b in read_blocks(data, name)
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", TYPES)
def test_restore_returns_the_table_to_the_savepoint(
    tmp_path: Path, version: TableVersion, table_type: TableType
) -> None:
    path = tmp_path / "t"
    table, (first, second) = _table(path, version, table_type)
    create_savepoint(ServiceContext(table))
    at_savepoint, at_savepoint_rs, files_at_savepoint = _snapshot(path), hudi_rs_rows(path), _data_files(path)
    as_of_first = _snapshot(path, first)
    writer = HoodieWriter(HoodieTable.open(str(path)))
    later = [writer.upsert(rows([1, 2, 3, 30, 31], 3)).instant.requested_time]
    later.append(writer.delete(rows([4, 5], 4).select(["id", "p"])).instant.requested_time)
    if table_type is TableType.MERGE_ON_READ:
        ctx = ServiceContext(HoodieTable.open(str(path)))
        compaction = schedule_compaction(ctx, CompactionPolicy())
        assert compaction is not None and compaction.instant_time is not None
        later.append(execute_compaction(ctx, compaction.instant_time, LocalRunner()).instant.requested_time)
        later.append(writer.upsert(rows([0, 6, 7], 5)).instant.requested_time)
    with pytest.raises(Killed):
        KilledWriter(HoodieTable.open(str(path))).upsert(rows([8, 9, 50], 6))
    failed = HoodieTable.open(str(path)).reload().pending().writes().instants[0].requested_time
    later.append(failed)
    assert _snapshot(path) != at_savepoint

    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table)
    dry = schedule_restore(ctx, dry_run=True)
    assert dry.instant_time is None and not table.reload().actions(Action.RESTORE)
    scheduled = service_named("restore").schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    restore_time = scheduled.instant_time
    plan = _decode(table, restore_time, State.REQUESTED, Action.RESTORE, "HoodieRestorePlan")
    assert plan["savepointToRestoreTimestamp"] == second and plan["version"] == 2
    assert [i["commitTime"] for i in plan["instantsToRollback"]] == list(reversed(later))  # newest first
    assert [i.requested_time for i in service_named("restore").pending(table, table.reload())] == [
        restore_time
    ]

    done = service_named("restore").execute(ctx, restore_time, LocalRunner())
    assert done.instant.is_completed
    assert _snapshot(path) == at_savepoint and hudi_rs_rows(path) == at_savepoint_rs
    assert _snapshot(path, first) == as_of_first  # time travel before the savepoint still works
    tl = table.reload()
    assert [i.requested_time for i in tl.writes()] == [first, second]
    assert tl.get(second, Action.SAVEPOINT).is_completed  # type: ignore[union-attr]
    assert not tl.actions(Action.ROLLBACK)  # the restore's rollbacks live in its metadata only
    meta = _decode(table, restore_time, State.COMPLETED, Action.RESTORE, "HoodieRestoreMetadata")
    assert meta["instantsToRollback"] == list(reversed(later))
    assert [i["commitTime"] for i in meta["restoreInstantInfo"]] == list(reversed(later))
    for ts in later:
        (rollback_meta,) = meta["hoodieRestoreMetadata"][ts]
        assert rollback_meta["commitsRollback"] == [ts]
    extra = _data_files(path) - files_at_savepoint
    assert files_at_savepoint <= _data_files(path)
    if version >= TableVersion.EIGHT or table_type is TableType.COPY_ON_WRITE:
        assert extra == set()  # every file written after the savepoint is gone
    else:  # v6 logs the restored writes appended to stay, cancelled by rollback blocks
        assert extra and all(LogFile.parse(f.rsplit("/", 1)[-1]) is not None for f in extra)
        assert all(_rolled_back_only(path, f, set(later)) for f in extra)
    # The table takes writes again, and both readers agree.
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1, 60], 7))
    assert hudi_rs_rows(path) == _snapshot(path) != at_savepoint


def test_restore_refuses_savepointed_commits_and_live_writers(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, (first, second) = _table(path, TableVersion.EIGHT, TableType.MERGE_ON_READ)
    ctx = ServiceContext(table)
    create_savepoint(ctx, first)
    create_savepoint(ctx, second)
    with pytest.raises(TableServiceError, match="is savepointed"):
        schedule_rollback(ctx, second)
    with pytest.raises(TableServiceError, match="savepointed; delete those savepoints first"):
        schedule_restore(ctx, first)
    assert delete_savepoint(ctx, second)
    with pytest.raises(Killed):
        KilledWriter(HoodieTable.open(str(path))).upsert(rows([1], 3))
    failed = table.reload().pending().writes().instants[0].requested_time
    Heartbeat(table.fileio, table.paths, failed, HeartbeatConfig()).beat()
    with pytest.raises(TableServiceError, match="heartbeat is alive"):
        schedule_restore(ctx, first)
    assert not table.reload().actions(Action.RESTORE)
    (path / ".hoodie" / ".heartbeat" / failed).unlink()
    restored = restore_to_savepoint(ctx, None, LocalRunner())
    assert restored.details["savepoint"] == first and restored.details["rolled_back"] == [failed, second]
    assert _snapshot(path) == _snapshot(path, first) and [
        i.requested_time for i in table.reload().writes()
    ] == [first]
    with pytest.raises(TableServiceError, match="no pending restore"):
        execute_restore(ctx, restored.instant.requested_time, LocalRunner())
