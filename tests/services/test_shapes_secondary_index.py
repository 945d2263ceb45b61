"""Secondary indexes on a table Apache Hudi wrote: one hts does not maintain refuses writes only; a
secondary-indexed table refuses insert overwrites and partition TTL, naming the index.
"""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

from hoodie.read.reader import TableReader
from hoodie.shape.matrix import Shape
from hoodie.table import HoodieTable
from service.cli import main
from tests.services.shapes_support import table_hash


def test_an_unmaintained_secondary_index_refuses_writes_only(
    table_copy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A secondary index Hudi built on a column hts keeps no index for (a decimal): writes, which
    must update it, are refused naming it; services, which keep secondary keys, are not."""
    path = table_copy("sample_table/mor/avro/v9_txns_simple_meta")
    defs = path / ".hoodie" / ".index_defs" / "index.json"
    defs.write_text(
        defs.read_text().replace('"sourceFields" : [ "txn_date" ]', '"sourceFields" : [ "amount" ]')
    )
    shape = HoodieTable.open(str(path)).shape()
    found = shape.feature(Shape.SECONDARY_INDEX)
    assert found is not None and "secondary_index_txn_date_idx in hoodie.table.metadata.partitions" in (
        found.evidence
    )
    assert shape.refusal("compaction") is None and shape.refusal("clustering") is None
    data = path.parent / "in.parquet"
    pq.write_table(TableReader(HoodieTable.open(str(path))).snapshot().slice(0, 1), data)
    before = table_hash(path)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) != 0
    err = capsys.readouterr().err
    assert "unmaintained secondary index table" in err and "is on 'amount'" in err, err
    assert "write (upsert) is refused" in err
    assert table_hash(path) == before


def test_a_secondary_indexed_table_refuses_overwrites_and_partition_ttl(
    table_copy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi's metadata writer refuses insert overwrites and delete_partition on a table with a secondary
    index (``HoodieBackedTableMetadataWriter.updateSecondaryIndexIfPresent``): hts refuses them before
    writing, naming the index; an upsert (which updates the index) still runs."""
    path = table_copy("sample_table/mor/avro/v9_txns_simple_meta")
    shape = HoodieTable.open(str(path)).shape()
    found = shape.feature(Shape.SECONDARY_INDEXED)
    named = "secondary_index_merchant_idx, secondary_index_txn_date_idx in hoodie.table.metadata.partitions"
    assert found is not None and named in found.evidence
    assert not shape.has(Shape.SECONDARY_INDEX)  # hts maintains this one
    data = path.parent / "in.parquet"
    pq.write_table(TableReader(HoodieTable.open(str(path))).snapshot().slice(0, 1), data)
    for argv, what in (
        (
            ["write", str(path), "--input", str(data), "--operation", "insert_overwrite"],
            "write (insert_overwrite)",
        ),
        (
            ["write", str(path), "--input", str(data), "--operation", "insert_overwrite_table"],
            "write (insert_overwrite_table)",
        ),
        (["run", "ttl", str(path), "--option", "hoodie.partition.ttl.strategy.days.retain=1"], "ttl"),
    ):
        before = table_hash(path)
        assert main(argv) != 0, argv
        err = capsys.readouterr().err
        assert f"secondary-indexed table ({named}" in err, err
        assert f"{what} is refused" in err and "Nothing was written" in err, err
        assert table_hash(path) == before
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) == 0
