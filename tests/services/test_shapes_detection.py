"""How a table's shape is found: the bucket form of every file id, schema-on-read evidence, the index
options a run declares; the verdict cached until the timeline changes and carried over new writes;
and checked again when a service or a write commits.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableVersion
from hoodie.errors import UnsupportedShapeError, UnsupportedTableError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.io.fileio import LocalFileIO
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.shape.matrix import Shape
from hoodie.shape.table_shape import TableShape
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.options import WriteOperation
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.services.shapes_support import (
    BUCKET_OPTIONS,
    base_table,
    bucket_file_id,
    bucket_table,
    expression_index,
    file_ids,
    rename_file_ids,
)
from tests.tables import rows


def test_one_non_bucket_file_id_makes_a_table_not_a_bucket_table(tmp_path: Path) -> None:
    """A random UUID starts with 8 digits ~2.3% of the time: every file group must have the form."""
    path = base_table(tmp_path / "t")
    ids = file_ids(path)
    # All but the last file group get bucket ids; the last gets a prefix of letters (what a random
    # UUID has 97.7% of the time).
    rename_file_ids(path, lambda n, old: bucket_file_id(n, old) if n < len(ids) - 1 else "abcdefgh" + old[8:])
    shape = HoodieTable.open(str(path)).shape()
    assert not shape.has(Shape.SIMPLE_BUCKET)
    assert shape.refusal("clustering") is None


def test_a_uuid_that_happens_to_start_with_eight_digits_counts_only_with_the_others(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t")
    rename_file_ids(path, bucket_file_id)
    shape = HoodieTable.open(str(path)).shape()
    assert shape.has(Shape.SIMPLE_BUCKET) and not shape.has(Shape.NBCC)
    error = shape.refusal("clustering")
    assert isinstance(error, UnsupportedShapeError) and isinstance(error, UnsupportedTableError)
    assert "simple bucket index" in str(error) and "bucket form" in str(error)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # crosses process boundaries intact


def test_latest_schema_in_commit_metadata_marks_schema_on_read(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t")
    table = HoodieTable.open(str(path))
    last = table.timeline.completed().writes().last()
    assert last is not None
    completed = next((path / ".hoodie").glob(f"{last.requested_time}.deltacommit"))
    meta = json.loads(completed.read_text())
    fields = [
        {"id": i, "name": name, "optional": True, "type": kind}
        for i, (name, kind) in enumerate([("id", "string"), ("ts", "long"), ("v", "string"), ("p", "string")])
    ]
    version = int(last.requested_time)
    meta["extraMetadata"]["latest_schema"] = json.dumps(
        {"max_column_id": 3, "version-id": version, "type": "record", "fields": fields}
    )
    completed.write_text(json.dumps(meta))
    shape = HoodieTable.open(str(path)).shape()
    assert shape.has(Shape.SCHEMA_ON_READ)
    with pytest.raises(
        UnsupportedShapeError, match=f"latest_schema in the extra metadata of {last.requested_time}"
    ):
        shape.check("indexing")
    shape.check("compaction")  # read with each file's own InternalSchema


def test_declared_index_options(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t")
    table = HoodieTable.open(str(path))
    assert table.shape().refusal("clustering") is None
    flink = table.shape({"hoodie.index.type": "flink_state"})
    assert flink.has(Shape.FLINK_STATE) and flink.refusal("compaction") is None
    assert "Flink-state index" in str(flink.refusal("clustering"))
    consistent = table.shape(
        {"hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "CONSISTENT_HASHING"}
    )
    assert consistent.has(Shape.CONSISTENT_HASHING)
    bucket = TableShape.declared("t", {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"})
    assert bucket.has(Shape.SIMPLE_BUCKET) and bucket.refusal("write", "insert") is None
    assert bucket.refusal("write", "bulk_insert") is None
    assert bucket.refusal("write", "insert_overwrite_table") is not None
    assert bucket.refusal("clustering") is not None


def test_cli_create_with_a_declared_bucket_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--create`` with Hudi's bucket options makes a bucket table (recognised from storage after),
    and a write the simple bucket layout does not support is refused before the table is created."""
    data = tmp_path / "in.parquet"
    pq.write_table(rows(range(4), 1), data)
    bucket = ["--option", "hoodie.index.type=BUCKET", "--option", "hoodie.bucket.index.num.buckets=4"]

    def create(target: Path, operation: str) -> int:
        argv = ["write", str(target), "--input", str(data), "--operation", operation, "--create"]
        return main([*argv, "--record-key", "id", *bucket])

    refused = tmp_path / "refused"
    assert create(refused, "insert_overwrite_table") != 0
    assert "simple bucket index" in capsys.readouterr().err
    assert not refused.exists()

    target = tmp_path / "t"
    assert create(target, "insert") == 0
    found = HoodieTable.open(str(target)).shape({}).feature(Shape.SIMPLE_BUCKET)
    assert found is not None and "bucket form" in found.evidence


def test_the_shape_is_cached_until_the_timeline_changes(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    table = HoodieTable.open(str(path))
    first = table.shape()
    assert table.shape() is first
    table.reload()
    assert table.shape() is first  # nothing changed
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(2), 5))
    table.reload()
    assert table.shape() is not first


def test_a_non_bucket_verdict_is_kept_until_its_witness_file_group_is_replaced(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    table = HoodieTable.open(str(path))
    first = table.shape()
    witness = first.not_bucket_witness
    assert witness is not None and not first.has(Shape.SIMPLE_BUCKET)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(3), 7))
    table.reload()
    second = table.shape()
    assert second is not first and second.not_bucket_witness == witness
    HoodieWriter(HoodieTable.open(str(path))).write(rows(range(3), 8), WriteOperation.INSERT_OVERWRITE_TABLE)
    table.reload()
    third = table.shape()
    assert third.not_bucket_witness is not None and third.not_bucket_witness != witness
    assert third.not_bucket_witness in {s.group_id for s in table.file_system_view().latest_file_slices()}


class IndexCreatedMidRun(LocalRunner):
    """Runs the tasks, then (as Apache Hudi's ``CREATE INDEX`` could, meanwhile) registers an
    expression index on the table: a shape that refuses what is running."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def run(self, fn: Any, tasks: Any, description: str) -> Any:
        out = super().run(fn, tasks, description)
        expression_index(self.path)
        return out


def test_the_commit_checks_the_shape_again(tmp_path: Path) -> None:
    """A compaction allowed when it started, on a table that gained a refused shape while it ran:
    its commit (under the lock) refuses it, and nothing completes."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    ctx = ServiceContext(HoodieTable.open(str(path)))
    compaction = service_named("compaction")
    scheduled = compaction.schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    with pytest.raises(UnsupportedShapeError, match="expression index table .* compaction is refused"):
        compaction.execute(ctx, scheduled.instant_time, IndexCreatedMidRun(path))
    found = HoodieTable.open(str(path)).reload().get(scheduled.instant_time, Action.COMPACTION)
    assert found is not None and found.is_inflight  # not completed; left for Hudi's writers


def test_a_write_checks_the_shape_again_when_it_commits(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)

    class Racing(HoodieWriter):
        def _complete(self, *args: Any, **kwargs: Any) -> Any:
            expression_index(path)  # lands after the write's own check, before its commit
            return super()._complete(*args, **kwargs)

    before = TableReader(HoodieTable.open(str(path))).snapshot().num_rows
    with pytest.raises(UnsupportedShapeError, match=r"expression index table .* write \(upsert\) is refused"):
        Racing(HoodieTable.open(str(path))).upsert(rows(range(40, 44), 5))
    table = HoodieTable.open(str(path))
    assert not table.reload().pending().writes()  # the failed write cleaned up after itself
    assert TableReader(table).snapshot().num_rows == before


class ListingFileIO(LocalFileIO):
    """The local filesystem, recording every folder listed."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []

    def list_dir(self, path: str) -> Any:
        self.listed.append(path)
        return super().list_dir(path)


def test_a_bucket_verdict_is_rechecked_from_the_new_writes_only(tmp_path: Path) -> None:
    """A bucket table's verdict is carried over a new write by reading its write stats: no partition
    is listed again; a file group without the bucket form (added as a writer without the bucket
    index would) ends it."""
    path = tmp_path / "t"
    path.mkdir()
    bucket_table(BUCKET_OPTIONS, TableVersion.EIGHT)(path)
    fileio = ListingFileIO()
    table = HoodieTable(fileio, str(path), HoodieTable.open(str(path)).config)
    first = table.shape()
    assert first.has(Shape.SIMPLE_BUCKET) and first.bucket is not None
    partitions = {str(path / f"p{i}") for i in range(8)}
    assert partitions & set(fileio.listed)  # the first verdict lists the file groups

    HoodieWriter(HoodieTable.open(str(path)), write_props=BUCKET_OPTIONS).upsert(
        rows(range(40, 46), 5, partitions=6)
    )
    table.reload()
    fileio.listed.clear()
    second = table.shape()
    assert second is not first and second.has(Shape.SIMPLE_BUCKET) and second.bucket is not None
    assert second.bucket.covered > first.bucket.covered
    assert not partitions & set(fileio.listed)

    result = HoodieWriter(HoodieTable.open(str(path)), write_props=BUCKET_OPTIONS).upsert(
        rows([7], 6, partitions=8)
    )
    (stat,) = [s for s in result.write_stats if s.partition_path == "p7"]
    assert stat.file_id is not None
    old, new = stat.file_id, "abcdefgh" + stat.file_id[8:]
    for p in sorted(path.rglob("*")):
        if p.is_file() and ".hoodie" in p.relative_to(path).parts:
            p.write_bytes(p.read_bytes().replace(old.encode(), new.encode()))
        elif p.is_file() and old in p.name:
            p.rename(p.with_name(p.name.replace(old, new)))
    table.reload()
    fileio.listed.clear()
    third = table.shape()
    assert not third.has(Shape.SIMPLE_BUCKET) and third.refusal("clustering") is None
    assert third.not_bucket_witness == FileGroupId("p7", new)
    assert not partitions & set(fileio.listed)
