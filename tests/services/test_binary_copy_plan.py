"""Binary-copy clustering decided once per plan, as Hudi's performClustering decides it: a plan Hudi
would not copy whole is rewritten whole (never partly copied); where Hudi would copy and hts cannot
write the same, the plan is refused with every file of the table unchanged; the codec written for
each hoodie.parquet.compression.codec value is parquet-mr's, and pyarrow and hudi-rs read it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.bloom import BloomFilterTypeCode
from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import UnsupportedShapeError
from hoodie.io.fileio import LocalFileIO
from hoodie.parquet import footer as f
from hoodie.parquet.copy import CopyPlan, binary_copy, plan_binary_copy
from hoodie.parquet.pages import LZ4_MAX_INPUT
from hoodie.schema.avro_arrow import arrow_to_avro_schema
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.services.shapes_support import table_hash
from tests.services.test_clustering import SCHEMA, _cluster, _live_groups, _rows, _snapshot
from tests.tables import new_table

RUN = "org.apache.hudi.client.clustering.run.strategy."
BINARY_COPY = RUN + "SparkBinaryCopyClusteringExecutionStrategy"
STREAM_COPY = RUN + "SparkStreamCopyClusteringExecutionStrategy"
EXECUTION = "hoodie.clustering.execution.strategy.class"
CODEC = "hoodie.parquet.compression.codec"
EVOLUTION = "hoodie.clustering.plan.strategy.binary.copy.schema.evolution.enable"


def _table(path: Path, batches: int = 3) -> HoodieTable:
    """A COPY_ON_WRITE table with ``batches`` small file groups in each of p0, p1, p2."""
    table = new_table(path, table_type=TableType.COPY_ON_WRITE, version=TableVersion.NINE, schema=SCHEMA)
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    for b in range(batches):
        writer.insert(_rows(range(b * 90, (b + 1) * 90), b + 1))
    return HoodieTable.open(str(path))


def _copied(path: Path) -> dict[str, bool]:
    """Live base file -> whether binary copy wrote it (its footer names the stitched inputs' writers)."""
    out = {}
    for g, name in _live_groups(path).items():
        kv = pq.ParquetFile(path / g.partition_path / name).metadata.metadata or {}
        out[name] = b"original.created.by" in kv
    return out


def _codecs(path: Path) -> set[int]:
    """The Thrift codec id of every column chunk of every live base file."""
    out = set()
    for g, name in _live_groups(path).items():
        meta = f.read_footer((path / g.partition_path / name).read_bytes(), name)
        for rg in meta.get_list(f.FMD_ROW_GROUPS):
            assert isinstance(rg, f.Struct)
            for chunk in rg.get_list(f.RG_COLUMNS):
                assert isinstance(chunk, f.Struct)
                cm = chunk.get_struct(f.CC_META)
                assert cm is not None
                out.add(cm.get_int(f.CM_CODEC))
    return out


@pytest.mark.parametrize("strategy", [BINARY_COPY, STREAM_COPY])
def test_a_plan_hudi_would_not_copy_whole_is_rewritten_whole(tmp_path: Path, strategy: str) -> None:
    path = tmp_path / "t"
    _table(path)
    # One more file group in p0 only, with SIMPLE bloom filters: the plan's files then hold two type
    # codes, so Hudi's checker (run over every file of every group) rewrites every group, p1 and p2 too.
    simple = WriteOptions(small_file_limit=0, bloom_type=BloomFilterTypeCode.SIMPLE)
    HoodieWriter(HoodieTable.open(str(path)), options=simple).insert(_rows(range(500, 540), 9, partitions=1))
    shutil.copytree(path, tmp_path / "rewrite")
    scheduled, _ = _cluster(HoodieTable.open(str(path)), {EXECUTION: strategy, EVOLUTION: "true"})
    _cluster(HoodieTable.open(str(tmp_path / "rewrite")))
    groups = scheduled.plan.clustering_plan.input_groups
    assert len(groups) == 3 and all(len(g.slices) > 1 for g in groups)
    copied = _copied(path)
    assert len(copied) == 3 and not any(copied.values())  # every group rewritten, none copied
    assert _snapshot(path) == _snapshot(tmp_path / "rewrite") == hudi_rs_rows(path)


def test_stream_copy_without_schema_evolution_skips_the_checker_and_copies_every_group(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    _table(path)
    simple = WriteOptions(small_file_limit=0, bloom_type=BloomFilterTypeCode.SIMPLE)
    HoodieWriter(HoodieTable.open(str(path)), options=simple).insert(_rows(range(500, 540), 9, partitions=1))
    before = _snapshot(path)
    # Hudi's SparkStreamCopy... skips ParquetBinaryCopyChecker when schema evolution is off; the group
    # holding both bloom type codes cannot be merged (Hudi's merger cannot OR them): refused whole.
    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table, options={EXECUTION: STREAM_COPY})
    scheduled = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    hashes = table_hash(path)
    with pytest.raises(UnsupportedShapeError, match="bloom filter type codes differ") as err:
        execute_clustering(ctx, scheduled.instant_time, LocalRunner())
    assert f"{EXECUTION}={STREAM_COPY}" in str(err.value)
    assert table_hash(path) == hashes
    # Without the odd file group, every group is copied.
    other = tmp_path / "other"
    _table(other)
    _cluster(HoodieTable.open(str(other)), {EXECUTION: STREAM_COPY})
    assert all(_copied(other).values()) and len(_copied(other)) == 3
    assert _snapshot(path) == before


def _refused(path: Path, options: dict[str, str], match: str) -> None:
    """Scheduling succeeds; executing refuses with ``match``, every file of the table unchanged."""
    table = HoodieTable.open(str(path))
    ctx = ServiceContext(table, options=options)
    scheduled = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    hashes = table_hash(path)
    with pytest.raises(UnsupportedShapeError, match=match) as err:
        execute_clustering(ctx, scheduled.instant_time, LocalRunner())
    assert f"clustering {scheduled.instant_time} is refused" in str(err.value)
    assert str(err.value).endswith("Nothing was written.")
    assert table_hash(path) == hashes
    instant = table.reload().get(scheduled.instant_time, Action.REPLACE_COMMIT)
    assert instant is not None and instant.state is State.REQUESTED  # never went inflight


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({EXECUTION: BINARY_COPY, CODEC: "none"}, "none is not a parquet-mr CompressionCodecName"),
        ({CODEC: "none"}, "none is not a parquet-mr CompressionCodecName"),
        ({EXECUTION: BINARY_COPY, CODEC: "lzo"}, "hts cannot write lzo pages"),
    ],
)
def test_codecs_hudi_fails_on_or_hts_cannot_write_are_refused(
    tmp_path: Path, options: dict[str, str], match: str
) -> None:
    path = tmp_path / "t"
    _table(path, batches=2)
    _refused(path, options, match)


def _evolved(path: Path) -> None:
    """p0..p2 file groups with SCHEMA, then one more file group per partition with a column added."""
    _table(path, batches=2)
    wider = SCHEMA.append(pa.field("z", pa.string()))
    extra = _rows(range(700, 760), 9)
    extra = pa.Table.from_arrays([*extra.columns, pa.array(["z"] * extra.num_rows)], schema=wider)
    avro = arrow_to_avro_schema(wider, "t_record", "hoodie.t")
    HoodieWriter(HoodieTable.open(str(path)), schema=avro, options=WriteOptions(small_file_limit=0)).insert(
        extra
    )


@pytest.mark.parametrize("evolution", ["false", "true"])
def test_groups_of_different_schemas_hudi_would_copy_are_refused(tmp_path: Path, evolution: str) -> None:
    path = tmp_path / "t"
    _evolved(path)
    match = "different Parquet schema" if evolution == "false" else "does not have the table's schema"
    _refused(path, {EXECUTION: BINARY_COPY, EVOLUTION: evolution}, match)


def test_groups_of_different_schemas_hudi_would_rewrite_are_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _evolved(path)
    shutil.copytree(path, tmp_path / "rewrite")
    _cluster(
        HoodieTable.open(str(path)),
        {EXECUTION: BINARY_COPY, "hoodie.clustering.plan.strategy.sort.columns": "x"},
    )
    _cluster(
        HoodieTable.open(str(tmp_path / "rewrite")), {"hoodie.clustering.plan.strategy.sort.columns": "x"}
    )
    assert not any(_copied(path).values())
    assert _snapshot(path) == _snapshot(tmp_path / "rewrite") == hudi_rs_rows(path)


# parquet-mr's CompressionCodecName, by the name Hudi's hoodie.parquet.compression.codec takes
HUDI_CODECS = {"uncompressed": 0, "snappy": 1, "gzip": 2, "brotli": 4, "lz4": 5, "zstd": 6, "lz4_raw": 7}


@pytest.mark.parametrize("strategy", [BINARY_COPY, RUN + "SparkSortAndSizeExecutionStrategy"])
@pytest.mark.parametrize("codec", sorted(HUDI_CODECS))
def test_clustering_writes_the_codec_hudi_writes_and_readers_read_it(
    tmp_path: Path, codec: str, strategy: str
) -> None:
    path = tmp_path / "t"
    _table(path)
    shutil.copytree(path, tmp_path / "rewrite")
    _cluster(HoodieTable.open(str(path)), {EXECUTION: strategy, CODEC: codec})
    _cluster(HoodieTable.open(str(tmp_path / "rewrite")))
    assert all(c == (strategy == BINARY_COPY) for c in _copied(path).values())
    assert _codecs(path) == {HUDI_CODECS[codec]}
    expected = _snapshot(tmp_path / "rewrite")
    assert _snapshot(path) == expected == hudi_rs_rows(path)
    for g, name in _live_groups(path).items():
        assert pq.read_table(path / g.partition_path / name).num_rows > 0


def test_parquet_mr_reads_the_lz4_pages_hts_writes(tmp_path: Path, spark: Any) -> None:
    """Spark's Parquet reader (parquet-mr with Hadoop's Lz4Codec, what Hudi reads with) reads the
    Hadoop-framed LZ4 of both strategies, and of a page longer than one frame's input."""
    copied, rewritten = tmp_path / "copied", tmp_path / "rewritten"
    _table(copied)
    shutil.copytree(copied, rewritten)
    _cluster(HoodieTable.open(str(copied)), {EXECUTION: BINARY_COPY, CODEC: "lz4"})
    _cluster(HoodieTable.open(str(rewritten)), {CODEC: "lz4"})
    for path in (copied, rewritten):
        assert _codecs(path) == {HUDI_CODECS["lz4"]}
        for g, name in _live_groups(path).items():
            data = pq.read_table(path / g.partition_path / name)
            read = spark.read.parquet(str(path / g.partition_path / name)).collect()
            assert [r.asDict() for r in read] == data.to_pylist()
    big = pa.table(
        {
            "_hoodie_file_name": pa.array(["x"] * 300_000),
            "v": pa.array(np.random.default_rng(7).integers(0, 1 << 40, 300_000)),
        }
    )
    source, out = tmp_path / "big-raw.parquet", tmp_path / "big.parquet"
    pq.write_table(big, source, compression="lz4", data_page_size=2 << 20, use_dictionary=False)
    fileio = LocalFileIO()
    plan = plan_binary_copy(fileio, [str(source)], "lz4")
    assert isinstance(plan, CopyPlan)
    binary_copy(fileio, plan, str(out))
    column = pq.ParquetFile(out).metadata.row_group(0).column(1)
    assert column.total_uncompressed_size > 2 * LZ4_MAX_INPUT  # pages longer than one frame's input
    rows = spark.read.parquet(str(out)).orderBy("v").select("v").collect()
    assert [r.v for r in rows] == sorted(big["v"].to_pylist())
    assert pq.read_table(out)["v"].equals(big["v"])


@pytest.mark.parametrize(("strategy", "copied"), [(BINARY_COPY, False), (STREAM_COPY, True)])
def test_two_level_lists_hudi_wrote_follow_hudis_checker(
    table_copy: Any, strategy: str, copied: bool
) -> None:
    """A table Apache Hudi wrote with two-level 'array' lists: SparkBinaryCopy's checker sends the plan
    to the rewrite; SparkStreamCopy without schema evolution skips the checker and copies as is."""
    path = table_copy("sample_table/cow/v8_nonpartitioned")
    shutil.copytree(path, path.parent / "rewrite")
    before = hudi_rs_rows(path)
    _cluster(
        HoodieTable.open(str(path)),
        {EXECUTION: strategy, "hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)},
    )
    _cluster(
        HoodieTable.open(str(path.parent / "rewrite")),
        {"hoodie.clustering.plan.strategy.small.file.limit": str(1 << 30)},
    )
    outputs = _copied(path)
    assert outputs and all(c is copied for c in outputs.values())
    assert _snapshot(path) == _snapshot(path.parent / "rewrite")
    assert hudi_rs_rows(path) == before


@pytest.mark.parametrize("strategy", [BINARY_COPY, RUN + "SparkSortAndSizeExecutionStrategy"])
def test_lz4_pages_longer_than_hadoops_buffer_read_in_hudi_rs(tmp_path: Path, strategy: str) -> None:
    """Pages over parquet-mr's 256 KiB LZ4 frame input are written as one frame, which hudi-rs reads."""
    path = tmp_path / "t"
    table = new_table(path, table_type=TableType.COPY_ON_WRITE, version=TableVersion.NINE, schema=SCHEMA)
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    rng = np.random.default_rng(11)
    n = 60_000
    for b in range(2):
        writer.insert(
            pa.table(
                {
                    "id": [f"k{b}-{i}" for i in range(n)],
                    "ts": np.full(n, b + 1),
                    "x": rng.integers(0, 1 << 60, n),
                    "y": rng.random(n),
                    "p": ["p0"] * n,
                },
                schema=SCHEMA,
            )
        )
    before = hudi_rs_rows(path)
    _cluster(HoodieTable.open(str(path)), {EXECUTION: strategy, CODEC: "lz4"})
    assert _codecs(path) == {HUDI_CODECS["lz4"]}
    for g, name in _live_groups(path).items():
        md = pq.ParquetFile(path / g.partition_path / name).metadata
        x = next(md.row_group(0).column(j) for j in range(md.num_columns) if md.schema.column(j).name == "x")
        assert x.total_uncompressed_size > LZ4_MAX_INPUT  # one page (pyarrow's 1 MiB pages) past it
    assert hudi_rs_rows(path) == before
