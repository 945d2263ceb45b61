"""Rollbacks and restores carry into the metadata table as Apache Hudi 1.x does: the metadata
table's deltacommit of a rolled-back instant is rolled back by a metadata-table rollback, and a
restore restores the metadata table to the savepoint and syncs it with storage. After each, the
metadata table lists exactly the committed files on storage, its column stats and record index
equal a recomputation, and hudi-rs (listing files through the metadata table) reads what we read."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError
from hoodie.metadata.policy import MetadataTablePolicy
from hoodie.metadata.services import maintain_metadata_table
from hoodie.metadata.table import MetadataTable, open_metadata_table
from hoodie.models.clean import CleaningPolicy
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import CleanPolicy, execute_clean, schedule_clean
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.indexing import execute_indexing, schedule_indexing
from hoodie.services.restore import restore_to_savepoint, schedule_restore
from hoodie.services.rollback import rollback, schedule_rollback
from hoodie.services.savepoint import create_savepoint
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from tests.services.test_indexing import BUILD, _check_column_stats, _check_record_index, _hudi_rs
from tests.tables import Killed, KilledWriter, new_table, rows

ONE_DELTA = dataclasses.replace(MetadataTablePolicy.from_options({}), max_delta_commits=1)
"""Metadata-table services that compact after every deltacommit."""


def _open(path: Path) -> HoodieTable:
    return HoodieTable.open(str(path))


def _indexed_table(path: Path, table_type: TableType, version: TableVersion) -> HoodieTable:
    """A table with files, column_stats, partition_stats, bloom_filters and record_index."""
    table = new_table(path, table_type=table_type, version=version)
    HoodieWriter(table).insert(rows(range(12), 1))
    ctx = ServiceContext(_open(path), options=BUILD)
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, LocalRunner())
    return _open(path)


def _snapshot(path: Path) -> pa.Table:
    return TableReader(_open(path)).snapshot()


def _rows(data: pa.Table) -> list[str]:
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _storage(path: Path, table: HoodieTable) -> dict[str, dict[str, int]]:
    """Partition -> {file: size} of the data files on storage whose instant completed."""
    timeline = table.reload()
    out: dict[str, dict[str, int]] = {}
    for partition in sorted(p.name for p in path.iterdir() if p.is_dir() and p.name != ".hoodie"):
        for f in (path / partition).iterdir():
            if f.name.startswith(".hoodie_partition"):
                continue
            instant = f.name.split("_")[1].split(".")[0] if f.name.startswith(".") else f.stem.split("_")[-1]
            if timeline.is_completed(instant):
                out.setdefault(partition, {})[f.name] = f.stat().st_size
    return out


def _check_consistent(path: Path) -> None:
    """The metadata table lists the committed files on storage, its column stats and record index
    equal a recomputation, and hudi-rs reads through it what we read."""
    table = _open(path)
    listed = {
        p: files for p, files in MetadataTable.open(table, table.reload()).list_files().items() if files
    }
    assert listed == _storage(path, table)
    _check_column_stats(table)
    ours = _snapshot(path)
    _check_record_index(table, ours)
    assert _rows(ours) == _rows(_hudi_rs(path))


@pytest.mark.parametrize("version", [TableVersion.EIGHT, TableVersion.NINE])
@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_restore_restores_the_metadata_table(
    tmp_path: Path, version: TableVersion, table_type: TableType
) -> None:
    path = tmp_path / "t"
    _indexed_table(path, table_type, version)
    writer = HoodieWriter(_open(path))
    savepoint = writer.upsert(rows(range(0, 12, 2), 2)).instant.requested_time
    create_savepoint(ServiceContext(_open(path)))
    at_savepoint = _rows(_snapshot(path))
    _check_consistent(path)
    listed_at_savepoint = {(p, n) for p, files in _storage(path, _open(path)).items() for n in files}
    mdt_before = {i.requested_time for i in open_metadata_table(_open(path)).reload()}

    # After the savepoint: writes, a compaction, a clean of files older than the savepoint (the
    # restored metadata table lists them again: the sync removes them), a metadata-table
    # compaction (rolled back by the restore) and a failed write.
    writer.upsert(rows([1, 2, 3, 30, 31], 3))
    writer.delete(rows([4, 5], 4).select(["id", "ts", "p"]))
    ctx = ServiceContext(_open(path))
    if table_type is TableType.MERGE_ON_READ:
        compaction = schedule_compaction(ctx, CompactionPolicy())
        assert compaction is not None and compaction.instant_time is not None
        execute_compaction(ctx, compaction.instant_time, LocalRunner())
    writer.upsert(rows([0, 6, 7], 5))
    clean = schedule_clean(
        ctx, CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    )
    if table_type is TableType.COPY_ON_WRITE:  # MOR: the older slices are the savepoint's
        assert clean is not None and clean.instant_time is not None
        execute_clean(ctx, clean.instant_time, LocalRunner())
    assert maintain_metadata_table(ServiceContext(_open(path)), policy=ONE_DELTA)["compaction"] is not None
    with pytest.raises(Killed):
        KilledWriter(_open(path)).upsert(rows([8, 9, 50], 6))
    assert _rows(_snapshot(path)) != at_savepoint
    _check_consistent(path)

    restored = restore_to_savepoint(ServiceContext(_open(path)), None, LocalRunner())
    assert restored.details["savepoint"] == savepoint
    assert _rows(_snapshot(path)) == at_savepoint
    _check_consistent(path)
    if table_type is TableType.COPY_ON_WRITE:  # the sync dropped the files cleaned after the savepoint
        stored = {(p, n) for p, files in _storage(path, _open(path)).items() for n in files}
        assert listed_at_savepoint - stored

    # The metadata table went back to the savepoint by a restore of its own, then took one sync
    # deltacommit at a time no data instant has.
    mdt_tl = open_metadata_table(_open(path)).reload()
    (mdt_restore,) = mdt_tl.actions(Action.RESTORE)
    assert mdt_restore.is_completed
    after = [i for i in mdt_tl if i.requested_time not in mdt_before]
    syncs = [i for i in after if i.action is Action.DELTA_COMMIT]
    assert len(syncs) == 1 and syncs[0].is_completed and syncs[0].requested_time not in _open(path).reload()
    assert not mdt_tl.completed().actions(Action.COMMIT).after(savepoint), "post-savepoint compaction undone"

    # The table takes writes again, and the metadata table stays in step.
    HoodieWriter(_open(path)).upsert(rows([1, 60], 7))
    _check_consistent(path)


def test_rollback_rolls_back_the_metadata_table_deltacommit(tmp_path: Path) -> None:
    """Hudi 1.x: the metadata table's deltacommit of the rolled-back instant is rolled back with a
    metadata-table rollback at the data rollback's time; no deltacommit records the rollback."""
    path = tmp_path / "t"
    _indexed_table(path, TableType.MERGE_ON_READ, TableVersion.NINE)
    writer = HoodieWriter(_open(path))
    writer.upsert(rows(range(0, 12, 2), 2))
    before = _rows(_snapshot(path))
    latest = writer.upsert(rows([1, 2, 40], 3)).instant.requested_time
    mdt_path = Path(open_metadata_table(_open(path)).base_path)

    def written() -> set[str]:
        return {
            f.name for f in mdt_path.rglob(f"*{latest}*") if ".hoodie" not in f.relative_to(mdt_path).parts
        }

    assert written(), "the deltacommit wrote log files to the metadata table"

    done = rollback(ServiceContext(_open(path)), latest, LocalRunner())
    rb = done.instant.requested_time
    mdt_tl = open_metadata_table(_open(path)).reload()
    assert mdt_tl.get(latest) is None
    mdt_rb = mdt_tl.get(rb, Action.ROLLBACK)
    assert mdt_rb is not None and mdt_rb.is_completed
    assert mdt_tl.get(rb, Action.DELTA_COMMIT) is None
    assert not written()
    assert _rows(_snapshot(path)) == before
    _check_consistent(path)

    # A write that died before reaching the metadata table: nothing to undo there. (One that died
    # after: test_crash_safety.test_crash_between_metadata_update_and_completion.)
    with pytest.raises(Killed):
        KilledWriter(_open(path)).upsert(rows([3, 41], 4))
    failed = _open(path).reload().pending().writes().instants[0].requested_time
    (path / ".hoodie" / ".heartbeat" / failed).unlink(missing_ok=True)
    mdt_instants = len(open_metadata_table(_open(path)).reload())
    rollback(ServiceContext(_open(path)), failed, LocalRunner())
    assert _open(path).reload().get(failed) is None
    assert len(open_metadata_table(_open(path)).reload()) == mdt_instants
    _check_consistent(path)


def test_rollback_of_a_commit_the_metadata_table_compacted_is_refused(tmp_path: Path) -> None:
    """Its update sits in a compacted base file: Hudi refuses (restore instead), and so do we,
    before anything is written."""
    path = tmp_path / "t"
    table = new_table(path, table_type=TableType.COPY_ON_WRITE, version=TableVersion.EIGHT)
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    latest = writer.upsert(rows(range(3), 2)).instant.requested_time
    assert maintain_metadata_table(ServiceContext(_open(path)), policy=ONE_DELTA)["compaction"] is not None
    timeline_dir = path / ".hoodie" / "timeline"
    before = sorted(p.name for p in timeline_dir.iterdir())
    with pytest.raises(TableServiceError, match="already merged its update"):
        schedule_rollback(ServiceContext(_open(path)), latest)
    assert sorted(p.name for p in timeline_dir.iterdir()) == before
    assert _open(path).reload().get(latest).is_completed  # type: ignore[union-attr]


def test_restore_refused_when_the_metadata_table_cannot_follow(tmp_path: Path) -> None:
    """A metadata table built after the savepoint cannot go back to it: refused, naming why,
    before anything is written."""
    path = tmp_path / "t"
    table = new_table(path, metadata_table=False)
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(6), 1)).instant.requested_time
    create_savepoint(ServiceContext(_open(path)), first)
    writer.upsert(rows(range(3), 2))
    ctx = ServiceContext(_open(path), options={"hoodie.metadata.index.column.stats.enable": "true"})
    scheduled = schedule_indexing(ctx)  # builds files, then column stats: both after the savepoint
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, LocalRunner())
    timeline_dir = path / ".hoodie" / "timeline"
    before = sorted(p.name for p in timeline_dir.iterdir())
    with pytest.raises(TableServiceError, match=f"no completed deltacommit {first}"):
        schedule_restore(ServiceContext(_open(path)), first)
    assert sorted(p.name for p in timeline_dir.iterdir()) == before
    assert not list(_open(path).reload().actions(Action.RESTORE).instants)


def test_a_restore_killed_after_the_metadata_table_was_restored_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process dies after the metadata table was restored and synced, before the data restore
    completed: running the restore again restores the metadata table again (rolling back the
    first sync) and completes; both tables are consistent."""
    import hoodie.services.restore as restore_module

    path = tmp_path / "t"
    _indexed_table(path, TableType.COPY_ON_WRITE, TableVersion.NINE)
    writer = HoodieWriter(_open(path))
    writer.upsert(rows(range(0, 12, 2), 2))
    create_savepoint(ServiceContext(_open(path)))
    at_savepoint = _rows(_snapshot(path))
    writer.upsert(rows([1, 2, 30], 3))

    restore_mdt = restore_module.restore_metadata_table

    def dies_after(ctx: ServiceContext, savepoint: str) -> object:
        restore_mdt(ctx, savepoint)
        raise Killed

    monkeypatch.setattr(restore_module, "restore_metadata_table", dies_after)
    scheduled = schedule_restore(ServiceContext(_open(path)))
    assert scheduled.instant_time is not None
    with pytest.raises(Killed):
        restore_module.execute_restore(ServiceContext(_open(path)), scheduled.instant_time, LocalRunner())
    assert _open(path).reload().get(scheduled.instant_time).is_inflight  # type: ignore[union-attr]
    monkeypatch.setattr(restore_module, "restore_metadata_table", restore_mdt)

    restore_module.execute_restore(ServiceContext(_open(path)), scheduled.instant_time, LocalRunner())
    assert _open(path).reload().get(scheduled.instant_time).is_completed  # type: ignore[union-attr]
    assert _rows(_snapshot(path)) == at_savepoint
    _check_consistent(path)
    HoodieWriter(_open(path)).upsert(rows([3, 70], 4))
    _check_consistent(path)


def test_a_rollback_killed_after_the_metadata_table_rollback_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed once while the metadata table's rollback is inflight and once after it completed,
    before the data rollback did: each next run finishes what is left, and both tables agree."""
    import hoodie.services.rollback as rollback_module

    path = tmp_path / "t"
    _indexed_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    writer = HoodieWriter(_open(path))
    before = _rows(_snapshot(path))
    latest = writer.upsert(rows([1, 2, 40], 2)).instant.requested_time
    ctx = ServiceContext(_open(path))
    scheduled = schedule_rollback(ctx, latest)
    assert scheduled.instant_time is not None
    rb = scheduled.instant_time

    real_execute = rollback_module.execute_rollback

    def mdt_dies_before_completing(
        mctx: ServiceContext, rollback_time: str, runner: object, **kw: object
    ) -> object:
        if mctx.table.is_metadata_table:
            monkeypatch.setattr(rollback_module, "_finish", _killed)
        return real_execute(mctx, rollback_time, runner, **kw)  # type: ignore[arg-type]

    def _killed(*args: object, **kwargs: object) -> None:
        raise Killed

    monkeypatch.setattr(rollback_module, "execute_rollback", mdt_dies_before_completing)
    with pytest.raises(Killed):
        real_execute(ServiceContext(_open(path)), rb, LocalRunner())
    monkeypatch.undo()
    mdt_rb = open_metadata_table(_open(path)).reload().get(rb, Action.ROLLBACK)
    assert mdt_rb is not None and mdt_rb.is_inflight

    real_rollback_mdt = rollback_module.rollback_metadata_commit

    def data_dies_after(ctx: ServiceContext, target: str, rollback_time: str) -> object:
        real_rollback_mdt(ctx, target, rollback_time)
        raise Killed

    monkeypatch.setattr(rollback_module, "rollback_metadata_commit", data_dies_after)
    with pytest.raises(Killed):
        rollback_module.execute_rollback(ServiceContext(_open(path)), rb, LocalRunner())
    monkeypatch.undo()
    assert open_metadata_table(_open(path)).reload().get(rb, Action.ROLLBACK).is_completed  # type: ignore[union-attr]
    assert _open(path).reload().get(rb, Action.ROLLBACK).is_inflight  # type: ignore[union-attr]

    rollback_module.execute_rollback(ServiceContext(_open(path)), rb, LocalRunner())
    assert _open(path).reload().get(rb, Action.ROLLBACK).is_completed  # type: ignore[union-attr]
    assert _open(path).reload().get(latest) is None
    assert _rows(_snapshot(path)) == before
    _check_consistent(path)


def test_restore_of_a_version_6_table_with_a_metadata_table_is_refused(tmp_path: Path) -> None:
    """hts keeps metadata tables of versions 8 and 9 only: refused before any rollback runs."""
    from hoodie.config.table_config import update_table_properties

    path = tmp_path / "t"
    table = new_table(path, version=TableVersion.SIX, metadata_table=False)
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(6), 1)).instant.requested_time
    create_savepoint(ServiceContext(_open(path)), first)
    later = writer.upsert(rows(range(3), 2)).instant.requested_time
    update_table_properties(table.fileio, table.paths.meta, {"hoodie.table.metadata.partitions": "files"})
    timeline_dir = path / ".hoodie"
    before = sorted(p.name for p in timeline_dir.iterdir())
    with pytest.raises(TableServiceError, match="table version 6 has a metadata table"):
        schedule_restore(ServiceContext(_open(path)), first)
    assert sorted(p.name for p in timeline_dir.iterdir()) == before
    assert _open(path).reload().get(later).is_completed  # type: ignore[union-attr]


def test_restore_refused_when_a_partition_was_built_after_the_savepoint(tmp_path: Path) -> None:
    """A partition built after the savepoint, here at a regular instant time as Hudi's CREATE
    INDEX may build one: restoring would roll its build back under the table's properties."""
    from hoodie.metadata.init import build_partition, set_metadata_partitions
    from tests.tables import define_secondary_index

    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path))
    first = writer.insert(rows(range(6), 1)).instant.requested_time
    create_savepoint(ServiceContext(_open(path)), first)
    writer.upsert(rows(range(3), 2))
    table = define_secondary_index(path, "v_idx", "v")
    ctx = ServiceContext(table)
    build_partition(table, "secondary_index_v_idx", {}, ctx.new_instant_time(), ctx.new_instant_time)
    set_metadata_partitions(table, add=("secondary_index_v_idx",))
    timeline_dir = path / ".hoodie" / "timeline"
    before = sorted(p.name for p in timeline_dir.iterdir())
    with pytest.raises(TableServiceError, match=r"built after the savepoint .*secondary_index_v_idx"):
        schedule_restore(ServiceContext(_open(path)), first)
    assert sorted(p.name for p in timeline_dir.iterdir()) == before
