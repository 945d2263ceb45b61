"""Tables written by ``hoodie``: every operation, every table version; hudi-rs reads them and parses
every instant file; file slices agree; bad input writes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.bloom import BLOOM_FILTER_FOOTER_KEY, deserialize_bloom_filter
from hoodie.config.table_config import RecordMergeMode, TableType, TableVersion
from hoodie.errors import InvalidInputError, SchemaError, WriteConflictError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.log_file import LogFile
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.create import create_table
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()),
        ("flag", pa.bool_()),
        ("tags", pa.list_(pa.string())),
        ("city", pa.string()),
    ]
)


def rows(ids: list[str], ts: int, city: str = "paris") -> pa.Table:
    import datetime as dt
    import decimal

    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "ts": ts,
                "amount": decimal.Decimal(f"{n}.{ts:02d}"),
                "at": dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=ts),
                "day": dt.date(2024, 1, 1 + ts % 27),
                "flag": n % 2 == 0,
                "tags": [i, str(ts)],
                "city": city,
            }
            for n, i in enumerate(ids)
        ],
        schema=SCHEMA,
    )


def new_table(path: Path, table_type: TableType, version: TableVersion, **kw: Any) -> HoodieTable:
    return create_table(
        str(path),
        table_name="orders",
        table_type=table_type,
        schema=SCHEMA,
        record_key_fields=["id"],
        partition_fields=["city"],
        ordering_fields=["ts"],
        table_version=version,
        hive_style_partitioning=True,
        **kw,
    )


def hudi_rs_rows(path: Path) -> list[tuple[Any, ...]]:
    batches = HudiTableBuilder.from_base_uri(str(path)).build().read()
    table = pa.Table.from_batches(batches) if batches else None
    return [] if table is None else sorted(tuple(map(repr, r.values())) for r in table.to_pylist())


def our_rows(path: Path) -> list[tuple[Any, ...]]:
    table = TableReader(HoodieTable.open(str(path))).snapshot()
    return sorted(tuple(map(repr, r.values())) for r in table.to_pylist())


VARIANTS = [
    (t, v, b)
    for t in (TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ)
    for v in (TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE)
    for b in (LogBlockFormat.AVRO, LogBlockFormat.PARQUET)
    if t is TableType.MERGE_ON_READ or b is LogBlockFormat.AVRO
]


@pytest.mark.parametrize(("table_type", "version", "block"), VARIANTS)
def test_every_operation_reads_back_through_hudi_rs(
    tmp_path: Path, table_type: TableType, version: TableVersion, block: LogBlockFormat
) -> None:
    path = tmp_path / "orders"
    table = new_table(path, table_type, version)
    writer = HoodieWriter(table, options=WriteOptions(log_block_format=block))
    writer.bulk_insert(rows(["a", "b", "c"], 1))
    writer.insert(rows(["d"], 1, city="rome"))
    writer.upsert(rows(["a", "e"], 2))
    writer.delete(rows(["b"], 5).select(["id", "city"]))
    overwrite = writer.insert_overwrite(rows(["z"], 3, city="rome"))
    assert overwrite.instant.action is Action.REPLACE_COMMIT
    assert overwrite.replaced_file_groups.keys() == {"city=rome"}

    ours = our_rows(path)
    assert ours == hudi_rs_rows(path)
    ids = sorted(r["id"] for r in TableReader(HoodieTable.open(str(path))).snapshot().to_pylist())
    assert ids == ["a", "c", "e", "z"]

    reopened = HoodieTable.open(str(path))
    hudi = HudiTableBuilder.from_base_uri(str(path)).build()
    timeline = hudi.get_timeline()
    parsed = {i.timestamp for i in timeline.get_completed_commits() + timeline.get_completed_deltacommits()}
    parsed |= {i.timestamp for i in timeline.get_completed_replacecommits()}
    ours_completed = {i.requested_time for i in reopened.timeline.completed()}
    assert parsed == ours_completed
    for instant in (
        timeline.get_completed_commits()
        + timeline.get_completed_deltacommits()
        + timeline.get_completed_replacecommits()
    ):
        meta = json.loads(timeline.get_instant_metadata_in_json(instant))
        assert "partitionToWriteStats" in meta
    our_slices = {
        (
            s.partition_path,
            s.file_id,
            s.base_file.name if s.base_file else "",
            tuple(lf.name for lf in s.log_files),
        )
        for s in reopened.file_system_view().latest_file_slices()
    }
    their_slices = {
        (s.partition_path, s.file_id, s.base_file_name, tuple(s.log_file_names))
        for s in hudi.get_file_slices()
    }
    assert our_slices == their_slices


def test_file_names_meta_fields_and_footers_follow_hudi(tmp_path: Path) -> None:
    path = tmp_path / "orders"
    table = new_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    writer = HoodieWriter(table)
    first = writer.insert(rows(["a", "b"], 1))
    second = writer.upsert(rows(["a"], 2))
    part = path / "city=paris"
    (base_name,) = [n for n in os.listdir(part) if n.endswith(".parquet")]
    base = BaseFile.parse(base_name)
    assert base is not None and base.commit_time == first.instant.requested_time
    (log_name,) = [n for n in os.listdir(part) if n.startswith(".") and ".log." in n]
    log = LogFile.parse(log_name)
    assert log is not None and log.instant_time == second.instant.requested_time and log.version == 1
    assert log.file_id == base.file_id
    assert (part / ".hoodie_partition_metadata").read_text().splitlines()[2:] == [
        f"commitTime={first.instant.requested_time}",
        "partitionDepth=1",
    ]
    pf = pq.ParquetFile(part / base_name)
    meta = {k.decode(): v.decode() for k, v in (pf.metadata.metadata or {}).items()}
    assert meta["hoodie_min_record_key"] == "a" and meta["hoodie_max_record_key"] == "b"
    assert meta["hoodie_bloom_filter_type_code"] == "DYNAMIC_V0"
    bloom = deserialize_bloom_filter(meta[BLOOM_FILTER_FOOTER_KEY], "DYNAMIC_V0")
    assert bloom.might_contain("a") and bloom.might_contain("b")
    data = pf.read().to_pylist()
    assert [r["_hoodie_commit_seqno"] for r in data] == [
        f"{first.instant.requested_time}_0_0",
        f"{first.instant.requested_time}_0_1",
    ]
    assert {r["_hoodie_file_name"] for r in data} == {base_name}
    assert {r["_hoodie_partition_path"] for r in data} == {"city=paris"}


def test_v6_logs_are_named_by_the_slice_base_instant_and_roll_versions(tmp_path: Path) -> None:
    path = tmp_path / "orders"
    table = new_table(path, TableType.MERGE_ON_READ, TableVersion.SIX)
    writer = HoodieWriter(table)
    first = writer.insert(rows(["a"], 1))
    writer.upsert(rows(["a"], 2))
    writer.upsert(rows(["a"], 3))
    logs = sorted(lf for n in os.listdir(path / "city=paris") if (lf := LogFile.parse(n)) is not None)
    assert [(lf.instant_time, lf.version) for lf in logs] == [
        (first.instant.requested_time, 1),
        (first.instant.requested_time, 2),
    ]
    assert (path / ".hoodie" / f"{first.instant.requested_time}.deltacommit").exists()
    assert our_rows(path) == hudi_rs_rows(path)


def test_incremental_reads_by_completion_time(tmp_path: Path) -> None:
    path = tmp_path / "orders"
    table = new_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    writer = HoodieWriter(table)
    w1 = writer.insert(rows(["a", "b"], 1))
    w2 = writer.upsert(rows(["a", "c"], 2))
    w3 = writer.upsert(rows(["b"], 3))
    reader = TableReader(HoodieTable.open(str(path)))
    c1, c2, c3 = (w.instant.completion_time for w in (w1, w2, w3))
    assert c1 and c2 and c3
    changed = reader.incremental(c1, c2)
    assert sorted(changed["id"].to_pylist()) == ["a", "c"]
    assert sorted(TableReader(HoodieTable.open(str(path))).incremental(c2)["id"].to_pylist()) == ["b"]
    everything = TableReader(HoodieTable.open(str(path))).incremental(None)
    assert sorted(everything["id"].to_pylist()) == ["a", "b", "c"]
    assert TableReader(HoodieTable.open(str(path))).incremental(c3).num_rows == 0


def _state(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (rows(["a"], 1).append_column("extra", pa.array([1])), SchemaError, r"columns \['extra'\]"),
        (rows(["a"], 1).set_column(1, "ts", pa.array(["x"])), SchemaError, "column 'ts' has type string"),
        (rows([None], 1), InvalidInputError, "record key"),  # type: ignore[list-item]
        (rows(["a"], 1).drop_columns(["ts"]), SchemaError, "ordering field"),
    ],
)
def test_bad_input_raises_and_writes_nothing(
    tmp_path: Path, bad: pa.Table, error: type[Exception], message: str
) -> None:
    path = tmp_path / "orders"
    table = new_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT)
    HoodieWriter(table).insert(rows(["a"], 1))
    before = _state(path)
    with pytest.raises(error, match=message):
        HoodieWriter(HoodieTable.open(str(path))).upsert(bad)
    assert _state(path) == before


def test_a_failure_after_the_instant_started_removes_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "orders"
    table = new_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT)
    HoodieWriter(table).insert(rows(["a"], 1))
    before = _state(path)

    def boom(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("hoodie.write.writer.HoodieWriter._complete", boom)
    with pytest.raises(OSError, match="disk full"):
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows(["a", "b"], 2))
    assert _state(path) == before


def test_updates_to_file_groups_under_pending_clustering_are_rejected(table_copy: Any) -> None:
    path = table_copy("sample_table/mor/avro/v9_txns_simple_nometa")
    table = HoodieTable.open(str(path))
    timeline = Path(table.paths.timeline)
    clustering = next(timeline.glob("*.clustering.requested"))
    ts = clustering.name.split(".")[0]
    # Make the completed clustering pending again (requested + inflight only).
    for f in timeline.glob(f"{ts}_*.replacecommit"):
        f.unlink()
    table = HoodieTable.open(str(path))
    groups = table.pending_clustering_file_groups()
    assert groups
    partition = next(iter(groups)).partition_path
    # The rows of the latest slice of a group under clustering, upserted again.
    before = TableReader(table).snapshot()
    victim = before.filter(pa.compute.equal(before["region"], partition.split("=")[1])).slice(0, 1)
    data = victim.drop_columns([c for c in victim.column_names if c.startswith("_hoodie")])
    state = _state(path)
    with pytest.raises(WriteConflictError, match="pending clustering"):
        HoodieWriter(table).upsert(data)
    assert _state(path) == state


def test_merge_modes_persist_like_hudi(tmp_path: Path) -> None:
    for version in (TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE):
        path = tmp_path / f"v{int(version)}"
        table = new_table(
            path, TableType.MERGE_ON_READ, version, merge_mode=RecordMergeMode.EVENT_TIME_ORDERING
        )
        props = (path / ".hoodie" / "hoodie.properties").read_text()
        if version is TableVersion.NINE:
            assert (
                "hoodie.table.ordering.fields=ts" in props
                and "hoodie.record.merge.mode=EVENT_TIME_ORDERING" in props
            )
        elif version is TableVersion.EIGHT:
            assert (
                "hoodie.table.precombine.field=ts" in props
                and "hoodie.record.merge.strategy.id=eeb8d96f" in props
            )
        else:
            assert "hoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator" in props
        assert HoodieTable.open(str(path)).config.table_version is version
        assert table.config.ordering_fields == ("ts",)


def _logs(path: Path) -> list[Path]:
    return sorted(
        (p for p in (path / "city=paris").iterdir() if LogFile.parse(p.name) is not None),
        key=lambda p: LogFile.parse(p.name),  # type: ignore[arg-type, return-value]
    )


def test_truncated_log_block_is_skipped_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "orders"
    writer = HoodieWriter(new_table(path, TableType.MERGE_ON_READ, TableVersion.SIX))
    writer.insert(rows(["a", "b"], 1))
    writer.upsert(rows(["a"], 2))
    before = our_rows(path)
    writer.upsert(rows(["b"], 3))
    last = _logs(path)[-1]
    last.write_bytes(last.read_bytes()[:-25])  # a writer crashed in the middle of the block
    reader = TableReader(HoodieTable.open(str(path)))
    result = reader.snapshot()
    assert sorted(tuple(map(repr, r.values())) for r in result.to_pylist()) == before
    assert [loc[0] for loc in reader.result.report.locations] == [str(last)]


def test_garbage_after_the_last_block_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "orders"
    writer = HoodieWriter(new_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT))
    writer.insert(rows(["a", "b"], 1))
    writer.upsert(rows(["a"], 2))
    expected = our_rows(path)
    log = _logs(path)[-1]
    log.write_bytes(log.read_bytes() + b"#HUDI#\x00\x00\x00")
    reader = TableReader(HoodieTable.open(str(path)))
    assert sorted(tuple(map(repr, r.values())) for r in reader.snapshot().to_pylist()) == expected
    assert len(reader.result.report) == 1


def test_malformed_plan_on_the_timeline_is_named(tmp_path: Path) -> None:
    path = tmp_path / "orders"
    writer = HoodieWriter(new_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT))
    writer.insert(rows(["a"], 1))
    plan = path / ".hoodie" / "timeline" / "20990101000000000.compaction.requested"
    plan.write_bytes(b"Obj\x01garbage")
    from hoodie.errors import MalformedPlanError

    with pytest.raises(MalformedPlanError, match="20990101000000000.compaction.requested"):
        TableReader(HoodieTable.open(str(path))).snapshot()
