"""CDC tables: the CDC logs hts writes (COW merges, MOR compaction, on Spark too) and the CDC query.

After each operation the CDC query over that one instant equals a model of the changes (before and
after images); CDC blocks decode with fastavro under the schema derived here from Hudi's
``HoodieCDCUtils`` (framing parsed here too); ``cdcStats`` are the CDC files' sizes.
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from hoodie.cdc.reader import read_cdc
from hoodie.cdc.schemas import SupplementalLoggingMode
from hoodie.config.table_config import TableType, TableVersion
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.write.options import ALLOW_DUPLICATE_ON_INSERTS
from hoodie.write.writer import HoodieWriter
from tests.services.cdc_support import (
    DATA,
    Change,
    cdc_query,
    cdc_stats_match_files,
    cdc_table,
    changes_model,
    compact,
    completion_time,
    metadata_lists_every_file,
    read_optimized_state,
    row_image,
    table_state,
)
from tests.tables import SCHEMA, new_table, rows

MODES = list(SupplementalLoggingMode)


def _model_overwrite(
    before: dict[str, dict[str, Any]], written: list[dict[str, Any]], ts: str
) -> list[Change]:
    """insert_overwrite: every row of the replaced partitions deleted, the written rows inserted."""
    partitions = {r["p"] for r in written}
    out: list[Change] = [("d", ts, row_image(r), None) for r in before.values() if r["p"] in partitions]
    out += [("i", ts, None, row_image({k: r[k] for k in DATA})) for r in written]
    return sorted(out, key=str)


def _action(path: Path, instant: str) -> str:
    return next(i.action.value for i in HoodieTable.open(str(path)).reload() if i.requested_time == instant)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_cdc_query_after_each_operation_equals_the_model(
    tmp_path: Path, table_type: TableType, version: TableVersion, mode: SupplementalLoggingMode
) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, table_type, version, mode.value)
    writer = HoodieWriter(table)
    last = last_done = "0"  # the last instant checked: requested time, and completion time (Flink)
    state: dict[str, dict[str, Any]] = {}

    cow = table_type is TableType.COPY_ON_WRITE

    def check(instant: str, expected: list[Change], *, logs: bool | None) -> None:
        """``logs``: whether the instant must have written CDC logs (None: either, by placement)."""
        nonlocal last, last_done, state
        assert cdc_query(path, last, instant) == expected
        if not cow:  # Flink reads a MERGE_ON_READ table's changes from compactions only
            flink = cdc_query(path, last_done, completion_time(path, instant), from_compaction=True)
            assert flink == ([] if _action(path, instant) == "deltacommit" else expected)
        written = cdc_stats_match_files(path, instant)
        assert logs is None or (written > 0) is logs
        last, last_done, state = instant, completion_time(path, instant), table_state(path)

    # insert into new file groups: the reader infers the inserts (no CDC log)
    done = writer.insert(rows(range(8), 1)).instant.requested_time
    check(done, changes_model(state, table_state(path), done), logs=False)
    # upsert: updates (COW rewrite, MOR log or small base file) and inserts into small files
    done = writer.upsert(rows([0, 1, 2, 8, 9], 2)).instant.requested_time
    check(done, changes_model(state, table_state(path), done), logs=cow or None)
    # delete
    done = writer.delete(rows([3, 4], 3).select(["id", "p"])).instant.requested_time
    check(done, changes_model(state, table_state(path), done), logs=cow)
    # insert of new keys into the small files, merged with their records (HoodieMergeHandle) and
    # logged; with hoodie.merge.allow.duplicate.on.inserts (1.x's default) the write is refused
    merging = HoodieWriter(table, write_props={ALLOW_DUPLICATE_ON_INSERTS: "false"})
    done = merging.insert(rows([12, 13, 14], 4)).instant.requested_time
    check(done, changes_model(state, table_state(path), done), logs=cow or None)
    if table_type is TableType.MERGE_ON_READ:
        before, merged = read_optimized_state(path), table_state(path)
        done = compact(path)
        assert cdc_query(path, last, done) == []  # Spark: compaction commits are no CDC source
        flink = cdc_query(path, last_done, completion_time(path, done), from_compaction=True)
        assert flink == changes_model(before, merged, done)  # Flink: the compaction's CDC logs
        assert cdc_stats_match_files(path, done) > 0
        last, last_done, state = done, completion_time(path, done), table_state(path)
    # insert_overwrite writes no CDC log: the reader infers deletes of the replaced file groups
    written = rows([10, 11], 5)
    done = writer.insert_overwrite(written).instant.requested_time
    check(done, _model_overwrite(state, written.to_pylist(), done), logs=False)
    # a delete that empties a file group (k10 alone in its new group): BASE_FILE_DELETE for COW
    done = writer.delete(rows([10], 6).select(["id", "p"])).instant.requested_time
    check(done, changes_model(state, table_state(path), done), logs=False)
    # one query over everything still works
    assert len(cdc_query(path, "0", done)) > 0
    metadata_lists_every_file(path)


def _hudi_cdc_schema(table_schema: dict[str, Any], mode: str) -> dict[str, Any]:
    """The CDC block schema of Hudi's ``HoodieCDCUtils`` for ``mode``, written out here."""
    if mode == "OP_KEY_ONLY":
        return {
            "type": "record",
            "name": "Record",
            "fields": [
                {"name": "op", "type": ["string", "null"]},
                {"name": "record_key", "type": ["string", "null"]},
            ],
        }
    image = {
        **table_schema,
        "fields": [f for f in table_schema["fields"] if not f["name"].startswith("_hoodie")],
    }
    full = f"{image['namespace']}.{image['name']}"

    def field(name: str, typ: Any) -> dict[str, Any]:
        return {"name": name, "type": ["null", typ], "doc": "", "default": None}

    if mode == "DATA_BEFORE_AFTER":
        fields = [
            field("op", "string"),
            field("ts_ms", "string"),
            field("before", image),
            field("after", full),
        ]
    else:
        fields = [field("op", "string"), field("record_key", "string"), field("before", image)]
    return {"type": "record", "name": "CDC", "namespace": image["namespace"], "doc": "", "fields": fields}


def _blocks(data: bytes) -> list[tuple[int, dict[int, str], bytes]]:
    """(block type, header, content) of each block of a Hudi log file (format version 1)."""
    out, pos = [], 0
    while pos < len(data):
        assert data[pos : pos + 6] == b"#HUDI#"
        (length,) = struct.unpack_from(">q", data, pos + 6)
        start = pos + 14
        version, block_type, count = struct.unpack_from(">iii", data, start)
        assert version == 1
        p = start + 12
        header = {}
        for _ in range(count):
            key, size = struct.unpack_from(">ii", data, p)
            header[key] = data[p + 8 : p + 8 + size].decode()
            p += 8 + size
        (content_len,) = struct.unpack_from(">q", data, p)
        out.append((block_type, header, data[p + 8 : p + 8 + content_len]))
        pos = start + length
    return out


def _records(content: bytes, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of an Avro data block's content: version 3, count, then length-prefixed datums."""
    version, count = struct.unpack_from(">ii", content, 0)
    assert version == 3
    parsed = fastavro.parse_schema(schema)
    out, pos = [], 8
    for _ in range(count):
        (n,) = struct.unpack_from(">i", content, pos)
        out.append(fastavro.schemaless_reader(io.BytesIO(content[pos + 4 : pos + 4 + n]), parsed))
        pos += 4 + n
    assert pos == len(content)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_cdc_blocks_decode_with_hudis_cdc_schema(tmp_path: Path, mode: SupplementalLoggingMode) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT, mode.value)
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    old = table_state(path)
    result = writer.upsert(rows([0, 3, 6], 2))  # k0, k3 updated in p0; k6 inserted into p0's file
    instant = result.instant.requested_time
    writer_schema = HoodieTable.open(str(path)).latest_schema_json()
    assert writer_schema is not None
    expected_schema = _hudi_cdc_schema(writer_schema, mode.value)
    stats = [s for s in result.write_stats if s.cdc_stats]
    assert [s.partition_path for s in stats] == ["p0"]
    (rel, size), *_ = stats[0].cdc_stats.items()  # type: ignore[union-attr]
    data = (path / rel).read_bytes()
    assert len(data) == size
    (block_type, header, content), *more = _blocks(data)
    assert not more and block_type == 6  # CDC_DATA_BLOCK
    assert header[0] == instant  # INSTANT_TIME
    assert json.loads(header[2]) == expected_schema  # SCHEMA
    got = sorted(_records(content, expected_schema), key=lambda r: str(r["op"]))
    new = {k: {c: v for c, v in r.items()} for k, r in table_state(path).items()}
    if mode is SupplementalLoggingMode.OP_KEY_ONLY:
        assert got == [{"op": "i", "record_key": "k6"}, *({"op": "u", "record_key": k} for k in ("k0", "k3"))]
    elif mode is SupplementalLoggingMode.DATA_BEFORE:
        assert got == [
            {"op": "i", "record_key": "k6", "before": None},
            *({"op": "u", "record_key": k, "before": old[k]} for k in ("k0", "k3")),
        ]
    else:
        assert sorted(got, key=str) == sorted(
            [
                {"op": "i", "ts_ms": instant, "before": None, "after": new["k6"]},
                *({"op": "u", "ts_ms": instant, "before": old[k], "after": new[k]} for k in ("k0", "k3")),
            ],
            key=str,
        )


def test_compaction_cdc_logs_hold_the_diff_of_base_and_merged_slice(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(9), 1))
    writer.upsert(rows([0, 1], 2))
    writer.upsert(rows([0], 0))  # loses on ordering: the stored record stays, no change logged
    writer.delete(rows([2], 3).select(["id", "p"]))
    before, merged = read_optimized_state(path), table_state(path)
    done = compact(path)
    table = HoodieTable.open(str(path))
    tl = table.reload()
    meta = table.commit_metadata(next(i for i in tl.completed() if i.requested_time == done), tl)
    assert meta.operation_type == "COMPACT"
    schema = _hudi_cdc_schema(table.latest_schema_json() or {}, "DATA_BEFORE_AFTER")
    logged = []
    for stat in meta.write_stats():
        assert stat.cdc_stats, f"compaction of {stat.file_id} wrote no CDC log"
        for rel, size in stat.cdc_stats.items():
            data = (path / rel).read_bytes()
            assert len(data) == size
            for block_type, _, content in _blocks(data):
                assert block_type == 6
                logged += [
                    (r["op"], r["ts_ms"], row_image(r["before"]), row_image(r["after"]))
                    for r in _records(content, schema)
                ]
    assert sorted(logged, key=str) == changes_model(before, merged, done)


def test_compaction_on_spark_writes_the_same_cdc_logs(tmp_path: Path, spark_runner: Any) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(9), 1))
    writer.upsert(rows([0, 1, 4], 2))
    writer.delete(rows([2], 3).select(["id", "p"]))
    before, merged = read_optimized_state(path), table_state(path)
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, spark_runner)
    done = scheduled.instant_time
    assert cdc_stats_match_files(path, done) == 3
    assert cdc_query(path, "0", completion_time(path, done), from_compaction=True) == changes_model(
        before, merged, done
    )


def test_compaction_of_a_cdc_table_with_hoodie_is_deleted(tmp_path: Path) -> None:
    """``_hoodie_is_deleted`` is a data column (not a meta field): it is in the images, and a record
    deleted through it is a delete in the compaction's CDC log."""
    schema = SCHEMA.append(pa.field("_hoodie_is_deleted", pa.bool_()))
    path = tmp_path / "t"
    new_table(
        path,
        schema=schema,
        extra_properties={
            "hoodie.table.cdc.enabled": "true",
            "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        },
    )
    for ids, ts, deleted in ((range(4), 1, False), ([0], 2, False), ([1], 3, True)):
        writer = HoodieWriter(HoodieTable.open(str(path)))
        writer.upsert(rows(ids, ts, schema=schema, _hoodie_is_deleted=deleted))
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    changes = read_cdc(HoodieTable.open(str(path)), "0", from_compaction=True).to_pylist()
    by_key = {json.loads(c["before"])["id"]: c for c in changes}
    assert {k: c["op"] for k, c in by_key.items()} == {"k0": "u", "k1": "d"}
    assert json.loads(by_key["k0"]["after"]) == {
        "id": "k0",
        "ts": 2,
        "v": "v0@2",
        "p": "p0",
        "_hoodie_is_deleted": False,
    }
    assert json.loads(by_key["k1"]["before"])["_hoodie_is_deleted"] is False
