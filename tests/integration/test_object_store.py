"""Tables on an object store, through FileIO's pyarrow.fs backend.

S3 here is moto's standalone server, an emulator of the S3 API, started by the test on a free
loopback port (no real AWS is reachable from the test machines). hudi-rs reads the same table
from the same endpoint.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from hudi import HudiTableBuilder

from hoodie.config.table_config import TableType
from hoodie.io.fileio import ArrowFileIO, FileIO
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string())])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = _free_port()
    server = Path(sys.executable).parent / "moto_server"
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(endpoint, timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.2)
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket="lake")
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def _options(endpoint: str) -> dict[str, str]:
    return {
        "endpoint_override": endpoint,
        "access_key": "test",
        "secret_key": "test",
        "region": "us-east-1",
        "scheme": "http",
    }


def test_table_round_trips_on_s3_and_hudi_rs_reads_it(s3_endpoint: str) -> None:
    uri = "s3://lake/tables/trips"
    opts = _options(s3_endpoint)
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
    storage = {
        "aws_endpoint_url": s3_endpoint,
        "aws_allow_http": "true",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "aws_region": "us-east-1",
    }
    theirs = pa.Table.from_batches(
        HudiTableBuilder.from_base_uri(uri).with_storage_options(storage).build().read()
    )
    assert sorted(theirs.select(["id", "ts"]).to_pylist(), key=lambda r: r["id"]) == expected


def test_create_new_refuses_to_overwrite_on_s3(s3_endpoint: str) -> None:
    fileio, path = FileIO.for_uri("s3://lake/scratch", **_options(s3_endpoint))
    fileio.create_new(f"{path}/instant.commit", b"one")
    with pytest.raises(FileExistsError):
        fileio.create_new(f"{path}/instant.commit", b"two")
    assert fileio.read_bytes(f"{path}/instant.commit") == b"one"
    assert [i.name for i in fileio.list_dir(path)] == ["instant.commit"]
    assert fileio.list_dir(f"{path}/absent") == []
