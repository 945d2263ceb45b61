"""Audit of keys, partitions and types on tables laid out as Apache Hudi's writers lay them out: every
service either does what Hudi does (results equal a model of Hudi's semantics and hudi-rs's read) or
refuses naming the shape, every file unchanged.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.config.table_config import TableType, TableVersion
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.keygen import KeyGeneratorType, key_generator_from_properties
from hoodie.metadata.table import MetadataTable
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import decode_data_block
from hoodie.schema.avro_arrow import META_FIELDS, avro_to_arrow_schema, encode_avro_block_content
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.stored_keys import check_stored_keys
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.conftest import fixture_names, fixture_path, hudi_rs_rows
from tests.services.shapes_support import table_hash, write_props
from tests.tables import new_table, rows


def _null_meta(table: pa.Table) -> pa.Table:
    for name in META_FIELDS:
        i = table.schema.get_field_index(name)
        table = table.set_column(
            i, table.schema.field(i), pa.nulls(table.num_rows, table.schema.field(i).type)
        )
    return table


def to_virtual_keys(path: Path, *, absent: bool = False) -> None:
    """Lay a table out as Hudi's writers do with ``hoodie.populate.meta.fields=false``: the property
    set (HoodieTableConfig.POPULATE_META_FIELDS), the meta columns in the files' schemas but null
    (HoodieWriteHandle writes ``writeSchemaWithMetaFields``; HoodieAvroParquetWriter /
    HoodieSparkParquetWriter and HoodieAppendHandle populate them only with populateMetaFields), or,
    with ``absent``, left out (releases whose ``addMetadataFields`` takes populateMetaFields); delete
    blocks keep the keys the writer's key generator made."""
    write_props(path, {"hoodie.populate.meta.fields": "false"})

    def layout(data: pa.Table) -> pa.Table:
        return data.drop_columns(list(META_FIELDS)) if absent else _null_meta(data)

    for base in path.rglob("*.parquet"):
        if ".hoodie" in base.relative_to(path).parts:
            continue
        data = pq.read_table(base)
        pq.write_table(layout(data).replace_schema_metadata(data.schema.metadata), base)
    for log in path.rglob(".*.log.*"):
        if ".hoodie" in log.relative_to(path).parts:
            continue
        out = []
        for block in read_blocks(log.read_bytes(), log.name):
            content, header = block.content, dict(block.header)
            if block.block_type is BlockType.AVRO_DATA:
                assert block.schema is not None
                schema = json.loads(block.schema)
                data = layout(decode_data_block(block, avro_to_arrow_schema(schema)))
                if absent:
                    schema = {
                        **schema,
                        "fields": [f for f in schema["fields"] if f["name"] not in META_FIELDS],
                    }
                    header[HeaderKey.SCHEMA] = json.dumps(schema, separators=(",", ":"))
                content = encode_avro_block_content(data, schema)
            out.append(encode_block(block.block_type, header, content, block.footer))
        log.write_bytes(b"".join(out))


def _model_and_table(
    path: Path, table_type: TableType, record_key_fields: list[str], *, absent: bool = False
) -> dict[str, int]:
    """Inserts k0..k11, upserts the even ids, deletes k1 and k3 (MERGE_ON_READ: log files with data
    and delete blocks), then the virtual-keys layout. Returns id -> ts the table must read."""
    table = new_table(path, table_type=table_type, version=TableVersion.EIGHT, metadata_table=False)
    if record_key_fields != ["id"]:
        keys = {
            "hoodie.table.recordkey.fields": ",".join(record_key_fields),
            "hoodie.table.keygenerator.type": "COMPLEX",
        }
        write_props(path, keys)
        table = HoodieTable.open(str(path))
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows(range(0, 12, 2), 2))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.delete(rows([1, 3], 3))
    to_virtual_keys(path, absent=absent)
    model = {f"k{i}": 2 if i % 2 == 0 else 1 for i in range(12)}
    del model["k1"], model["k3"]
    return model


def _read(path: Path) -> dict[str, int]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    assert not set(META_FIELDS) & set(data.column_names)
    out = {r["id"]: r["ts"] for r in data.to_pylist()}
    assert len(out) == data.num_rows, "a key read twice"
    return out


@pytest.mark.parametrize("record_key_fields", [["id"], ["id", "p"]], ids=["simple", "complex"])
@pytest.mark.parametrize("table_type", [TableType.MERGE_ON_READ, TableType.COPY_ON_WRITE])
def test_virtual_keys_read_as_hudi_and_rewrites_are_refused(
    table_type: TableType, record_key_fields: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi's reader keys the stored rows of a table without meta fields by its record key fields
    (RecordContext.virtualKeyExtractor): reads merge log files by them (they failed with a KeyError
    on ``_hoodie_record_key``). Writes, compaction, clustering and log compaction key stored rows by
    ``_hoodie_record_key`` and write it populated: refused, nothing written; clean and archival run."""
    path = tmp_path / "t"
    model = _model_and_table(path, table_type, record_key_fields)
    if table_type is TableType.MERGE_ON_READ:
        assert list(path.rglob(".*.log.*"))
    assert _read(path) == model
    expected = sorted(
        str({"id": k, "ts": ts, "v": f"v{k[1:]}@{ts}", "p": f"p{int(k[1:]) % 3}"}) for k, ts in model.items()
    )
    assert hudi_rs_rows(path, drop=META_FIELDS) == expected
    data = tmp_path / "in.parquet"
    pq.write_table(rows([0, 5], 9), data)
    for argv in (
        *(
            ["write", str(path), "--input", str(data), "--operation", op]
            for op in ("upsert", "insert", "delete")
        ),
        *(
            ["run", s, str(path), "--spark-master", "in-process"]
            for s in ("compaction", "clustering", "logcompaction")
        ),
    ):
        before = table_hash(path)
        assert (
            main(
                [*argv, "--option", "hoodie.log.compaction.blocks.threshold=1"]
                if "logcompaction" in argv
                else argv
            )
            != 0
        )
        err = capsys.readouterr().err
        assert "virtual keys table (hoodie.populate.meta.fields=false)" in err and "refused" in err, err
        assert table_hash(path) == before, argv
    for service in ("clean", "archival"):
        assert main(["run", service, str(path), "--spark-master", "in-process"]) == 0, capsys.readouterr().err
    assert _read(path) == model
    # Hudi's incremental queries refuse tables without meta fields (no _hoodie_commit_time to select
    # by); hts returned every row of the touched partitions
    out = tmp_path / "incremental.parquet"
    assert main(["read", str(path), "--begin-instant", "0", "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert "virtual keys table (hoodie.populate.meta.fields=false): read (incremental) is refused" in err, err
    assert not out.exists()


# -- keys the table stores that hts's key generator would not make ----------------------------------

NEW_ENCODING = "hoodie.write.complex.keygen.new.encoding=true"


def _ids_read(path: Path) -> dict[str, int]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    out = {r["id"]: r["ts"] for r in data.to_pylist()}
    assert len(out) == data.num_rows, "a key read twice"
    return out


def test_single_field_complex_keys_of_hudi_0_15_are_refused_unless_declared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi 0.14.1, 0.15 and 1.0.0-1.0.2 store a one-field complex key bare (HUDI-7001), and a
    version-6 table does not record it (``hoodie.table.complex.keygen.encoding`` is 1.1's): hts's
    default, ``field:value``, would have upserted every key as a second record. Refused naming the
    stored key, nothing written; declared with Hudi's ``hoodie.write.complex.keygen.new.encoding``,
    the upsert updates the stored records (ours and hudi-rs's reads)."""
    path = tmp_path / "t"
    table = new_table(
        path,
        table_type=TableType.COPY_ON_WRITE,
        version=TableVersion.SIX,
        metadata_table=False,
        key_generator=KeyGeneratorType.COMPLEX,
    )
    HoodieWriter(table, write_props=dict([NEW_ENCODING.split("=")])).insert(rows(range(6), 1))
    stored = pq.read_table(next(path.rglob("*.parquet")), columns=["_hoodie_record_key"]).column(0)[0].as_py()
    assert stored.startswith("k")  # bare, as Hudi 0.15 stores it
    data = tmp_path / "in.parquet"
    pq.write_table(rows([0, 4], 2), data)
    before = table_hash(path)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) != 0
    err = capsys.readouterr().err
    named = re.search(
        r"_hoodie_record_key='(k\d)' in \S+\.parquet \(hts's key generator makes 'id:(k\d)'\)", err
    )
    assert "unsupported key generator table" in err and named and named[1] == named[2], err
    assert "write (upsert) is refused" in err, err
    assert table_hash(path) == before
    argv = ["write", str(path), "--input", str(data), "--operation", "upsert", "--option", NEW_ENCODING]
    assert main(argv) == 0, capsys.readouterr().err
    model = {f"k{i}": 2 if i in (0, 4) else 1 for i in range(6)}
    assert _ids_read(path) == model
    assert {r.split("'ts': ")[1].split(",")[0] for r in hudi_rs_rows(path, drop=META_FIELDS)} == {"1", "2"}
    assert len(hudi_rs_rows(path)) == len(model)


def _as_spark_sql_timestamp_partitions(path: Path) -> dict[str, str]:
    """Rename each partition of a table partitioned by a timestamp column as Spark SQL's
    ``SqlKeyGenerator.convertPartitionPathToSqlType`` writes it: the escaped ``yyyy-MM-dd HH:mm:ss``
    of the value (JVM zone UTC), not the epoch micros the Avro key generators make. Version 6: the
    timeline's JSON names partitions as text. Returns old -> new partition path."""
    renames = {}
    for part in [p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")]:
        when = dt.datetime.fromtimestamp(int(part.name) / 1e6, dt.UTC)
        renames[part.name] = when.strftime("%Y-%m-%d %H:%M:%S").replace(":", "%3A")
    for f in path.rglob("*"):
        if f.is_file() and ".hoodie" in f.relative_to(path).parts:
            text = f.read_bytes()
            for old, new in renames.items():
                text = text.replace(old.encode(), new.encode())
            f.write_bytes(text)
    for old, new in renames.items():
        for base in (path / old).glob("*.parquet"):
            data = pq.read_table(base)
            i = data.schema.get_field_index("_hoodie_partition_path")
            value = pa.array([new] * data.num_rows, pa.string())
            data = data.set_column(i, data.schema.field(i), value)
            pq.write_table(data.replace_schema_metadata(pq.read_table(base).schema.metadata), base)
        (path / old).rename(path / new)
    return renames


def test_spark_sql_timestamp_partitions_are_refused_for_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table Spark SQL filled, partitioned by a TIMESTAMP column, stores its partitions as formatted
    times; its hoodie.properties says SIMPLE like a datasource-written one, whose partitions are epoch
    micros (what hts makes). hts's writes would have started second partitions for the same keys:
    refused naming the stored partition path, every file unchanged; reads and hudi-rs agree."""
    schema = pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.timestamp("us", "UTC"))]
    )
    path = tmp_path / "t"
    table = new_table(
        path,
        table_type=TableType.COPY_ON_WRITE,
        version=TableVersion.SIX,
        schema=schema,
        metadata_table=False,
    )
    when = [dt.datetime(2024, 1, 15, 10, 30, tzinfo=dt.UTC), dt.datetime(2024, 1, 16, tzinfo=dt.UTC)]
    batch = pa.Table.from_pylist(
        [{"id": f"k{i}", "ts": 1, "v": f"v{i}", "p": when[i % 2]} for i in range(4)], schema=schema
    )
    HoodieWriter(table).insert(batch)
    renames = _as_spark_sql_timestamp_partitions(path)
    assert sorted(renames.values()) == ["2024-01-15 10%3A30%3A00", "2024-01-16 00%3A00%3A00"]
    assert _ids_read(path) == {f"k{i}": 1 for i in range(4)}
    assert len(hudi_rs_rows(path)) == 4
    data = tmp_path / "in.parquet"
    pq.write_table(batch.slice(0, 1), data)
    for op in ("upsert", "insert", "delete"):
        before = table_hash(path)
        assert main(["write", str(path), "--input", str(data), "--operation", op]) != 0
        err = capsys.readouterr().err
        assert "_hoodie_partition_path='2024-01-1" in err and f"write ({op}) is refused" in err, err
        assert table_hash(path) == before


def test_version_6_custom_key_generator_takes_its_types_from_the_writer_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi 0.14/0.15 record a CUSTOM table's partition fields without their types
    (``hoodie.table.partition.fields=region,ev``); writers pass ``region:SIMPLE,ev:TIMESTAMP`` as
    ``hoodie.datasource.write.partitionpath.field`` (CustomAvroKeyGenerator). Without it a write is
    refused naming the fields, nothing written; with it the write goes through (it was refused even
    then) and lands where Hudi puts it: ``eu/2023/11/15`` for 1700000000000 ms in GMT+8."""
    schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("region", pa.string()), ("ev", pa.int64())])
    path = tmp_path / "t"
    timestamp = {
        "hoodie.keygen.timebased.timestamp.type": "EPOCHMILLISECONDS",
        "hoodie.keygen.timebased.output.dateformat": "yyyy/MM/dd",
        "hoodie.keygen.timebased.output.timezone": "GMT+8:00",
    }
    create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["region", "ev"],
        ordering_fields=["ts"],
        table_version=TableVersion.SIX,
        metadata_table=False,
    )
    # as Hudi 0.15 leaves hoodie.properties (HoodieTableConfig: class, names only, timestamp options)
    write_props(
        path, {"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator", **timestamp}
    )
    option = "hoodie.datasource.write.partitionpath.field=region:SIMPLE,ev:TIMESTAMP"
    data = tmp_path / "in.parquet"
    for ts in (1, 2):
        pq.write_table(
            pa.Table.from_pylist([{"id": "a", "ts": ts, "region": "eu", "ev": 1700000000000}], schema), data
        )
        before = table_hash(path)
        assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) != 0
        err = capsys.readouterr().err
        assert "unsupported key generator table" in err and "['region', 'ev']" in err, err
        assert table_hash(path) == before
        argv = ["write", str(path), "--input", str(data), "--operation", "upsert", "--option", option]
        assert main(argv) == 0, capsys.readouterr().err
    read = TableReader(HoodieTable.open(str(path))).snapshot().to_pylist()
    assert [(r["_hoodie_partition_path"], r["id"], r["ts"]) for r in read] == [("eu/2023/11/15", "a", 2)]
    assert (path / "eu" / "2023" / "11" / "15").is_dir()
    assert main(["run", "compaction", str(path), "--spark-master", "in-process"]) == 0, (
        capsys.readouterr().err
    )
    assert [r["ts"] for r in TableReader(HoodieTable.open(str(path))).snapshot().to_pylist()] == [2]


@pytest.mark.parametrize("record_key_fields", [["id"], ["id", "p"]], ids=["simple", "complex"])
def test_record_index_of_a_virtual_keys_table_holds_its_live_keys(
    record_key_fields: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Building the record index merges each latest slice; on a MERGE_ON_READ table without meta
    fields its rows are keyed by their record key fields as Hudi's reader keys them (the build failed
    with a KeyError on ``_hoodie_record_key``). The index then holds the live keys in their partitions."""
    path = tmp_path / "t"
    model = _model_and_table(path, TableType.MERGE_ON_READ, record_key_fields)
    argv = ["run", "indexing", str(path), "--option", "hoodie.metadata.record.index.enable=true"]
    assert main([*argv, "--spark-master", "in-process"]) == 0, capsys.readouterr().err
    table = HoodieTable.open(str(path))
    index = MetadataTable.open(table, table.reload()).read_partition("record_index")
    got = {key: p["recordIndexMetadata"]["partitionName"] for key, p in index.items()}

    def key(k: str) -> str:  # KeyGenerator.constructRecordKey for several fields
        return k if record_key_fields == ["id"] else f"id:{k},p:p{int(k[1:]) % 3}"

    assert got == {key(k): f"p{int(k[1:]) % 3}" for k in model}
    assert _read(path) == model


def test_stored_keys_of_log_only_file_groups_are_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A MERGE_ON_READ table whose inserts went to log files (Flink's NBCC bucket writers start every
    file group so) has no base file to take stored keys from: they come from its smallest log-only
    slice. Bare one-field complex keys there (Hudi 0.15 / 1.0 writers) refuse an upsert that would
    write ``id:<value>``, nothing written; declared, the upsert updates them."""
    path = tmp_path / "t"
    table = new_table(
        path, version=TableVersion.EIGHT, metadata_table=False, key_generator=KeyGeneratorType.COMPLEX
    )
    bucket = {
        "hoodie.index.type": "BUCKET",
        "hoodie.bucket.index.num.buckets": "2",
        "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
    }
    HoodieWriter(table, write_props={**bucket, **dict([NEW_ENCODING.split("=")])}).insert(rows(range(6), 1))
    assert not list(path.rglob("*.parquet")) and list(path.rglob(".*.log.*"))
    data = tmp_path / "in.parquet"
    pq.write_table(rows([0, 4], 2), data)
    argv = ["write", str(path), "--input", str(data), "--operation", "upsert"]
    for key, value in bucket.items():
        argv += ["--option", f"{key}={value}"]
    before = table_hash(path)
    assert main(argv) != 0
    err = capsys.readouterr().err
    named = re.search(
        r"_hoodie_record_key='(k\d)' in \S+\.log\.\S+ \(hts's key generator makes 'id:(k\d)'", err
    )
    assert "unsupported key generator table" in err and named and named[1] == named[2], err
    assert table_hash(path) == before
    assert main([*argv, "--option", NEW_ENCODING]) == 0, capsys.readouterr().err
    assert _ids_read(path) == {f"k{i}": 2 if i in (0, 4) else 1 for i in range(6)}


@pytest.mark.parametrize("name", fixture_names())
def test_the_stored_key_check_passes_every_partition_of_the_tables_hudi_wrote(
    fixture_root: Path, name: str
) -> None:
    """No false refusal: on every real table Apache Hudi wrote, the key generator its properties
    describe rebuilds the stored keys of every partition (the check a write makes on its own)."""
    table = HoodieTable.open(str(fixture_path(fixture_root, name)))
    view = table.file_system_view()
    keygen = key_generator_from_properties(dict(table.config.props))
    schema = table.latest_schema_json()
    for partition in view.partitions():  # none in the empty tables
        assert schema is not None
        check_stored_keys(table, view, keygen, schema, "upsert", [partition])


@pytest.mark.parametrize("record_key_fields", [["id"], ["id", "p"]], ids=["simple", "complex"])
def test_virtual_keys_without_meta_columns_in_the_files_read_as_hudi(
    record_key_fields: list[str], tmp_path: Path
) -> None:
    """The same merge when the files leave the meta columns out altogether (base files and the
    data blocks' SCHEMA): ours and hudi-rs's reads equal the model."""
    path = tmp_path / "t"
    model = _model_and_table(path, TableType.MERGE_ON_READ, record_key_fields, absent=True)
    assert not set(META_FIELDS) & set(pq.read_schema(next(path.rglob("*.parquet"))).names)
    assert _read(path) == model
    rs = {r["id"]: r["ts"] for r in pa.Table.from_batches(_hudi_rs_batches(path)).to_pylist()}
    assert rs == model


def _hudi_rs_batches(path: Path) -> list[pa.RecordBatch]:
    table = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false")
    return list(table.build().read())


def test_creating_a_table_without_meta_fields_is_refused_before_it_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Writes to a table without meta fields are refused, so ``--create`` with
    ``hoodie.populate.meta.fields=false`` is refused before the table is created."""
    data, path = tmp_path / "in.parquet", tmp_path / "t"
    pq.write_table(rows(range(3), 1), data)
    argv = [
        "write",
        str(path),
        "--input",
        str(data),
        "--operation",
        "insert",
        "--create",
        "--record-key",
        "id",
    ]
    assert main([*argv, "--option", "hoodie.populate.meta.fields=false"]) != 0
    err = capsys.readouterr().err
    assert "virtual keys table (hoodie.populate.meta.fields=false): write (insert) is refused" in err, err
    assert not path.exists()
