"""Log compaction: the merged log hides nothing and changes nothing. hudi-rs and our reader read the
same snapshot before and after, the old logs stay while readers skip the blocks the new one covers,
a regular compaction afterwards still agrees, and the plan is Hudi's own format."""

from __future__ import annotations

import io
import json
import random
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from hoodie.config.table_config import RecordMergeMode, TableVersion
from hoodie.errors import TableServiceError
from hoodie.file_group.log_block import BlockType, HeaderKey, LogBlock, encode_block
from hoodie.file_group.log_reader import iter_blocks
from hoodie.merge.config import MergeConfig
from hoodie.merge.log_entries import DeleteEntries, MergeSpec
from hoodie.merge.vectorized import LogSurvivors, merge_logs_only, merge_slice
from hoodie.models.codec import load_schema
from hoodie.models.compaction import CompactionPlan
from hoodie.read.log_scanner import scan_log_blocks
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import decode_data_block, decode_delete_block
from hoodie.schema.avro_arrow import avro_to_arrow_schema, encode_avro_block_content
from hoodie.services.base import LocalRunner, Scheduled, ServiceContext, service_named
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.logcompaction import (
    COMPACTOR_CLASS,
    LogCompactionPolicy,
    delete_blocks,
    delete_records,
    execute_log_compaction,
    schedule_log_compaction,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.timeline.instant_time import normalize
from hoodie.write.markers import IOType, WriteMarkers
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import NO_METADATA_TABLE, hudi_rs_rows
from tests.tables import SCHEMA, age_heartbeats, hts, new_table, rows


def _our_table(
    path: Path,
    version: TableVersion,
    block: LogBlockFormat = LogBlockFormat.AVRO,
    merge_mode: RecordMergeMode | None = None,
) -> HoodieTable:
    """Three file groups, each with a base file and many small log writes: upserts that win and
    lose on ordering, ties, commit-time deletes and revivals, deletes with ordering values."""
    table = new_table(path, version=version, merge_mode=merge_mode)
    writer = HoodieWriter(table, options=WriteOptions(log_block_format=block))
    writer.insert(rows(list(range(30)), 1))
    writer.upsert(rows(list(range(0, 30, 2)), 5))
    writer.delete(rows([3, 9], 3).select(["id", "p"]))  # commit-time deletes (no ordering value)
    writer.upsert(rows([1, 30, 31], 4))
    writer.delete(rows([4, 5, 12], 7))  # deletes carrying ordering values
    writer.upsert(rows([3, 5, 6], 2))  # revives 3; loses to the delete of 5 and the update of 6
    writer.upsert(rows([5, 8, 10], 5))  # ties with the earlier update of 8 and 10
    writer.upsert(rows([5, 13], 9))
    return HoodieTable.open(str(path))


def _snapshot(path: Path, *, read_optimized: bool = False) -> list[str]:
    reader = TableReader(HoodieTable.open(str(path)))
    data = reader.read_optimized() if read_optimized else reader.snapshot()
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _log_compact(path: Path, runner: Any = None, options: dict[str, str] | None = None) -> str:
    ctx = ServiceContext(HoodieTable.open(str(path)), options=options or {})
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    execute_log_compaction(ctx, scheduled.instant_time, runner or LocalRunner())
    return scheduled.instant_time


def _plan(scheduled: Scheduled | None) -> CompactionPlan:
    assert scheduled is not None and isinstance(scheduled.plan, CompactionPlan)
    return scheduled.plan


def _log_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob(".*.log.*") if ".hoodie" not in p.parts}


def _block_instants(path: Path, files: set[str]) -> dict[str, set[str]]:
    """Per file id, the instants of the data and delete blocks in ``files``."""
    out: dict[str, set[str]] = {}
    for rel in files:
        file_id = Path(rel).name[1:].split("_", 1)[0]
        for block in iter_blocks((path / rel).read_bytes(), str(path / rel)):
            if block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE):
                assert block.instant_time is not None
                out.setdefault(file_id, set()).add(block.instant_time)
    return out


def _applied_blocks(path: Path) -> dict[str, list[LogBlock]]:
    """Per file id, the log blocks a snapshot read of the latest slice applies."""
    table = HoodieTable.open(str(path))
    view = table.file_system_view()
    return {
        s.file_id: scan_log_blocks(
            table.fileio, table.base_path, s, is_committed=view.is_committed, latest_instant=None
        )
        for s in view.latest_file_slices()
    }


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE])
@pytest.mark.parametrize("block", [LogBlockFormat.AVRO, LogBlockFormat.PARQUET])
def test_log_compaction_keeps_the_snapshot_and_covers_the_old_logs(
    tmp_path: Path, version: TableVersion, block: LogBlockFormat
) -> None:
    path = tmp_path / "t"
    _our_table(path, version, block)
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    old_logs = _log_files(path)
    covered = _block_instants(path, old_logs)
    instant = _log_compact(path, options={"hoodie.logfile.data.block.format": block.value})

    assert _snapshot(path) == before
    assert hudi_rs_rows(path) == before_rs
    new_logs = _log_files(path) - old_logs
    assert old_logs <= _log_files(path) and len(new_logs) == 3  # old logs stay; one new log per group
    # Readers apply only the new log's blocks: every block it stands for is skipped.
    data_type = BlockType.PARQUET_DATA if block is LogBlockFormat.PARQUET else BlockType.AVRO_DATA
    for file_id, blocks in _applied_blocks(path).items():
        assert {Path(b.log_file).name for b in blocks} == {Path(n).name for n in new_logs if file_id in n}
        assert {b.block_type for b in blocks} <= {data_type, BlockType.DELETE}
        for b in blocks:
            assert b.instant_time == instant
            assert list(b.compacted_block_times) == sorted(covered[file_id], key=normalize, reverse=True)
    table = HoodieTable.open(str(path))
    done = table.timeline.get(instant)
    assert done is not None and done.action is Action.DELTA_COMMIT and done.is_completed
    assert table.timeline.state_file(instant, State.REQUESTED) == f"{instant}.logcompaction.requested"
    meta = table.commit_metadata(done)
    assert meta.operation_type == "LOG_COMPACT" and not meta.compacted and meta.schema
    stats = list(meta.write_stats())
    assert {s.path for s in stats} == new_logs
    for s in stats:
        assert s.num_inserts == 0 and s.num_update_writes == s.num_writes
        assert s.log_files is not None and Path(s.path or "").name in s.log_files
        assert s.total_log_files_compacted and s.total_log_records and s.base_file
    assert sum(s.num_deletes or 0 for s in stats) == 3  # 9 (commit-time), 4 and 12 (ts 7)
    # Records keep the commit time of the write that made them.
    assert instant not in set(TableReader(table).snapshot()["_hoodie_commit_time"].to_pylist())

    # A regular compaction afterwards merges the new log onto the base: nothing changes.
    ctx = ServiceContext(HoodieTable.open(str(path)))
    compaction = schedule_compaction(ctx, CompactionPolicy())
    assert compaction is not None and compaction.instant_time is not None
    execute_compaction(ctx, compaction.instant_time, LocalRunner())
    assert _snapshot(path) == before
    assert _snapshot(path, read_optimized=True) == before
    assert hudi_rs_rows(path) == before_rs


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_readers_use_the_merged_log_instead_of_the_logs_it_covers(
    tmp_path: Path, version: TableVersion
) -> None:
    """Rewrite the merged log's records with a lower ordering value: a reader that merged the
    covered blocks as well would still see the originals (higher ordering wins); ours and hudi-rs
    see the rewritten ones, so both skip the covered blocks."""
    path = tmp_path / "t"
    table = new_table(path, version=version)
    writer = HoodieWriter(table)
    writer.insert(rows([0, 3], 1))
    writer.upsert(rows([0], 5))
    writer.upsert(rows([3], 5))
    old_logs = _log_files(path)
    instant = _log_compact(path)
    (merged_log,) = _log_files(path) - old_logs
    rewritten = []
    for block in iter_blocks((path / merged_log).read_bytes(), merged_log):
        assert block.block_type is BlockType.AVRO_DATA and block.schema and instant == block.instant_time
        records = decode_data_block(block, avro_to_arrow_schema(json.loads(block.schema)))
        records = records.set_column(
            records.schema.get_field_index("ts"), "ts", pa.array([3] * records.num_rows, pa.int64())
        )
        content = encode_avro_block_content(records, json.loads(block.schema))
        rewritten.append(encode_block(block.block_type, dict(block.header), content))
    (path / merged_log).write_bytes(b"".join(rewritten))
    for reader_rows in (hudi_rs_rows(path), _snapshot(path)):
        assert len(reader_rows) == 2 and all("'ts': 3" in r and "@5" in r for r in reader_rows)


# The MOR fixtures Apache Hudi wrote whose latest slices still have log files.
WITH_LOGS = [n for n in NO_METADATA_TABLE if "/mor/" in n and "/v9_" not in n]


@pytest.mark.parametrize("name", WITH_LOGS)
def test_log_compaction_of_tables_apache_hudi_wrote(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    instant = _log_compact(path, options={"hoodie.log.compaction.blocks.threshold": "1"})
    assert _snapshot(path) == before and hudi_rs_rows(path) == before_rs
    assert all(b.instant_time == instant for blocks in _applied_blocks(path).values() for b in blocks)


def test_commit_time_ordering(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _our_table(path, TableVersion.NINE, merge_mode=RecordMergeMode.COMMIT_TIME_ORDERING)
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    _log_compact(path)
    assert _snapshot(path) == before and hudi_rs_rows(path) == before_rs
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    values = dict(zip(data["id"].to_pylist(), data["v"].to_pylist(), strict=True))
    assert values["k6"] == "v6@2" and values["k5"] == "v5@9"  # the last write wins, whatever its ts


def test_data_rows_flagged_deleted_become_delete_entries(tmp_path: Path) -> None:
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    path = tmp_path / "t"
    table = new_table(path, version=TableVersion.NINE, schema=schema)
    writer = HoodieWriter(table)
    writer.insert(rows(list(range(9)), 1, schema=schema, _hoodie_is_deleted=False))
    writer.upsert(rows([0, 3], 3, schema=schema, _hoodie_is_deleted=True))
    writer.upsert(rows([3], 4, schema=schema, _hoodie_is_deleted=False))  # revived
    writer.upsert(rows([6], 0, schema=schema, _hoodie_is_deleted=True))  # older than the base row: ignored
    before = _snapshot(path)
    assert len(before) == 8
    instant = _log_compact(path)
    assert _snapshot(path) == before
    assert hudi_rs_rows(path) == before
    entries: dict[str, Any] = {}
    for blocks in _applied_blocks(path).values():
        for b in blocks:
            if b.block_type is BlockType.DELETE and b.instant_time == instant:
                d = decode_delete_block(b, 9)
                entries.update(
                    zip(d.keys, zip(d.ordering_values, d.ordering_classes, strict=True), strict=True)
                )
    assert entries == {"k0": (3, "LongWrapper"), "k6": (0, "LongWrapper")}


def test_a_second_log_compaction_covers_the_first(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _our_table(path, TableVersion.EIGHT)
    first = _log_compact(path)
    # Nothing new since: every slice is one log compaction's output already.
    assert schedule_log_compaction(ServiceContext(HoodieTable.open(str(path))), LogCompactionPolicy()) is None
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([0, 1, 2, 40], 11))
    writer.delete(rows([0, 13], 12))
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    second = _log_compact(path)
    assert _snapshot(path) == before and hudi_rs_rows(path) == before_rs
    latest = HoodieTable.open(str(path)).reload().completed().actions(Action.DELTA_COMMIT)
    newer = [i.requested_time for i in latest if normalize(i.requested_time) > normalize(first)]
    applied = [blocks for blocks in _applied_blocks(path).values() if blocks]
    assert len(applied) == 3
    for blocks in applied:
        assert {b.instant_time for b in blocks} == {second}
        times = list(blocks[0].compacted_block_times)
        assert times[-1] == first and times[:-1] and set(times[:-1]) <= set(newer) - {second}
        assert times == sorted(times, key=normalize, reverse=True)


def test_threshold_and_enable_options(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _our_table(path, TableVersion.EIGHT)
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([0], 12))
    writer.upsert(rows([0], 13))  # k0's group now has six logs
    table = HoodieTable.open(str(path))
    slices = table.file_system_view().latest_file_slices()
    logs = {s.file_id: len(s.log_files) for s in slices if s.log_files}  # new keys made base-only groups
    assert sorted(logs.values()) == [5, 5, 6] and len(slices) == 5

    def planned(options: dict[str, str]) -> set[str]:
        policy = LogCompactionPolicy.from_options(options)
        scheduled = schedule_log_compaction(ServiceContext(table), policy, dry_run=True)
        return {op.file_id or "" for op in _plan(scheduled).operations or ()} if scheduled else set()

    assert planned({}) == set(logs)  # without a threshold: every slice with two logs or blocks
    assert planned({"hoodie.log.compaction.blocks.threshold": "5"}) == set(logs)
    assert planned({"hoodie.log.compaction.blocks.threshold": "6"}) == {f for f, n in logs.items() if n == 6}
    assert planned({"hoodie.log.compaction.blocks.threshold": "7"}) == set()
    assert planned({"hoodie.log.compaction.enable": "false"}) == set()
    for bad in ("five", "0"):
        with pytest.raises(TableServiceError, match="hoodie.log.compaction.blocks.threshold"):
            LogCompactionPolicy.from_options({"hoodie.log.compaction.blocks.threshold": bad})


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_the_plan_decodes_with_hudis_schema(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version)
    scheduled = service_named("logcompaction").schedule(ServiceContext(table))
    assert scheduled is not None and scheduled.instant_time is not None
    folder = path / ".hoodie" / ("timeline" if version >= 8 else "")
    data = (folder / f"{scheduled.instant_time}.logcompaction.requested").read_bytes()
    records = fastavro.reader(io.BytesIO(data), reader_schema=load_schema("HoodieCompactionPlan", version))
    (record,) = [r for r in records if isinstance(r, dict)]
    assert record["version"] == 2 and record["preserveHoodieMetadata"] is True
    hudi_class = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"
    assert record["strategy"]["compactorClassName"] == COMPACTOR_CLASS == hudi_class
    assert record["strategy"]["strategyParams"] == {} and record["extraMetadata"] == {}
    assert len(record["operations"]) == 3
    for op in record["operations"]:
        assert "/" not in op["dataFilePath"] and all("/" not in p for p in op["deltaFilePaths"])
        assert op["baseInstantTime"] and op["metrics"]["TOTAL_LOG_FILES"] == len(op["deltaFilePaths"])
    # Table version 6's plan schema has no missingSchedulePartitions.
    plan = _plan(scheduled)
    expected = plan if version >= 8 else replace(plan, missing_schedule_partitions=None)
    assert CompactionPlan.from_bytes(data, version) == expected
    pending = service_named("logcompaction").pending(table, table.reload())
    assert [i.requested_time for i in pending] == [scheduled.instant_time]


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.NINE)
    before = sorted(str(p) for p in path.rglob("*"))
    dry = service_named("logcompaction").schedule(ServiceContext(table), dry_run=True)
    assert dry is not None and dry.instant_time is None and len(_plan(dry).operations or ()) == 3
    assert dry.plan_json()["strategy"]["compactorClassName"] == COMPACTOR_CLASS
    assert sorted(str(p) for p in path.rglob("*")) == before


def test_tables_it_cannot_log_compact_are_refused(table_copy: Any, tmp_path: Path) -> None:
    cow = table_copy("sample_table/cow/v8_nonpartitioned")
    with pytest.raises(TableServiceError, match="COPY_ON_WRITE"):
        schedule_log_compaction(ServiceContext(HoodieTable.open(str(cow))), LogCompactionPolicy())


def test_pending_delta_commits_block_scheduling_and_completion(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.EIGHT)
    ctx = ServiceContext(table)
    writing = table.reload().create_requested(
        Instant(ctx.new_instant_time(), Action.DELTA_COMMIT, State.REQUESTED)
    )
    with pytest.raises(TableServiceError, match="delta commits are pending"):
        schedule_log_compaction(ctx, LogCompactionPolicy())
    table.reload().delete_instant(writing.requested_time, Action.DELTA_COMMIT)
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    # A writer that minted its time before the plan but shows up after it: its log would sort
    # before the merged log without being covered, so the plan may not run.
    racer = str(int(scheduled.instant_time) - 1)
    HoodieTable.open(str(path)).reload().create_requested(
        Instant(racer, Action.DELTA_COMMIT, State.REQUESTED)
    )
    logs = _log_files(path)
    with pytest.raises(TableServiceError, match="no longer covers every log before it"):
        execute_log_compaction(ctx, scheduled.instant_time, LocalRunner())
    assert _log_files(path) == logs
    state = HoodieTable.open(str(path)).timeline.get(scheduled.instant_time, Action.LOG_COMPACTION)
    assert state is not None and state.state is State.REQUESTED


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_an_abandoned_attempt_is_rolled_back_with_its_plan(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version)
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    ctx = ServiceContext(table)
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time
    op = (_plan(scheduled).operations or [])[0]
    # What a killed attempt leaves: the inflight instant, a marker and half a log file.
    torn = (
        path
        / (op.partition_path or "")
        / f".{op.file_id}_{ts if version >= 8 else op.base_instant_time}.log.40_7-0-7"
    )
    table.reload().transition_to_inflight(Instant(ts, Action.LOG_COMPACTION, State.REQUESTED))
    WriteMarkers(table.fileio, table.paths, ts).create(op.partition_path or "", torn.name, IOType.APPEND)
    torn.write_bytes(b"#HUDI#\0\0\0")
    result = service_named("logcompaction").execute(ctx, ts, LocalRunner())
    # As Hudi does: the attempt is rolled back together with its plan, never run again.
    assert result.instant.action is Action.ROLLBACK and result.details["rolled_back"] == ts
    assert HoodieTable.open(str(path)).timeline.get(ts) is None
    assert _snapshot(path) == before
    if version >= 8:
        assert not torn.exists()  # v8+ rollback deletes files
        assert hudi_rs_rows(path) == before_rs
    # (Table version 6 rolls back with a command block and keeps the torn file; Java and our reader
    # skip its corrupt block, hudi-rs cannot read torn blocks.)
    again = _log_compact(path)
    assert again != ts and _snapshot(path) == before


@pytest.mark.parametrize("step", ["after_inflight", "task_mid_write", "task_after_write", "before_complete"])
def test_a_killed_log_compaction_leaves_the_table_as_it_was(tmp_path: Path, step: str) -> None:
    path = tmp_path / "t"
    _our_table(path, TableVersion.EIGHT)
    before, before_rs = _snapshot(path), hudi_rs_rows(path)
    data_files = {
        str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".hoodie" not in p.parts
    }
    assert hts("schedule", "logcompaction", str(path)).returncode == 0
    (ts,) = [i.requested_time for i in HoodieTable.open(str(path)).timeline.pending_log_compaction()]
    killed = hts(
        "execute",
        "logcompaction",
        str(path),
        "--spark-master",
        "in-process",
        crash_at=f"logcompaction.{step}",
    )
    assert killed.returncode == 97, killed.stderr
    assert _snapshot(path) == before and hudi_rs_rows(path) == before_rs  # the dead attempt is invisible
    age_heartbeats(path)  # its heartbeat expires
    recovered = hts("execute", "logcompaction", str(path), "--spark-master", "in-process")
    assert recovered.returncode == 0, recovered.stderr
    assert HoodieTable.open(str(path)).timeline.get(ts) is None  # rolled back with its plan
    rerun = hts("run", "logcompaction", str(path), "--spark-master", "in-process")
    assert rerun.returncode == 0, rerun.stderr
    assert _snapshot(path) == before and hudi_rs_rows(path) == before_rs
    table = HoodieTable.open(str(path))
    rollbacks = table.timeline.completed().actions(Action.ROLLBACK)
    assert len(rollbacks) == 1 and normalize(rollbacks.instants[0].requested_time) > normalize(ts)
    (done,) = table.timeline.completed().actions(Action.DELTA_COMMIT).after(ts)
    written = {s.path for s in table.commit_metadata(done).write_stats()}
    now = {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".hoodie" not in p.parts}
    assert now - data_files == written and len(written) == 3  # no orphans of the dead attempt
    assert not (path / ".hoodie" / ".temp" / ts).exists()


def test_log_compaction_on_spark_equals_local(tmp_path: Path, spark_runner: Any) -> None:
    _our_table(tmp_path / "local", TableVersion.EIGHT, LogBlockFormat.PARQUET)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    before = _snapshot(tmp_path / "local")
    _log_compact(tmp_path / "local")
    _log_compact(tmp_path / "spark", spark_runner)
    assert _snapshot(tmp_path / "spark") == _snapshot(tmp_path / "local") == before
    assert hudi_rs_rows(tmp_path / "spark") == hudi_rs_rows(tmp_path / "local")


# -- the log-only merge, against the slice merge it must stand in for ----------------------------

_KEYS = [f"k{i}" for i in range(6)]
_ROW_SCHEMA = pa.schema(
    [
        ("_hoodie_record_key", pa.string()),
        ("_hoodie_partition_path", pa.string()),
        ("ts", pa.int64()),
        ("v", pa.string()),
        ("_hoodie_is_deleted", pa.bool_()),
    ]
)


def _random_batch(rng: random.Random, n: int) -> pa.Table | DeleteEntries:
    keys = [rng.choice(_KEYS) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.35:
        # Deletes: without ordering (commit-time), Integer 0, Long values, or an Integer (other class).
        choices = [(None, None), (0, "IntWrapper"), (3, "IntWrapper")] + [
            (v, "LongWrapper") for v in range(6)
        ]
        picks = [rng.choice(choices) for _ in keys]
        return DeleteEntries(pa.array(keys, pa.string()), [p[0] for p in picks], [p[1] for p in picks])
    records = [
        {"_hoodie_record_key": k, "_hoodie_partition_path": "p", "v": f"{k}#{n}.{i}"}
        | {"ts": rng.choice([None, 0, 1, 2, 3, 4, 5]), "_hoodie_is_deleted": rng.random() < 0.15}
        for i, k in enumerate(keys)
    ]
    return pa.Table.from_pylist(records, schema=_ROW_SCHEMA)


def _as_written(merged: LogSurvivors, merge: MergeConfig) -> list[pa.Table | DeleteEntries]:
    """The surviving entries as log compaction writes them and a reader decodes them again."""
    records = delete_records(merged.deletes, merged.deleted_rows, merge, "p")
    out: list[pa.Table | DeleteEntries] = [merged.rows]
    for raw in delete_blocks(records, {HeaderKey.INSTANT_TIME: "1"}, 9):
        (block,) = iter_blocks(raw, "mem")
        d = decode_delete_block(block, 9)
        out.append(DeleteEntries(pa.array(d.keys, pa.string()), d.ordering_values, d.ordering_classes))
    return out


@pytest.mark.parametrize("mode", [RecordMergeMode.EVENT_TIME_ORDERING, RecordMergeMode.COMMIT_TIME_ORDERING])
def test_merged_logs_stand_in_for_the_logs_they_replace(mode: RecordMergeMode) -> None:
    ordering = ("ts",) if mode is RecordMergeMode.EVENT_TIME_ORDERING else ()
    spec, merge = MergeSpec(mode, ordering), MergeConfig(mode, ordering)
    rng = random.Random(f"{mode}")
    for trial in range(300):
        base_rows = [{"_hoodie_record_key": k, "ts": rng.randint(0, 5), "v": f"{k}@base"} for k in _KEYS[:4]]
        base = pa.Table.from_pylist(base_rows, schema=_ROW_SCHEMA)
        logs = [_random_batch(rng, i) for i in range(rng.randint(1, 8))]
        later = [_random_batch(rng, 100 + i) for i in range(rng.randint(0, 3))]
        merged = merge_logs_only(logs, spec, _ROW_SCHEMA)
        survivors = [
            set(merged.rows["_hoodie_record_key"].to_pylist()),
            set(merged.deleted_rows["_hoodie_record_key"].to_pylist()),
            set(merged.deletes.keys.to_pylist()),
        ]
        assert sum(map(len, survivors)) == len(set().union(*survivors)), trial  # one entry per key
        kept: list[pa.Table | DeleteEntries] = [merged.rows, merged.deleted_rows, merged.deletes]
        for base_or_none in (base, None):
            expected = sorted(map(str, merge_slice(base_or_none, [*logs, *later], spec).to_pylist()))
            assert sorted(map(str, merge_slice(base_or_none, [*kept, *later], spec).to_pylist())) == expected
            written = merge_slice(base_or_none, [*_as_written(merged, merge), *later], spec)
            assert sorted(map(str, written.to_pylist())) == expected, trial
