"""The ``_hoodie_operation`` field (Flink's changelog mode): seen in the latest commit's base files, log
block headers or commit schema, and refused naming the evidence; a write told to add it is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableVersion
from hoodie.errors import UnsupportedShapeError
from hoodie.shape.matrix import Shape
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.services.shapes_support import base_table, operation_block, table_hash
from tests.tables import new_table, rows


def _add_operation_column(parquet: Path, op: str) -> None:
    """Rewrite a base file as Flink's compaction writes it in changelog mode: ``_hoodie_operation``
    right after ``_hoodie_file_name`` (``HoodieAvroUtils.addMetadataFields(schema, true)``)."""
    data = pq.read_table(parquet)
    at = data.schema.get_field_index("_hoodie_file_name") + 1
    pq.write_table(data.add_column(at, "_hoodie_operation", pa.array([op] * data.num_rows)), parquet)


def test_the_operation_field_is_seen_in_the_base_files_of_the_latest_commit_with_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``TableSchemaResolver.hasOperationField``: the latest completed commit that wrote files
    (here inserts into base files) is looked at, and a clean after it does not make it look again;
    clustering is refused naming the base file, and nothing is written; clean is handled."""
    path = tmp_path / "t"
    HoodieWriter(new_table(path, version=TableVersion.EIGHT, metadata_table=False)).insert(rows(range(8), 1))
    for parquet in path.rglob("*.parquet"):
        _add_operation_column(parquet, "I")
    table = HoodieTable.open(str(path))
    shape = table.shape()
    found = shape.feature(Shape.OPERATION_FIELD)
    assert found is not None and ".parquet" in found.evidence, shape.features
    last = table.timeline.completed().writes().last()
    assert last is not None and last.requested_time in found.evidence
    before = table_hash(path)
    assert main(["run", "clustering", str(path), "--spark-master", "in-process"]) != 0
    err = capsys.readouterr().err
    assert Shape.OPERATION_FIELD.value in err and found.evidence in err and "clustering is refused" in err
    assert table_hash(path) == before
    # A commit that wrote no data file leaves the verdict as it was, without reading a file again.
    assert main(["run", "clean", str(path), "--spark-master", "in-process"]) == 0
    table.reload()
    assert table.shape().operation_probe is shape.operation_probe


def test_the_operation_field_in_a_commit_schema_and_its_absence(tmp_path: Path) -> None:
    """A commit whose ``schema`` holds ``_hoodie_operation`` names the shape too; a table whose
    latest data files lack the column is not this shape (older blocks meet the log scan's refusal)."""
    path = base_table(tmp_path / "t")
    table = HoodieTable.open(str(path))
    assert not table.shape().has(Shape.OPERATION_FIELD)
    last = table.timeline.completed().writes().last()
    assert last is not None
    completed = next((path / ".hoodie").glob(f"{last.requested_time}.deltacommit"))
    meta = json.loads(completed.read_text())
    schema = json.loads(meta["extraMetadata"]["schema"])
    schema["fields"].insert(0, {"name": "_hoodie_operation", "type": ["null", "string"], "default": None})
    meta["extraMetadata"]["schema"] = json.dumps(schema)
    completed.write_text(json.dumps(meta))
    shape = HoodieTable.open(str(path)).shape()
    with pytest.raises(
        UnsupportedShapeError, match=f"_hoodie_operation in the schema of commit {last.requested_time}"
    ):
        shape.check("write", "upsert")
    shape.check("clean")
    shape.check("archival")


def test_a_write_told_to_add_the_operation_field_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hoodie.allow.operation.metadata.field=true`` given to a write (Hudi's writers would add the
    column; hts's would not) is refused naming the option, on an existing table and with ``--create``."""
    path = base_table(tmp_path / "t")
    data = tmp_path / "in.parquet"
    pq.write_table(rows(range(4), 3), data)
    option = ["--option", "hoodie.allow.operation.metadata.field=true"]
    before = table_hash(path)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert", *option]) != 0
    err = capsys.readouterr().err
    assert Shape.OPERATION_FIELD.value in err and "hoodie.allow.operation.metadata.field=true" in err
    assert table_hash(path) == before
    created = tmp_path / "new"
    argv = ["write", str(created), "--input", str(data), "--operation", "insert", "--create"]
    assert main([*argv, "--record-key", "id", *option]) != 0
    assert Shape.OPERATION_FIELD.value in capsys.readouterr().err
    assert not created.exists()
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) == 0  # without it


def test_a_large_log_file_is_looked_at_only_up_to_the_header_its_commit_wrote(tmp_path: Path) -> None:
    """A log file over SMALL_LOG is not read whole for the shape: only the block the latest commit
    wrote (its write stat's offset), up to the header, which names ``_hoodie_operation``."""
    from hoodie.io import usage
    from hoodie.shape.operation_field import SMALL_LOG

    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, version=TableVersion.EIGHT, metadata_table=False))
    writer.insert(rows(range(4), 1, partitions=1))
    big = rows(range(4), 2, partitions=1)
    writer.upsert(big.set_column(big.schema.get_field_index("v"), "v", pa.array(["x" * SMALL_LOG] * 4)))
    (log,) = list(path.rglob(".*.log.*"))
    operation_block(log)
    assert log.stat().st_size > SMALL_LOG
    with usage.measure() as used:
        shape = HoodieTable.open(str(path)).shape()
    found = shape.feature(Shape.OPERATION_FIELD)
    assert found is not None and f"{log.name}@0" in found.evidence, shape.features
    assert 0 < used.read_from[str(log)] <= SMALL_LOG < log.stat().st_size
