"""Audit (issue 14): log-block layouts Apache Hudi's writers leave in MERGE_ON_READ slices, read and
serviced by hts as Hudi 1.1's log record reader (``BaseHoodieLogRecordReader``) reads them.

Each case builds a table with hts's writer, then lays extra bytes into its logs as a Hudi writer
would have: a block of an inflight instant of a second writer ahead of a committed one, a torn
(crashed) block followed by later appends, a failed write rolled back by a ROLLBACK command block
(table version 6). Every operation then runs through the CLI, and the table must read as the model
of the committed writes says, before and after.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import UnsupportedTableError
from hoodie.file_group.log_block import BlockType, encode_block, rollback_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.file_group.log_writer import (
    WRAPPER_NAMESPACE,
    OrderingWrapper,
    avro_data_block,
    delete_block_content,
)
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import decode_data_block, decode_delete_block
from hoodie.schema.avro_arrow import avro_to_arrow_schema
from hoodie.table import HoodieTable
from hoodie.timeline.instant_time import normalize
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.conftest import hudi_rs_rows
from tests.tables import SCHEMA, new_table, rows

Model = dict[str, str]


def _write(path: Path, version: TableVersion) -> tuple[HoodieTable, Model]:
    """Inserts (ts 1) then two upserts (ts 2, ts 3) into one partition: the base file and two logs."""
    table = new_table(path, version=version)
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1, partitions=1))
    writer.upsert(rows(range(0, 6, 2), 2, partitions=1))
    writer.upsert(rows(range(0, 6, 3), 3, partitions=1))
    model = {f"k{i}": f"v{i}@1" for i in range(6)}
    model.update({f"k{i}": f"v{i}@2" for i in range(0, 6, 2)})
    model.update({f"k{i}": f"v{i}@3" for i in range(0, 6, 3)})
    return HoodieTable.open(str(path)), model


def _logs(path: Path) -> list[Path]:
    """The log files of partition p0 in log order: by instant (v8+: the write's), then version."""

    def order(p: Path) -> tuple[str, int]:
        head, tail = p.name.split(".log.")
        return head.rsplit("_", 1)[1], int(tail.split("_")[0])

    return sorted(path.glob("p0/.*.log.*"), key=order)


def _writer_schema(log: Path) -> dict[str, Any]:
    block = next(b for b in read_blocks(log.read_bytes(), str(log)) if b.schema)
    schema: dict[str, Any] = json.loads(block.schema or "{}")
    return schema


def _later_instant(table: HoodieTable, offset: int) -> str:
    """An instant ``offset`` ms after the last completed write (and before any later write's)."""
    last = table.reload().completed().writes().last()
    assert last is not None
    time.sleep(0.01)
    return str(int(normalize(last.requested_time)) + offset)


def _inflight(path: Path, instant: str) -> None:
    """A deltacommit of another writer that has not completed (requested and inflight files)."""
    for suffix in ("deltacommit.requested", "deltacommit.inflight"):
        (path / ".hoodie" / f"{instant}.{suffix}").write_bytes(b"")


def _block(log: Path, ids: range, ts: int, instant: str) -> bytes:
    data = rows(ids, ts, partitions=1)
    schema = _writer_schema(log)
    names = [f["name"] for f in schema["fields"]]
    meta = {
        "_hoodie_commit_time": [instant] * data.num_rows,
        "_hoodie_commit_seqno": [f"{instant}_0_{i}" for i in range(data.num_rows)],
        "_hoodie_record_key": data["id"].to_pylist(),
        "_hoodie_partition_path": data["p"].to_pylist(),
        "_hoodie_file_name": [log.name] * data.num_rows,
    }
    columns = {n: meta[n] if n in meta else data[n].to_pylist() for n in names}
    return avro_data_block(pa.table(columns), schema, instant)


def inflight_block_ahead_of_a_committed_one(path: Path, table: HoodieTable, model: Model) -> None:
    """Table version 6, two writers: the second (a later instant, still inflight) appended its block
    to the first log file while the first writer went on to a new log version and committed.
    Hudi 1.x skips the newer, uncommitted block and applies the committed one after it."""
    logs = _logs(path)
    instant = _later_instant(table, 1)
    _inflight(path, instant)
    with logs[0].open("ab") as f:
        f.write(_block(logs[0], range(6), 9, instant))


def inflight_block_ahead_rolled_back(path: Path, table: HoodieTable, model: Model) -> None:
    """As :func:`inflight_block_ahead_of_a_committed_one`, after the second writer failed and was
    rolled back: its instant files are gone and a ROLLBACK command block (of a later instant) follows
    its block. Reads and compaction still see the last completed write as the latest instant."""
    logs = _logs(path)
    instant = _later_instant(table, 1)
    with logs[0].open("ab") as f:
        f.write(_block(logs[0], range(6), 9, instant))
        f.write(rollback_block(_later_instant(table, 2), instant))


def torn_block_then_appends(path: Path, table: HoodieTable, model: Model) -> None:
    """Table version 6: a writer crashed in the middle of appending a block (a torn write), and its
    instant was rolled back with a ROLLBACK command block; a later writer appended after both."""
    logs = _logs(path)
    failed = _later_instant(table, 1)
    rollback = _later_instant(table, 2)
    torn = _block(logs[-1], range(6), 9, failed)
    with logs[-1].open("ab") as f:
        f.write(torn[: len(torn) // 2])
        f.write(rollback_block(rollback, failed))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([1, 2], 4, partitions=1))
    model.update({"k1": "v1@4", "k2": "v2@4"})


def rolled_back_blocks_in_one_file(path: Path, table: HoodieTable, model: Model) -> None:
    """Table version 6, appends to one file: a failed deltacommit's two blocks (a Spark task retry
    wrote the same records twice), its ROLLBACK command block, then a committed write's block."""
    logs = _logs(path)
    failed = _later_instant(table, 1)  # rolled back: its instant files are gone
    with logs[-1].open("ab") as f:
        f.write(_block(logs[-1], range(6), 9, failed))
        f.write(_block(logs[-1], range(6), 9, failed))
        f.write(rollback_block(_later_instant(table, 2), failed))


def torn_start_of_a_block(path: Path, table: HoodieTable, model: Model) -> None:
    """A writer crashed after writing the first bytes of a block's magic (fewer than six) behind the
    last, committed block: the end of the file to Hudi (``HoodieLogFileReader.readMagic`` meets
    EOF), so that block stays valid."""
    with _logs(path)[-1].open("ab") as f:
        f.write(b"#HU")


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path, HoodieTable, Model], None]
    version: TableVersion = TableVersion.SIX


CASES = [
    Case("inflight_block_ahead", inflight_block_ahead_of_a_committed_one),
    Case("inflight_block_ahead_rolled_back", inflight_block_ahead_rolled_back),
    Case("torn_block_then_appends", torn_block_then_appends),
    Case("rolled_back_blocks", rolled_back_blocks_in_one_file),
    Case("torn_start_of_a_block", torn_start_of_a_block),
    Case("torn_start_of_a_block_v8", torn_start_of_a_block, TableVersion.EIGHT),
]


def _files(path: Path) -> dict[str, bytes]:
    """Every file of the table but hts's own state and heartbeats, with its bytes."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in path.rglob("*")
        if p.is_file() and ".aux" not in p.parts and ".heartbeat" not in p.parts
    }


def _read(path: Path) -> Model:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    pairs = list(zip(data.column("id").to_pylist(), data.column("v").to_pylist(), strict=True))
    assert len(pairs) == len({k for k, _ in pairs}), "a key read twice"
    return dict(pairs)


def _ordered_by_two_fields(path: Path, schema: pa.Schema) -> HoodieWriter:
    """A version-9 MERGE_ON_READ table ordered by ``ts`` then ``v`` (Hudi 1.1's several ordering fields)."""
    create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts", "v"],
        table_version=TableVersion.NINE,
        metadata_table=False,
    )
    return HoodieWriter(HoodieTable.open(str(path)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_log_layouts_read_and_service_as_hudi(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t"
    table, model = _write(path, case.version)
    case.build(path, table, model)
    assert _read(path) == model
    ran: list[str] = []
    for service in ("logcompaction", "compaction", "clustering", "clean"):
        before = _files(path)
        code = main(["run", service, str(path), "--spark-master", "in-process"])
        err = capsys.readouterr().err
        if code != 0:  # a pending write of another writer: Hudi too waits for it (refused, unchanged)
            assert "cannot schedule" in err, (service, err)
            assert _files(path) == before, service
        assert _read(path) == model, service
        if code == 0:
            ran.append(service)
    if case.build is not inflight_block_ahead_of_a_committed_one:
        assert "compaction" in ran and len(list(path.glob("p0/*.parquet"))) > 1  # it compacted
    assert len(hudi_rs_rows(path)) == len(model)


def _wrapped(value: int | str) -> tuple[str, dict[str, Any]]:
    name = "LongWrapper" if isinstance(value, int) else "StringWrapper"
    return (WRAPPER_NAMESPACE + name, {"value": value})


def test_deletes_with_several_ordering_fields_keep_their_ordering_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi 1.1 writes the ordering value of a delete on a table with several ordering fields as an
    ``ArrayWrapper`` of wrapped values (``HoodieAvroUtils.wrapValueIntoAvro``). A delete with a lower
    value than the record's loses (``EventTimeBufferedRecordMerger``), one with a greater value
    deletes; it is not a commit-time delete, which would delete whatever the ordering values."""
    path = tmp_path / "t"
    writer = _ordered_by_two_fields(path, SCHEMA)
    writer.insert(rows(range(4), 5, partitions=1))
    writer.upsert(rows([0], 6, partitions=1))
    writer.delete(rows([0, 1, 2], 0, partitions=1).select(["id", "p"]))
    # The delete block as Hudi writes it for deletes carrying their records' ordering values.
    log = _logs(path)[-1]
    (block,) = read_blocks(log.read_bytes(), str(log))
    assert block.block_type is BlockType.DELETE
    ordering: list[OrderingWrapper | None] = [
        (WRAPPER_NAMESPACE + "ArrayWrapper", {"wrappedValues": [_wrapped(ts), _wrapped(v)]})
        for ts, v in [(3, "v0@3"), (5, "v1@4"), (9, "v2@9")]
    ]
    content = delete_block_content(["k0", "k1", "k2"], ["p0"] * 3, ordering, 9)
    log.write_bytes(encode_block(BlockType.DELETE, block.header, content))
    model = {"k0": "v0@6", "k1": "v1@5", "k3": "v3@5"}
    assert _read(path) == model
    code = main(["run", "compaction", str(path), "--spark-master", "in-process"])
    assert code == 0, capsys.readouterr().err
    assert _read(path) == model


TS_SCHEMA = pa.schema(
    [("id", pa.string()), ("ts", pa.timestamp("us")), ("v", pa.string()), ("p", pa.string())]
)


def _ts_rows(ids: list[int], second: int) -> pa.Table:
    at = dt.datetime(2024, 1, 1) + dt.timedelta(seconds=second)
    return pa.Table.from_pylist(
        [{"id": f"k{i}", "ts": at, "v": f"v{i}@{second}", "p": "p0"} for i in ids], schema=TS_SCHEMA
    )


def _micros(second: int) -> int:
    return (int((dt.datetime(2024, 1, 1) - dt.datetime(1970, 1, 1)).total_seconds()) + second) * 1_000_000


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_deletes_on_a_timestamp_ordering_field_compare_as_spark_writes_them(
    tmp_path: Path, version: TableVersion, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark's rows hold a timestamp as a Long of microseconds, so a delete Spark writes on a table
    ordered by a timestamp carries a ``LongWrapper`` (``HoodieAvroUtils.wrapValueIntoAvro``), of the
    same class as the records' ordering values: it loses to a record with a later timestamp
    (``EventTimeBufferedRecordMerger``), and is not a delete of another class that always applies."""
    path = tmp_path / "t"
    new_table(path, version=version, schema=TS_SCHEMA, metadata_table=False)
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.insert(_ts_rows([0, 1, 2, 3], 5))
    writer.upsert(_ts_rows([0], 6))
    writer.delete(_ts_rows([0, 1, 2], 0).select(["id", "p"]))
    log = _logs(path)[-1]
    (block,) = read_blocks(log.read_bytes(), str(log))
    assert block.block_type is BlockType.DELETE
    ordering: list[OrderingWrapper | None] = [
        (WRAPPER_NAMESPACE + "LongWrapper", {"value": _micros(s)}) for s in (3, 4, 9)
    ]
    content = delete_block_content(["k0", "k1", "k2"], ["p0"] * 3, ordering, int(version))
    log.write_bytes(encode_block(BlockType.DELETE, block.header, content))
    model = {"k0": "v0@6", "k1": "v1@5", "k3": "v3@5"}
    assert _read(path) == model
    for service in ("logcompaction", "compaction"):
        code = main(["run", service, str(path), "--spark-master", "in-process"])
        assert code == 0, capsys.readouterr().err
        assert _read(path) == model, service


def test_hts_writes_deletes_on_several_ordering_fields_as_hudi(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An upsert's ``_hoodie_is_deleted`` rows on a table ordered by several fields become delete
    entries carrying their ordering values in an ``ArrayWrapper``, as Hudi 1.1's append handle
    writes them, not the default (commit-time) value that would delete a later record."""
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    path = tmp_path / "t"
    writer = _ordered_by_two_fields(path, schema)
    writer.insert(rows(range(3), 5, partitions=1, schema=schema, _hoodie_is_deleted=False))
    writer.upsert(rows([0], 7, partitions=1, schema=schema, _hoodie_is_deleted=False))
    deletes = pa.concat_tables(
        [
            rows([i], ts, partitions=1, schema=schema, _hoodie_is_deleted=True)
            for i, ts in [(0, 6), (1, 4), (2, 9)]
        ]
    )
    writer.upsert(deletes)
    log = _logs(path)[-1]
    (block,) = (b for b in read_blocks(log.read_bytes(), str(log)) if b.block_type is BlockType.DELETE)
    decoded = decode_delete_block(block, 9)
    assert decoded.ordering_values == [(6, "v0@6"), (4, "v1@4"), (9, "v2@9")]
    assert decoded.ordering_classes == [("LongWrapper", "StringWrapper")] * 3
    assert _read(path) == {"k0": "v0@7", "k1": "v1@5"}
    code = main(["run", "compaction", str(path), "--spark-master", "in-process"])
    assert code == 0, capsys.readouterr().err
    assert _read(path) == {"k0": "v0@7", "k1": "v1@5"}


def test_log_blocks_with_the_operation_field_are_refused_not_misread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer with ``hoodie.allow.operation.metadata.field=true`` (Flink's changelog mode) puts
    ``_hoodie_operation`` after the meta fields of its log blocks' schema; Hudi's reader takes rows
    marked ``D`` or ``-U`` as deletes. hts does not carry that column, so it refuses such blocks
    (naming the file) instead of bringing deleted records back; the committed data is untouched."""
    path = tmp_path / "t"
    new_table(path, version=TableVersion.EIGHT, metadata_table=False)
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.insert(rows(range(3), 1, partitions=1))
    writer.upsert(rows([0, 1], 2, partitions=1))
    log = _logs(path)[-1]
    (block,) = read_blocks(log.read_bytes(), str(log))
    schema = json.loads(block.schema or "{}")
    at = [f["name"] for f in schema["fields"]].index("_hoodie_file_name") + 1
    schema["fields"].insert(at, {"name": "_hoodie_operation", "type": ["null", "string"], "default": None})
    data = decode_data_block(block, avro_to_arrow_schema(json.dumps(schema)))
    data = data.set_column(at, "_hoodie_operation", pa.array(["U", "D"]))
    log.write_bytes(avro_data_block(data, schema, block.instant_time or ""))
    committed = sorted(hudi_rs_rows(path))
    with pytest.raises(UnsupportedTableError, match=r"_hoodie_operation .*deletes \(D, -U\)"):
        _read(path)
    for argv in (
        ["read", str(path), "--out", str(tmp_path / "out.parquet")],
        ["run", "compaction", str(path)],
    ):
        assert main([*argv, "--spark-master", "in-process"] if argv[0] == "run" else argv) != 0
        assert log.name in capsys.readouterr().err
    assert sorted(hudi_rs_rows(path)) == committed
    assert not list(path.glob("p0/*.parquet"))[1:], "compaction wrote a base file"
