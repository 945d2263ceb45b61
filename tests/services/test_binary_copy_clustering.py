"""Binary-copy clustering (Hudi's SparkBinaryCopyClusteringExecutionStrategy): each group becomes one
file stitched from its inputs' row groups; its rows equal the decode-rewrite's row for row (every
column, meta columns as Hudi sets them); hudi-rs reads the table; groups that do not qualify are
rewritten."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.bloom import BLOOM_FILTER_FOOTER_KEY, BLOOM_TYPE_FOOTER_KEY, deserialize_bloom_filter
from hoodie.config.table_config import TableType, TableVersion
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.table import HoodieTable
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.services.test_clustering import _cluster, _live_groups, _our_table, _snapshot
from tests.tables import new_table

BINARY_COPY = "org.apache.hudi.client.clustering.run.strategy.SparkBinaryCopyClusteringExecutionStrategy"
STREAM_COPY = "org.apache.hudi.client.clustering.run.strategy.SparkStreamCopyClusteringExecutionStrategy"
EXECUTION = "hoodie.clustering.execution.strategy.class"


def _files(path: Path) -> dict[str, pa.Table]:
    """Live base file name -> its rows."""
    return {name: pq.read_table(path / g.partition_path / name) for g, name in _live_groups(path).items()}


def _by_keys(files: dict[str, pa.Table]) -> dict[frozenset[str], tuple[str, pa.Table]]:
    return {frozenset(t["_hoodie_record_key"].to_pylist()): (name, t) for name, t in files.items()}


def _two_copies(tmp_path: Path, version: TableVersion, table_type: TableType) -> tuple[Path, Path]:
    _our_table(tmp_path / "copy", version, table_type)
    shutil.copytree(tmp_path / "copy", tmp_path / "rewrite")
    return tmp_path / "copy", tmp_path / "rewrite"


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
@pytest.mark.parametrize("strategy", [BINARY_COPY, STREAM_COPY])
def test_binary_copy_equals_the_rewrite_row_for_row(
    tmp_path: Path, version: TableVersion, strategy: str
) -> None:
    copy, rewrite = _two_copies(tmp_path, version, TableType.COPY_ON_WRITE)
    inputs = {
        name: pq.ParquetFile(copy / g.partition_path / name).metadata
        for g, name in _live_groups(copy).items()
    }
    scheduled, _ = _cluster(HoodieTable.open(str(copy)), {EXECUTION: strategy})
    _cluster(HoodieTable.open(str(rewrite)))
    plan = scheduled.plan.clustering_plan
    assert plan.strategy.strategy_class_name == strategy

    copied, rewritten = _files(copy), _files(rewrite)
    assert len(copied) == len(plan.input_groups)  # one file per group
    assert _snapshot(copy) == _snapshot(rewrite)
    assert hudi_rs_rows(copy) == hudi_rs_rows(rewrite) == _snapshot(copy)

    pairs = _by_keys(rewritten)
    for name, table in copied.items():
        other_name, other = pairs[frozenset(table["_hoodie_record_key"].to_pylist())]
        # every column equal in row order; _hoodie_file_name is each file's own name
        assert table.drop_columns(["_hoodie_file_name"]).equals(other.drop_columns(["_hoodie_file_name"]))
        assert set(table["_hoodie_file_name"].to_pylist()) == {name}
        assert set(other["_hoodie_file_name"].to_pylist()) == {other_name}
        # the commit times are the writes' own, not the clustering's (preserveHoodieMetadata)
        assert scheduled.instant_time not in set(table["_hoodie_commit_time"].to_pylist())

        md = pq.ParquetFile(copy / table["_hoodie_partition_path"][0].as_py() / name).metadata
        kv = {k.decode(): v.decode() for k, v in (md.metadata or {}).items()}
        keys = table["_hoodie_record_key"]
        assert kv["hoodie_min_record_key"] == min(keys.to_pylist())
        assert kv["hoodie_max_record_key"] == max(keys.to_pylist())
        bloom = deserialize_bloom_filter(kv[BLOOM_FILTER_FOOTER_KEY], kv.get(BLOOM_TYPE_FOOTER_KEY, "SIMPLE"))
        assert bloom.might_contain_many(keys).all()
        assert "original.created.by" in kv and "parquet.avro.schema" not in kv
    # the row groups are the inputs', carried over (the rewrite makes one per file)
    assert sum(
        pq.ParquetFile(copy / g.partition_path / n).metadata.num_row_groups
        for g, n in _live_groups(copy).items()
    ) == sum(m.num_row_groups for m in inputs.values())

    table = HoodieTable.open(str(copy))
    last = table.reload().completed().last()
    assert last is not None and last.requested_time == scheduled.instant_time
    meta = table.commit_metadata(last)
    assert isinstance(meta, ReplaceCommitMetadata) and meta.operation_type == "CLUSTER"
    stats = meta.write_stats()
    assert sum(s.num_writes or 0 for s in stats) == len(_snapshot(copy))
    for s in stats:
        assert s.file_size_in_bytes == (copy / (s.path or "")).stat().st_size


@pytest.mark.parametrize(
    ("table_type", "options"),
    [
        (TableType.MERGE_ON_READ, {}),
        (TableType.COPY_ON_WRITE, {"hoodie.clustering.plan.strategy.sort.columns": "x"}),
    ],
)
def test_groups_that_do_not_qualify_are_rewritten(
    tmp_path: Path, table_type: TableType, options: dict[str, str]
) -> None:
    copy, rewrite = _two_copies(tmp_path, TableVersion.NINE, table_type)
    _cluster(HoodieTable.open(str(copy)), {EXECUTION: BINARY_COPY, **options})
    _cluster(HoodieTable.open(str(rewrite)), options)
    assert _snapshot(copy) == _snapshot(rewrite) == hudi_rs_rows(copy)
    for g, name in _live_groups(copy).items():
        md = pq.ParquetFile(copy / g.partition_path / name).metadata
        assert b"parquet.avro.schema" in (md.metadata or {})  # written by the rewrite
        assert b"original.created.by" not in (md.metadata or {})


NESTED = pa.schema(
    [
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("p", pa.string()),
        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ("l", pa.list_(pa.int64())),
        ("m", pa.map_(pa.string(), pa.float64())),
    ]
)


def _nested_rows(ids: range, ts: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": f"k{i}",
                "ts": ts,
                "p": f"p{i % 2}",
                "s": None if i % 3 == 0 else {"a": i, "b": None if i % 4 == 0 else str(i)},
                "l": None if i % 5 == 0 else list(range(i % 4)),
                "m": {"x": i * 1.5} if i % 2 else None,
            }
            for i in ids
        ],
        schema=NESTED,
    )


def test_nested_and_nullable_columns_copy_as_the_rewrite_writes_them(tmp_path: Path) -> None:
    table = new_table(
        tmp_path / "copy", table_type=TableType.COPY_ON_WRITE, version=TableVersion.NINE, schema=NESTED
    )
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    for b in range(3):
        writer.insert(_nested_rows(range(b * 100, (b + 1) * 100), b + 1))
    writer.upsert(_nested_rows(range(0, 300, 7), 9))
    shutil.copytree(tmp_path / "copy", tmp_path / "rewrite")
    copy, rewrite = tmp_path / "copy", tmp_path / "rewrite"
    _cluster(HoodieTable.open(str(copy)), {EXECUTION: BINARY_COPY})
    _cluster(HoodieTable.open(str(rewrite)))

    assert _snapshot(copy) == _snapshot(rewrite) == hudi_rs_rows(copy)
    pairs = _by_keys(_files(rewrite))
    for name, data in _files(copy).items():
        _, other = pairs[frozenset(data["_hoodie_record_key"].to_pylist())]
        assert data.drop_columns(["_hoodie_file_name"]).equals(other.drop_columns(["_hoodie_file_name"]))
        md = pq.ParquetFile(copy / data["_hoodie_partition_path"][0].as_py() / name).metadata
        assert md.num_row_groups == 3 and b"original.created.by" in (
            md.metadata or {}
        )  # stitched, not rewritten


def test_binary_copy_on_spark_and_parquet_mr_reads_the_stitched_files(
    tmp_path: Path, spark: Any, spark_runner: Any
) -> None:
    """Tasks on Spark stitch as the in-process ones do; Spark's Parquet reader (parquet-mr, the
    reader Apache Hudi's Spark integration uses) reads every stitched file back."""
    copy, rewrite = _two_copies(tmp_path, TableVersion.NINE, TableType.COPY_ON_WRITE)
    _cluster(HoodieTable.open(str(copy)), {EXECUTION: BINARY_COPY}, spark_runner)
    _cluster(HoodieTable.open(str(rewrite)))
    assert _snapshot(copy) == _snapshot(rewrite) == hudi_rs_rows(copy)
    for name, data in _files(copy).items():
        path = copy / data["_hoodie_partition_path"][0].as_py() / name
        assert b"original.created.by" in (pq.ParquetFile(path).metadata.metadata or {})
        read = spark.read.parquet(str(path)).collect()
        assert [r.asDict() for r in read] == data.to_pylist()
