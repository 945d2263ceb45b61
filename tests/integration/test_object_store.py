"""Tables on an object store, through FileIO's pyarrow.fs backend.

S3 here is moto's standalone server, an emulator of the S3 API (``tests.servers.s3``), on a free
loopback port (no real AWS is reachable from the test machines). hudi-rs reads the same table
from the same endpoint.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.config.table_config import TableType
from hoodie.io.fileio import ArrowFileIO, FileIO
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter
from tests.servers.s3 import S3Endpoint

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string())])


def test_table_round_trips_on_s3_and_hudi_rs_reads_it(s3: S3Endpoint) -> None:
    uri = "s3://lake/tables/trips"
    opts = s3.storage_options()
    table = create_table(
        uri,
        table_name="trips",
        table_type=TableType.MERGE_ON_READ,
        schema=SCHEMA,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        **opts,
    )
    assert isinstance(table.fileio, ArrowFileIO) and table.fileio.scheme == "s3"
    writer = HoodieWriter(table)
    writer.insert(pa.table({"id": ["a", "b", "c"], "ts": [1, 1, 1], "p": ["x", "y", "y"]}, schema=SCHEMA))
    writer.upsert(pa.table({"id": ["a", "c"], "ts": [2, 0], "p": ["x", "y"]}, schema=SCHEMA))
    writer.delete(pa.table({"id": ["b"], "p": ["y"]}))
    ours = TableReader(HoodieTable.open(uri, **opts)).snapshot()
    expected = [{"id": "a", "ts": 2}, {"id": "c", "ts": 1}]
    assert sorted(ours.select(["id", "ts"]).to_pylist(), key=lambda r: r["id"]) == expected
    storage = s3.hudi_rs_options()
    theirs = pa.Table.from_batches(
        HudiTableBuilder.from_base_uri(uri).with_storage_options(storage).build().read()
    )
    assert sorted(theirs.select(["id", "ts"]).to_pylist(), key=lambda r: r["id"]) == expected


def test_create_new_refuses_to_overwrite_on_s3(s3: S3Endpoint) -> None:
    fileio, path = FileIO.for_uri("s3://lake/scratch", **s3.storage_options())
    fileio.create_new(f"{path}/instant.commit", b"one")
    with pytest.raises(FileExistsError):
        fileio.create_new(f"{path}/instant.commit", b"two")
    assert fileio.read_bytes(f"{path}/instant.commit") == b"one"
    assert [i.name for i in fileio.list_dir(path)] == ["instant.commit"]
    assert fileio.list_dir(f"{path}/absent") == []
