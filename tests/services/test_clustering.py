"""Clustering: our plans match the plans Apache Hudi wrote and decode with its schemas; plans Hudi
wrote run with our executor; hudi-rs reads the same snapshot after clustering; small files are
rewritten into fewer, ordered files; writers keep away from file groups under clustering."""

from __future__ import annotations

import io
import itertools
import json
import random
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import TableServiceError, WriteConflictError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.models.clustering import RequestedReplaceMetadata
from hoodie.models.codec import load_schema
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clustering import (
    ClusteringPolicy,
    execute_clustering,
    plan_clustering,
    schedule_clustering,
)
from hoodie.services.layout import (
    LayoutOptions,
    curve_keys,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import NO_METADATA_TABLE, hudi_rs_rows
from tests.tables import age_heartbeats, hts, new_table

SCHEMA = pa.schema(
    [("id", pa.string()), ("ts", pa.int64()), ("x", pa.int64()), ("y", pa.float64()), ("p", pa.string())]
)
SORT = "hoodie.clustering.plan.strategy.sort.columns"
TARGET = "hoodie.clustering.plan.strategy.target.file.max.bytes"
LAYOUT = "hoodie.layout.optimize.strategy"
PLANS = "org.apache.hudi.client.clustering.plan.strategy."
VERSIONS = [TableVersion.SIX, TableVersion.EIGHT, TableVersion.NINE]


def _rows(ids: range | list[int], ts: int, *, nulls: bool = False, partitions: int = 3) -> pa.Table:
    rnd = random.Random(ts * 7919 + len(ids))
    out = []
    for i in ids:
        x: int | None = rnd.randint(-1000, 1000)
        if nulls and rnd.random() < 0.1:
            x = None
        out.append({"id": f"k{i}", "ts": ts, "x": x, "y": rnd.uniform(-50, 50), "p": f"p{i % partitions}"})
    return pa.Table.from_pylist(out, schema=SCHEMA)


def _our_table(
    path: Path,
    version: TableVersion = TableVersion.EIGHT,
    table_type: TableType = TableType.MERGE_ON_READ,
    *,
    batches: int = 4,
    per_batch: int = 150,
    nulls: bool = False,
) -> HoodieTable:
    """A table with ``batches`` small file groups per partition (p0, p1, p2), updates and deletes."""
    table = new_table(path, table_type=table_type, version=version, schema=SCHEMA)
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    for b in range(batches):
        writer.insert(_rows(range(b * per_batch, (b + 1) * per_batch), b + 1, nulls=nulls))
    writer.upsert(_rows(range(0, batches * per_batch, 7), 50, nulls=nulls))
    writer.delete(_rows([3, 10, 17], 60).select(["id", "p"]))
    return HoodieTable.open(str(path))


def _cluster(table: HoodieTable, options: dict[str, str] | None = None, runner: Any = None) -> Any:
    ctx = ServiceContext(table, options=options or {})
    scheduled = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    result = execute_clustering(ctx, scheduled.instant_time, runner or LocalRunner())
    return scheduled, result


def _live_groups(path: Path) -> dict[FileGroupId, str]:
    """Live file group -> its latest base file name, as readers see them."""
    table = HoodieTable.open(str(path))
    view = table.file_system_view(timeline=table.reload())
    return {s.group_id: s.base_file.name for s in view.latest_file_slices() if s.base_file is not None}


def _live_sizes(path: Path) -> dict[str, list[int]]:
    """Sizes of the live base files, per partition."""
    out: dict[str, list[int]] = {}
    for group, name in _live_groups(path).items():
        out.setdefault(group.partition_path, []).append((path / group.partition_path / name).stat().st_size)
    return out


def _target_for(path: Path, files: int) -> str:
    """A target.file.max.bytes that makes every partition's group ask for ``files`` output files."""
    return str(max(-(-sum(sizes) // files) for sizes in _live_sizes(path).values()))


def _snapshot(path: Path) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _timeline_dir(path: Path, version: TableVersion) -> Path:
    return path / ".hoodie" / ("timeline" if version >= TableVersion.EIGHT else "")


# -- end to end on tables our writer made ---------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_clustering_rewrites_small_files_and_keeps_the_snapshot(
    tmp_path: Path, version: TableVersion, table_type: TableType
) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version, table_type)
    before_rs = hudi_rs_rows(path)
    before_ours = _snapshot(path)
    groups_before = _live_groups(path)
    assert len(groups_before) == 12

    scheduled, _ = _cluster(table)
    ts = scheduled.instant_time
    plan = scheduled.plan.clustering_plan
    inputs = {FileGroupId(p, f) for p, f in plan.file_groups()}
    assert inputs == set(groups_before)  # every group is small: 3 partitions x 4 groups
    assert [len(g.slices) for g in plan.input_groups] == [4, 4, 4]

    # The snapshot is unchanged for hudi-rs and for us; replaced groups are gone from the view.
    assert hudi_rs_rows(path) == before_rs
    assert _snapshot(path) == before_ours
    groups_after = _live_groups(path)
    assert not set(groups_after) & inputs
    assert len(groups_after) == sum(g.num_output_file_groups for g in plan.input_groups) == 3
    assert all(name.endswith(f"_{ts}.parquet") for name in groups_after.values())
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    assert set(data["_hoodie_file_name"].to_pylist()) == set(groups_after.values())
    # preserveHoodieMetadata: records keep their commit times (several of them, never the clustering's).
    times = set(data["_hoodie_commit_time"].to_pylist())
    assert ts not in times and len(times) >= 4

    # Timeline files: requested plan, empty inflight, completed replacecommit.
    tl = _timeline_dir(path, version)
    action = "clustering" if version >= TableVersion.EIGHT else "replacecommit"
    assert (tl / f"{ts}.{action}.inflight").read_bytes() == b""
    requested = (tl / f"{ts}.{action}.requested").read_bytes()
    (record,) = list(
        fastavro.reader(
            io.BytesIO(requested), reader_schema=load_schema("HoodieRequestedReplaceMetadata", version)
        )
    )
    assert record["operationType"] == "CLUSTER" and record["version"] == 1
    assert record["clusteringPlan"]["preserveHoodieMetadata"] is True
    assert record["clusteringPlan"]["strategy"]["strategyClassName"].endswith(
        "SparkSortAndSizeExecutionStrategy"
    )
    assert ("missingSchedulePartitions" in record["clusteringPlan"]) == (version >= TableVersion.EIGHT)
    for group in record["clusteringPlan"]["inputGroups"]:
        assert set(group["metrics"]) == {
            "TOTAL_LOG_FILES",
            "TOTAL_IO_MB",
            "TOTAL_IO_READ_MB",
            "TOTAL_LOG_FILES_SIZE",
            "TOTAL_IO_WRITE_MB",
        }
        for piece in group["slices"]:
            assert piece["dataFilePath"].startswith(f"file:{path}/") and piece["bootstrapFilePath"] == ""
            assert all(p.startswith(f"file:{path}/") for p in piece["deltaFilePaths"])
    assert RequestedReplaceMetadata.from_bytes(requested, version) == scheduled.plan

    done = HoodieTable.open(str(path))
    instant = done.timeline.get(ts)
    assert instant is not None and instant.is_completed and instant.action is Action.REPLACE_COMMIT
    completed = (tl / done.timeline.state_file(ts, State.COMPLETED)).read_bytes()  # type: ignore[operator]
    if version >= TableVersion.EIGHT:
        (raw,) = list(
            fastavro.reader(
                io.BytesIO(completed), reader_schema=load_schema("HoodieReplaceCommitMetadata", version)
            )
        )
    else:
        raw = json.loads(completed)
        assert "version" not in raw
    assert raw["operationType"] == "CLUSTER" and raw["compacted"] is False
    assert json.loads(raw["extraMetadata"]["schema"])["type"] == "record"
    assert {(p, f) for p, ids in raw["partitionToReplaceFileIds"].items() for f in ids} == {
        (g.partition_path, g.file_id) for g in inputs
    }
    meta = done.commit_metadata(instant)
    assert isinstance(meta, ReplaceCommitMetadata)
    stats = list(meta.write_stats())
    assert {s.path for s in stats} == {f"{g.partition_path}/{n}" for g, n in groups_after.items()}
    assert all(s.prev_commit == "null" and s.num_writes == s.num_inserts for s in stats)
    assert sum(s.num_writes or 0 for s in stats) == len(before_rs)
    # The markers are gone once the instant completed.
    assert not (path / ".hoodie" / ".temp" / ts).exists()


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_several_output_files_per_group_split_evenly(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version, TableType.COPY_ON_WRITE)
    before = hudi_rs_rows(path)
    scheduled, result = _cluster(table, {TARGET: _target_for(path, 3)})
    assert [g.num_output_file_groups for g in scheduled.plan.clustering_plan.input_groups] == [3, 3, 3]
    assert hudi_rs_rows(path) == before
    counts: dict[str, list[int]] = {}
    for s in result.write_stats:
        counts.setdefault(s.partition_path, []).append(s.num_writes)
    for partition, per_file in counts.items():
        assert max(per_file) - min(per_file) <= 1, (partition, per_file)


# -- layout ---------------------------------------------------------------------------------


def _output_tables(path: Path, result: Any) -> list[pa.Table]:
    return [pq.read_table(path / s.path) for s in result.write_stats]


def test_linear_sort_orders_rows_within_each_file(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.NINE, TableType.MERGE_ON_READ, nulls=True)
    before = hudi_rs_rows(path)
    scheduled, result = _cluster(table, {SORT: "x, y", TARGET: _target_for(path, 3)})
    assert scheduled.plan.clustering_plan.strategy.strategy_params == {SORT: "x, y"}
    assert hudi_rs_rows(path) == before
    outputs = _output_tables(path, result)
    assert len(outputs) == 9  # three files per partition
    saw_null = False
    for data in outputs:
        keys = [
            (x is not None, x if x is not None else 0, y)
            for x, y in zip(data["x"].to_pylist(), data["y"].to_pylist(), strict=True)
        ]
        saw_null |= any(not k[0] for k in keys)
        assert keys == sorted(keys)  # nulls first, then x, then y
    assert saw_null
    # Files of one partition hold consecutive ranges of x.
    by_partition: dict[str, list[tuple[int, int]]] = {}
    for s, data in zip(result.write_stats, outputs, strict=True):
        xs = [x for x in data["x"].to_pylist() if x is not None]
        by_partition.setdefault(s.partition_path, []).append((min(xs), max(xs)))
    for ranges in by_partition.values():
        ranges.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges))


def _spread(tables: list[pa.Table], column: str) -> float:
    return float(sum(pc.max(t[column]).as_py() - pc.min(t[column]).as_py() for t in tables))


def _area(data: pa.Table) -> float:
    xs, ys = data["x"].to_numpy(), data["y"].to_numpy()
    return float((xs.max() - xs.min()) * (ys.max() - ys.min()))


@pytest.mark.parametrize("strategy", ["z-order", "hilbert"])
@pytest.mark.parametrize("method", ["direct", "sample"])
def test_space_curves_order_files_and_tighten_their_ranges(
    tmp_path: Path, strategy: str, method: str
) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.EIGHT, TableType.COPY_ON_WRITE, per_batch=400)
    before = hudi_rs_rows(path)
    inputs = [
        pq.read_table(f) for f in path.glob("p*/*.parquet") if f.name in set(_live_groups(path).values())
    ]
    options = {
        SORT: "y,x",
        LAYOUT: strategy,
        "hoodie.layout.optimize.curve.build.method": method,
        TARGET: _target_for(path, 4),
    }
    _, result = _cluster(table, options)
    assert hudi_rs_rows(path) == before
    outputs = _output_tables(path, result)
    assert len(outputs) == len(inputs) == 12
    # Output files cover smaller boxes in (x, y) than the files they came from, in both dimensions:
    # the curve clusters by both columns, where a linear sort would only narrow the first.
    assert sum(_area(d) for d in outputs) < 0.6 * sum(_area(d) for d in inputs)
    for column in ("x", "y"):
        assert _spread(outputs, column) < 0.8 * _spread(inputs, column)
    if method == "direct":  # the curve key of a file's rows never decreases
        layout = LayoutOptions.from_options(options)
        for data in outputs:
            words = curve_keys(data, ["y", "x"], layout)
            values = [tuple(int(w) for w in row) for row in words]
            assert values == sorted(values)


# -- plans Apache Hudi wrote ----------------------------------------------------------------

HUDI_CLUSTERED = [
    "sample_table/cow/v9_txns_simple_nometa",
    "sample_table/mor/avro/v9_txns_nonpart_nometa",
    "sample_table/mor/avro/v9_txns_simple_nometa",
]


def _hudi_clustering(path: Path) -> tuple[str, Path]:
    timeline = path / ".hoodie" / "timeline"
    requested = next(timeline.glob("*.clustering.requested"))
    return requested.name.split(".")[0], timeline


def _unwrite(path: Path, timeline: Path, ts: str) -> None:
    """Remove instant ``ts`` and every data file named with it (keeps the requested file)."""
    for f in list(timeline.glob(f"{ts}_*")) + list(timeline.glob(f"{ts}.*.inflight")):
        f.unlink()
    for f in path.rglob(f"*_{ts}.parquet"):
        f.unlink()
    for f in path.rglob(f".*_{ts}.log.*"):
        f.unlink()


@pytest.mark.parametrize("name", HUDI_CLUSTERED)
def test_the_clustering_plan_apache_hudi_wrote_runs_with_our_executor(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    ts, timeline = _hudi_clustering(path)
    expected = hudi_rs_rows(path)
    hudi_meta = ReplaceCommitMetadata.from_bytes(next(timeline.glob(f"{ts}_*.replacecommit")).read_bytes(), 9)
    _unwrite(path, timeline, ts)
    table = HoodieTable.open(str(path))
    instant = table.timeline.get(ts, Action.CLUSTERING)
    assert instant is not None and instant.state is State.REQUESTED
    plan = table.clustering_plan(ts).clustering_plan
    assert plan is not None
    # The plan names files on the machine that wrote it; the executor finds them in this copy.
    assert all(s.data_file_path.startswith("file:/tmp/v9-gen/") for g in plan.input_groups for s in g.slices)
    assert hudi_rs_rows(path) == expected  # pending clustering: the inputs are still the live groups

    result = execute_clustering(ServiceContext(table), ts, LocalRunner())
    assert hudi_rs_rows(path) == expected
    done = HoodieTable.open(str(path))
    meta = done.commit_metadata(done.timeline.get(ts))  # type: ignore[arg-type]
    assert isinstance(meta, ReplaceCommitMetadata)
    assert meta.replaced_file_ids() == hudi_meta.replaced_file_ids()
    ours = {
        p: sorted(s.num_writes or 0 for s in stats)
        for p, stats in (meta.partition_to_write_stats or {}).items()
    }
    theirs = {
        p: sorted(s.num_writes or 0 for s in stats)
        for p, stats in (hudi_meta.partition_to_write_stats or {}).items()
    }
    assert ours == theirs
    assert len(result.write_stats) == len(list(hudi_meta.write_stats()))


def _rewind(path: Path, ts: str) -> None:
    """Remove instant ``ts`` and everything after it, with their data files (a table as of before ``ts``)."""
    timeline = path / ".hoodie" / "timeline"
    later = sorted({f.name.split(".")[0].split("_")[0] for f in timeline.iterdir() if f.is_file()})
    for t in (t for t in later if t >= ts):
        done = list(timeline.glob(f"{t}_*.*"))
        for f in done:
            model = ReplaceCommitMetadata if f.name.endswith(".replacecommit") else CommitMetadata
            meta = model.from_bytes(f.read_bytes(), 9)
            for stat in meta.write_stats():
                (path / (stat.path or "")).unlink(missing_ok=True)
        for f in timeline.glob(f"{t}*"):
            f.unlink()
        for f in path.rglob(f"*_{t}.parquet"):
            f.unlink()


@pytest.mark.parametrize("name", HUDI_CLUSTERED)
def test_our_planner_makes_the_plan_apache_hudi_made(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    ts, timeline = _hudi_clustering(path)
    hudi = RequestedReplaceMetadata.from_bytes((timeline / f"{ts}.clustering.requested").read_bytes(), 9)
    _rewind(path, ts)
    table = HoodieTable.open(str(path))
    ours = plan_clustering(table, ClusteringPolicy())
    assert ours is not None and ours.clustering_plan is not None and hudi.clustering_plan is not None

    def shape(meta: RequestedReplaceMetadata) -> Any:
        plan = meta.clustering_plan
        assert plan is not None
        groups = [
            (
                [
                    (
                        s.file_id,
                        s.partition_path,
                        s.data_file_path.rsplit("/", 1)[-1],
                        s.bootstrap_file_path,
                        s.version,
                    )
                    for s in g.slices or ()
                ],
                g.metrics,
                g.num_output_file_groups,
                g.extra_metadata,
                g.version,
            )
            for g in plan.input_groups or ()
        ]
        return (
            meta.operation_type,
            meta.extra_metadata,
            meta.version,
            groups,
            plan.strategy,
            plan.extra_metadata,
            plan.version,
            plan.preserve_hoodie_metadata,
            plan.missing_schedule_partitions,
        )

    assert shape(ours) == shape(hudi)


@pytest.mark.parametrize("name", NO_METADATA_TABLE)
def test_clustering_tables_apache_hudi_wrote_keeps_their_snapshot(table_copy: Any, name: str) -> None:
    path = table_copy(name)
    before = hudi_rs_rows(path)
    table = HoodieTable.open(str(path))
    groups_before = _live_groups(path)
    scheduled, result = _cluster(table)
    assert hudi_rs_rows(path) == before
    inputs = {FileGroupId(p, f) for p, f in scheduled.plan.clustering_plan.file_groups()}
    groups_after = _live_groups(path)
    assert not inputs & set(groups_after)
    assert len(groups_after) == len(groups_before) - len(inputs & set(groups_before)) + len(
        result.write_stats
    )


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_writers_keep_away_from_file_groups_under_clustering(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version, TableType.MERGE_ON_READ, batches=2)
    ctx = ServiceContext(table)
    scheduled = schedule_clustering(ctx, ClusteringPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    writer = HoodieWriter(HoodieTable.open(str(path)), options=WriteOptions(small_file_limit=0))
    with pytest.raises(WriteConflictError, match="pending clustering"):
        writer.upsert(_rows([1, 2], 80))
    writer.insert(_rows([5000, 5001], 81))  # new file groups are fine
    execute_clustering(ctx, scheduled.instant_time, LocalRunner())
    after = HoodieTable.open(str(path))
    HoodieWriter(after, options=WriteOptions(small_file_limit=0)).upsert(_rows([1, 2], 90))
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    by_id = dict(zip(data["id"].to_pylist(), data["ts"].to_pylist(), strict=True))
    assert by_id["k1"] == by_id["k2"] == 90 and by_id["k5000"] == 81
    assert len(data) == 300 - 3 + 2  # k3, k10 and k17 were deleted


def _foreign_upsert(path: Path, tmp_path: Path, ts: str, rows: pa.Table) -> None:
    """An upsert by a writer that ignores the pending clustering ``ts`` (another engine): made on
    a copy that lacks the plan, then its new and changed files are brought over."""
    other = tmp_path / "other"
    shutil.copytree(path, other)
    for plan_file in (other / ".hoodie").rglob(f"{ts}.*.requested"):
        plan_file.unlink()
    sizes = {p.relative_to(other): p.stat().st_size for p in other.rglob("*") if p.is_file()}
    HoodieWriter(HoodieTable.open(str(other))).upsert(rows)
    for f in other.rglob("*"):
        rel = f.relative_to(other)
        if f.is_file() and ".heartbeat" not in rel.parts and sizes.get(rel) != f.stat().st_size:
            shutil.copy(f, path / rel)


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_a_write_that_ignored_the_clustering_stops_it_from_completing(
    tmp_path: Path, version: TableVersion
) -> None:
    path = tmp_path / "t"
    table = _our_table(path, version, TableType.MERGE_ON_READ, batches=2)
    scheduled = schedule_clustering(ServiceContext(table), ClusteringPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time
    _foreign_upsert(path, tmp_path, ts, _rows([1], 99))
    expected = hudi_rs_rows(path)
    assert any("'ts': 99" in r for r in expected)
    # Its delta commit wrote a log file the plan does not name: rewriting the group would lose it.
    with pytest.raises(TableServiceError, match="cannot complete"):
        execute_clustering(ServiceContext(HoodieTable.open(str(path))), ts, LocalRunner())
    assert HoodieTable.open(str(path)).timeline.get(ts).is_inflight  # type: ignore[union-attr]
    assert hudi_rs_rows(path) == expected


def test_an_abandoned_attempt_is_rolled_back_and_run_again(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _our_table(path, TableVersion.NINE, TableType.MERGE_ON_READ, batches=2)
    before = hudi_rs_rows(path)
    ctx = ServiceContext(table)
    scheduled = schedule_clustering(ctx, ClusteringPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    ts = scheduled.instant_time
    # A dead attempt: inflight, a torn file with its marker, no heartbeat.
    timeline = table.reload()
    timeline.transition_to_inflight(timeline.get(ts, Action.CLUSTERING))  # type: ignore[arg-type]
    torn = path / "p0" / f"00000000-0000-0000-0000-000000000000-0_0-0-0_{ts}.parquet"
    torn.write_bytes(b"PAR1" + b"\0" * 10)
    marker = path / ".hoodie" / ".temp" / ts / "p0" / f"{torn.name}.marker.CREATE"
    marker.parent.mkdir(parents=True)
    marker.write_bytes(b"")
    assert hudi_rs_rows(path) == before
    result = execute_clustering(ServiceContext(HoodieTable.open(str(path))), ts, LocalRunner())
    assert not torn.exists()
    assert hudi_rs_rows(path) == before
    written = {s.path for s in result.write_stats}
    named = {str(p.relative_to(path)) for p in path.rglob(f"*_{ts}.parquet")}
    assert named == written


CRASH_POINTS = [
    "clustering.after_inflight",
    "clustering.task_mid_write",
    "clustering.task_after_write",
    "clustering.before_complete",
]


@pytest.mark.parametrize("crash_at", CRASH_POINTS)
def test_a_killed_clustering_recovers(tmp_path: Path, crash_at: str) -> None:
    path = tmp_path / "t"
    _our_table(path, TableVersion.EIGHT, TableType.MERGE_ON_READ, batches=2)
    before = hudi_rs_rows(path)
    options = ["--option", f"{SORT}=x"]
    scheduled = hts("schedule", "clustering", str(path), *options)
    assert scheduled.returncode == 0, scheduled.stderr
    ts = scheduled.stdout.split()[2]
    killed = hts(
        "execute", "clustering", str(path), "--spark-master", "in-process", *options, crash_at=crash_at
    )
    assert killed.returncode == 97, killed.stderr
    assert hudi_rs_rows(path) == before  # the dead attempt is invisible
    age_heartbeats(path)
    resumed = hts("execute", "clustering", str(path), "--spark-master", "in-process", *options)
    assert resumed.returncode == 0, resumed.stderr
    table = HoodieTable.open(str(path))
    done = table.timeline.get(ts)
    assert done is not None and done.is_completed
    assert hudi_rs_rows(path) == before
    written = {s.path for s in table.commit_metadata(done).write_stats()}
    assert {str(p.relative_to(path)) for p in path.rglob(f"*_{ts}.parquet")} == written


def test_clustering_on_spark_equals_local(tmp_path: Path, spark_runner: Any) -> None:
    local = _our_table(tmp_path / "local", TableVersion.EIGHT, TableType.MERGE_ON_READ)
    shutil.copytree(tmp_path / "local", tmp_path / "spark")
    on_spark = HoodieTable.open(str(tmp_path / "spark"))
    options = {SORT: "x,y", LAYOUT: "hilbert"}
    _, local_result = _cluster(local, options)
    _, spark_result = _cluster(on_spark, options, spark_runner)
    assert _snapshot(tmp_path / "local") == _snapshot(tmp_path / "spark")
    assert hudi_rs_rows(tmp_path / "spark") == hudi_rs_rows(tmp_path / "local")
    assert sorted(s.num_writes for s in spark_result.write_stats) == sorted(
        s.num_writes for s in local_result.write_stats
    )
    for a, b in zip(
        sorted(local_result.write_stats, key=lambda s: s.partition_path),
        sorted(spark_result.write_stats, key=lambda s: s.partition_path),
        strict=True,
    ):
        assert (
            pq.read_table(tmp_path / "local" / a.path)
            .drop_columns(["_hoodie_file_name"])
            .equals(pq.read_table(tmp_path / "spark" / b.path).drop_columns(["_hoodie_file_name"]))
        )
