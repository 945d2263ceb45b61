"""Metadata-table ``column_stats`` / ``partition_stats`` payloads against what Apache Hudi wrote.

The fixtures' metadata tables hold the stats Hudi 1.0 (table version 8) and 1.1 (table version 9)
computed for every data file and partition; we recompute each one from the data files and compare
whole payloads. Hudi's MDT compactions give merged records to check ``merge_column_stats`` against.
Rules the fixtures cannot show (non-tight merges, all-null Parquet chunks, NaN and signed-zero
ordering, V1 wrappers of decimals/dates) are checked against the Java rules cited in
``hoodie/metadata/column_stats.py``.
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import math
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import UnsupportedTableError
from hoodie.file_group.log_block import BlockType, rollback_block
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import read_blocks
from hoodie.file_group.log_writer import avro_data_block, delete_block, parquet_data_block
from hoodie.hfile.reader import HFileReader
from hoodie.io.fileio import LocalFileIO
from hoodie.metadata.column_ranges import ValueType, merge_column_stats, partition_stats
from hoodie.metadata.column_stats import (
    ALWAYS_INDEXED_META_COLUMNS,
    default_indexed_columns,
    file_column_stats,
    indexed_columns,
    tombstone,
)
from hoodie.metadata.keys import column_stats_key, partition_stats_key
from hoodie.metadata.records import metadata_schema
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.schema.avro_arrow import add_meta_fields, avro_to_arrow_schema
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from tests.conftest import fixture_path

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

V8 = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"
V9 = "sample_table/mor/avro/v9_txns_simple_meta"
V9_ROLLBACK = "sample_table/mor/avro/v9_nonpartitioned_rollback"
V6_PARQUET_LOGS = "sample_table/mor/parquet/v6_nonpartitioned_rollback"
MDT_TABLES = [V8, V9, V9_ROLLBACK]
NS = "org.apache.hudi.avro.model."


# -- reading what Hudi wrote ----------------------------------------------------------------------


@dataclass(frozen=True)
class MdtRecord:
    mdt_file: str
    instant: str | None  # the HFILE_DATA block's instant; None for a base HFile
    key: str
    stats: dict[str, Any]


def _decode(reader: HFileReader) -> Iterator[tuple[str, dict[str, Any]]]:
    assert reader.schema is not None
    schema = fastavro.parse_schema(json.loads(reader.schema))
    for key, value in reader.items():
        record = fastavro.schemaless_reader(
            io.BytesIO(value), schema, schema, return_record_name=True, return_record_name_override=True
        )
        assert isinstance(record, dict)
        yield key.decode(), record["ColumnStatsMetadata"]


def _log_order(path: Path) -> tuple[str, int, tuple[int, str], str]:
    log = LogFile.parse(path.name)
    assert log is not None
    return log.sort_key


def mdt_records(table: Path, partition: str) -> list[MdtRecord]:
    """Every record of an MDT partition: base HFiles first, then log blocks in log order."""
    directory = table / ".hoodie" / "metadata" / partition
    bases = sorted(p for p in directory.iterdir() if p.name.endswith(".hfile"))
    logs = sorted(
        (p for p in directory.iterdir() if LogFile.parse(p.name)),
        key=_log_order,
    )
    out: list[MdtRecord] = []
    for base in bases:
        out += [MdtRecord(base.name, None, k, v) for k, v in _decode(HFileReader(base.read_bytes()))]
    for log in logs:
        for block in read_blocks(log.read_bytes(), str(log)):
            if block.block_type is BlockType.HFILE_DATA:
                reader = HFileReader.from_log_block(block)
                out += [MdtRecord(log.name, block.instant_time, k, v) for k, v in _decode(reader)]
    return out


def data_files(table: Path) -> dict[str, str]:
    """Data file name -> partition path, for every base and log file on disk."""
    out: dict[str, str] = {}
    for path in table.rglob("*"):
        rel = path.relative_to(table)
        if rel.parts[0] in (".hoodie", "__MACOSX") or not path.is_file():
            continue
        if path.name.endswith(".parquet") or LogFile.parse(path.name):
            out[path.name] = "/".join(rel.parts[:-1])
    return out


def round_trip(stats: dict[str, Any], table_version: int) -> dict[str, Any]:
    """``stats`` written inside a HoodieMetadataRecord of ``table_version`` and read back."""
    schema = fastavro.parse_schema(copy.deepcopy(metadata_schema(table_version)))
    buf = io.BytesIO()
    record = {"key": "", "type": 3, "filesystemMetadata": None, "ColumnStatsMetadata": stats}
    fastavro.schemaless_writer(buf, schema, record)
    back = fastavro.schemaless_reader(
        io.BytesIO(buf.getvalue()), schema, schema, return_record_name=True, return_record_name_override=True
    )
    assert isinstance(back, dict)
    result: dict[str, Any] = back["ColumnStatsMetadata"]
    return result


class StatsCache:
    """Our stats of the data files of one table, computed once per file."""

    def __init__(self, root: Path, table_version: int | None = None) -> None:
        self.table = HoodieTable.open(str(root))
        self.columns = indexed_columns(self.table)
        schema = self.table.latest_schema_json()
        assert schema is not None
        self.schema: dict[str, Any] = schema
        self.version = table_version or self.table.table_version
        self._cache: dict[str, list[dict[str, Any]]] = {}

    def of(self, partition: str, file_name: str) -> list[dict[str, Any]]:
        if file_name not in self._cache:
            self._cache[file_name] = file_column_stats(
                self.table.fileio,
                self.table.base_path,
                partition,
                file_name,
                self.columns,
                self.schema,
                table_version=self.version,
            )
        return self._cache[file_name]


# -- columns --------------------------------------------------------------------------------------


def _registered_columns(table: Path) -> list[str]:
    defs = json.loads((table / ".hoodie" / ".index_defs" / "index.json").read_text())
    return list(defs["indexDefinitions"]["column_stats"]["sourceFields"])


@pytest.mark.parametrize("name", MDT_TABLES)
def test_indexed_columns_are_the_registered_source_fields(fixture_root: Path, name: str) -> None:
    root = fixture_path(fixture_root, name)
    assert indexed_columns(HoodieTable.open(str(root))) == _registered_columns(root)


@pytest.mark.parametrize("name", MDT_TABLES)
def test_default_rule_gives_the_columns_hudi_registered(table_copy: Any, name: str) -> None:
    # Hudi derived these sourceFields with its default rule; without the index definitions we
    # must derive the same list from the table schema.
    root = Path(table_copy(name))
    registered = _registered_columns(root)
    shutil.rmtree(root / ".hoodie" / ".index_defs")
    table = HoodieTable.open(str(root))
    assert indexed_columns(table) == registered
    assert default_indexed_columns(table.latest_schema_json()) == registered


def test_default_rule_skips_unsupported_types_and_stops_at_32() -> None:
    fields: list[dict[str, Any]] = [
        {"name": "_hoodie_operation", "type": ["null", "string"]},
        {"name": "nested", "type": {"type": "record", "name": "n", "fields": [{"name": "a", "type": "int"}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "props", "type": {"type": "map", "values": "string"}},
        {"name": "kind", "type": {"type": "enum", "name": "k", "symbols": ["A"]}},
        # "wide": precision + (15 - scale) > 30 does not fit decimal(30,15); "fine": scale 16 > 15
        {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 25, "scale": 2}},
        {"name": "fine", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 16}},
        {"name": "ok_dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 17, "scale": 2}},
        {"name": "blob", "type": ["null", "bytes"]},
    ]
    fields += [{"name": f"c{i}", "type": "long"} for i in range(40)]
    schema = {"type": "record", "name": "r", "fields": fields}
    columns = default_indexed_columns(schema)
    assert columns[:3] == list(ALWAYS_INDEXED_META_COLUMNS)
    assert columns[3:] == ["ok_dec", "blob"] + [f"c{i}" for i in range(30)]
    assert default_indexed_columns(schema, populate_meta_fields=False, max_columns=2) == ["ok_dec", "blob"]
    assert default_indexed_columns(None) == list(ALWAYS_INDEXED_META_COLUMNS)


# -- file stats against Hudi's ----------------------------------------------------------------------


@pytest.mark.parametrize("name", MDT_TABLES)
def test_file_column_stats_reproduce_hudi(fixture_root: Path, name: str) -> None:
    root = fixture_path(fixture_root, name)
    ours = StatsCache(root)
    on_disk = data_files(root)
    hudi: dict[tuple[str, str], list[MdtRecord]] = {}
    for record in mdt_records(root, "column_stats"):
        hudi.setdefault((record.stats["fileName"], record.stats["columnName"]), []).append(record)
    assert hudi, f"{name}: no column stats in the metadata table"
    # Every data file Hudi indexed still exists (no clean ran), so nothing is left unchecked.
    assert {file_name for file_name, _ in hudi} <= set(on_disk)
    kinds: set[str] = set()
    for (file_name, column), records in hudi.items():
        partition = on_disk[file_name]
        mine = {s["columnName"]: s for s in ours.of(partition, file_name)}
        assert set(mine) == set(ours.columns), file_name
        for record in records:  # the log record and its copy in the compacted base HFile
            assert record.key == column_stats_key(column, partition, file_name)
            assert mine[column] == record.stats, (record.mdt_file, file_name, column)
        kinds.add("base" if file_name.endswith(".parquet") else "log")
        if record.stats["valueCount"] == 0:
            kinds.add("empty log")
    if name != V9_ROLLBACK:  # the rollback table has base files only
        assert kinds == {"base", "log", "empty log"}
    for stats in (s for f, p in on_disk.items() for s in ours.of(p, f)):
        assert round_trip(stats, ours.version) == stats


def test_v9_value_types_seen_in_hudi_stats(fixture_root: Path) -> None:
    root = fixture_path(fixture_root, V9)
    seen = {
        (r.stats["columnName"], r.stats["valueType"]["typeOrdinal"])
        for r in mdt_records(root, "column_stats")
    }
    by_column: dict[str, set[int]] = {}
    for column, ordinal in seen:
        by_column.setdefault(column, set()).add(ordinal)
    # every column has its type, plus NULL for the stats of delete-only log files
    assert by_column["amount"] == {ValueType.DECIMAL, ValueType.NULL}
    assert by_column["txn_datetime"] == {ValueType.TIMESTAMP_MICROS, ValueType.NULL}
    assert by_column["txn_date"] == {ValueType.DATE, ValueType.NULL}
    assert by_column["is_international"] == {ValueType.BOOLEAN, ValueType.NULL}
    assert by_column["txn_ts"] == {ValueType.LONG, ValueType.NULL}
    assert by_column["currency"] == {ValueType.STRING, ValueType.NULL}


def test_table_version_8_wrappers_for_decimals_dates_and_timestamps(fixture_root: Path) -> None:
    # The v8 fixture has no decimal/date/timestamp column; the v9 table's files computed with
    # V1 rules must carry the same values in the wrappers Java's wrapValueIntoAvro picks.
    root = fixture_path(fixture_root, V9)
    v1, v2 = StatsCache(root, table_version=8), StatsCache(root)
    checked = 0
    for file_name, partition in data_files(root).items():
        for old, new in zip(v1.of(partition, file_name), v2.of(partition, file_name), strict=True):
            assert "valueType" not in old and round_trip(old, 8) == old
            assert {k: v for k, v in old.items() if k not in ("minValue", "maxValue")} == {
                k: v for k, v in new.items() if k not in ("minValue", "maxValue", "valueType")
            }
            for bound in ("minValue", "maxValue"):
                if new[bound] is None:
                    assert old[bound] is None
                    continue
                (wrapper, value), (new_wrapper, new_value) = old[bound], new[bound]
                ordinal = new["valueType"]["typeOrdinal"]
                if ordinal == ValueType.DECIMAL:
                    scale = int(new["valueType"]["additionalInfo"].split(",")[1])
                    unscaled = int.from_bytes(new_value["value"], "big", signed=True)
                    assert wrapper == NS + "DecimalWrapper"
                    assert value["value"] == Decimal(unscaled).scaleb(-scale)
                    assert value["value"].as_tuple().exponent == -15
                    checked += 1
                elif ordinal == ValueType.DATE:
                    assert (wrapper, value) == (NS + "DateWrapper", new_value)
                    checked += 1
                else:  # timestamps stay longs, strings, booleans and numbers as they are
                    assert (wrapper, value) == (new_wrapper, new_value)
    assert checked > 0


# -- partition stats against Hudi's -------------------------------------------------------------------


def _files_in_partition_at(table: HoodieTable, instant_time: str, partition: str) -> list[str]:
    """The files Hudi aggregates for ``partition`` when writing instant ``instant_time``.

    ``getPartitionLatestFileSlicesIncludingInflight`` at that instant: the latest slices with the
    instant's own files. A replacecommit is still inflight then, so the file groups it replaces
    still count.
    """
    writes = table.timeline.completed().writes()
    instant = writes.get(instant_time)
    assert instant is not None
    slices = table.file_system_view(as_of=instant_time).latest_file_slices([partition])
    if instant.action is Action.REPLACE_COMMIT:
        meta = table.commit_metadata(instant)
        assert isinstance(meta, ReplaceCommitMetadata)
        replaced = {fid for p, fid in meta.replaced_file_ids() if p == partition}
        before = [i for i in writes if i.requested_time < instant_time][-1].requested_time
        slices += [
            s
            for s in table.file_system_view(as_of=before).latest_file_slices([partition])
            if s.file_id in replaced
        ]
    names: list[str] = []
    for s in slices:
        names += ([s.base_file.name] if s.base_file is not None else []) + [log.name for log in s.log_files]
    return names


@pytest.mark.parametrize("name", [V8, V9])
def test_partition_stats_reproduce_hudi(fixture_root: Path, name: str) -> None:
    root = fixture_path(fixture_root, name)
    ours = StatsCache(root)
    checked = 0
    for record in mdt_records(root, "partition_stats"):
        if record.instant is None:
            continue  # base HFile records are MDT-compaction merges: see the merge test below
        partition, column = record.stats["fileName"], record.stats["columnName"]
        assert record.key == partition_stats_key(column, partition)
        files = _files_in_partition_at(ours.table, record.instant, partition)
        stats = [s for f in files for s in ours.of(partition, f)]
        mine = {s["columnName"]: s for s in partition_stats(partition, stats, tight_bound=True)}
        assert mine[column] == record.stats, (record.instant, partition, column, files)
        checked += 1
    assert checked >= {V8: 90, V9: 300}[name]


@pytest.mark.parametrize("name", [V8, V9])
@pytest.mark.parametrize("partition", ["column_stats", "partition_stats"])
def test_mdt_compaction_merges_like_merge_column_stats(fixture_root: Path, name: str, partition: str) -> None:
    # The MDT compaction plan names the log files it merged into each base HFile; folding their
    # records with merge_column_stats must give the records Hudi wrote to the base.
    root = fixture_path(fixture_root, name)
    mdt = root / ".hoodie" / "metadata"
    timeline = mdt / ".hoodie" / "timeline"
    version = HoodieTable.open(str(root)).table_version
    records = mdt_records(root, partition)
    folded_keys = 0
    for requested in sorted(timeline.glob("*.compaction.requested")):
        plan = CompactionPlan.from_bytes(requested.read_bytes(), version, str(requested))
        for op in plan.operations or ():
            if op.partition_path != partition:
                continue
            instant = requested.name.split(".")[0]
            base = next(p.name for p in (mdt / partition).glob(f"{op.file_id}_*_{instant}.hfile"))
            merged: dict[str, dict[str, Any]] = {}
            for log in op.delta_file_paths or ():
                for r in (r for r in records if r.mdt_file == log):
                    merged[r.key] = merge_column_stats(merged[r.key], r.stats) if r.key in merged else r.stats
            written = {r.key: r.stats for r in records if r.mdt_file == base}
            assert merged == written
            folded_keys += len(written)
    assert folded_keys > 0


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


# -- merging and tombstones -----------------------------------------------------------------------


def _stats(
    lo: Any,
    hi: Any,
    *,
    wrapper: str = "LongWrapper",
    ordinal: int | None = 4,
    counts: tuple[int, int, int, int] = (1, 10, 100, 200),
    **extra: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "fileName": "f.parquet",
        "columnName": "c",
        "minValue": None if lo is None else (NS + wrapper, {"value": lo}),
        "maxValue": None if hi is None else (NS + wrapper, {"value": hi}),
        "valueCount": counts[1],
        "nullCount": counts[0],
        "totalSize": counts[2],
        "totalUncompressedSize": counts[3],
        "isDeleted": False,
        "isTightBound": False,
    }
    if ordinal is not None:
        out["valueType"] = {"typeOrdinal": ordinal, "additionalInfo": None}
    return out | extra


def test_merge_takes_min_max_and_sums_counts() -> None:
    older, newer = _stats(5, 9), _stats(3, 7, counts=(2, 20, 300, 400), fileName="g.parquet")
    merged = merge_column_stats(older, newer)
    assert merged["minValue"][1]["value"] == 3 and merged["maxValue"][1]["value"] == 9
    assert (
        merged["nullCount"],
        merged["valueCount"],
        merged["totalSize"],
        merged["totalUncompressedSize"],
    ) == (3, 30, 400, 600)
    assert (
        merged["fileName"] == "g.parquet" and merged["isDeleted"] is False and merged["isTightBound"] is False
    )
    # null bounds are ignored; an empty (NULL-typed) side adopts the other's type
    empty = _stats(None, None, ordinal=ValueType.NULL, counts=(0, 0, 0, 0))
    assert merge_column_stats(older, empty)["valueType"] == older["valueType"]
    assert merge_column_stats(empty, older)["minValue"] == older["minValue"]
    with pytest.raises(ValueError, match="cannot merge"):
        merge_column_stats(older, newer | {"columnName": "other"})


def test_merge_tombstones_and_tight_bounds_replace() -> None:
    live, dead = _stats(5, 9), tombstone("p", "f.parquet", "c")
    assert merge_column_stats(live, dead) == dead
    assert merge_column_stats(dead, live) == live
    tight = _stats(6, 6, isTightBound=True)
    assert merge_column_stats(_stats(1, 100), tight) == tight
    loose = merge_column_stats(tight, _stats(1, 2))  # a loose newer record widens a tight one
    assert (loose["minValue"][1]["value"], loose["maxValue"][1]["value"], loose["isTightBound"]) == (
        1,
        6,
        False,
    )


def test_merge_orders_values_as_java() -> None:
    # Decimals (table version 9) are unscaled two's complement: b"\xff" (-1) < b"\x01" (1)
    dec: dict[str, Any] = {"ordinal": ValueType.DECIMAL, "wrapper": "BytesWrapper"}
    merged = merge_column_stats(_stats(b"\x01", b"\x01", **dec), _stats(b"\xff", b"\xff", **dec))
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == (b"\xff", b"\x01")
    # Plain bytes compare as signed bytes (ByteBuffer.compareTo)
    raw: dict[str, Any] = {"ordinal": ValueType.BYTES, "wrapper": "BytesWrapper"}
    merged = merge_column_stats(_stats(b"\x7f", b"\x7f", **raw), _stats(b"\x80", b"\x80", **raw))
    assert merged["minValue"][1]["value"] == b"\x80"
    # Strings compare as String.compareTo: UTF-16 code units, so U+FF61 sorts after U+1F600
    text: dict[str, Any] = {"ordinal": ValueType.STRING, "wrapper": "StringWrapper"}
    merged = merge_column_stats(
        _stats("\uff61", "\uff61", **text), _stats("\U0001f600", "\U0001f600", **text)
    )
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == ("\U0001f600", "\uff61")
    # Doubles compare as Double.compare: -0.0 < 0.0, NaN above everything
    dbl: dict[str, Any] = {"ordinal": ValueType.DOUBLE, "wrapper": "DoubleWrapper"}
    merged = merge_column_stats(_stats(0.0, 1.0, **dbl), _stats(-0.0, math.nan, **dbl))
    assert math.copysign(1, merged["minValue"][1]["value"]) == -1 and math.isnan(
        merged["maxValue"][1]["value"]
    )
    # Version 8 wrappers: DecimalWrapper values are decimals at scale 15
    v1: dict[str, Any] = {"ordinal": None, "wrapper": "DecimalWrapper"}
    merged = merge_column_stats(
        _stats(Decimal("2.5"), Decimal("2.5"), **v1), _stats(Decimal("-1"), Decimal("10"), **v1)
    )
    assert "valueType" not in merged
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == (Decimal("-1"), Decimal("10"))


def test_tombstone_is_hudis_stub() -> None:
    for version in (8, 9):
        stats = tombstone("region=us", "f.parquet", "amount", table_version=version)
        assert stats["isDeleted"] is True and stats["isTightBound"] is False
        assert (stats["minValue"], stats["maxValue"]) == (None, None)
        assert (
            stats["valueCount"],
            stats["nullCount"],
            stats["totalSize"],
            stats["totalUncompressedSize"],
        ) == (-1,) * 4
        assert ("valueType" in stats) is (version == 9)
        assert round_trip(stats, version) == stats
    assert tombstone("p", "f.parquet", "c")["valueType"] == {
        "typeOrdinal": ValueType.NULL,
        "additionalInfo": None,
    }
    with pytest.raises(ValueError, match="not a file name"):
        tombstone("p", "p/f.parquet", "c")


def test_partition_stats_aggregate_files() -> None:
    files = [
        _stats(5, 9, counts=(1, 10, 100, 200)),
        _stats(None, None, ordinal=ValueType.NULL, counts=(0, 0, 0, 0)),  # a delete-only log
        _stats(2, 3, wrapper="IntWrapper", ordinal=ValueType.INT, counts=(0, 5, 0, 0)),  # before int -> long
        tombstone("p", "gone.parquet", "c"),  # deleted files do not count
        _stats(7, 12, counts=(0, 1, 0, 0)) | {"columnName": "d"},
    ]
    out = {s["columnName"]: s for s in partition_stats("region=us", files, tight_bound=True)}
    c = out["c"]
    assert c["fileName"] == "region=us" and c["isTightBound"] is True and c["isDeleted"] is False
    assert c["valueType"]["typeOrdinal"] == ValueType.LONG
    assert c["minValue"] == (NS + "LongWrapper", {"value": 2}) and c["maxValue"] == (
        NS + "LongWrapper",
        {"value": 9},
    )
    assert (c["nullCount"], c["valueCount"], c["totalSize"], c["totalUncompressedSize"]) == (1, 15, 100, 200)
    assert out["d"]["minValue"][1]["value"] == 7
    assert partition_stats("p", [files[0]], tight_bound=False)[0]["isTightBound"] is False
    for s in out.values():
        assert round_trip(s, 9) == s


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
