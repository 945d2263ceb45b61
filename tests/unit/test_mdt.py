"""The metadata table core: key hashing and file-group mapping, reading Apache Hudi's metadata
tables, and writing deltacommits that our reader and hudi-rs both read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie.config.table_config import TableType
from hoodie.metadata.keys import (
    column_stats_key,
    decode_file_id,
    encode_file_id,
    file_group_index,
    hash_id,
    partition_stats_key,
)
from hoodie.metadata.records import files_payload, merge_payloads
from hoodie.metadata.table import MetadataTable
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter
from tests.conftest import fixture_path, hudi_rs_rows

MDT_FIXTURES = [
    "sample_table/mor/avro/v9_txns_simple_meta",
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
    "sample_table/mor/avro/v9_nonpartitioned_rollback",
]


def _disk(path: Path, partitions: list[str]) -> dict[str, dict[str, int]]:
    return {
        p: {
            f.name: f.stat().st_size
            for f in (path / p).iterdir()
            if f.is_file() and not f.name.startswith(".hoodie_partition")
        }
        for p in partitions
    }


def test_key_vectors_from_hudi() -> None:
    # hudi-format.md §6.1/§6.2, checked against keys Apache Hudi wrote
    assert file_group_index("e96c4396-3fad-413a-a942-4cb36106d721", 10) == 1
    assert file_group_index("txn_id:TXN-004,account_id:ACC-C", 10) == 3
    assert file_group_index("rider-J$c8abbe79-8d89-47ea-b4ce-4d224bae5bfa", 10) == 0
    assert [hash_id(s) for s in ("driver", "city=sao_paulo", "_hoodie_commit_time", ".")] == [
        "AjpJ7N1gBZc=",
        "6Hj+sBy+gvM=",
        "JBBzUToHtLc=",
        "FXThHwelITM=",
    ]
    name = "8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_2-1112-3192_20251220210129235.parquet"
    assert (
        column_stats_key("driver", "city=sao_paulo", name)
        == "AjpJ7N1gBZc=6Hj+sBy+gvM=0VV0SYFvRHPGdIGkp/dZ+A=="
    )
    assert partition_stats_key("driver", "") == "AjpJ7N1gBZc=FXThHwelITM="
    loc = encode_file_id("384f9962-3173-46b6-928c-efb1fc2bbb7e-0")
    assert (loc["fileIdHighBits"], loc["fileIdLowBits"]) == (4057630436299589302, -7886665299713606786)
    assert decode_file_id(loc) == "384f9962-3173-46b6-928c-efb1fc2bbb7e-0"
    raw = encode_file_id("not-a-uuid")
    assert raw["fileIdEncoding"] == 1 and decode_file_id(raw) == "not-a-uuid"


def test_files_merge_rules() -> None:
    old = files_payload({"a": (10, False), "b": (5, False)})
    new = files_payload({"a": (7, False), "b": (0, True), "c": (0, True)})
    merged = merge_payloads(old, new)
    assert merged is not None
    # sizes take the max, a tombstone removes a live file, an unknown tombstone is kept
    assert merged["filesystemMetadata"] == {
        "a": {"size": 10, "isDeleted": False},
        "c": {"size": 0, "isDeleted": True},
    }


@pytest.mark.parametrize("name", MDT_FIXTURES)
def test_listing_of_hudi_metadata_tables_equals_the_directories(fixture_root: Path, name: str) -> None:
    path = fixture_path(fixture_root, name)
    mdt = MetadataTable.open(HoodieTable.open(str(path)))
    listing = mdt.list_files()
    assert listing and listing == _disk(path, sorted(listing))
    keys = mdt.read_partition("record_index")
    assert keys  # every fixture has a record index
    for payload in keys.values():
        assert payload["recordIndexMetadata"]["partitionName"] in listing


def test_our_metadata_table_is_read_by_hudi_rs(tmp_path: Path) -> None:
    data = pa.table({"id": [f"k{i}" for i in range(12)], "p": ["a", "b", "c"] * 4, "ts": [1] * 12})
    table = create_table(
        str(tmp_path / "t"),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=data.schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        metadata_table=True,
    )
    writer = HoodieWriter(table)
    writer.insert(data)
    writer.upsert(data.slice(0, 5))
    writer.delete(data.slice(5, 2).select(["id", "p"]))
    mdt = MetadataTable.open(HoodieTable.open(str(tmp_path / "t")))
    listing = mdt.list_files()
    assert sorted(listing) == ["a", "b", "c"] == mdt.all_partitions()
    assert listing == _disk(tmp_path / "t", ["a", "b", "c"])
    rows: list[Any] = hudi_rs_rows(tmp_path / "t")  # hudi-rs lists files through the metadata table
    assert len(rows) == 10
    # one metadata-table deltacommit per data commit, at the same instant time
    mdt_timeline = HoodieTable.open(str(tmp_path / "t" / ".hoodie" / "metadata")).timeline
    data_times = {i.requested_time for i in HoodieTable.open(str(tmp_path / "t")).timeline.completed()}
    mdt_times = {i.requested_time for i in mdt_timeline.completed()}
    assert mdt_times == data_times | {"00000000000000000"}  # plus the initialisation


@pytest.mark.parametrize("version", [8, 9])
@pytest.mark.parametrize("file_name", [None, "record-index-0003-0_3-0-3_00000000000000004.hfile"])
def test_record_index_datums_equal_the_generic_avro_writer(version: int, file_name: str | None) -> None:
    """The hand-written record-index encoder must produce fastavro's bytes exactly."""
    import io

    import fastavro

    from hoodie.metadata.records import META_FIELDS, _parsed, encode_payload, record_index_payload

    locations = [
        encode_file_id("9b42bb86-fbf9-4317-b639-168185d57da8-0"),
        encode_file_id("ffffffff-ffff-ffff-ffff-ffffffffffff-12"),
        encode_file_id("not-a-uuid-file-id"),
    ]
    for location in locations:
        for partition, millis in (("p1", 1795279877563), ("", 0), ("région=été", -5)):
            payload = record_index_payload(partition, location, millis)
            record = {**dict.fromkeys(META_FIELDS), "_hoodie_file_name": file_name, **payload, "key": ""}
            expected = io.BytesIO()
            fastavro.schemaless_writer(expected, _parsed(version), record)
            assert encode_payload(payload, version, file_name=file_name) == expected.getvalue()


def test_vectorized_file_group_indexes_equal_the_scalar_rule() -> None:
    import random

    from hoodie.index.java_hash import java_string_hash
    from hoodie.metadata.keys import file_group_indexes

    rng = random.Random(7)
    keys = [
        "e96c4396-3fad-413a-a942-4cb36106d721",
        "txn_id:TXN-004,account_id:ACC-C",
        "",
        "été$clé",  # not ASCII: UTF-16 code units
        "x" * 300,  # past the width where sums could overflow without wrapping
        *("".join(rng.choice("abcXYZ019-_:,") for _ in range(rng.randint(1, 60))) for _ in range(500)),
    ]
    # Java's String.hashCode of "Aa" and "BB" collide.
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    ascii_only = [k for k in keys if k.isascii()]
    for n in (1, 2, 10, 1000):
        assert file_group_indexes(keys, n).tolist() == [file_group_index(k, n) for k in keys]
        assert file_group_indexes(ascii_only, n).tolist() == [file_group_index(k, n) for k in ascii_only]
    many = [f"key-{i:08d}" for i in range(70_000)]  # past one chunk of the key matrix
    assert file_group_indexes(many, 10)[-5:].tolist() == [file_group_index(k, 10) for k in many[-5:]]
    assert file_group_indexes(["e96c4396-3fad-413a-a942-4cb36106d721"], 10).tolist() == [1]


def test_a_metadata_table_for_table_version_6_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from hoodie.config.table_config import TableVersion
    from hoodie.errors import InvalidInputError

    schema = pa.schema([("id", pa.string()), ("ts", pa.int64())])
    with pytest.raises(InvalidInputError, match="versions 8 and 9 only, not 6"):
        create_table(
            str(tmp_path / "t"),
            table_name="t",
            table_type=TableType.COPY_ON_WRITE,
            schema=schema,
            record_key_fields=["id"],
            table_version=TableVersion.SIX,
            metadata_table=True,
        )
    assert not (tmp_path / "t").exists()
    plain = create_table(
        str(tmp_path / "v6"),
        table_name="t",
        table_type=TableType.COPY_ON_WRITE,
        schema=schema,
        record_key_fields=["id"],
        table_version=TableVersion.SIX,
    )
    assert not plain.has_metadata_table, "version 6 tables get no metadata table by default"


@pytest.mark.parametrize(
    ("name", "by_value"),
    [
        ("sample_table/mor/avro/v9_txns_simple_meta", True),
        ("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", False),
    ],
)
def test_secondary_index_entries_sit_where_hudi_put_them(
    fixture_root: Path, name: str, by_value: bool
) -> None:
    """Index version V2 (Hudi 1.1) places an entry by its value and ``$``; V1 by the whole key."""
    from hoodie.metadata.keys import file_group_indexes, secondary_index_shard_key
    from hoodie.metadata.secondary import shard_keys, shards_by_value

    table = HoodieTable.open(str(fixture_path(fixture_root, name)))
    mdt = MetadataTable.open(table, table.reload())
    checked = 0
    for partition in (p for p in table.config.metadata_partitions if p.startswith("secondary_index_")):
        assert shards_by_value(table, partition) is by_value
        slices = mdt.file_slices(partition)
        for position, file_slice in enumerate(slices):
            keys = list(mdt.read_slice(file_slice))
            placed = file_group_indexes(shard_keys(table, partition, keys), len(slices)).tolist()
            assert placed == [position] * len(keys), (partition, file_slice.file_id)
            if by_value:
                assert all(secondary_index_shard_key(k).endswith("$") for k in keys)
            checked += len(keys)
    assert checked >= 6
