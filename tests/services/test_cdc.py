"""CDC tables: the CDC logs hts writes (COW merges, MOR compaction) and the CDC query.

After each operation the CDC query over that one instant equals a model of the changes (before and
after images); CDC blocks decode with fastavro under the schema derived here from Hudi's
``HoodieCDCUtils`` (framing parsed here too); ``cdcStats`` are the CDC files' sizes; clean removes
CDC logs with their slice; clustering and log compaction commit with operation types the CDC query
skips.
"""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.cdc.reader import read_cdc
from hoodie.cdc.schemas import SupplementalLoggingMode
from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import HoodieError, InvalidTableConfigError
from hoodie.metadata.table import MetadataTable
from hoodie.models.clean import CleaningPolicy
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import CleanPolicy, execute_clean, schedule_clean
from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.logcompaction import LogCompactionPolicy, execute_log_compaction, schedule_log_compaction
from hoodie.table import HoodieTable
from hoodie.write.options import ALLOW_DUPLICATE_ON_INSERTS, WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import SCHEMA, new_table, rows, snapshot

MODES = list(SupplementalLoggingMode)
DATA = ("id", "ts", "v", "p")
Change = tuple[str, str, str | None, str | None]  # op, ts_ms, before, after (canonical JSON)


def _cdc_table(path: Path, table_type: TableType, version: TableVersion, mode: str) -> HoodieTable:
    """A CDC table as Hudi creates one: the two CDC keys in ``hoodie.properties``."""
    return new_table(
        path,
        table_type=table_type,
        version=version,
        extra_properties={
            "hoodie.table.cdc.enabled": "true",
            "hoodie.table.cdc.supplemental.logging.mode": mode,
        },
    )


def _state(path: Path, columns: tuple[str, ...] = DATA) -> dict[str, dict[str, Any]]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return {r["id"]: {k: r[k] for k in columns} for r in data.to_pylist()}


def _read_optimized(path: Path) -> dict[str, dict[str, Any]]:
    data = TableReader(HoodieTable.open(str(path))).read_optimized()
    return {r["id"]: {k: r[k] for k in DATA} for r in data.to_pylist()}


def _image(row: dict[str, Any] | None) -> str | None:
    return None if row is None else json.dumps(row, sort_keys=True)


def _model(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], ts: str) -> list[Change]:
    """The changes that turn one table state into the next, by key."""
    out: list[Change] = []
    for key in before.keys() | after.keys():
        b, a = before.get(key), after.get(key)
        if b == a:
            continue
        op = "i" if b is None else "d" if a is None else "u"
        out.append((op, ts, _image(b), _image(a)))
    return sorted(out, key=str)


def _model_overwrite(
    before: dict[str, dict[str, Any]], written: list[dict[str, Any]], ts: str
) -> list[Change]:
    """insert_overwrite: every row of the replaced partitions deleted, the written rows inserted."""
    partitions = {r["p"] for r in written}
    out: list[Change] = [("d", ts, _image(r), None) for r in before.values() if r["p"] in partitions]
    out += [("i", ts, None, _image({k: r[k] for k in DATA})) for r in written]
    return sorted(out, key=str)


def _parse(text: str | None) -> str | None:
    """A CDC image as canonical JSON (Hudi prints a missing Avro image as the text ``null``)."""
    if text is None:
        return None
    value = json.loads(text)
    return None if value is None else json.dumps(value, sort_keys=True)


def _query(path: Path, begin: str, end: str, *, from_compaction: bool = False) -> list[Change]:
    out = read_cdc(HoodieTable.open(str(path)), begin, end, from_compaction=from_compaction)
    assert out.schema.names == ["op", "ts_ms", "before", "after"]
    return sorted(
        ((r["op"], r["ts_ms"], _parse(r["before"]), _parse(r["after"])) for r in out.to_pylist()), key=str
    )


def _cdc_stats_match_files(path: Path, instant: str) -> int:
    """Every ``cdcStats`` entry of ``instant`` names a CDC log of that size; returns their count."""
    table = HoodieTable.open(str(path))
    tl = table.reload()
    meta = table.commit_metadata(next(i for i in tl.completed() if i.requested_time == instant), tl)
    n = 0
    for stat in meta.write_stats():
        for rel, size in (stat.cdc_stats or {}).items():
            assert rel.endswith(".cdc") and f"_{instant}.log.1_" in rel
            assert (path / rel).stat().st_size == size
            n += 1
    return n


def _metadata_lists_every_file(path: Path) -> None:
    """The metadata table's ``files`` partition holds every data file, CDC logs included."""
    table = HoodieTable.open(str(path))
    if not table.has_metadata_table:
        return
    listing = MetadataTable.open(table).list_files()
    disk = {
        p: {
            f.name: f.stat().st_size
            for f in (path / p).iterdir()
            if f.is_file() and ".hoodie_partition" not in f.name
        }
        for p in listing
    }
    assert listing == disk
    assert any(name.endswith(".cdc") for files in listing.values() for name in files)


def _action(path: Path, instant: str) -> str:
    return next(i.action.value for i in HoodieTable.open(str(path)).reload() if i.requested_time == instant)


def _completion(path: Path, instant: str) -> str:
    """Where Flink's range puts ``instant``: its completion time on a layout-2 timeline."""
    table = HoodieTable.open(str(path))
    found = next(i for i in table.reload() if i.requested_time == instant)
    return found.completion_time if table.paths.layout >= 2 and found.completion_time else instant


def _compact(path: Path) -> str:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return scheduled.instant_time


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_cdc_query_after_each_operation_equals_the_model(
    tmp_path: Path, table_type: TableType, version: TableVersion, mode: SupplementalLoggingMode
) -> None:
    path = tmp_path / "t"
    table = _cdc_table(path, table_type, version, mode.value)
    writer = HoodieWriter(table)
    last = last_done = "0"  # the last instant checked: requested time, and completion time (Flink)
    state: dict[str, dict[str, Any]] = {}

    cow = table_type is TableType.COPY_ON_WRITE

    def check(instant: str, expected: list[Change], *, logs: bool | None) -> None:
        """``logs``: whether the instant must have written CDC logs (None: either, by placement)."""
        nonlocal last, last_done, state
        assert _query(path, last, instant) == expected
        if not cow:  # Flink reads a MERGE_ON_READ table's changes from compactions only
            flink = _query(path, last_done, _completion(path, instant), from_compaction=True)
            assert flink == ([] if _action(path, instant) == "deltacommit" else expected)
        written = _cdc_stats_match_files(path, instant)
        assert logs is None or (written > 0) is logs
        last, last_done, state = instant, _completion(path, instant), _state(path)

    # insert into new file groups: the reader infers the inserts (no CDC log)
    done = writer.insert(rows(range(8), 1)).instant.requested_time
    check(done, _model(state, _state(path), done), logs=False)
    # upsert: updates (COW rewrite, MOR log or small base file) and inserts into small files
    done = writer.upsert(rows([0, 1, 2, 8, 9], 2)).instant.requested_time
    check(done, _model(state, _state(path), done), logs=cow or None)
    # delete
    done = writer.delete(rows([3, 4], 3).select(["id", "p"])).instant.requested_time
    check(done, _model(state, _state(path), done), logs=cow)
    # insert of new keys into the small files, merged with their records (HoodieMergeHandle) and
    # logged; with hoodie.merge.allow.duplicate.on.inserts (1.x's default) the write is refused
    merging = HoodieWriter(table, write_props={ALLOW_DUPLICATE_ON_INSERTS: "false"})
    done = merging.insert(rows([12, 13, 14], 4)).instant.requested_time
    check(done, _model(state, _state(path), done), logs=cow or None)
    if table_type is TableType.MERGE_ON_READ:
        before, merged = _read_optimized(path), _state(path)
        done = _compact(path)
        assert _query(path, last, done) == []  # Spark: compaction commits are no CDC source
        flink = _query(path, last_done, _completion(path, done), from_compaction=True)
        assert flink == _model(before, merged, done)  # Flink: the compaction's CDC logs
        assert _cdc_stats_match_files(path, done) > 0
        last, last_done, state = done, _completion(path, done), _state(path)
    # insert_overwrite writes no CDC log: the reader infers deletes of the replaced file groups
    written = rows([10, 11], 5)
    done = writer.insert_overwrite(written).instant.requested_time
    check(done, _model_overwrite(state, written.to_pylist(), done), logs=False)
    # a delete that empties a file group (k10 alone in its new group): BASE_FILE_DELETE for COW
    done = writer.delete(rows([10], 6).select(["id", "p"])).instant.requested_time
    check(done, _model(state, _state(path), done), logs=False)
    # one query over everything still works
    assert len(_query(path, "0", done)) > 0
    _metadata_lists_every_file(path)


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
    table = _cdc_table(path, TableType.COPY_ON_WRITE, TableVersion.EIGHT, mode.value)
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    old = _state(path)
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
    new = {k: {c: v for c, v in r.items()} for k, r in _state(path).items()}
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
    table = _cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(9), 1))
    writer.upsert(rows([0, 1], 2))
    writer.upsert(rows([0], 0))  # loses on ordering: the stored record stays, no change logged
    writer.delete(rows([2], 3).select(["id", "p"]))
    before, merged = _read_optimized(path), _state(path)
    done = _compact(path)
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
                    (r["op"], r["ts_ms"], _image(r["before"]), _image(r["after"]))
                    for r in _records(content, schema)
                ]
    assert sorted(logged, key=str) == _model(before, merged, done)


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_clean_removes_cdc_logs_with_their_slice(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = _cdc_table(path, TableType.COPY_ON_WRITE, version, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    for ts in range(2, 6):
        writer.upsert(rows([0, 1, 2], ts))
    cdc_logs = {p.name for p in path.rglob("*.cdc")}
    assert len(cdc_logs) == 4 * 3
    ctx = ServiceContext(HoodieTable.open(str(path)))
    policy = CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    scheduled = schedule_clean(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_clean(ctx, scheduled.instant_time, LocalRunner())
    latest = {
        s.base_file.commit_time
        for s in HoodieTable.open(str(path)).file_system_view().latest_file_slices()
        if s.base_file
    }
    kept = {p.name for p in path.rglob("*.cdc")}
    assert kept == {n for n in cdc_logs if n.split("_")[1].split(".")[0] in latest}
    assert len(kept) == 3
    _metadata_lists_every_file(path)


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_clean_removes_compaction_cdc_logs_with_their_slice(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = _cdc_table(path, TableType.MERGE_ON_READ, version, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    compactions = []
    for ts in range(2, 5):
        writer.upsert(rows([0, 1, 2], ts))
        compactions.append(_compact(path))
    writer.upsert(rows([0, 1, 2], 9))  # logs of the latest slices, beside its compaction CDC logs
    by_instant = {c: {p.name for p in path.rglob(f"*_{c}.log.*.cdc")} for c in compactions}
    assert all(len(names) == 3 for names in by_instant.values())
    ctx = ServiceContext(HoodieTable.open(str(path)))
    policy = CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    scheduled = schedule_clean(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_clean(ctx, scheduled.instant_time, LocalRunner())
    assert {p.name for p in path.rglob("*.cdc")} == by_instant[compactions[-1]]
    _metadata_lists_every_file(path)


def test_clustering_and_log_compaction_commit_as_no_cdc_source(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    for b in range(3):
        writer.insert(rows(range(b * 10, b * 10 + 10), 1))
    for ts in range(2, 6):
        last = writer.upsert(rows([0, 10, 20], ts)).instant.requested_time
    ctx = ServiceContext(HoodieTable.open(str(path)), options={"hoodie.log.compaction.blocks.threshold": "2"})
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    execute_log_compaction(ctx, scheduled.instant_time, LocalRunner())
    ctx = ServiceContext(HoodieTable.open(str(path)))
    clustered = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert clustered is not None and clustered.instant_time is not None
    execute_clustering(ctx, clustered.instant_time, LocalRunner())
    table = HoodieTable.open(str(path))
    tl = table.reload()
    ops = {i.requested_time: table.commit_metadata(i, tl).operation_type for i in tl.completed().writes()}
    assert ops[scheduled.instant_time] == "LOG_COMPACT" and ops[clustered.instant_time] == "CLUSTER"
    end = max(ops)
    assert _query(path, last, end) == [] and _query(path, last, end, from_compaction=True) == []


def test_a_rewrite_without_cdc_log_fails_the_query_as_hudi_does(tmp_path: Path) -> None:
    """The reported bug's symptom: a COW rewrite without a CDC log cannot be read as CDC."""
    path = tmp_path / "t"
    table = new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=False)
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(3), 1)).instant.requested_time
    writer.upsert(rows([0], 2))
    props = path / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text() + "hoodie.table.cdc.enabled=true\n")
    with pytest.raises(HoodieError, match="There should be a cdc log file"):
        read_cdc(HoodieTable.open(str(path)), first)


@pytest.mark.parametrize(
    ("value", "mode"),
    [
        ("DATA_BEFORE_AFTER", SupplementalLoggingMode.DATA_BEFORE_AFTER),
        ("data_before", SupplementalLoggingMode.DATA_BEFORE),
        (" op_key_only ", SupplementalLoggingMode.OP_KEY_ONLY),
        ("cdc_op_key", SupplementalLoggingMode.OP_KEY_ONLY),
        ("cdc_data_before_after", SupplementalLoggingMode.DATA_BEFORE_AFTER),
        (None, SupplementalLoggingMode.DATA_BEFORE_AFTER),
    ],
)
def test_logging_mode_is_read_leniently(value: str | None, mode: SupplementalLoggingMode) -> None:
    assert SupplementalLoggingMode.parse(value) is mode


def test_unknown_logging_mode_is_named() -> None:
    with pytest.raises(
        InvalidTableConfigError, match="hoodie.table.cdc.supplemental.logging.mode=everything"
    ):
        SupplementalLoggingMode.parse("everything")


def test_cli_reads_cdc_as_spark_and_flink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from service.cli import main

    path = tmp_path / "t"
    table = _cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(6), 1)).instant.requested_time
    writer.upsert(rows([0, 1], 2))
    before, merged = _read_optimized(path), _state(path)
    done = _compact(path)
    out = tmp_path / "cdc.parquet"
    base = ["read", str(path), "--begin-instant", first, "--out", str(out)]
    assert main([*base, "--cdc"]) == 0
    spark = pq.read_table(out)
    assert spark.schema.names == ["op", "ts_ms", "before", "after"]
    assert sorted(spark["op"].to_pylist()) == ["u", "u"] and done not in spark["ts_ms"].to_pylist()
    assert main([*base, "--cdc-from-compaction"]) == 0
    flink = pq.read_table(out)
    from_compaction = [r for r in flink.to_pylist() if r["ts_ms"] == done]
    assert sorted(
        (r["op"], r["ts_ms"], _parse(r["before"]), _parse(r["after"])) for r in from_compaction
    ) == _model(before, merged, done)
    assert "changes to" in capsys.readouterr().out
    assert main(["read", str(path), "--cdc", "--out", str(out)]) == 2
    assert "--cdc needs --begin-instant" in capsys.readouterr().err
    assert (
        main(["read", str(path), "--cdc", "--begin-instant", done, "--end-instant", first, "--out", str(out)])
        == 2
    )
    assert "not a valid range" in capsys.readouterr().err


def _with_is_deleted(path: Path) -> tuple[HoodieWriter, pa.Schema]:
    schema = pa.schema([*SCHEMA, ("_hoodie_is_deleted", pa.bool_())])
    table = new_table(
        path,
        table_type=TableType.COPY_ON_WRITE,
        schema=schema,
        extra_properties={"hoodie.table.cdc.enabled": "true"},
    )
    return HoodieWriter(table), schema


def test_a_rewrite_that_deletes_every_old_record_and_inserts_logs_nothing_as_hudi(tmp_path: Path) -> None:
    """Hudi's ``HoodieCDCLogger.writeCDCDataIfNeeded`` skips the log when every record the handle
    wrote is an insert, though old records were deleted; 1.x's ``HoodieCDCExtractor`` then reads
    the file as BASE_FILE_INSERT (its check of ``numDeletes == 0`` is gone), so Hudi's CDC query
    reports the inserts and not the deletes. hts writes the same files and reads them the same."""
    path = tmp_path / "t"
    writer, schema = _with_is_deleted(path)
    first = writer.insert(rows([0], 1, partitions=1, schema=schema, _hoodie_is_deleted=False))
    batch = pa.concat_tables(
        [
            rows([0], 2, partitions=1, schema=schema, _hoodie_is_deleted=True),
            rows([1], 2, partitions=1, schema=schema, _hoodie_is_deleted=False),
        ]
    )
    result = writer.upsert(batch)
    done = result.instant.requested_time
    (stat,) = result.write_stats
    assert (stat.num_writes, stat.num_inserts, stat.num_update_writes, stat.num_deletes) == (1, 1, 0, 1)
    assert not stat.cdc_stats and not list(path.rglob("*.cdc"))
    after = {"id": "k1", "ts": 2, "v": "v1@2", "p": "p0", "_hoodie_is_deleted": False}
    assert _state(path, (*DATA, "_hoodie_is_deleted")) == {"k1": after}
    assert _query(path, first.instant.requested_time, done) == [("i", done, None, _image(after))]


def test_an_upsert_deleting_every_record_of_a_file_logs_nothing_as_hudi(tmp_path: Path) -> None:
    """An upsert whose ``_hoodie_is_deleted`` records remove a whole file group writes no record
    (``recordsWritten == 0``), so no log; Hudi 1.x's extractor reads the empty file as
    BASE_FILE_INSERT (not a delete operation) and reports no change. A delete operation emptying a
    group is read as BASE_FILE_DELETE."""
    path = tmp_path / "t"
    writer, schema = _with_is_deleted(path)
    first = writer.insert(rows([0, 1], 1, partitions=1, schema=schema, _hoodie_is_deleted=False))
    result = writer.upsert(rows([0, 1], 2, partitions=1, schema=schema, _hoodie_is_deleted=True))
    (stat,) = result.write_stats
    assert (stat.num_writes, stat.num_deletes, stat.cdc_stats) == (0, 2, None)
    assert _state(path) == {}
    assert _query(path, first.instant.requested_time, result.instant.requested_time) == []
    second = writer.upsert(rows([5], 3, partitions=1, schema=schema, _hoodie_is_deleted=False))
    deleted = writer.delete(rows([5], 4, partitions=1).select(["id", "p"]))
    assert not any(s.cdc_stats for s in deleted.write_stats)
    gone = {"id": "k5", "ts": 3, "v": "v5@3", "p": "p0", "_hoodie_is_deleted": False}
    assert _query(path, second.instant.requested_time, deleted.instant.requested_time) == [
        ("d", deleted.instant.requested_time, _image(gone), None)
    ]


def test_a_concatenating_insert_into_an_empty_small_file_is_inferred_as_hudi(tmp_path: Path) -> None:
    """HoodieConcatHandle into a small file holding no record writes only inserts
    (``numWrites == numInserts``): no CDC log, read as BASE_FILE_INSERT, so hts does not refuse it."""
    path = tmp_path / "t"
    writer, schema = _with_is_deleted(path)  # version 8: hoodie.merge.allow.duplicate.on.inserts=true
    writer.insert(rows([0, 1], 1, partitions=1, schema=schema, _hoodie_is_deleted=False))
    emptied = writer.upsert(rows([0, 1], 2, partitions=1, schema=schema, _hoodie_is_deleted=True))
    result = writer.insert(rows([5], 3, partitions=1, schema=schema, _hoodie_is_deleted=False))
    (stat,) = result.write_stats
    assert stat.prev_commit == emptied.instant.requested_time  # the emptied file group's small file
    assert (stat.num_writes, stat.num_inserts, stat.cdc_stats) == (1, 1, None)
    done = result.instant.requested_time
    after = {"id": "k5", "ts": 3, "v": "v5@3", "p": "p0", "_hoodie_is_deleted": False}
    assert _query(path, emptied.instant.requested_time, done) == [("i", done, None, _image(after))]


def test_compaction_on_spark_writes_the_same_cdc_logs(tmp_path: Path, spark_runner: Any) -> None:
    path = tmp_path / "t"
    table = _cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(9), 1))
    writer.upsert(rows([0, 1, 4], 2))
    writer.delete(rows([2], 3).select(["id", "p"]))
    before, merged = _read_optimized(path), _state(path)
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, spark_runner)
    done = scheduled.instant_time
    assert _cdc_stats_match_files(path, done) == 3
    assert _query(path, "0", _completion(path, done), from_compaction=True) == _model(before, merged, done)


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_metadata_table_lists_cdc_logs_and_indexes_only_data_files(
    tmp_path: Path, table_type: TableType
) -> None:
    from hoodie.services.indexing import execute_indexing, schedule_indexing

    path = tmp_path / "t"
    table = _cdc_table(path, table_type, TableVersion.NINE, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    build = {
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
    }
    ctx = ServiceContext(HoodieTable.open(str(path)), options=build)
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, LocalRunner())
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([0, 1, 2, 12], 2))
    writer.delete(rows([3], 3).select(["id", "p"]))
    if table_type is TableType.MERGE_ON_READ:
        _compact(path)
    _metadata_lists_every_file(path)
    mdt = MetadataTable.open(HoodieTable.open(str(path)))
    stats = mdt.read_partition("column_stats")
    assert stats and not [
        k for k, v in stats.items() if v["ColumnStatsMetadata"]["fileName"].endswith(".cdc")
    ]
    assert snapshot(path) == hudi_rs_rows(path)  # hudi-rs reads the table, CDC logs and all


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_a_query_from_before_the_active_timeline_is_refused(tmp_path: Path, version: TableVersion) -> None:
    from hoodie.services.archival import execute_archival

    path = tmp_path / "t"
    table = _cdc_table(path, TableType.COPY_ON_WRITE, version, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(3), 1)).instant.requested_time
    for ts in range(2, 20):
        writer.upsert(rows([ts % 3], ts))
    options = {
        "hoodie.keep.min.commits": "5",
        "hoodie.keep.max.commits": "8",
        "hoodie.cleaner.commits.retained": "3",
    }
    execute_archival(ServiceContext(HoodieTable.open(str(path)), options=options))
    active = HoodieTable.open(str(path)).reload()
    start = active.completed().writes().first()
    assert start is not None and start.requested_time > first
    with pytest.raises(HoodieError, match="has to be in the active timeline"):
        read_cdc(HoodieTable.open(str(path)), first)
    changes = read_cdc(HoodieTable.open(str(path)), start.requested_time)
    assert set(changes["op"].to_pylist()) == {"u"} and len(changes) > 0


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
