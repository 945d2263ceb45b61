"""INDEXING: building column_stats, partition_stats and record_index on a table that lacked them
while writers keep writing, and what hudi-rs and our reader make of the table afterwards."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.bloom import deserialize_bloom_filter
from hoodie.errors import InvalidInputError, UnsupportedTableError
from hoodie.metadata.column_stats import indexed_columns
from hoodie.metadata.keys import bloom_filter_key
from hoodie.metadata.table import MetadataTable
from hoodie.models.index import IndexCommitMetadata, IndexPlan
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, Task, TaskFunction, TaskResult
from hoodie.services.clean import CleanPolicy, execute_clean, schedule_clean
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.indexing import execute_indexing, requested_partitions, schedule_indexing
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.tables import define_secondary_index, new_table, rows

BUILD = {
    "hoodie.metadata.index.column.stats.enable": "true",
    "hoodie.metadata.index.bloom.filter.enable": "true",
    "hoodie.metadata.record.index.enable": "true",
}
NEW_PARTITIONS = ["column_stats", "partition_stats", "bloom_filters", "record_index"]


class WritesDuringBuild(LocalRunner):
    """Runs ``writes`` (other writers committing) after the build's snapshot, before its tasks."""

    def __init__(self, writes: Callable[[], None]) -> None:
        self.writes = writes

    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
        self.writes()
        return super().run(fn, tasks, description)


class DiesDuringBuild(LocalRunner):
    def run(self, fn: TaskFunction, tasks: Sequence[Task], description: str) -> list[TaskResult]:
        raise RuntimeError("executor lost")


def _keys_only(ids: range, ts: int) -> pa.Table:
    return rows(ids, ts).select(["id", "ts", "p"])


def _hudi_rs(path: Path) -> pa.Table:
    """hudi-rs's snapshot, listing files through the metadata table (the table registers
    ``files``), so a partition our build left out or got wrong would show."""
    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "true").build()
    )
    return pa.Table.from_batches(table.read())


def _file_id(file_name: str) -> str:
    if file_name.startswith("."):  # a log file: .<fileId>_<instant>.log.<version>_<token>
        return file_name[1:].split("_", maxsplit=1)[0]
    return file_name.split("_", maxsplit=1)[0]


def _decode(location: Mapping[str, Any]) -> str:
    """The file id of a record-index entry, decoded here independently of hoodie.metadata.keys."""
    if location["fileIdEncoding"] == 1:
        return str(location["fileId"])
    mask = (1 << 64) - 1
    bits = ((location["fileIdHighBits"] & mask) << 64) | (location["fileIdLowBits"] & mask)
    return f"{uuid.UUID(int=bits)}-{location['fileIndex']}"


def _check_record_index(table: HoodieTable, snapshot: pa.Table) -> None:
    """Every live key, and only those, at the partition and file group holding it."""
    expected = {
        r["_hoodie_record_key"]: (r["_hoodie_partition_path"], _file_id(r["_hoodie_file_name"]))
        for r in snapshot.select(
            ["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"]
        ).to_pylist()
    }
    index = MetadataTable.open(table, table.reload()).read_partition("record_index")
    got = {
        key: (p["recordIndexMetadata"]["partitionName"], _decode(p["recordIndexMetadata"]))
        for key, p in index.items()
    }
    assert got == expected


def _committed_files(table: HoodieTable) -> dict[str, set[str]]:
    """Data files on storage whose instant completed (their names carry the instant)."""
    timeline = table.reload()
    out: dict[str, set[str]] = {}
    for partition in ("p0", "p1", "p2"):
        for f in (Path(table.base_path) / partition).iterdir():
            if f.name.startswith(".hoodie_partition"):
                continue
            instant = f.name.split("_")[1].split(".")[0] if f.name.startswith(".") else f.stem.split("_")[-1]
            if timeline.is_completed(instant):
                out.setdefault(partition, set()).add(f.name)
    return out


def _value(wrapped: Any) -> Any:
    return None if wrapped is None else wrapped[1]["value"]


def _check_column_stats(table: HoodieTable) -> None:
    """One record per committed file and indexed column; a base file's min, max and null count
    equal pyarrow's over the file's values."""
    stats = MetadataTable.open(table, table.reload()).read_partition("column_stats")
    live = [p["ColumnStatsMetadata"] for p in stats.values() if not p["ColumnStatsMetadata"]["isDeleted"]]
    files = _committed_files(table)
    columns = indexed_columns(table)
    assert {(s["fileName"], s["columnName"]) for s in live} == {
        (name, c) for names in files.values() for name in names for c in columns
    }
    by_file = {(s["fileName"], s["columnName"]): s for s in live}
    for partition, names in files.items():
        for name in (n for n in names if n.endswith(".parquet")):
            data = pq.read_table(Path(table.base_path) / partition / name)
            for column in ("id", "ts", "v"):
                s = by_file[(name, column)]
                lo, hi = pc.min_max(data[column]).values()
                assert (_value(s["minValue"]), _value(s["maxValue"])) == (lo.as_py(), hi.as_py()), (
                    name,
                    column,
                )
                assert s["nullCount"] == data[column].null_count and s["valueCount"] == data.num_rows


def _check_partition_stats(table: HoodieTable, snapshot: pa.Table, *, tight: bool) -> None:
    """Each partition's range holds every live value there (what data skipping relies on);
    ``tight``: it is Hudi's tight bound, the range of its latest file slices' files (not so
    while writes during the build widened it: their stats could not be read then)."""
    mdt = MetadataTable.open(table, table.reload())
    stats = mdt.read_partition("partition_stats")
    ranges = {
        (p["ColumnStatsMetadata"]["fileName"], p["ColumnStatsMetadata"]["columnName"]): p[
            "ColumnStatsMetadata"
        ]
        for p in stats.values()
    }
    for row in snapshot.select(["p", "id", "ts"]).to_pylist():
        for column in ("id", "ts"):
            s = ranges[(row["p"], column)]
            assert _value(s["minValue"]) <= row[column] <= _value(s["maxValue"])
    if not tight:
        return
    files = mdt.read_partition("column_stats")
    by_file = {
        (p["ColumnStatsMetadata"]["fileName"], p["ColumnStatsMetadata"]["columnName"]): p
        for p in files.values()
    }
    view = table.file_system_view(timeline=table.reload())
    for partition in ("p0", "p1", "p2"):
        latest = [
            n
            for s in view.latest_file_slices([partition])
            for n in ([s.base_file.name] if s.base_file else []) + [lf.name for lf in s.log_files]
        ]
        for column in ("id", "ts"):
            values = [by_file[(n, column)]["ColumnStatsMetadata"] for n in latest]
            s = ranges[(partition, column)]
            assert s["isTightBound"], (partition, column)
            assert _value(s["minValue"]) == min(_value(v["minValue"]) for v in values if v["minValue"])
            assert _value(s["maxValue"]) == max(_value(v["maxValue"]) for v in values if v["maxValue"])


def _check_bloom_filters(table: HoodieTable) -> None:
    """One live record per committed base file, stamped with its commit time, whose filter holds
    every key of the file."""
    blooms = MetadataTable.open(table, table.reload()).read_partition("bloom_filters")
    expected = set()
    for partition, names in _committed_files(table).items():
        for name in (n for n in names if n.endswith(".parquet")):
            key = bloom_filter_key(partition, name)
            expected.add(key)
            info = blooms[key]["BloomFilterMetadata"]
            assert info["timestamp"] == name.rsplit("_", 1)[1].split(".")[0] and not info["isDeleted"]
            bloom = deserialize_bloom_filter(info["bloomFilter"], info["type"])
            keys = pq.read_table(Path(table.base_path) / partition / name, columns=["_hoodie_record_key"])
            assert all(bloom.might_contain(k) for k in keys.column(0).to_pylist()), name
    assert set(blooms) == expected


def _requested(table: HoodieTable, ts: str) -> IndexPlan:
    return table.index_plan(ts, table.reload())


def _expected(ids: Mapping[int, int]) -> list[tuple[str, int]]:
    return sorted((f"k{i}", ts) for i, ts in ids.items())


def test_indexing_builds_the_partitions_while_writers_write(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = new_table(path)
    writer = HoodieWriter(table)
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(20, 40), 2))
    live = {i: 1 for i in range(20)} | {i: 2 for i in range(20, 40)}
    ctx = ServiceContext(table, options=BUILD)

    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    last_write = table.reload().completed().writes().last()
    assert last_write is not None
    plan = _requested(table, scheduled.instant_time)
    assert plan.partition_paths() == NEW_PARTITIONS
    assert {i.index_upto_instant for i in plan.index_partition_infos or ()} == {last_write.requested_time}
    assert schedule_indexing(ctx) is None, "one indexer at a time"

    # After planning, before execution: part of the build's snapshot.
    writer.upsert(rows(range(35, 45), 3))
    live |= {i: 3 for i in range(35, 45)}

    # Opened before the indexer started: it learns of the new partitions under the lock.
    other = HoodieWriter(HoodieTable.open(str(path)))

    def concurrent() -> None:  # commit after the snapshot: they log to the new partitions
        other.upsert(rows(range(40, 50), 4))
        other.delete(_keys_only(range(0, 5), 5))

    result = execute_indexing(ctx, scheduled.instant_time, WritesDuringBuild(concurrent))
    live = {i: ts for i, ts in (live | {i: 4 for i in range(40, 50)}).items() if i >= 5}

    fresh = HoodieTable.open(str(path))
    assert set(fresh.config.metadata_partitions) == {"files", *NEW_PARTITIONS}
    assert fresh.config.metadata_partitions_inflight == ()
    assert result.details["records"]["record_index"] == 45, "the snapshot's keys (k0..k44)"
    completed = fresh.reload().get(scheduled.instant_time, Action.INDEXING)
    assert completed is not None and completed.is_completed
    commit = IndexCommitMetadata.from_bytes(
        (
            path / ".hoodie" / "timeline" / f"{scheduled.instant_time}_{completed.completion_time}.indexing"
        ).read_bytes(),
        8,
    )
    last = fresh.reload().completed().writes().last()
    assert last is not None
    assert [i.metadata_partition_path for i in commit.index_partition_infos or ()] == NEW_PARTITIONS
    assert {i.index_upto_instant for i in commit.index_partition_infos or ()} == {last.requested_time}

    snapshot = _hudi_rs(path)
    assert sorted(zip(snapshot["id"].to_pylist(), snapshot["ts"].to_pylist(), strict=True)) == _expected(live)
    ours = TableReader(fresh).snapshot()
    assert sorted(ours["_hoodie_record_key"].to_pylist()) == sorted(
        snapshot["_hoodie_record_key"].to_pylist()
    )
    _check_record_index(fresh, snapshot)
    _check_column_stats(fresh)
    _check_partition_stats(fresh, snapshot, tight=False)
    _check_bloom_filters(fresh)

    # Later writes keep the new partitions current.
    HoodieWriter(fresh).upsert(rows(range(60, 66), 6))
    HoodieWriter(fresh).delete(_keys_only(range(5, 8), 7))
    snapshot = _hudi_rs(path)
    assert len(snapshot) == len(live) + 6 - 3
    _check_record_index(fresh, snapshot)
    _check_column_stats(fresh)
    _check_partition_stats(fresh, snapshot, tight=True)
    _check_bloom_filters(fresh)

    # Compaction adds base files (and their records); a clean tombstones what it deletes.
    compact = ServiceContext(HoodieTable.open(str(path)))
    planned = schedule_compaction(compact, CompactionPolicy())
    assert planned is not None and planned.instant_time is not None
    execute_compaction(compact, planned.instant_time, LocalRunner())
    _check_bloom_filters(HoodieTable.open(str(path)))
    files_before = len(list(path.glob("p*/*")))
    clean = ServiceContext(
        HoodieTable.open(str(path)),
        options={
            "hoodie.cleaner.policy": "KEEP_LATEST_FILE_VERSIONS",
            "hoodie.cleaner.fileversions.retained": "1",
        },
    )
    scheduled_clean = schedule_clean(clean, CleanPolicy.from_options(clean.options))
    assert scheduled_clean is not None and scheduled_clean.instant_time is not None
    execute_clean(clean, scheduled_clean.instant_time, LocalRunner())
    assert len(list(path.glob("p*/*"))) < files_before
    fresh = HoodieTable.open(str(path))
    _check_column_stats(fresh)
    _check_bloom_filters(fresh)
    _check_record_index(fresh, _hudi_rs(path))


def test_an_abandoned_build_is_dropped_and_built_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = new_table(path)
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    ctx = ServiceContext(table, options={"hoodie.metadata.record.index.enable": "true"})
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    with pytest.raises(RuntimeError, match="executor lost"):
        execute_indexing(ctx, scheduled.instant_time, DiesDuringBuild())

    left = HoodieTable.open(str(path))
    assert left.config.metadata_partitions_inflight == ("record_index",)
    assert "record_index" not in left.config.metadata_partitions
    # Writers go on meanwhile, logging to the half-built partition; readers do not read it.
    HoodieWriter(left).upsert(rows(range(10, 16), 2))
    assert len(_hudi_rs(path)) == 16

    result = execute_indexing(
        ServiceContext(HoodieTable.open(str(path)), options=ctx.options),
        scheduled.instant_time,
        LocalRunner(),
    )
    assert result.instant.is_completed
    fresh = HoodieTable.open(str(path))
    assert fresh.config.metadata_partitions_inflight == ()
    mdt = MetadataTable.open(fresh, fresh.reload())
    builds = [i for i in mdt.timeline.completed() if i.requested_time.startswith("00000000000000")]
    assert [i.requested_time for i in builds] == ["00000000000000000", "00000000000000001"], (
        "the dead attempt's build instant was rolled back and its time reused"
    )
    _check_record_index(fresh, _hudi_rs(path))


def test_requests_hts_cannot_build_are_refused_naming_them(tmp_path: Path) -> None:
    table = new_table(tmp_path / "t")
    HoodieWriter(table).insert(rows(range(3), 1))
    before = sorted(p.name for p in (tmp_path / "t" / ".hoodie" / "timeline").iterdir())
    with pytest.raises(InvalidInputError, match="hoodie.metadata.record.index.enable"):
        requested_partitions(table, {})
    secondary = {"hoodie.metadata.index.secondary.enable": "true"}
    with pytest.raises(InvalidInputError, match="no secondary index is defined"):
        schedule_indexing(ServiceContext(table, options=secondary))
    # Hudi's default for the key is true: alongside another request it asks for nothing more.
    assert requested_partitions(table, {**secondary, "hoodie.metadata.record.index.enable": "true"}) == [
        "record_index"
    ]
    with pytest.raises(UnsupportedTableError, match="expr_index_"):
        schedule_indexing(ServiceContext(table, options={"hoodie.metadata.index.expression.enable": "true"}))
    table = define_secondary_index(tmp_path / "t", "gone_idx", "gone")
    with pytest.raises(UnsupportedTableError, match="secondary_index_gone_idx: no column 'gone'"):
        schedule_indexing(ServiceContext(table, options=secondary))
    with pytest.raises(InvalidInputError, match="column.stats"):
        requested_partitions(table, {"hoodie.metadata.index.partition.stats.enable": "true"})
    assert sorted(p.name for p in (tmp_path / "t" / ".hoodie" / "timeline").iterdir()) == before


def test_cli_runs_indexing_and_builds_the_metadata_table_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t"
    table = new_table(path, metadata_table=False)
    HoodieWriter(table).insert(rows(range(9), 1))
    assert not (path / ".hoodie" / "metadata").exists()
    assert (
        main(
            [
                "run",
                "indexing",
                str(path),
                "--option",
                "hoodie.metadata.record.index.enable=true",
                "--spark-master",
                "in-process",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["executed"], summary
    fresh = HoodieTable.open(str(path))
    assert set(fresh.config.metadata_partitions) == {"files", "record_index"}
    plan = IndexPlan.from_bytes(
        (path / ".hoodie" / "timeline" / f"{summary['scheduled']}.indexing.requested").read_bytes(), 8
    )
    assert plan.partition_paths() == ["files", "record_index"]
    _check_record_index(fresh, _hudi_rs(path))
    assert main(["schedule", "indexing", str(path)]) != 0
    assert "hoodie.metadata.index.column.stats.enable=true" in capsys.readouterr().err


def test_indexing_on_spark_equals_local(tmp_path: Path, spark_runner: Any) -> None:
    """The build's tasks run on Spark (results come back as JSON) with the same records."""
    built = {}
    for name, runner in (("local", LocalRunner()), ("spark", spark_runner)):
        path = tmp_path / name
        writer = HoodieWriter(new_table(path))
        writer.insert(rows(range(20), 1))
        writer.upsert(rows(range(10, 25), 2))
        ctx = ServiceContext(HoodieTable.open(str(path)), options=BUILD)
        scheduled = schedule_indexing(ctx)
        assert scheduled is not None and scheduled.instant_time is not None
        execute_indexing(ctx, scheduled.instant_time, runner)
        table = HoodieTable.open(str(path))
        mdt = MetadataTable.open(table, table.reload())
        built[name] = {p: mdt.read_partition(p) for p in NEW_PARTITIONS}
        _check_record_index(table, _hudi_rs(path))
    # File names differ between the two tables (new file ids), so compare what does not name them.
    assert {p: len(r) for p, r in built["spark"].items()} == {p: len(r) for p, r in built["local"].items()}
    assert sorted(built["spark"]["record_index"]) == sorted(built["local"]["record_index"])
    assert built["spark"]["partition_stats"].keys() == built["local"]["partition_stats"].keys()


@pytest.mark.parametrize("version", ["V1", "V2"])
def test_indexing_builds_a_defined_secondary_index_while_writers_write(tmp_path: Path, version: str) -> None:
    """A secondary index defined (as Hudi's CREATE INDEX defines it) but not built: INDEXING builds
    it from the latest slices while writers commit; its entries equal a recomputation from the
    snapshot and sit in the file groups their shard key hashes to (by value for V2, by the whole
    key for V1); later writes keep it current."""
    from hoodie.metadata.keys import file_group_indexes
    from hoodie.metadata.secondary import live_secondary_entries, shard_keys

    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(30), 1))
    writer.upsert(rows(range(20, 40), 2))
    table = define_secondary_index(path, "v_idx", "v", version=version)
    partition = "secondary_index_v_idx"
    ctx = ServiceContext(table, options={"hoodie.metadata.index.secondary.enable": "true"})
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    assert _requested(table, scheduled.instant_time).partition_paths() == [partition]
    other = HoodieWriter(HoodieTable.open(str(path)))

    def concurrent() -> None:
        other.upsert(rows(range(35, 45), 3))
        other.delete(_keys_only(range(0, 4), 4))

    execute_indexing(ctx, scheduled.instant_time, WritesDuringBuild(concurrent))
    fresh = HoodieTable.open(str(path))
    assert partition in fresh.config.metadata_partitions
    assert partition not in fresh.config.metadata_partitions_inflight

    def check() -> None:
        table = HoodieTable.open(str(path))
        snapshot = TableReader(table).snapshot()
        mdt = MetadataTable.open(table, table.reload())
        assert set(mdt.read_partition(partition)) == live_secondary_entries(snapshot, "v")
        slices = mdt.file_slices(partition)
        assert len(slices) == 10  # Hudi's default for a secondary index, as in the v9 fixture
        for position, file_slice in enumerate(slices):
            keys = [k for k, p in mdt.read_slice(file_slice).items() if p is not None]
            hashed = file_group_indexes(shard_keys(table, partition, keys), len(slices)).tolist()
            assert set(hashed) <= {position}, file_slice.file_id
        assert len(_hudi_rs(path)) == len(snapshot)

    check()
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(10, 16), 5))
    check()


def test_a_secondary_index_build_hudi_left_pending_is_dropped_and_built(tmp_path: Path) -> None:
    """Hudi's CREATE INDEX died mid-build: its indexing instant inflight, the partition in
    ``.inflight``, and its metadata-table deltacommit (at a regular instant time, as Hudi 1.1's
    second build in the v9 fixture) pending with a log file written. The daemon's next run drops
    that attempt and builds the index."""
    from hoodie.metadata.init import set_metadata_partitions
    from hoodie.metadata.secondary import live_secondary_entries
    from hoodie.metadata.table import open_metadata_table
    from hoodie.timeline.instant import Instant, State

    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(12), 1))
    table = define_secondary_index(path, "v_idx", "v")
    partition = "secondary_index_v_idx"
    ctx = ServiceContext(table, options={"hoodie.metadata.index.secondary.enable": "true"})
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    # What the dead attempt left behind.
    timeline = table.reload()
    timeline.transition_to_inflight(timeline.get(scheduled.instant_time))  # type: ignore[arg-type]
    mdt = open_metadata_table(table)
    stale = ctx.new_instant_time()
    requested = mdt.reload().create_requested(Instant(stale, Action.DELTA_COMMIT, State.REQUESTED))
    mdt.reload().transition_to_inflight(requested, b"")
    (path / ".hoodie" / "metadata" / partition).mkdir()
    leftover = (
        path / ".hoodie" / "metadata" / partition / f".secondary-index-v-idx-0000-0_{stale}.log.1_0-0-0"
    )
    leftover.write_bytes(b"half a log block")
    set_metadata_partitions(table, inflight_add=[partition])

    result = execute_indexing(
        ServiceContext(HoodieTable.open(str(path)), options=ctx.options),
        scheduled.instant_time,
        LocalRunner(),
    )
    assert result.instant.is_completed
    fresh = HoodieTable.open(str(path))
    assert partition in fresh.config.metadata_partitions and not fresh.config.metadata_partitions_inflight
    assert open_metadata_table(fresh).reload().get(stale) is None and not leftover.exists()
    snapshot = TableReader(fresh).snapshot()
    entries = MetadataTable.open(fresh, fresh.reload()).read_partition(partition)
    assert set(entries) == live_secondary_entries(snapshot, "v")
