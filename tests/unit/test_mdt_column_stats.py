"""Metadata-table ``column_stats`` / ``partition_stats`` payloads against what Apache Hudi wrote.

The fixtures' metadata tables hold the stats Hudi 1.0 (table version 8) and 1.1 (table version 9)
computed for every data file and partition; we recompute each one from the data files and compare
whole payloads. Hudi's MDT compactions give merged records to check ``merge_column_stats`` against.
The rules the fixtures cannot show are in ``test_mdt_column_stats_files.py`` and
``test_mdt_column_stats_merge.py``.
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.file_group.log_block import BlockType
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import read_blocks
from hoodie.hfile.reader import HFileReader
from hoodie.metadata.column_ranges import ValueType, merge_column_stats, partition_stats
from hoodie.metadata.column_stats import (
    ALWAYS_INDEXED_META_COLUMNS,
    default_indexed_columns,
    file_column_stats,
    indexed_columns,
)
from hoodie.metadata.keys import column_stats_key, partition_stats_key
from hoodie.models.commit import ReplaceCommitMetadata
from hoodie.models.compaction import CompactionPlan
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from tests.conftest import fixture_path
from tests.unit.column_stats_support import NS, round_trip

V8 = "quickstart_trips_table/mor/avro/v8_trips_8i3u1d"
V9 = "sample_table/mor/avro/v9_txns_simple_meta"
V9_ROLLBACK = "sample_table/mor/avro/v9_nonpartitioned_rollback"
MDT_TABLES = [V8, V9, V9_ROLLBACK]


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
