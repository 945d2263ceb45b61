"""Schema-on-read tables (``hoodie.schema.on.read.enable=true``): a rename, a drop, a type change
and a column re-added under a dropped column's name, resolved by column id with each file read
with its own commit's schema version, as Hudi's ``InternalSchemaMerger`` does; compaction and
clustering rewrite the files in the latest version and keep the reads.

The table is laid out as Hudi's writers leave it: every write's commit metadata carries its
version under ``latest_schema`` and a ``.hoodie/.schema/<instant>.schemacommit`` history
(``BaseHoodieWriteClient.saveInternalSchema``), and the ``ALTER TABLE`` is a completed instant with
no write stats whose ``latest_schema`` is the new version, its ``version-id`` that instant's time
(``BaseHoodieWriteClient.commitTableChange``). hudi-rs does not resolve columns by id (it reads by
name), so the reads here are checked against a model of Hudi's semantics only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import SchemaError
from hoodie.models.commit import CommitMetadata
from hoodie.read.reader import TableReader
from hoodie.schema.avro_arrow import arrow_to_avro_schema
from hoodie.schema.internal_schema import SchemaHistory, SchemaOnRead, parse_internal_schema
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.services.logcompaction import (
    LogCompactionPolicy,
    execute_log_compaction,
    schedule_log_compaction,
)
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, Instant, State
from hoodie.write.create import create_table
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter

META = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
]
V1 = pa.schema(
    [
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("p", pa.string()),
        ("a", pa.int32()),
        ("b", pa.string()),
        ("c", pa.float64()),
        ("n", pa.struct([("x", pa.int32()), ("z", pa.string())])),
    ]
)
# ALTER TABLE: RENAME a TO a2, DROP b, ALTER c TYPE string, RENAME n.x TO n.x2, DROP n.z,
# ADD b string (a new column: a new id under the dropped one's name), ALTER a2 TYPE bigint
V2 = pa.schema(
    [
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("p", pa.string()),
        ("a2", pa.int64()),
        ("c", pa.string()),
        ("n", pa.struct([("x2", pa.int32())])),
        ("b", pa.string()),
    ]
)


def _field(fid: int, name: str, typ: Any) -> dict[str, Any]:
    return {"id": fid, "name": name, "optional": True, "type": typ}


def _internal(version: str, v2: bool) -> dict[str, Any]:
    """The InternalSchema JSON (SerDeHelper.toJson) of V1 or V2, meta fields included."""
    fields = [_field(i, name, "string") for i, name in enumerate(META)]
    fields += [_field(5, "id", "string"), _field(6, "ts", "long"), _field(7, "p", "string")]
    if not v2:
        nested = {"type": "record", "fields": [_field(12, "x", "int"), _field(13, "z", "string")]}
        fields += [
            _field(8, "a", "int"),
            _field(9, "b", "string"),
            _field(10, "c", "double"),
            _field(11, "n", nested),
        ]
        max_id = 13
    else:
        nested = {"type": "record", "fields": [_field(12, "x2", "int")]}
        fields += [
            _field(8, "a2", "long"),
            _field(10, "c", "string"),
            _field(11, "n", nested),
            _field(14, "b", "string"),
        ]
        max_id = 14
    return {"max_column_id": max_id, "version-id": int(version), "type": "record", "fields": fields}


def _avro(schema: pa.Schema) -> dict[str, Any]:
    return arrow_to_avro_schema(schema, "t_record", "hoodie.t")


def _record_schema_on_read(
    path: Path, instant: str, version: dict[str, Any], history: list[dict[str, Any]]
) -> None:
    """What saveInternalSchema adds to a write: ``latest_schema`` and the history file."""
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    done = timeline.get(instant)
    assert done is not None and done.state is State.COMPLETED
    file = Path(timeline.path_of(done.file_name(table.paths.layout)))
    meta = CommitMetadata.from_bytes(file.read_bytes(), table.table_version, str(file))
    extra = {**(meta.extra_metadata or {}), "latest_schema": json.dumps(version, separators=(",", ":"))}
    file.write_bytes(dataclasses.replace(meta, extra_metadata=extra).to_bytes(table.table_version))
    _persist_history(path, instant, done.completion_time, history)


def _persist_history(path: Path, instant: str, completed: str | None, history: list[dict[str, Any]]) -> None:
    """persistHistorySchemaStr: a schemacommit instant in .hoodie/.schema; its completed file is
    ``<instant>_<completion>.schemacommit`` in timeline layout 2, ``<instant>.schemacommit`` in 1."""
    folder = path / ".hoodie" / ".schema"
    folder.mkdir(exist_ok=True)
    (folder / f"{instant}.schemacommit.requested").write_bytes(b"")
    (folder / f"{instant}.schemacommit.inflight").write_bytes(b"")
    text = json.dumps({"schemas": history}, separators=(",", ":"))
    name = f"{instant}_{int(completed) - 1}.schemacommit" if completed else f"{instant}.schemacommit"
    (folder / name).write_text(text)


def _history_file(path: Path, instant: str) -> Path:
    folder = path / ".hoodie" / ".schema"
    (found,) = [*folder.glob(f"{instant}_*.schemacommit"), *folder.glob(f"{instant}.schemacommit")]
    return found


def _alter(path: Path, instant_time: str, completion: str, history: list[dict[str, Any]]) -> None:
    """The ALTER TABLE instant (commitTableChange): no write stats, the new schema."""
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    version = _internal(instant_time, v2=True)
    meta = CommitMetadata(
        partition_to_write_stats={},
        extra_metadata={
            "schema": json.dumps(_avro(V2), separators=(",", ":")),
            "latest_schema": json.dumps(version, separators=(",", ":")),
        },
        operation_type="ALTER_SCHEMA",
    )
    instant = timeline.create_requested(Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED))
    instant = timeline.transition_to_inflight(instant)
    done = timeline.complete(instant, meta.to_bytes(table.table_version), completion)
    _persist_history(path, instant_time, done.completion_time, [version, *history])


def _v1_row(k: int) -> dict[str, Any]:
    return {
        "id": f"k{k}",
        "ts": 1,
        "p": f"p{k % 2}",
        "a": 1000 + k,
        "b": f"old-b{k}",
        "c": [0.1, 1e10, 100.0, 2.5e-7][k % 4],
        "n": {"x": k, "z": f"z{k}"},
    }


def _as_v2(row: dict[str, Any]) -> dict[str, Any]:
    """The model of Hudi's read of a V1 row under V2: by id."""
    texts = {0.1: "0.1", 1e10: "1.0E10", 100.0: "100.0", 2.5e-7: "2.5E-7"}
    return {
        "id": row["id"],
        "ts": row["ts"],
        "p": row["p"],
        "a2": row["a"],
        "c": texts[row["c"]],
        "n": {"x2": row["n"]["x"]},
        "b": None,  # the re-added b is a new column: the old b's values are not it
    }


def _v2_row(k: int, ts: int) -> dict[str, Any]:
    return {
        "id": f"k{k}",
        "ts": ts,
        "p": f"p{k % 2}",
        "a2": 2**40 + k,
        "c": f"c{k}",
        "n": {"x2": -k},
        "b": f"new-b{k}",
    }


def _table(
    path: Path,
    block: LogBlockFormat = LogBlockFormat.AVRO,
    table_type: TableType = TableType.MERGE_ON_READ,
    version: TableVersion = TableVersion.EIGHT,
    before_alter: Callable[[Path], str] | None = None,
) -> dict[str, dict[str, Any]]:
    """C1 (a Hudi write that turned schema-on-read on), C2 (hts, V1), the ALTER TABLE, C3 (hts, V2);
    hts's writes record the version in force themselves, as Hudi's writer does. ``before_alter``
    runs between C2 and the ALTER TABLE and returns the last instant it created."""
    table = create_table(
        str(path),
        table_name="t",
        table_type=table_type,
        schema=V1,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        table_version=version,
        metadata_table=False,
    )
    options = WriteOptions(log_block_format=block)
    rows = pa.Table.from_pylist([_v1_row(k) for k in range(8)], schema=V1)
    c1 = HoodieWriter(table, options=options).insert(rows).instant.requested_time
    v1 = _internal(c1, v2=False)
    _record_schema_on_read(path, c1, v1, [v1])
    # a V1 update (a log block on MERGE_ON_READ) before the ALTER
    old_update = {**_v1_row(3), "ts": 2, "a": -3, "c": 100.0}
    writer = HoodieWriter(HoodieTable.open(str(path)), options=options)
    c2 = writer.upsert(pa.Table.from_pylist([old_update], schema=V1)).instant.requested_time
    alter = str(int(before_alter(path) if before_alter else c2) + 1)
    _alter(path, alter, str(int(alter) + 1), [v1])
    updates = [_v2_row(k, 3) for k in (1, 4, 6)]
    writer = HoodieWriter(HoodieTable.open(str(path)), options=options)
    c3 = writer.upsert(pa.Table.from_pylist(updates, schema=V2)).instant.requested_time
    # hts's writes carry the version in force and re-persist the history, as saveInternalSchema
    table = HoodieTable.open(str(path))
    schemas = path / ".hoodie" / ".schema"
    for instant, in_force, history_of in ((c2, v1, c1), (c3, _internal(alter, v2=True), alter)):
        done = table.timeline.get(instant)
        assert done is not None
        latest = json.loads((table.commit_metadata(done).extra_metadata or {})["latest_schema"])
        assert latest == in_force
        assert _history_file(path, instant).read_bytes() == _history_file(path, history_of).read_bytes()
        assert (schemas / f"{instant}.schemacommit.requested").exists()
    model = {f"k{k}": _as_v2(_v1_row(k)) for k in range(8)}
    model["k3"] = _as_v2(old_update)
    model.update({r["id"]: r for r in updates})
    return model


def _read(path: Path, *, read_optimized: bool = False) -> dict[str, dict[str, Any]]:
    reader = TableReader(HoodieTable.open(str(path)))
    data = reader.read_optimized() if read_optimized else reader.snapshot()
    assert data.schema.names[5:] == V2.names
    return {r["id"]: {n: r[n] for n in V2.names} for r in data.to_pylist()}


def _base_schemas(path: Path) -> list[pa.Schema]:
    table = HoodieTable.open(str(path))
    out = []
    for s in table.file_system_view().latest_file_slices():
        base = s.base_file_path(table.base_path)
        assert base is not None
        out.append(pq.read_schema(base))
    return out


@pytest.mark.parametrize(
    ("block", "version"),
    [
        (LogBlockFormat.AVRO, TableVersion.EIGHT),
        (LogBlockFormat.PARQUET, TableVersion.EIGHT),
        (LogBlockFormat.AVRO, TableVersion.SIX),
    ],
)
def test_rename_drop_retype_and_readd_read_by_column_id(
    tmp_path: Path, block: LogBlockFormat, version: TableVersion
) -> None:
    path = tmp_path / "t"
    model = _table(path, block, version=version)
    assert _read(path) == model
    # the read-optimized view: base files of V1 read under V2 by id
    assert _read(path, read_optimized=True) == {k: _as_v2(_v1_row(int(k[1:]))) for k in model}

    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    assert _read(path) == model
    assert _read(path, read_optimized=True) == model
    for schema in _base_schemas(path):
        assert schema.names[5:] == V2.names and schema.field("c").type == pa.string()

    ctx = ServiceContext(HoodieTable.open(str(path)))
    planned = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert planned is not None and planned.instant_time is not None
    execute_clustering(ctx, planned.instant_time, LocalRunner())
    assert _read(path) == model


def _compact(path: Path) -> str:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return scheduled.instant_time


def test_tasks_after_an_alter_read_by_the_new_version_in_a_process_that_ran_tasks_before_it(
    tmp_path: Path,
) -> None:
    """An executor opens a table once per process (``open_table_for_task``) and keeps it; the
    schema versions a task reads by come with the task, not from the timeline that table loaded
    for the process' first task (here: before the ALTER TABLE)."""
    path = tmp_path / "t"
    model = _table(path, before_alter=_compact)  # this process runs a compaction task of V1 slices
    assert _read(path) == model
    _compact(path)  # its slices: base files of V1, log blocks of V2
    assert _read(path) == model
    assert _read(path, read_optimized=True) == model
    for schema in _base_schemas(path):
        assert schema.names[5:] == V2.names and schema.field("a2").type == pa.int64()


def test_time_travel_before_the_alter_reads_the_old_version(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    table = HoodieTable.open(str(path))
    writes = list(table.timeline.completed().writes())
    before_alter = writes[1].requested_time  # C2: the V1 update
    data = TableReader(table).snapshot(as_of=before_alter)
    assert data.schema.names[5:] == V1.names
    rows = {r["id"]: {n: r[n] for n in V1.names} for r in data.to_pylist()}
    expected = {f"k{k}": _v1_row(k) for k in range(8)}
    expected["k3"] = {**_v1_row(3), "ts": 2, "a": -3, "c": 100.0}
    assert rows == expected


def test_clustering_and_log_compaction_of_uncompacted_slices(tmp_path: Path) -> None:
    path = tmp_path / "t"
    model = _table(path, LogBlockFormat.AVRO)
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_log_compaction(ctx, scheduled.instant_time, LocalRunner())
    assert _read(path) == model
    ctx = ServiceContext(HoodieTable.open(str(path)))
    planned = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert planned is not None and planned.instant_time is not None
    execute_clustering(ctx, planned.instant_time, LocalRunner())
    assert _read(path) == model
    for schema in _base_schemas(path):
        assert schema.names[5:] == V2.names


def test_copy_on_write_merges_old_base_files_by_column_id(tmp_path: Path) -> None:
    path = tmp_path / "t"
    model = _table(path, table_type=TableType.COPY_ON_WRITE)
    assert _read(path) == model
    for schema in _base_schemas(path):
        if "a2" in schema.names:  # rewritten by C3's merge: V2 with the old rows' values by id
            assert schema.names[5:] == V2.names
    ctx = ServiceContext(HoodieTable.open(str(path)))
    planned = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert planned is not None and planned.instant_time is not None
    execute_clustering(ctx, planned.instant_time, LocalRunner())
    assert _read(path) == model


def test_a_write_without_a_history_file_or_evolving_the_schema_is_refused_before_writing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    _table(path)
    writer = HoodieWriter(HoodieTable.open(str(path)), schema=_avro(V2))
    before = sorted(str(p) for p in path.rglob("*"))
    with pytest.raises(SchemaError, match="evolves by ALTER TABLE only"):
        writer.upsert(pa.Table.from_pylist([_v2_row(1, 9)], schema=V2))
    assert sorted(str(p) for p in path.rglob("*")) == before
    for f in (path / ".hoodie" / ".schema").iterdir():
        f.unlink()  # versions now only in the commits' latest_schema
    before = sorted(str(p) for p in path.rglob("*"))
    with pytest.raises(SchemaError, match=r"without a \.hoodie/\.schema/\*\.schemacommit history"):
        HoodieWriter(HoodieTable.open(str(path))).upsert(pa.Table.from_pylist([_v2_row(1, 9)], schema=V2))
    assert sorted(str(p) for p in path.rglob("*")) == before
    # reads still resolve by id, from the versions in the commits' latest_schema
    assert _read(path)["k1"] == _v2_row(1, 3)


def test_a_file_older_than_every_version_is_refused_naming_the_history(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path, LogBlockFormat.AVRO)
    history = sorted((path / ".hoodie" / ".schema").glob("*_*.schemacommit"))
    for f in history:  # keep only V2 in every history file
        node = json.loads(f.read_text())
        f.write_text(json.dumps({"schemas": node["schemas"][:1] if len(node["schemas"]) > 1 else []}))
    with pytest.raises(SchemaError, match="no schema version at or before instant"):
        TableReader(HoodieTable.open(str(path))).snapshot()


def test_a_version_whose_type_change_hts_cannot_read_is_reported() -> None:
    v1 = _internal("1", v2=False)
    v2 = _internal("2", v2=True)
    for f in v2["fields"]:
        if f["name"] == "a2":
            f["type"] = "string"  # int -> string: Hudi's promotion, readable
        if f["name"] == "c":
            f["type"] = "int"  # double -> int: not readable
    history = SchemaHistory({1: parse_internal_schema(v1, "v1"), 2: parse_internal_schema(v2, "v2")}, "h")
    on_read = SchemaOnRead(history, history.latest())
    assert on_read.unreadable() == ["version 1: c: double -> int"]


def test_a_partial_blocks_written_columns_map_to_query_names() -> None:
    v1, v2 = _internal("1", v2=False), _internal("2", v2=True)
    history = SchemaHistory({1: parse_internal_schema(v1, "v1"), 2: parse_internal_schema(v2, "v2")}, "h")
    on_read = SchemaOnRead(history, history.latest())
    # a block of version 1 that wrote a (renamed a2), b (dropped; the new b is another column), c
    written = {"_hoodie_record_key", "id", "a", "b", "c"}
    assert on_read.query_names("1", written) == {"_hoodie_record_key", "id", "a2", "c"}
    assert on_read.query_names("3", {"id", "a2", "b"}) == {"id", "a2", "b"}


def test_renames_inside_arrays_and_maps_resolve_by_id() -> None:
    def version(vid: int, inner: str, value: str) -> dict[str, Any]:
        element = {"type": "record", "fields": [_field(3, inner, "int")]}
        values = {"type": "record", "fields": [_field(6, value, "string")]}
        array = {"type": "array", "element-id": 2, "element": element, "element_optional": True}
        mapping = {"type": "map", "key-id": 7, "key": "string", "value-id": 5, "value": values}
        mapping["value_optional"] = True
        fields = [_field(0, "id", "string"), _field(1, "xs", array), _field(4, "m", mapping)]
        return {"max_column_id": 7, "version-id": vid, "type": "record", "fields": fields}

    old, new = (
        parse_internal_schema(version(1, "x", "v"), "v1"),
        parse_internal_schema(version(2, "x2", "w"), "v2"),
    )
    written = pa.table(
        {
            "id": ["a", "b"],
            "xs": pa.array([[{"x": 1}, {"x": 2}], None], pa.list_(pa.struct([("x", pa.int32())]))),
            "m": pa.array([[("k", {"v": "s"})], []], pa.map_(pa.string(), pa.struct([("v", pa.string())]))),
        }
    )
    schema = pa.schema(
        [
            ("id", pa.string()),
            ("xs", pa.list_(pa.struct([("x2", pa.int32())]))),
            ("m", pa.map_(pa.string(), pa.struct([("w", pa.string())]))),
        ]
    )
    history = SchemaHistory({1: old, 2: new}, "h")
    out = SchemaOnRead(history, new).read(written, "1", schema, "f.parquet")
    assert out.schema == schema
    assert out.to_pylist() == [
        {"id": "a", "xs": [{"x2": 1}, {"x2": 2}], "m": [("k", {"w": "s"})]},
        {"id": "b", "xs": None, "m": []},
    ]
