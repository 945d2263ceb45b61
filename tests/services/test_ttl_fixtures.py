"""Partition TTL on tables Apache Hudi wrote (the shared fixtures): every partition has expired (their
commits are older than a day), so each is deleted and hts and hudi-rs read nothing, or the table is
refused before a byte is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hoodie.errors import UnsupportedTableError
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner
from hoodie.services.orchestrator import run, service_context
from hoodie.table import HoodieTable
from tests.conftest import hudi_rs_rows
from tests.services.test_ttl import DAYS, table_hash

FIXTURES = {
    # name -> the metadata partition that refuses it, or None
    "sample_table/cow/v9_txns_simple_nometa": None,
    "sample_table/cow/v8_simplekeygen_nonhivestyle": None,
    "sample_table/mor/avro/v9_txns_simple_nometa": None,
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d": "secondary_index_rider_idx",
    "sample_table/mor/parquet/v6_simplekeygen_nonhivestyle": None,
    "sample_table/mor/avro/v9_txns_simple_meta": "secondary_index_",
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_partition_ttl_on_tables_hudi_wrote(table_copy: Any, name: str) -> None:
    path: Path = table_copy(name)
    table = HoodieTable.open(str(path))
    partitions = sorted({s.partition_path for s in table.file_system_view().latest_file_slices()})
    assert partitions and hudi_rs_rows(path)
    before = table_hash(path)
    ctx = service_context(table, {DAYS: "1"})
    refused = FIXTURES[name]
    if refused is not None:
        with pytest.raises(UnsupportedTableError, match=rf"{refused}.*Nothing was written"):
            run(ctx, "ttl", LocalRunner)
        assert table_hash(path) == before
        return

    outcome = run(ctx, "ttl", LocalRunner)

    [result] = outcome.executed
    assert sorted(result.details["partitions_deleted"]) == partitions
    assert TableReader(HoodieTable.open(str(path))).snapshot().num_rows == 0
    assert hudi_rs_rows(path) == []
