"""Compaction: plans Apache Hudi wrote run with our executor; our plans match Hudi's format; the
snapshot hudi-rs reads is unchanged and the read-optimized view catches up with it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.config.table_config import TableVersion
from hoodie.models.codec import load_schema
from hoodie.models.compaction import CompactionPlan
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import (
    CompactionPolicy,
    CompactionStrategy,
    execute_compaction,
    plan_compaction,
    schedule_compaction,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import NO_METADATA_TABLE, hudi_rs_rows
from tests.tables import new_table, rows


def _our_table(path: Path, version: TableVersion, block: LogBlockFormat = LogBlockFormat.AVRO) -> HoodieTable:
    table = new_table(path, version=version)
    writer = HoodieWriter(table, options=WriteOptions(log_block_format=block))
    writer.insert(rows(list(range(30)), 1))
    writer.upsert(rows(list(range(0, 30, 2)), 2))
    writer.delete(rows([3, 9], 3).select(["id", "p"]))
    writer.upsert(rows([1, 30, 31], 4))
    return HoodieTable.open(str(path))


def _snapshot(table: HoodieTable, *, read_optimized: bool = False) -> list[str]:
    reader = TableReader(HoodieTable.open(table.base_path))
    data = reader.read_optimized() if read_optimized else reader.snapshot()
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _compact(table: HoodieTable, runner: Any = None, **policy: Any) -> str:
    ctx = ServiceContext(table)
    scheduled = schedule_compaction(ctx, CompactionPolicy(**policy))
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, runner or LocalRunner())
    return scheduled.instant_time


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE])
@pytest.mark.parametrize("block", [LogBlockFormat.AVRO, LogBlockFormat.PARQUET])
def test_compaction_keeps_the_snapshot_and_catches_up_read_optimized(
    tmp_path: Path, version: TableVersion, block: LogBlockFormat
) -> None:
    table = _our_table(tmp_path / "t", version, block)
    before = hudi_rs_rows(tmp_path / "t")
    assert _snapshot(table, read_optimized=True) != _snapshot(table)
    instant = _compact(table)
    assert hudi_rs_rows(tmp_path / "t") == before
    assert _snapshot(table, read_optimized=True) == _snapshot(table)
    done = HoodieTable.open(str(tmp_path / "t"))
    meta = done.commit_metadata(done.timeline.get(instant))  # type: ignore[arg-type]
    assert meta.compacted is True and meta.operation_type == "COMPACT"
    for stat in meta.write_stats():
        assert stat.path is not None and stat.path.endswith(f"_{instant}.parquet")
        assert stat.total_log_files_compacted and stat.prev_commit is not None
        if version >= TableVersion.EIGHT:  # the v6 JSON form has no prevBaseFile
            assert stat.prev_base_file is not None
    # Untouched records keep their commit time and sequence number; updated ones carry the log's.
    data = TableReader(done).snapshot()
    times = set(data["_hoodie_commit_time"].to_pylist())
    assert instant not in times and len(times) >= 2


# The MOR fixtures whose latest slices still have log files (the v9 ones were compacted and
# clustered by Hudi after their last log write).
WITH_LOGS = [n for n in NO_METADATA_TABLE if "/mor/" in n and "/v9_" not in n]


@pytest.mark.parametrize("name", WITH_LOGS)
def test_compaction_of_tables_apache_hudi_wrote(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    table = HoodieTable.open(str(path))
    before = hudi_rs_rows(path)
    _compact(table)
    assert hudi_rs_rows(path) == before
    assert _snapshot(table, read_optimized=True) == _snapshot(table)


def test_plans_apache_hudi_wrote_run_on_a_copy(table_copy: Any) -> None:
    path = table_copy("sample_table/mor/avro/v9_txns_simple_nometa")
    timeline = path / ".hoodie" / "timeline"
    requested = next(timeline.glob("*.compaction.requested"))
    ts = requested.name.split(".")[0]
    expected = hudi_rs_rows(path)
    # Re-request Hudi's own plan: drop the completed and inflight files and the files it wrote.
    for f in list(timeline.glob(f"{ts}_*.commit")) + list(timeline.glob(f"{ts}.compaction.inflight")):
        f.unlink()
    for f in path.rglob(f"*_{ts}.parquet"):
        f.unlink()
    table = HoodieTable.open(str(path))
    plan = table.compaction_plan(ts)
    assert table.timeline.get(ts, Action.COMPACTION).state is State.REQUESTED  # type: ignore[union-attr]
    result = execute_compaction(ServiceContext(table), ts, LocalRunner())
    assert {s.file_id for s in result.write_stats} == {op.file_id for op in plan.operations or ()}
    assert hudi_rs_rows(path) == expected


def test_our_plans_decode_with_hudis_schema_and_defaults(tmp_path: Path) -> None:
    table = _our_table(tmp_path / "t", TableVersion.EIGHT)
    scheduled = schedule_compaction(ServiceContext(table), CompactionPolicy())
    assert scheduled is not None
    data = (
        tmp_path / "t" / ".hoodie" / "timeline" / f"{scheduled.instant_time}.compaction.requested"
    ).read_bytes()
    reader = fastavro.reader(
        __import__("io").BytesIO(data), reader_schema=load_schema("HoodieCompactionPlan", 8)
    )
    (record,) = list(reader)
    assert record["version"] == 2 and record["preserveHoodieMetadata"] is False
    for op in record["operations"]:
        assert "/" not in op["dataFilePath"] and all("/" not in p for p in op["deltaFilePaths"])
        assert set(op["metrics"]) == {
            "TOTAL_LOG_FILES",
            "TOTAL_IO_MB",
            "TOTAL_IO_READ_MB",
            "TOTAL_LOG_FILES_SIZE",
            "TOTAL_IO_WRITE_MB",
        }
    assert CompactionPlan.from_bytes(data, 8) == scheduled.plan


def test_dry_run_writes_nothing_and_triggers_gate_scheduling(tmp_path: Path) -> None:
    table = _our_table(tmp_path / "t", TableVersion.EIGHT)
    before = sorted(p.name for p in (tmp_path / "t" / ".hoodie" / "timeline").iterdir())
    dry = schedule_compaction(ServiceContext(table), CompactionPolicy(), dry_run=True)
    assert dry is not None and dry.instant_time is None and dry.plan.operations
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie" / "timeline").iterdir()) == before
    # 3 delta commits since the start: NUM_COMMITS with 5 does not fire, with 3 it does.
    policy = CompactionPolicy.from_options({"hoodie.compact.inline.max.delta.commits": "5"})
    assert schedule_compaction(ServiceContext(table), policy) is None
    policy = CompactionPolicy.from_options({"hoodie.compact.inline.max.delta.commits": "3"})
    assert schedule_compaction(ServiceContext(table), policy) is not None


def test_strategies_filter_and_order_operations(tmp_path: Path) -> None:
    table = _our_table(tmp_path / "t", TableVersion.EIGHT)
    everything = plan_compaction(table, CompactionPolicy(strategy=CompactionStrategy.UNBOUNDED))
    assert everything is not None and len(everything.operations or ()) == 3
    big = plan_compaction(
        table, CompactionPolicy(strategy=CompactionStrategy.LOG_FILE_SIZE, log_file_size_threshold=10**9)
    )
    assert big is None
    many = plan_compaction(
        table, CompactionPolicy(strategy=CompactionStrategy.LOG_FILE_NUM, log_file_num_threshold=2)
    )
    assert many is not None and all(len(op.delta_file_paths or ()) >= 2 for op in many.operations or ())
    assert len(many.operations or ()) == 2
    day = plan_compaction(
        table, CompactionPolicy(strategy=CompactionStrategy.DAY_BASED, day_based_partitions=1)
    )
    assert day is not None and len({op.partition_path for op in day.operations or ()}) == 1


def test_compaction_on_spark_equals_local(tmp_path: Path, spark_runner: Any) -> None:
    local = _our_table(tmp_path / "local", TableVersion.EIGHT)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    on_spark = HoodieTable.open(str(tmp_path / "spark"))
    _compact(local)
    _compact(on_spark, spark_runner)
    assert _snapshot(local) == _snapshot(on_spark)
    assert hudi_rs_rows(tmp_path / "spark") == hudi_rs_rows(tmp_path / "local")
