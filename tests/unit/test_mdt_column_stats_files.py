"""Column stats of log files (Avro and Parquet data blocks, delete-only logs, the writer's own records)
and Parquet footers (all-null chunks, NaN and signed-zero ordering), checked against the Java rules
cited in ``hoodie/metadata/column_stats.py``.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import UnsupportedTableError
from hoodie.file_group.log_block import BlockType, rollback_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.file_group.log_writer import avro_data_block, delete_block, parquet_data_block
from hoodie.io.fileio import LocalFileIO
from hoodie.metadata.column_ranges import ValueType
from hoodie.metadata.column_stats import default_indexed_columns, file_column_stats
from hoodie.schema.avro_arrow import add_meta_fields, avro_to_arrow_schema
from hoodie.table import HoodieTable
from tests.conftest import fixture_path
from tests.unit.column_stats_support import round_trip

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
V6_PARQUET_LOGS = "sample_table/mor/parquet/v6_nonpartitioned_rollback"


# -- log files ------------------------------------------------------------------------------------


def test_parquet_data_block_logs(fixture_root: Path) -> None:
    # Table version 6 (no metadata table) but with PARQUET_DATA log blocks and every primitive type.
    root = fixture_path(fixture_root, V6_PARQUET_LOGS)
    table = HoodieTable.open(str(root))
    schema = table.latest_schema_json()
    assert schema is not None
    columns = default_indexed_columns(schema)
    checked = 0
    for log in sorted(root.glob(".*.log.*")):
        rows = [
            row
            for b in read_blocks(log.read_bytes(), str(log))
            if b.block_type is BlockType.PARQUET_DATA
            for row in pq.read_table(pa.BufferReader(b.content)).to_pylist()
        ]
        for version in (8, 9):
            for stats in file_column_stats(
                table.fileio, table.base_path, "", log.name, columns, schema, table_version=version
            ):
                values = [r[stats["columnName"]] for r in rows if r[stats["columnName"]] is not None]
                assert stats["valueCount"] == len(rows) and stats["nullCount"] == len(rows) - len(values)
                assert (stats["totalSize"], stats["totalUncompressedSize"]) == (0, 0)
                if not rows:
                    assert stats["minValue"] is None and stats.get("valueType", {}).get("typeOrdinal", 1) == 1
                    continue
                low = stats["minValue"][1]["value"]
                expected = min(values)
                if isinstance(expected, Decimal) and version == 9:  # unscaled two's complement
                    expected = _java_bytes(int(expected.scaleb(-_exponent(expected))))
                elif isinstance(expected, dt.datetime):  # timestamp-micros: micros since the epoch
                    expected = (expected - EPOCH) // dt.timedelta(microseconds=1)
                elif isinstance(expected, dt.date):  # date: days since the epoch
                    expected = (expected - EPOCH.date()).days
                assert low == expected, (log.name, stats["columnName"])
                checked += 1
                assert round_trip(stats, version) == stats
    assert checked > 0


def _exponent(value: Decimal) -> int:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return exponent


def _java_bytes(value: int) -> bytes:
    """Java's BigInteger.toByteArray, written out independently of the module under test."""
    size = 1
    while not -(2 ** (8 * size - 1)) <= value < 2 ** (8 * size - 1):
        size += 1
    return value.to_bytes(size, "big", signed=True)


def _log_file(tmp_path: Path, blocks: list[bytes]) -> tuple[LocalFileIO, str]:
    name = ".f1-0_20250101000000000.log.1_0-1-1"
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / name).write_bytes(b"".join(blocks))
    return LocalFileIO(), name


TEST_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "t_record",
    "namespace": "hoodie.t",
    "fields": [
        {"name": "d", "type": ["null", "double"], "default": None},
        {"name": "s", "type": ["null", "string"], "default": None},
        {"name": "b", "type": ["null", "bytes"], "default": None},
        {"name": "n", "type": ["null", "long"], "default": None},
    ],
}


@pytest.mark.parametrize("block_writer", [avro_data_block, parquet_data_block])
def test_log_stats_order_values_as_java(tmp_path: Path, block_writer: Any) -> None:
    writer = add_meta_fields(TEST_SCHEMA)
    arrow = avro_to_arrow_schema(writer)
    rows: dict[str, list[Any]] = {
        "d": [0.0, -0.0, math.nan, 2.5, None],
        "s": ["é", "z", "\U0001f600", "a", None],
        "b": [b"\x7f", b"\x80", b"\x00", None, None],
        "n": [None] * 5,
    }
    table = pa.table({f.name: rows.get(f.name, ["x"] * 5) for f in arrow}, schema=arrow)
    late = table.slice(0, 1)
    fileio, name = _log_file(
        tmp_path,
        [
            block_writer(table, writer, "20250101000000000"),
            block_writer(late, writer, "20250101000000001"),
            rollback_block("20250101000000002", "20250101000000001"),  # the second block never counts
            delete_block(["k"], [""], None, "20250101000000003", writer, 9),
        ],
    )
    stats = {
        s["columnName"]: s
        for s in file_column_stats(
            fileio, str(tmp_path), "p", name, ["d", "s", "b", "n"], TEST_SCHEMA, table_version=9
        )
    }
    d = stats["d"]
    assert (d["valueCount"], d["nullCount"]) == (5, 1)
    assert math.copysign(1, d["minValue"][1]["value"]) == -1 and d["minValue"][1]["value"] == 0  # -0.0 < +0.0
    assert math.isnan(d["maxValue"][1]["value"])  # NaN is the largest double
    assert (stats["s"]["minValue"][1]["value"], stats["s"]["maxValue"][1]["value"]) == ("a", "\U0001f600")
    # Avro compares bytes as Java's ByteBuffer does: signed, so 0x80 < 0x00 < 0x7f
    assert (stats["b"]["minValue"][1]["value"], stats["b"]["maxValue"][1]["value"]) == (b"\x80", b"\x7f")
    n = stats["n"]
    assert (n["minValue"], n["maxValue"], n["nullCount"], n["valueCount"]) == (None, None, 5, 5)
    assert n["valueType"] == {"typeOrdinal": ValueType.LONG, "additionalInfo": None}


def test_delete_only_log_has_empty_stats(tmp_path: Path) -> None:
    deletes = delete_block(["k"], [""], None, "20250101000000000", add_meta_fields(TEST_SCHEMA), 9)
    fileio, name = _log_file(tmp_path, [deletes])
    for version, value_type in ((9, {"valueType": {"typeOrdinal": 1, "additionalInfo": None}}), (8, {})):
        stats = file_column_stats(fileio, str(tmp_path), "p", name, ["n"], TEST_SCHEMA, table_version=version)
        assert stats == [
            {
                "fileName": name,
                "columnName": "n",
                "minValue": None,
                "maxValue": None,
                "valueCount": 0,
                "nullCount": 0,
                "totalSize": 0,
                "totalUncompressedSize": 0,
                "isDeleted": False,
                "isTightBound": False,
            }
            | value_type
        ]


# -- Parquet footers --------------------------------------------------------------------------------


def test_parquet_footer_rules(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    name = "f1-0_0-1-1_20250101000000000.parquet"
    table = pa.table(
        {
            "all_null_long": pa.array([None, None, None, None], pa.int64()),
            "all_null_str": pa.array([None, None, None, None], pa.string()),
            "zero": pa.array([0.0, 1.0, 2.0, 0.0], pa.float64()),
            "neg": pa.array([-2.0, -0.0, -1.0, -0.0], pa.float64()),
            "dec": pa.array([Decimal("-1.50"), Decimal("2.25"), None, Decimal("0.00")], pa.decimal128(5, 2)),
        }
    )
    pq.write_table(table, tmp_path / "p" / name, row_group_size=2)
    columns = ["all_null_long", "all_null_str", "zero", "neg", "dec", "missing"]
    for version in (8, 9):
        stats = {
            s["columnName"]: s
            for s in file_column_stats(
                LocalFileIO(), str(tmp_path), "p", name, columns, {}, table_version=version
            )
        }
        assert "missing" not in stats  # no column chunk, no record (as Hudi)
        meta = pq.read_metadata(tmp_path / "p" / name)
        sizes = [
            sum(meta.row_group(g).column(i).total_compressed_size for g in range(meta.num_row_groups))
            for i in range(meta.num_columns)
        ]
        # row groups are merged: counts and sizes add up
        assert [stats[c]["totalSize"] for c in columns[:5]] == sizes
        assert stats["dec"]["valueCount"] == 4 and stats["dec"]["nullCount"] == 1
        # parquet-mr gives Java's field defaults for chunks without min/max: 0L for longs, null for binaries
        long_bound = ("LongWrapper", 0)
        assert [
            (b[0].rsplit(".", 1)[1], b[1]["value"])
            for b in (stats["all_null_long"]["minValue"], stats["all_null_long"]["maxValue"])
        ] == [long_bound, long_bound]
        assert stats["all_null_long"]["nullCount"] == stats["all_null_long"]["valueCount"] == 4
        assert stats["all_null_str"]["minValue"] is None and stats["all_null_str"]["maxValue"] is None
        # parquet-mr reads a +0.0 minimum as -0.0 and a -0.0 maximum as +0.0
        assert math.copysign(1, stats["zero"]["minValue"][1]["value"]) == -1
        assert math.copysign(1, stats["neg"]["maxValue"][1]["value"]) == 1
        low, high = stats["dec"]["minValue"][1]["value"], stats["dec"]["maxValue"][1]["value"]
        if version == 9:
            assert stats["dec"]["valueType"] == {"typeOrdinal": ValueType.DECIMAL, "additionalInfo": "5,2"}
            assert (low, high) == (
                (-150).to_bytes(2, "big", signed=True),
                (225).to_bytes(2, "big", signed=True),
            )
            assert stats["zero"]["valueType"]["typeOrdinal"] == ValueType.DOUBLE
        else:
            assert (low, high) == (Decimal("-1.500000000000000"), Decimal("2.250000000000000"))
        for s in stats.values():
            assert round_trip(s, version) == s


def test_unsupported_files_and_versions(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedTableError, match="table version 6"):
        file_column_stats(LocalFileIO(), str(tmp_path), "", "x.parquet", ["a"], {}, table_version=6)
    with pytest.raises(UnsupportedTableError, match="only for .parquet"):
        file_column_stats(LocalFileIO(), str(tmp_path), "", "x.orc", ["a"], {}, table_version=9)


@pytest.mark.parametrize("block_format", ["avro", "parquet"])
def test_log_stats_from_the_writers_records_equal_reading_the_file(tmp_path: Path, block_format: str) -> None:
    """The writer hands the records of each new log file to the metadata sync; the stats must be
    exactly those computed by reading the file back (every type, nulls included)."""
    import datetime as dt
    from decimal import Decimal

    import pyarrow as pa

    from hoodie.config.table_config import TableType
    from hoodie.metadata.column_stats import file_column_stats, indexed_columns
    from hoodie.metadata.table import MetadataTable
    from hoodie.write.create import create_table
    from hoodie.write.options import LogBlockFormat, WriteOptions
    from hoodie.write.writer import HoodieWriter

    schema = pa.schema(
        [
            ("id", pa.string()),
            ("ts", pa.int64()),
            ("p", pa.string()),
            ("i", pa.int32()),
            ("f", pa.float32()),
            ("d", pa.float64()),
            ("amount", pa.decimal128(10, 2)),
            ("day", pa.date32()),
            ("at", pa.timestamp("us", tz="UTC")),
            ("flag", pa.bool_()),
        ]
    )

    def batch(ids: range, ts: int) -> pa.Table:
        return pa.Table.from_pylist(
            [
                {
                    "id": f"k{i}",
                    "ts": ts,
                    "p": f"p{i % 2}",
                    "i": None if i % 3 == 0 else i - 5,
                    "f": float("nan") if i == 4 else i / 3,
                    "d": -0.0 if i == 2 else i * 1.5,
                    "amount": Decimal(f"{i}.{i % 10}5"),
                    "day": dt.date(2026, 1, 1 + i % 28),
                    "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i * 77),
                    "flag": None if i % 4 == 0 else i % 2 == 0,
                }
                for i in ids
            ],
            schema=schema,
        )

    table = create_table(
        str(tmp_path / "t"),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
    )
    from hoodie.metadata.init import build_partition, free_init_instant_time, set_metadata_partitions
    from hoodie.metadata.table import open_metadata_table
    from hoodie.services.base import ServiceContext

    ctx = ServiceContext(table)
    at = free_init_instant_time(open_metadata_table(table).reload())
    build_partition(table, "column_stats", {}, at, ctx.new_instant_time)
    set_metadata_partitions(table, add=("column_stats",))
    writer = HoodieWriter(table, options=WriteOptions(log_block_format=LogBlockFormat(block_format)))
    writer.insert(batch(range(12), 1))
    result = writer.upsert(batch(range(0, 12, 2), 2))
    fresh = HoodieTable.open(str(tmp_path / "t"))
    stored = MetadataTable.open(fresh, fresh.reload()).read_partition("column_stats")
    by_file = {
        (p["ColumnStatsMetadata"]["fileName"], p["ColumnStatsMetadata"]["columnName"]): p
        for p in stored.values()
    }
    schema_json = fresh.latest_schema_json()
    assert schema_json is not None
    logs = [s for s in result.write_stats if (s.path or "").rsplit("/", 1)[-1].startswith(".")]
    assert logs
    for stat in logs:
        partition, name = (stat.path or "").rsplit("/", 1)
        expected = file_column_stats(
            fresh.fileio,
            fresh.base_path,
            partition,
            name,
            indexed_columns(fresh),
            schema_json,
            table_version=8,
        )
        for s in expected:
            got = by_file[(name, s["columnName"])]["ColumnStatsMetadata"]
            assert repr(got) == repr(s), (name, s["columnName"])  # repr: NaN equals NaN
