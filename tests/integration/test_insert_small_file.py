"""The insert operation into a small base file, as Hudi's ``HoodieMergeHandleFactory`` picks the
handle for it: ``HoodieConcatHandle`` (the file's records kept as they are, every incoming record
appended, duplicates of existing keys included) when ``hoodie.merge.allow.duplicate.on.inserts``
holds, otherwise ``HoodieMergeHandle`` (incoming records kept in a map by key, the last one of a
key winning, then merged with the file's record of that key by the table's merge mode).

The key defaults to false for table version 6 (as Hudi 0.14) and true from version 8 (Hudi 1.x).
On a CDC table the concatenation writes no CDC log and Hudi's CDC reader fails on the commit, so
hts refuses it before anything is written; merged inserts are logged as changes.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.cdc.reader import read_cdc
from hoodie.config.table_config import RecordMergeMode, TableType, TableVersion
from hoodie.errors import InvalidInputError, UnsupportedShapeError
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.write.options import ALLOW_DUPLICATE_ON_INSERTS
from hoodie.write.writer import HoodieWriter
from tests.integration.hudi_model import Entry, keep_newer
from tests.tables import new_table

Row = dict[str, Any]
DATA = ("id", "ts", "v", "p")

OLD: list[Row] = [{"id": f"k{i}", "ts": 2, "v": f"old{i}", "p": "p0"} for i in range(4)]
INCOMING: list[Row] = [
    {"id": "k1", "ts": 3, "v": "newer", "p": "p0"},  # an existing key, greater ordering value
    {"id": "k2", "ts": 1, "v": "late", "p": "p0"},  # an existing key, smaller ordering value
    {"id": "k8", "ts": 5, "v": "first", "p": "p0"},  # a new key, twice in the batch:
    {"id": "k8", "ts": 4, "v": "second", "p": "p0"},  # the map keeps the later record
    {"id": "k9", "ts": 1, "v": "fresh", "p": "p0"},
]


def _concat_model(old: list[Row], incoming: list[Row]) -> list[Row]:
    """HoodieConcatHandle: every old record, then every incoming one."""
    return [*old, *incoming]


def _merge_model(old: list[Row], incoming: list[Row], event_time: bool) -> list[Row]:
    """HoodieMergeHandle: the last incoming record per key, merged with the old record of its key."""
    last: dict[str, Row] = {}
    for r in incoming:
        last[r["id"]] = r
    out = []
    for r in old:
        new = last.pop(r["id"], None)
        winner = (
            new if new is not None and keep_newer(Entry(r, r["ts"]), Entry(new, new["ts"]), event_time) else r
        )
        out.append(winner)
    return [*out, *last.values()]


def _rows(data: list[Row]) -> pa.Table:
    return pa.Table.from_pylist(
        data,
        schema=pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())]),
    )


def _snapshot(path: Path) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return sorted(json.dumps({k: r[k] for k in DATA}, sort_keys=True) for r in data.to_pylist())


def _hudi_rs(path: Path) -> list[str]:
    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false").build()
    )
    data = pa.Table.from_batches(table.read())
    return sorted(json.dumps({k: r[k] for k in DATA}, sort_keys=True) for r in data.to_pylist())


def _expected(rows: list[Row]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _table(
    path: Path, version: TableVersion, *, cdc: bool = False, table_type: TableType = TableType.COPY_ON_WRITE
) -> HoodieTable:
    extra = {"hoodie.table.cdc.enabled": "true"} if cdc else {}
    return new_table(
        path, table_type=table_type, version=version, metadata_table=False, extra_properties=extra
    )


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
@pytest.mark.parametrize(
    ("version", "setting", "concat"),
    [
        (TableVersion.SIX, None, False),  # Hudi 0.14's default
        (TableVersion.EIGHT, None, True),  # Hudi 1.x's default
        (TableVersion.NINE, None, True),
        (TableVersion.SIX, "true", True),
        (TableVersion.NINE, "false", False),
    ],
)
def test_insert_into_a_small_file_as_hudis_handle(
    tmp_path: Path, table_type: TableType, version: TableVersion, setting: str | None, concat: bool
) -> None:
    path = tmp_path / "t"
    table = _table(path, version, table_type=table_type)
    HoodieWriter(table).insert(_rows(OLD))
    props = {} if setting is None else {ALLOW_DUPLICATE_ON_INSERTS: setting}
    result = HoodieWriter(HoodieTable.open(str(path)), write_props=props).insert(_rows(INCOMING))
    (stat,) = result.write_stats  # the one small file took the whole batch
    assert stat.prev_commit != "null" and stat.path.endswith(".parquet")
    # new_table: EVENT_TIME_ORDERING (version 6: DefaultHoodieRecordPayload, which orders the same way)
    config = HoodieTable.open(str(path)).config
    event_time = config.merge_mode is RecordMergeMode.EVENT_TIME_ORDERING or (
        config.payload_class or ""
    ).endswith(".DefaultHoodieRecordPayload")
    expected = _concat_model(OLD, INCOMING) if concat else _merge_model(OLD, INCOMING, event_time)
    assert _snapshot(path) == _expected(expected)
    assert _hudi_rs(path) == _expected(expected)
    assert (stat.num_writes, stat.num_inserts) == ((9, 5) if concat else (6, 2))
    assert stat.num_deletes == 0 and (stat.num_update_writes == 0 if concat else stat.num_update_writes >= 1)


def _tree_hash(path: Path) -> dict[str, str]:
    return {
        p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
        and not p.relative_to(path).as_posix().startswith((".hoodie/.aux/hts/", ".hoodie/.heartbeat/"))
    }


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_a_concatenating_insert_into_a_cdc_table_is_refused_before_writing(
    tmp_path: Path, table_type: TableType
) -> None:
    path = tmp_path / "t"
    HoodieWriter(_table(path, TableVersion.NINE, cdc=True, table_type=table_type)).insert(_rows(OLD))
    before = _tree_hash(path)
    with pytest.raises(UnsupportedShapeError) as refused:
        HoodieWriter(HoodieTable.open(str(path))).insert(_rows(INCOMING))
    message = str(refused.value)
    assert "hoodie.table.cdc.enabled=true" in message and f"{ALLOW_DUPLICATE_ON_INSERTS}=true" in message
    assert "p0/" in message and ".parquet" in message and refused.value.shape == "CDC"
    assert _tree_hash(path) == before


def test_a_merging_insert_into_a_cdc_table_logs_its_changes(tmp_path: Path) -> None:
    path = tmp_path / "t"
    first = HoodieWriter(_table(path, TableVersion.NINE, cdc=True)).insert(_rows(OLD))
    writer = HoodieWriter(HoodieTable.open(str(path)), write_props={ALLOW_DUPLICATE_ON_INSERTS: "false"})
    result = writer.insert(_rows(INCOMING))
    done = result.instant.requested_time
    assert all(s.cdc_stats for s in result.write_stats)
    changes = read_cdc(HoodieTable.open(str(path)), first.instant.requested_time, done)

    def v(image: str | None) -> str | None:  # Hudi prints a missing image as the text null
        parsed = None if image is None else json.loads(image)
        return None if parsed is None else str(parsed["v"])

    got = sorted((r["op"], v(r["before"]), v(r["after"])) for r in changes.to_pylist())
    # event-time ordering: k1 (ts 3 > 2) updated, k2's late record (ts 1) loses, k8 once (the later), k9
    assert got == [("i", None, "fresh"), ("i", None, "second"), ("u", "old1", "newer")]


def test_a_bad_value_of_the_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t"
    HoodieWriter(_table(path, TableVersion.NINE)).insert(_rows(OLD))
    before = _tree_hash(path)
    writer = HoodieWriter(HoodieTable.open(str(path)), write_props={ALLOW_DUPLICATE_ON_INSERTS: "yes"})
    with pytest.raises(InvalidInputError, match=f"'yes' for {ALLOW_DUPLICATE_ON_INSERTS}"):
        writer.insert(_rows(INCOMING))
    assert _tree_hash(path) == before


def test_the_cli_refuses_and_honours_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from service.cli import main

    path = tmp_path / "t"
    HoodieWriter(_table(path, TableVersion.EIGHT, cdc=True)).insert(_rows(OLD))
    data = tmp_path / "in.parquet"
    pq.write_table(_rows(INCOMING), data)
    base = ["write", str(path), "--input", str(data), "--operation", "insert"]
    before = _tree_hash(path)
    assert main(base) != 0
    err = capsys.readouterr().err
    assert "CDC table" in err and "refused" in err and f"{ALLOW_DUPLICATE_ON_INSERTS}=true" in err
    assert _tree_hash(path) == before
    assert main([*base, "--option", f"{ALLOW_DUPLICATE_ON_INSERTS}=false"]) == 0
    expected = _merge_model(OLD, INCOMING, event_time=True)
    assert _snapshot(path) == _expected(expected) and _hudi_rs(path) == _expected(expected)
