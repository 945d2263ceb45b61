"""Schema evolution as Hudi does it without schema-on-read: files written with an older schema
read with the table's latest one (added columns null, nested too; Hudi's type promotions with
Java's text for numbers read as strings), compaction and clustering rewrite them in the latest
schema, and a type change outside Hudi's set is refused naming the column, the file and both types.

The numeric timestamp-keygen table is built as Hudi 1.1 leaves it: base files and log blocks
hold the ``long`` the key generator was given, the commit metadata's schema says ``string``.
How Hudi gets there (read in its source, not reproduced with Spark here): Spark gives a
TimestampBasedKeyGenerator table's partition column the type string
(``SparkHoodieTableFileIndex`` / ``getPartitionSchema`` with
``shouldUseStringTypeForTimestampPartitionKeyType``), so the catalog table says string;
``HoodieSparkSqlWriter.getLatestTableSchema`` falls back to that catalog schema and
``HoodieSchemaUtils.deduceWriterSchema`` promotes the batch's long to the table's string (long ->
string is one of Hudi's promotions), which the commit records, while the row writer keeps the
DataFrame's int64 in the files. Hudi's file-group reader and its services read the column as the
schema's string: ``String.valueOf`` of the long (``HoodieAvroUtils`` / Spark's cast).
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableType, TableVersion, update_table_properties
from hoodie.errors import SchemaError, UnsupportedShapeError
from hoodie.io.fileio import LocalFileIO
from hoodie.keygen.factory import key_generator_properties
from hoodie.keygen.generators import KeyGeneratorType
from hoodie.keygen.timestamp import TimestampOptions, TimestampType
from hoodie.models.commit import CommitMetadata, ReplaceCommitMetadata
from hoodie.read.reader import TableReader
from hoodie.schema.avro_arrow import arrow_to_avro_schema
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action, State
from hoodie.write.create import create_table
from hoodie.write.options import LogBlockFormat, WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows

OLD = pa.schema(
    [
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("p", pa.string()),
        ("i", pa.int32()),  # -> long
        ("i2f", pa.int32()),  # -> float
        ("l", pa.int64()),  # -> string
        ("f", pa.float32()),  # -> double
        ("fs", pa.float32()),  # -> string
        ("d", pa.float64()),  # -> string
        ("b", pa.binary()),  # -> string
        ("s", pa.string()),  # -> bytes
        ("dec", pa.decimal128(5, 2)),  # -> decimal(8, 3)
        ("n", pa.struct([("x", pa.int32())])),  # gains n.y
    ]
)
NEW = pa.schema(
    [
        ("id", pa.string()),
        ("ts", pa.int64()),
        ("p", pa.string()),
        ("i", pa.int64()),
        ("i2f", pa.float32()),
        ("l", pa.string()),
        ("f", pa.float64()),
        ("fs", pa.string()),
        ("d", pa.string()),
        ("b", pa.string()),
        ("s", pa.binary()),
        ("dec", pa.decimal128(8, 3)),
        ("n", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("added", pa.string()),
    ]
)

# Old values and what Hudi reads them as under NEW: Java's Float.toString / Double.toString text
# (HoodieAvroUtils.rewritePrimaryTypeWithDiffSchemaType calls toString() on the boxed number),
# float -> double through that text (Double.valueOf(f + "")), (float) of an int rounds to nearest.
F_VALUES = [
    (1.1, 1.1, "1.1"),
    (0.5, 0.5, "0.5"),
    (1e10, 1e10, "1.0E10"),
    (-3.4028235e38, -3.4028235e38, "-3.4028235E38"),
]
D_VALUES = [(0.1, "0.1"), (100.0, "100.0"), (1e-5, "1.0E-5"), (12345678.9, "1.23456789E7")]
I2F_VALUES = [(16777217, 16777216.0), (7, 7.0), (-2147483647, -2147483648.0), (0, 0.0)]
TEXTS = ["été", "plain", "ünïcödé", ""]


def _old_row(k: int) -> dict[str, Any]:
    return {
        "id": f"k{k}",
        "ts": 1,
        "p": f"p{k % 2}",
        "i": 2**31 - 1 - k,
        "i2f": I2F_VALUES[k % 4][0],
        "l": 1_700_000_000_000 + k,
        "f": F_VALUES[k % 4][0],
        "fs": F_VALUES[k % 4][0],
        "d": D_VALUES[k % 4][0],
        "b": TEXTS[k % 4].encode(),
        "s": TEXTS[k % 4],
        "dec": Decimal(f"{k}.25"),
        "n": {"x": k} if k % 3 else None,
    }


def _as_new(row: dict[str, Any], k: int) -> dict[str, Any]:
    """The model: an old row as Hudi reads it with NEW."""
    _, f_double, f_text = F_VALUES[k % 4]
    return {
        **row,
        "i2f": I2F_VALUES[k % 4][1],
        "l": str(row["l"]),
        "f": f_double,
        "fs": f_text,
        "d": D_VALUES[k % 4][1],
        "b": TEXTS[k % 4],
        "s": TEXTS[k % 4].encode(),
        "dec": Decimal(f"{k}.250"),
        "n": None if row["n"] is None else {"x": row["n"]["x"], "y": None},
        "added": None,
    }


def _new_row(k: int, ts: int) -> dict[str, Any]:
    return {
        "id": f"k{k}",
        "ts": ts,
        "p": f"p{k % 2}",
        "i": 2**40 + k,
        "i2f": 0.25,
        "l": f"L{k}",
        "f": 2.000000001,
        "fs": "fs",
        "d": "dd",
        "b": "bb",
        "s": b"\x00\xff",
        "dec": Decimal("12345.678"),
        "n": {"x": -k, "y": f"y{k}"},
        "added": f"a{k}",
    }


def _avro(schema: pa.Schema) -> dict[str, Any]:
    return arrow_to_avro_schema(schema, "t_record", "hoodie.t")


def _evolved_table(
    path: Path, table_type: TableType, block: LogBlockFormat = LogBlockFormat.AVRO
) -> tuple[HoodieTable, dict[str, dict[str, Any]]]:
    """Commits 1 and 2 write OLD, commit 3 (a writer whose batch evolved the table) NEW: on
    MERGE_ON_READ a slice has a base file of OLD, log blocks of OLD, then log blocks of NEW."""
    options = WriteOptions(log_block_format=block)
    table = create_table(
        str(path),
        table_name="t",
        table_type=table_type,
        schema=OLD,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        table_version=TableVersion.EIGHT,
    )
    HoodieWriter(table, options=options).insert(
        pa.Table.from_pylist([_old_row(k) for k in range(8)], schema=OLD)
    )
    old_updates = [{**_old_row(k), "ts": 2, "i": -k} for k in (0, 1, 5)]
    HoodieWriter(HoodieTable.open(str(path)), options=options).upsert(
        pa.Table.from_pylist(old_updates, schema=OLD)
    )
    model = {f"k{k}": _as_new(_old_row(k), k) for k in range(8)}
    model.update({r["id"]: {**_as_new(r, int(r["id"][1:]))} for r in old_updates})
    updates = [_new_row(k, 3) for k in (1, 4, 9)]
    evolved = HoodieWriter(HoodieTable.open(str(path)), schema=_avro(NEW), options=options)
    evolved.upsert(pa.Table.from_pylist(updates, schema=NEW))
    model.update({r["id"]: r for r in updates})
    return HoodieTable.open(str(path)), model


def _read(path: Path) -> dict[str, dict[str, Any]]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    assert data.schema.names[5:] == NEW.names
    assert data.schema.remove_metadata() == pa.schema(
        [*[pa.field(n, pa.string()) for n in data.schema.names[:5]], *NEW]
    )
    return {r["id"]: {n: r[n] for n in NEW.names} for r in data.to_pylist()}


def _latest_base_schemas(path: Path) -> set[pa.Schema]:
    table = HoodieTable.open(str(path))
    out = set()
    for s in table.file_system_view().latest_file_slices():
        base = s.base_file_path(table.base_path)
        assert base is not None
        out.add(pq.read_schema(base).remove_metadata())
    return out


def _compact(path: Path) -> None:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())


def _cluster(path: Path) -> None:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    execute_clustering(ctx, scheduled.instant_time, LocalRunner())


@pytest.mark.parametrize(
    ("table_type", "block"),
    [
        (TableType.MERGE_ON_READ, LogBlockFormat.AVRO),
        (TableType.MERGE_ON_READ, LogBlockFormat.PARQUET),
        (TableType.COPY_ON_WRITE, LogBlockFormat.AVRO),
    ],
)
def test_add_and_promote_read_as_the_model_and_services_rewrite_in_the_latest_schema(
    tmp_path: Path, table_type: TableType, block: LogBlockFormat
) -> None:
    path = tmp_path / "t"
    _, model = _evolved_table(path, table_type, block)
    assert _read(path) == model
    if table_type is TableType.COPY_ON_WRITE:
        # the upserts' merges rewrote every file group in NEW with Hudi's conversions; hudi-rs
        # reads those files as they are. (On MERGE_ON_READ hudi-rs refuses to merge the log
        # blocks: "column 'i' has type Int32 but the table schema expects Int64".)
        assert _rs(path, NEW) == model
    arrow_new = {f.name: f.type for f in NEW}
    if table_type is TableType.MERGE_ON_READ:
        # a slice whose base file has OLD and whose logs have NEW: compaction writes NEW
        _compact(path)
        assert _read(path) == model
        for schema in _latest_base_schemas(path):
            assert {n: schema.field(n).type for n in NEW.names} == arrow_new
    _cluster(path)
    assert _read(path) == model
    for schema in _latest_base_schemas(path):
        assert {n: schema.field(n).type for n in NEW.names} == arrow_new


def _rs(path: Path, schema: pa.Schema) -> dict[str, dict[str, Any]]:
    return {r["id"]: {n: r[n] for n in schema.names} for r in (eval(s) for s in hudi_rs_rows(path))}


@pytest.mark.parametrize("table_type", [TableType.MERGE_ON_READ, TableType.COPY_ON_WRITE])
def test_added_columns_top_level_and_nested_read_as_hudi_rs_reads_them(
    tmp_path: Path, table_type: TableType
) -> None:
    before = pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("n", pa.struct([("x", pa.int32())]))]
    )
    after = pa.schema(
        [*before.remove(3), ("n", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("added", pa.string())]
    )
    path = tmp_path / "t"
    table = create_table(
        str(path),
        table_name="t",
        table_type=table_type,
        schema=before,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        metadata_table=False,
    )
    first = [{"id": f"k{i}", "ts": 1, "p": f"p{i % 2}", "n": {"x": i} if i % 3 else None} for i in range(6)]
    HoodieWriter(table).insert(pa.Table.from_pylist(first, schema=before))
    second = [
        {"id": "k1", "ts": 2, "p": "p1", "n": {"x": 10, "y": "y1"}, "added": "a1"},
        {"id": "k9", "ts": 2, "p": "p2", "n": None, "added": "a9"},
    ]
    HoodieWriter(HoodieTable.open(str(path)), schema=_avro(after)).upsert(
        pa.Table.from_pylist(second, schema=after)
    )
    model = {
        r["id"]: {**r, "n": None if r["n"] is None else {**r["n"], "y": None}, "added": None} for r in first
    }
    model.update({r["id"]: r for r in second})
    ours = {
        r["id"]: {n: r[n] for n in after.names}
        for r in TableReader(HoodieTable.open(str(path))).snapshot().to_pylist()
    }
    assert ours == model
    assert _rs(path, after) == model


def test_clustering_of_uncompacted_slices_writes_the_latest_schema(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _, model = _evolved_table(path, TableType.MERGE_ON_READ)
    _cluster(path)
    assert _read(path) == model
    for schema in _latest_base_schemas(path):
        assert schema.field("added").type == pa.string() and schema.field("f").type == pa.float64()


def test_a_writer_schema_that_is_no_evolution_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _evolved_table(path, TableType.MERGE_ON_READ)
    before = sorted(p.name for p in path.rglob("*"))
    narrowed = NEW.set(NEW.get_field_index("i"), pa.field("i", pa.int32()))
    narrowed = narrowed.remove(narrowed.get_field_index("b"))
    writer = HoodieWriter(HoodieTable.open(str(path)), schema=_avro(narrowed))
    with pytest.raises(SchemaError) as err:
        writer.upsert(pa.Table.from_pylist([], schema=narrowed))
    assert "i: int64 -> int32 is not one of Hudi's type promotions" in str(err.value)
    assert "b is dropped" in str(err.value)
    assert sorted(p.name for p in path.rglob("*")) == before


def _set_commit_schemas(path: Path, schema: dict[str, Any], *, last_only: bool = False) -> None:
    """Every completed write's metadata (or the last's) records ``schema``, as its writer did."""
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    writes = list(timeline.completed().writes())
    for instant in writes[-1:] if last_only else writes:
        name = instant.file_name(table.paths.layout)
        file = Path(timeline.path_of(name))
        model = ReplaceCommitMetadata if instant.action is Action.REPLACE_COMMIT else CommitMetadata
        meta = model.from_bytes(file.read_bytes(), table.table_version, str(file))
        extra = dict(meta.extra_metadata or {})
        extra["schema"] = json.dumps(schema, separators=(",", ":"))
        import dataclasses

        file.write_bytes(dataclasses.replace(meta, extra_metadata=extra).to_bytes(table.table_version))
        assert instant.state is State.COMPLETED


KEYGEN = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def timestamp_keygen_table(path: Path, timestamp_type: str, unit: int) -> dict[str, dict[str, Any]]:
    """A MERGE_ON_READ table of a numeric TimestampBasedKeyGenerator partition field ``ts`` as
    Hudi 1.1 leaves it (base file and log block hold int64, the commits' schema says string);
    returns the model of its read: the file's long as the schema's string, in decimal."""
    create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=KEYGEN,
        record_key_fields=["id"],
        partition_fields=["ts"],
        metadata_table=False,
    )
    # hoodie.properties as Hudi 1.1 records a TimestampBasedKeyGenerator table
    timestamp = TimestampOptions(TimestampType(timestamp_type), "yyyy/MM/dd", output_timezone="UTC")
    keygen = key_generator_properties(
        KeyGeneratorType.TIMESTAMP, ["id"], ["ts"], False, False, 8, timestamp=timestamp
    )
    keygen["hoodie.table.keygenerator.class"] = "org.apache.hudi.keygen.TimestampBasedKeyGenerator"
    update_table_properties(LocalFileIO(), str(path / ".hoodie"), keygen)
    table = HoodieTable.open(str(path))
    assert table.config.props["hoodie.table.keygenerator.class"] == keygen["hoodie.table.keygenerator.class"]
    day = 86_400 * unit
    base = 1_700_000_000 * unit
    first = [{"id": f"k{i}", "ts": base + (i % 3) * day, "v": f"a{i}"} for i in range(9)]
    HoodieWriter(table, options=WriteOptions()).insert(pa.Table.from_pylist(first, schema=KEYGEN))
    second = [{"id": f"k{i}", "ts": base + (i % 3) * day, "v": f"b{i}"} for i in (0, 4, 8)]
    HoodieWriter(HoodieTable.open(str(path))).upsert(pa.Table.from_pylist(second, schema=KEYGEN))
    as_string = KEYGEN.set(1, pa.field("ts", pa.string()))
    _set_commit_schemas(path, _avro(as_string))
    model = {r["id"]: {**r, "ts": str(r["ts"])} for r in first}
    model.update({r["id"]: {**r, "ts": str(r["ts"])} for r in second})
    return model


@pytest.mark.parametrize(("timestamp_type", "unit"), [("EPOCHMILLISECONDS", 1000), ("UNIX_TIMESTAMP", 1)])
def test_numeric_timestamp_keygen_field_reads_as_the_commit_schemas_string(
    tmp_path: Path, timestamp_type: str, unit: int
) -> None:
    path = tmp_path / "t"
    model = timestamp_keygen_table(path, timestamp_type, unit)

    def read() -> dict[str, dict[str, Any]]:
        data = TableReader(HoodieTable.open(str(path))).snapshot()
        assert data.schema.field("ts").type == pa.string()
        return {r["id"]: {n: r[n] for n in KEYGEN.names} for r in data.to_pylist()}

    assert read() == model
    # hudi-rs agrees with Hudi here: the file's long read as the schema's string, in decimal.
    # (Spark's query layer then shows the partition path instead, for every row of a partition:
    # HoodieSparkUtils.parsePartitionColumnValues passes the path for non-DATE_STRING timestamp
    # types; that is a presentation of the query engine, not what Hudi's readers and services
    # put in files, and hts follows the file-group reader.)
    rs = {r["id"]: {n: r[n] for n in KEYGEN.names} for r in (eval(s) for s in hudi_rs_rows(path))}
    assert rs == model
    _compact(path)
    assert read() == model
    for schema in _latest_base_schemas(path):
        assert schema.field("ts").type == pa.string()
    _cluster(path)
    assert read() == model


def _hashes(path: Path) -> dict[str, str]:
    import hashlib

    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in path.rglob("*")
        if p.is_file()
    }


def test_a_type_change_outside_hudis_promotions_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("v", pa.string())])
    path = tmp_path / "t"
    table = create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        metadata_table=False,
    )
    rows = [{"id": f"k{i}", "ts": 1, "p": f"p{i % 2}", "v": f"x{i}"} for i in range(6)]
    HoodieWriter(table).insert(pa.Table.from_pylist(rows, schema=schema))
    HoodieWriter(HoodieTable.open(str(path))).upsert(pa.Table.from_pylist(rows[:2], schema=schema))
    # the last write recorded v as a long: files holding strings cannot be read with it
    narrowed = schema.set(3, pa.field("v", pa.int64()))
    _set_commit_schemas(path, _avro(narrowed), last_only=True)
    before = _hashes(path)
    message = r"unreadable evolved schema table \(.*: v: string -> int64 is not one of Hudi's type promotions"
    ctx = ServiceContext(HoodieTable.open(str(path)))
    with pytest.raises(UnsupportedShapeError, match=message):
        schedule_compaction(ctx, CompactionPolicy())
    with pytest.raises(UnsupportedShapeError, match=message):
        schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    with pytest.raises(UnsupportedShapeError, match=message):
        HoodieWriter(HoodieTable.open(str(path))).upsert(pa.Table.from_pylist([], schema=narrowed))
    assert _hashes(path) == before
    # a read names the file, the column and both types
    with pytest.raises(SchemaError, match=r"\.parquet: v: data of type string cannot be read as int64"):
        TableReader(HoodieTable.open(str(path))).read_optimized()


def test_hts_write_evolves_the_schema_with_hudis_write_schema_option(tmp_path: Path) -> None:
    from tests.tables import hts

    before = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("i", pa.int32())])
    after = pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("p", pa.string()), ("i", pa.int64()), ("s", pa.string())]
    )
    path, first, second = tmp_path / "t", tmp_path / "1.parquet", tmp_path / "2.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": "a", "ts": 1, "p": "x", "i": 7}], schema=before), first)
    pq.write_table(
        pa.Table.from_pylist([{"id": "b", "ts": 2, "p": "x", "i": 2**40, "s": "new"}], schema=after), second
    )
    made = hts(
        "write", str(path), "--input", str(first), "--operation", "insert", "--create", "--table-name", "t",
        "--record-key", "id", "--ordering-field", "ts", "--partition-field", "p",
        "--option", "hoodie.metadata.enable=false",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    option = "hoodie.write.schema=" + json.dumps(_avro(after))
    evolved = hts("write", str(path), "--input", str(second), "--operation", "upsert", "--option", option)
    assert evolved.returncode == 0, evolved.stderr
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    rows = sorted(({n: r[n] for n in after.names} for r in data.to_pylist()), key=lambda r: r["id"])
    assert rows == [
        {"id": "a", "ts": 1, "p": "x", "i": 7, "s": None},
        {"id": "b", "ts": 2, "p": "x", "i": 2**40, "s": "new"},
    ]
    bad = hts(
        "write",
        str(path),
        "--input",
        str(second),
        "--operation",
        "upsert",
        "--option",
        "hoodie.write.schema={",
    )
    assert bad.returncode != 0 and "hoodie.write.schema='{' is not an Avro schema" in bad.stderr
