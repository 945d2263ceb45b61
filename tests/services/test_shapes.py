"""The shape matrix over the census: each shape built as Hudi's writers leave it on storage, then every
operation through the CLI. A refused one exits non-zero naming the shape and leaves every file of
the table (outside hts's own ``.hoodie/.aux/hts/`` and heartbeats) byte-identical; a handled one
still works.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hudi import HudiTableBuilder

from hoodie.config.table_config import TableType, TableVersion, update_table_properties
from hoodie.errors import UnsupportedShapeError, UnsupportedTableError
from hoodie.file_group.file_slice import FileGroupId
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.index.bucket import bucket_id_str
from hoodie.io.fileio import LocalFileIO
from hoodie.merge.config import PARTIAL_UPDATE_PAYLOAD, PAYLOAD_BASED_STRATEGY_ID
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import decode_data_block
from hoodie.schema.avro_arrow import avro_to_arrow_schema, encode_avro_block_content
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.shape.matrix import (
    MATRIX,
    OPEN_REFUSED,
    OPERATIONS,
    WRITE_OPERATIONS,
    Shape,
    cell,
    markdown_table,
)
from hoodie.shape.table_shape import TableShape
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.options import WriteOperation
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.tables import new_table, rows

SERVICES_RUN = ("compaction", "logcompaction", "clustering", "clean", "archival")
"""Services the matrix test runs end to end when handled (the others need an instant or an index named)."""


def table_hash(path: Path) -> dict[str, str]:
    """sha256 of every file of the table, except hts's own ``.hoodie/.aux/hts/`` and heartbeats."""
    out = {}
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path).as_posix()
        if not p.is_file() or rel.startswith((".hoodie/.aux/hts/", ".hoodie/.heartbeat/")):
            continue
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def base_table(path: Path, *, version: TableVersion = TableVersion.SIX) -> Path:
    """A MERGE_ON_READ table without a metadata table: inserts, then upserts that leave log files."""
    writer = HoodieWriter(new_table(path, version=version, metadata_table=False))
    writer.insert(rows(range(12), 1))
    writer.upsert(rows(range(0, 12, 2), 2))
    return path


def _file_ids(path: Path) -> list[str]:
    table = HoodieTable.open(str(path))
    return sorted({s.file_id for s in table.file_system_view().latest_file_slices()})


def rename_file_ids(path: Path, new_id: Callable[[int, str], str]) -> list[str]:
    """Give every file group the id ``new_id(n, old)`` (same length) everywhere Hudi names it: data
    and log file names and the timeline's plans and commit metadata (table version 6: JSON)."""
    mapping = {old: new_id(n, old) for n, old in enumerate(_file_ids(path))}
    assert all(len(a) == len(b) for a, b in mapping.items())
    for p in sorted(path.rglob("*"), key=lambda q: len(q.parts), reverse=True):
        if not p.is_file():
            continue
        if ".hoodie" in p.relative_to(path).parts:
            data = p.read_bytes()
            for old, new in mapping.items():
                data = data.replace(old.encode(), new.encode())
            p.write_bytes(data)
            continue
        name = p.name
        for old, new in mapping.items():
            name = name.replace(old, new)
        if name != p.name:
            p.rename(p.with_name(name))
    return list(mapping.values())


def _bucket(n: int, old: str) -> str:
    return bucket_id_str(n) + old[8:]


def set_props(path: Path, **props: str) -> None:
    table = HoodieTable.open(str(path))
    update_table_properties(
        table.fileio, table.paths.meta, {k.replace("__", "."): v for k, v in props.items()}
    )


def _write_props(path: Path, updates: dict[str, str]) -> None:
    """Set keys in ``hoodie.properties`` without opening the table (it may refuse to open)."""
    update_table_properties(LocalFileIO(), str(path / ".hoodie"), updates)


# -- the census, as Hudi's writers leave each shape on storage -------------------------------------


def cdc(path: Path) -> None:  # HoodieTableConfig.CDC_ENABLED / CDC_SUPPLEMENTAL_LOGGING_MODE
    _write_props(
        path,
        {
            "hoodie.table.cdc.enabled": "true",
            "hoodie.table.cdc.supplemental.logging.mode": "DATA_BEFORE_AFTER",
        },
    )


BUCKET_OPTIONS = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"}
NBCC_OPTIONS = {**BUCKET_OPTIONS, "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL"}


def bucket_table(options: dict[str, str], version: TableVersion) -> Callable[[Path], None]:
    """The base table's writes made by a writer with Hudi's bucket index (``BucketIdentifier``:
    one file group per bucket, ids ``newBucketFileIdPrefix`` / ``newBucketFileIdForNBCC``)."""

    def build(path: Path) -> None:
        shutil.rmtree(path)
        table = new_table(path, version=version, metadata_table=False)
        writer = HoodieWriter(table, write_props=options)
        writer.insert(rows(range(12), 1))
        writer.upsert(rows(range(0, 12, 2), 2))

    return build


def consistent_hashing(path: Path) -> None:
    """``HoodieConsistentHashingMetadata`` JSON per partition, nodes naming the file id prefixes."""
    table = HoodieTable.open(str(path))
    by_partition: dict[str, list[str]] = {}
    for s in table.file_system_view().latest_file_slices():
        by_partition.setdefault(s.partition_path, []).append(s.file_id.rsplit("-", 1)[0])
    for partition, prefixes in by_partition.items():
        folder = path / ".hoodie" / ".bucket_index" / "consistent_hashing_metadata" / partition
        folder.mkdir(parents=True)
        step = 0x7FFFFFFF // len(prefixes)
        nodes = [
            {
                "value": 0x7FFFFFFF if i == len(prefixes) - 1 else step * (i + 1),
                "fileIdPrefix": p,
                "tag": "NORMAL",
            }
            for i, p in enumerate(sorted(prefixes))
        ]
        meta = {
            "version": 0,
            "partitionPath": partition,
            "instant": "00000000000000",
            "numBuckets": len(prefixes),
            "seqNo": 0,
            "nodes": nodes,
        }
        (folder / "00000000000000.hashing_meta").write_text(json.dumps(meta, indent=2))


def partition_bucket(path: Path) -> None:
    """Bucket file ids plus ``PartitionBucketIndexHashingConfig``'s initial ``.hashing_config``."""
    rename_file_ids(path, _bucket)
    folder = path / ".hoodie" / ".bucket_index" / "partition_bucket_index_meta" / "configs"
    folder.mkdir(parents=True)
    config = {
        "expressions": "p0,4",
        "defaultBucketNumber": 12,
        "rule": "regex",
        "version": 1,
        "instant": "00000000000000000",
    }
    (folder / "00000000000000000.hashing_config").write_text(json.dumps(config, indent=2))


def schema_on_read(path: Path) -> None:
    """``FileBasedInternalSchemaStorageManager``'s ``.hoodie/.schema/<instant>.schemacommit``."""
    table = HoodieTable.open(str(path))
    last = table.timeline.completed().writes().last()
    assert last is not None
    folder = (
        path / ".hoodie" / ".schema"
    )  # Hudi creates the folder with every table; commits come with evolution
    folder.mkdir(exist_ok=True)
    fields = [
        {"id": i, "name": name, "optional": True, "type": kind}
        for i, (name, kind) in enumerate([("id", "string"), ("ts", "long"), ("v", "string"), ("p", "string")])
    ]
    history = {
        "schemas": [
            {"max_column_id": 3, "version_id": int(last.requested_time), "type": "record", "fields": fields}
        ]
    }
    (folder / f"{last.requested_time}.schemacommit").write_text(json.dumps(history))


def expression_index(path: Path) -> None:
    """An expression index registered in the index definitions, as ``CREATE INDEX ... USING
    column_stats(func(col))`` leaves it."""
    folder = path / ".hoodie" / ".index_defs"
    folder.mkdir()
    defs = {
        "indexDefinitions": {
            "expr_index_day": {
                "indexName": "expr_index_day",
                "indexType": "column_stats",
                "indexFunction": "from_unixtime",
                "sourceFields": ["ts"],
                "indexOptions": {"format": "yyyy-MM-dd"},
                "version": "V1",
            }
        }
    }
    (folder / "index.json").write_text(json.dumps(defs))
    _write_props(path, {"hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json"})


def metadata_table_of_version_6(path: Path) -> None:
    """A version-6 table whose properties list a built ``files`` partition (Hudi 0.14/0.15 with
    ``hoodie.metadata.enable``, its default on Spark)."""
    _write_props(path, {"hoodie.table.metadata.partitions": "files"})


def with_metadata_table(extra_partition: str) -> Callable[[Path], None]:
    """The base table's writes on a version-8 table with a metadata table, whose properties then
    list ``extra_partition`` as built (as a later Hudi's indexer would leave a new partition kind)."""

    def build(path: Path) -> None:
        shutil.rmtree(path)
        writer = HoodieWriter(new_table(path, version=TableVersion.EIGHT))
        writer.insert(rows(range(12), 1))
        writer.upsert(rows(range(0, 12, 2), 2))
        built = HoodieTable.open(str(path)).config.metadata_partitions
        _write_props(path, {"hoodie.table.metadata.partitions": ",".join([*built, extra_partition])})

    return build


def unreadable_schema(path: Path) -> None:
    """The last write's commit schema declares ``v`` a long while the files hold strings (a change
    outside Hudi's type promotions, ``HoodieAvroUtils``)."""
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    last = timeline.completed().writes().last()
    assert last is not None
    file = Path(timeline.path_of(last.file_name(table.paths.layout)))
    meta = json.loads(file.read_text())
    schema = json.loads(meta["extraMetadata"]["schema"])
    for f in schema["fields"]:
        if f["name"] == "v":
            f["type"] = ["null", "long"]
    meta["extraMetadata"]["schema"] = json.dumps(schema)
    file.write_text(json.dumps(meta))


UNAVAILABLE = "__debezium_unavailable_value"


def _partial_block(log: Path, columns: tuple[str, ...]) -> None:
    """Rewrite the one data block of ``log`` as Hudi's ``HoodieAppendHandle`` writes it with
    ``shouldWritePartialUpdates()`` (Spark SQL MERGE INTO updating some columns): the header's
    SCHEMA is the meta fields plus the updated ``columns`` (the table schema projected, in its
    order; ``HoodieAvroUtils.generateProjectionSchema``) and IS_PARTIAL is ``true``."""
    (block,) = read_blocks(log.read_bytes(), log.name)
    assert block.block_type is BlockType.AVRO_DATA and block.schema is not None
    full = json.loads(block.schema)
    keep = [f for f in full["fields"] if f["name"].startswith("_hoodie_") or f["name"] in columns]
    partial = {**full, "fields": keep}
    rows = decode_data_block(block, avro_to_arrow_schema(full)).select([f["name"] for f in keep])
    header = {
        HeaderKey.INSTANT_TIME: block.instant_time,
        HeaderKey.SCHEMA: json.dumps(partial, separators=(",", ":")),
        HeaderKey.IS_PARTIAL: "true",
    }
    log.write_bytes(encode_block(BlockType.AVRO_DATA, header, encode_avro_block_content(rows, partial)))


def partial_updates(path: Path) -> None:
    """A version-9 MERGE_ON_READ table as Hudi 1.1 leaves one migrated from a Debezium payload
    (``hoodie.table.partial.update.mode=FILL_UNAVAILABLE`` with its marker in the merge properties,
    ``HoodieTableConfig.PARTIAL_UPDATE_MODE`` / ``MERGE_PROPERTIES_PREFIX``): the base table's writes,
    the even keys' upsert sending the marker for ``v`` on k0, k2 and k4 (their stored ``v`` stays),
    then a partial update of ``v`` on k1 and k3 in an IS_PARTIAL block (``id`` and ``p`` absent from
    the block: the stored values stay)."""
    shutil.rmtree(path)
    props = {
        "hoodie.table.partial.update.mode": "FILL_UNAVAILABLE",
        "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value": UNAVAILABLE,
    }
    writer = HoodieWriter(
        new_table(path, version=TableVersion.NINE, metadata_table=False, extra_properties=props)
    )
    writer.insert(rows(range(12), 1))
    evens = rows(range(0, 12, 2), 2)
    marked = pa.array(
        [
            UNAVAILABLE if k in ("k0", "k2", "k4") else v
            for k, v in zip(evens["id"].to_pylist(), evens["v"].to_pylist(), strict=True)
        ]
    )
    writer.upsert(evens.set_column(evens.schema.get_field_index("v"), "v", marked))
    before = set(path.rglob(".*.log.*"))
    partial = rows([1, 3], 1)
    writer.upsert(
        partial.set_column(partial.schema.get_field_index("v"), "v", pa.array(["partial1", "partial3"]))
    )
    for log in set(path.rglob(".*.log.*")) - before:
        _partial_block(log, ("ts", "v"))


def partial_update_model() -> dict[str, tuple[int, str]]:
    """Record key -> (ts, v) of :func:`partial_updates`' table (one file group per partition).

    Once a file group's log holds an IS_PARTIAL block, Hudi's reader merges it with
    ``PartialUpdateBufferedRecordMerger`` (KEEP_VALUES: the columns a record lacks are kept), built
    without the table's partial-update mode (``BufferedRecordMergerFactory.create`` with
    ``enablePartialMerging``): there the marker is a value like any other. So k0 (p0, with k3's
    partial block) and k4 (p1, with k1's) read the marker; k2 (p2) reads its stored value."""
    model = {f"k{i}": (1, f"v{i}@1") for i in range(12)}
    model.update({f"k{i}": (2, f"v{i}@2") for i in range(6, 12, 2)})
    model.update({"k0": (2, UNAVAILABLE), "k2": (2, "v2@1"), "k4": (2, UNAVAILABLE)})
    model.update({"k1": (1, "partial1"), "k3": (1, "partial3")})
    return model


def _operation_block(log: Path) -> None:
    """Rewrite the data blocks of ``log`` as a writer with ``hoodie.allow.operation.metadata.field=true``
    (Flink's changelog mode) writes them: ``_hoodie_operation`` right after ``_hoodie_file_name`` in the
    SCHEMA header and the rows (``HoodieAvroUtils.addMetadataFields(schema, true)``), filled with the
    ``HoodieOperation`` names: the first row a delete (``D``, with its last values), the others ``+U``."""
    out = b""
    for block in read_blocks(log.read_bytes(), log.name):
        assert block.block_type is BlockType.AVRO_DATA and block.schema is not None
        schema = json.loads(block.schema)
        at = [f["name"] for f in schema["fields"]].index("_hoodie_file_name") + 1
        data = decode_data_block(block, avro_to_arrow_schema(block.schema))
        operation = {"name": "_hoodie_operation", "type": ["null", "string"], "default": None}
        schema["fields"].insert(at, operation)
        ops = pa.array(["D" if i == 0 else "+U" for i in range(data.num_rows)], pa.string())
        data = data.add_column(at, "_hoodie_operation", ops)
        header = {
            HeaderKey.INSTANT_TIME: block.instant_time,
            HeaderKey.SCHEMA: json.dumps(schema, separators=(",", ":")),
        }
        out += encode_block(BlockType.AVRO_DATA, header, encode_avro_block_content(data, schema))
    log.write_bytes(out)


def changelog(path: Path) -> None:
    """The base table as a Flink changelog writer leaves it: its upsert's log blocks carry
    ``_hoodie_operation``; the commit's ``schema`` stays the writer schema without meta fields
    (``FlinkWriteClients``), and nothing in ``hoodie.properties`` says so."""
    for log in path.rglob(".*.log.*"):
        if ".hoodie" not in log.relative_to(path).parts:  # the data table's, not its metadata table's
            _operation_block(log)


def open_refused(updates: dict[str, str]) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        _write_props(path, updates)

    return build


@dataclass(frozen=True)
class Case:
    shape: Shape
    build: Callable[[Path], None]
    options: dict[str, str] = field(default_factory=dict)
    evidence: str = ""


CASES = [
    Case(Shape.CDC, cdc, evidence="hoodie.table.cdc.enabled=true"),
    Case(
        Shape.SIMPLE_BUCKET,
        bucket_table(BUCKET_OPTIONS, TableVersion.SIX),
        BUCKET_OPTIONS,
        evidence="bucket form",
    ),
    Case(Shape.NBCC, bucket_table(NBCC_OPTIONS, TableVersion.EIGHT), NBCC_OPTIONS, evidence="NBCC form"),
    Case(
        Shape.BUCKET_SETTINGS_MISSING,
        bucket_table(BUCKET_OPTIONS, TableVersion.SIX),
        evidence="hoodie.index.type not given",
    ),
    Case(Shape.CONSISTENT_HASHING, consistent_hashing, evidence=".hashing_meta"),
    Case(Shape.PARTITION_BUCKET, partition_bucket, evidence=".hashing_config"),
    Case(
        Shape.FLINK_STATE,
        lambda _p: None,
        {"hoodie.index.type": "FLINK_STATE"},
        "hoodie.index.type=FLINK_STATE",
    ),
    Case(Shape.SCHEMA_ON_READ, schema_on_read, evidence=".schemacommit"),
    Case(
        Shape.PARTIAL_UPDATES, partial_updates, evidence="hoodie.table.partial.update.mode=FILL_UNAVAILABLE"
    ),
    Case(Shape.EXPRESSION_INDEX, expression_index, evidence="expr_index_day"),
    Case(Shape.OPERATION_FIELD, changelog, evidence="_hoodie_operation in the schema of "),
    Case(Shape.VERSION_6, lambda _p: None, evidence="hoodie.table.version=6"),
    Case(
        Shape.METADATA_TABLE_VERSION,
        metadata_table_of_version_6,
        evidence="hoodie.table.version=6, hoodie.table.metadata.partitions=files",
    ),
    Case(
        Shape.METADATA_PARTITION,
        with_metadata_table("vector_index_embedding"),
        evidence="vector_index_embedding in hoodie.table.metadata.partitions=files,",
    ),
    Case(Shape.UNREADABLE_SCHEMA, unreadable_schema, evidence="v: string -> int64"),
    Case(
        Shape.KEY_GENERATOR,
        open_refused({"hoodie.table.keygenerator.class": "org.apache.hudi.keygen.GlobalDeleteKeyGenerator"}),
        evidence="hoodie.table.keygenerator.class=org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
    ),
    Case(
        Shape.UNSUPPORTED_MERGE,
        open_refused({"hoodie.compaction.payload.class": "com.acme.MergeByVendorRules"}),
        evidence="hoodie.compaction.payload.class=com.acme.MergeByVendorRules",
    ),
    Case(
        Shape.BOOTSTRAP,
        open_refused({"hoodie.bootstrap.base.path": "/src"}),
        evidence="hoodie.bootstrap.base.path=/src",
    ),
    Case(
        Shape.TABLE_FORMAT,
        open_refused({"hoodie.table.format": "iceberg"}),
        evidence="hoodie.table.format=iceberg",
    ),
    Case(
        Shape.BASE_FILE_FORMAT, open_refused({"hoodie.table.base.file.format": "ORC"}), evidence="format=ORC"
    ),
    Case(
        Shape.MULTIPLE_BASE_FILE_FORMATS,
        open_refused({"hoodie.table.multiple.base.file.formats.enable": "true"}),
        evidence="formats.enable=true",
    ),
    Case(
        Shape.DROP_PARTITION_COLUMNS,
        open_refused({"hoodie.datasource.write.drop.partition.columns": "true"}),
        evidence="drop.partition.columns=true",
    ),
    Case(
        Shape.VIRTUAL_KEYS_KEYGEN,
        open_refused(
            {
                "hoodie.populate.meta.fields": "false",
                "hoodie.table.keygenerator.class": "org.apache.hudi.keygen.CustomKeyGenerator",
            }
        ),
        evidence="CustomKeyGenerator",
    ),
    Case(
        Shape.TABLE_VERSION, open_refused({"hoodie.table.version": "10"}), evidence="hoodie.table.version=10"
    ),
    Case(
        Shape.LOG_FILE_FORMAT, open_refused({"hoodie.table.log.file.format": "PARQUET"}), evidence="PARQUET"
    ),
    # A key no table version hts implements persists, as a plugin leaves one (census section 20):
    # refused for everything that writes; read as Hudi's readers read it (ignoring the key).
    Case(
        Shape.UNKNOWN_PROPERTY,
        open_refused({"com.acme.catalog.sync.id": "42"}),
        evidence="com.acme.catalog.sync.id=42",
    ),
    Case(
        Shape.UNIMPLEMENTED_PROPERTY,
        open_refused({"hoodie.partition.metafile.use.base.format": "true"}),
        evidence="hoodie.partition.metafile.use.base.format=true",
    ),
]


WRITES = {
    "upsert": (range(6, 18), 3, 3),
    "bulk_insert": (range(103, 109), 3, 100),
    "delete": (range(10, 14), 4, 3),
}
"""The writes the matrix runs: operation -> (ids, ordering value, partitions). The bulk insert goes to
new partitions (p3..p8): on a bucket table, Hudi's bulk insert starts a file group per bucket."""


def _invocations(op: str, path: Path, tmp: Path, options: dict[str, str]) -> list[list[str]]:
    opts = [a for k, v in options.items() for a in ("--option", f"{k}={v}")]
    if op == "read":
        return [["read", str(path), "--out", str(tmp / "out.parquet")]]
    if op == "write":
        out = []
        for w, (ids, ts, partitions) in WRITES.items():
            data = tmp / f"{w}.parquet"
            pq.write_table(rows(ids, ts, partitions=partitions), data)
            out.append(["write", str(path), "--input", str(data), "--operation", w, *opts])
        return out
    return [["run", op, str(path), "--spark-master", "in-process", *opts]]


def _keys(data: pa.Table) -> dict[str, int]:
    """Record key -> ordering value of a read (each key at most once)."""
    pairs = list(zip(data.column("id").to_pylist(), data.column("ts").to_pylist(), strict=True))
    assert len(pairs) == len({k for k, _ in pairs}), "a key read twice"
    return dict(pairs)


def _hudi_rs_keys(path: Path) -> dict[str, int]:
    from hudi import HudiTableBuilder

    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false").build()
    )
    return _keys(pa.Table.from_batches(table.read()))


@pytest.mark.parametrize("case", CASES, ids=[c.shape.name.lower() for c in CASES])
def test_shape_matrix(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every operation on every shape: refused ones name the shape and change no file; handled ones
    run, and the table then reads (ours and hudi-rs's) as a model of the writes that ran says."""
    path = base_table(tmp_path / "t")
    model = {f"k{i}": 2 if i % 2 == 0 else 1 for i in range(12)}  # base_table's inserts and upserts
    case.build(path)
    if case.shape not in OPEN_REFUSED:
        shape = HoodieTable.open(str(path)).shape(case.options)
        found = shape.feature(case.shape)
        assert found is not None and case.evidence in found.evidence, shape.features
    for op in ("read", "write", *SERVICES_RUN, "indexing", "rollback", "restore", "savepoint"):
        for argv in _invocations(op, path, tmp_path, case.options):
            write_op = argv[argv.index("--operation") + 1] if op == "write" else None
            refused = cell(case.shape, op, write_op)
            if refused is None and (op not in ("read", "write", *SERVICES_RUN)):
                continue  # handled; needs an instant or an index named to run (their own tests)
            before = table_hash(path)
            code = main(argv)
            err = capsys.readouterr().err
            if refused is not None:
                assert code != 0, (op, write_op)
                assert case.shape.value in err and case.evidence in err and "refused" in err, err
                assert table_hash(path) == before, (op, write_op)
                continue
            assert code == 0, (op, write_op, err)
            if write_op is not None:
                ids, ts, _ = WRITES[write_op]
                for i in ids:
                    if write_op == "delete":
                        model.pop(f"k{i}", None)
                    else:
                        model[f"k{i}"] = ts
    if cell(case.shape, "read") is None:
        assert _keys(TableReader(HoodieTable.open(str(path))).snapshot()) == model
        assert _hudi_rs_keys(path) == model


TESTED_ALONE = {
    Shape.PARTIAL_BLOCKS,
    Shape.UNMERGED_PARTIAL_BLOCKS,
    Shape.SECONDARY_INDEX,
    Shape.SECONDARY_INDEXED,
    Shape.CUSTOM_MERGE,
    Shape.MULTI_FIELD_ORDERING,
    Shape.VIRTUAL_KEYS,
    Shape.PARTIAL_UPDATES,
}
"""Shapes tested by their own tests: a secondary index on a table Apache Hudi wrote
(test_an_unmaintained_secondary_index_refuses_writes_only,
test_a_secondary_indexed_table_refuses_overwrites_and_partition_ttl; the base table cannot hold a built one);
the merge shapes whose only refusal is log compaction
(test_log_compaction_is_refused_on_merges_it_does_not_implement; their writes merge as their own
tests check); virtual keys, laid out as Hudi's writers leave them (tests/services/test_audit_keys.py)."""


def test_every_shape_of_the_census_is_in_the_matrix_and_tested() -> None:
    tested = {c.shape for c in CASES} | TESTED_ALONE
    informational = {s for s, row in MATRIX.items() if not row}
    # Shapes handled everywhere are shown in TableShape but need no refusal test; NBCC's bucket rules
    # are the simple bucket's.
    assert set(Shape) - informational <= tested


# -- detection ------------------------------------------------------------------------------------


def test_one_non_bucket_file_id_makes_a_table_not_a_bucket_table(tmp_path: Path) -> None:
    """A random UUID starts with 8 digits ~2.3% of the time: every file group must have the form."""
    path = base_table(tmp_path / "t")
    ids = _file_ids(path)
    # All but the last file group get bucket ids; the last gets a prefix of letters (what a random
    # UUID has 97.7% of the time).
    rename_file_ids(path, lambda n, old: _bucket(n, old) if n < len(ids) - 1 else "abcdefgh" + old[8:])
    shape = HoodieTable.open(str(path)).shape()
    assert not shape.has(Shape.SIMPLE_BUCKET)
    assert shape.refusal("clustering") is None


def test_a_uuid_that_happens_to_start_with_eight_digits_counts_only_with_the_others(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t")
    rename_file_ids(path, _bucket)
    shape = HoodieTable.open(str(path)).shape()
    assert shape.has(Shape.SIMPLE_BUCKET) and not shape.has(Shape.NBCC)
    error = shape.refusal("clustering")
    assert isinstance(error, UnsupportedShapeError) and isinstance(error, UnsupportedTableError)
    assert "simple bucket index" in str(error) and "bucket form" in str(error)
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # crosses process boundaries intact


def test_latest_schema_in_commit_metadata_marks_schema_on_read(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t")
    table = HoodieTable.open(str(path))
    last = table.timeline.completed().writes().last()
    assert last is not None
    completed = next((path / ".hoodie").glob(f"{last.requested_time}.deltacommit"))
    meta = json.loads(completed.read_text())
    fields = [
        {"id": i, "name": name, "optional": True, "type": kind}
        for i, (name, kind) in enumerate([("id", "string"), ("ts", "long"), ("v", "string"), ("p", "string")])
    ]
    version = int(last.requested_time)
    meta["extraMetadata"]["latest_schema"] = json.dumps(
        {"max_column_id": 3, "version-id": version, "type": "record", "fields": fields}
    )
    completed.write_text(json.dumps(meta))
    shape = HoodieTable.open(str(path)).shape()
    assert shape.has(Shape.SCHEMA_ON_READ)
    with pytest.raises(
        UnsupportedShapeError, match=f"latest_schema in the extra metadata of {last.requested_time}"
    ):
        shape.check("indexing")
    shape.check("compaction")  # read with each file's own InternalSchema


def test_declared_index_options(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t")
    table = HoodieTable.open(str(path))
    assert table.shape().refusal("clustering") is None
    flink = table.shape({"hoodie.index.type": "flink_state"})
    assert flink.has(Shape.FLINK_STATE) and flink.refusal("compaction") is None
    assert "Flink-state index" in str(flink.refusal("clustering"))
    consistent = table.shape(
        {"hoodie.index.type": "BUCKET", "hoodie.index.bucket.engine": "CONSISTENT_HASHING"}
    )
    assert consistent.has(Shape.CONSISTENT_HASHING)
    bucket = TableShape.declared("t", {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"})
    assert bucket.has(Shape.SIMPLE_BUCKET) and bucket.refusal("write", "insert") is None
    assert bucket.refusal("write", "bulk_insert") is None
    assert bucket.refusal("write", "insert_overwrite_table") is not None
    assert bucket.refusal("clustering") is not None


def test_cli_create_with_a_declared_bucket_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--create`` with Hudi's bucket options makes a bucket table (recognised from storage after),
    and a write the simple bucket layout does not support is refused before the table is created."""
    data = tmp_path / "in.parquet"
    pq.write_table(rows(range(4), 1), data)
    bucket = ["--option", "hoodie.index.type=BUCKET", "--option", "hoodie.bucket.index.num.buckets=4"]

    def create(target: Path, operation: str) -> int:
        argv = ["write", str(target), "--input", str(data), "--operation", operation, "--create"]
        return main([*argv, "--record-key", "id", *bucket])

    refused = tmp_path / "refused"
    assert create(refused, "insert_overwrite_table") != 0
    assert "simple bucket index" in capsys.readouterr().err
    assert not refused.exists()

    target = tmp_path / "t"
    assert create(target, "insert") == 0
    found = HoodieTable.open(str(target)).shape({}).feature(Shape.SIMPLE_BUCKET)
    assert found is not None and "bucket form" in found.evidence


def test_the_shape_is_cached_until_the_timeline_changes(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    table = HoodieTable.open(str(path))
    first = table.shape()
    assert table.shape() is first
    table.reload()
    assert table.shape() is first  # nothing changed
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(2), 5))
    table.reload()
    assert table.shape() is not first


def test_cow_cdc_writes_are_handled(tmp_path: Path) -> None:
    """CDC tables are written as Hudi writes them (the CDC tests check the logs' content): an upsert
    rewrites a file group with a CDC log named in ``cdcStats``; a bulk insert writes none."""
    path = tmp_path / "t"
    HoodieWriter(new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=False)).insert(
        rows(range(4), 1)
    )
    cdc(path)
    upsert = HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(2), 2))
    assert upsert.write_stats and all(s.cdc_stats for s in upsert.write_stats)
    for stat in upsert.write_stats:
        assert all((path / log).is_file() and log.endswith(".cdc") for log in stat.cdc_stats or {})
    result = HoodieWriter(HoodieTable.open(str(path))).bulk_insert(rows(range(10, 12), 2))
    assert result.num_inserts == 2 and not any(s.cdc_stats for s in result.write_stats)


def test_matrix_lists_every_operation_for_open_refused_shapes() -> None:
    for shape in OPEN_REFUSED:
        assert set(MATRIX[shape]) == set(OPERATIONS)
        assert all(cell(shape, "write", w) is not None for w in WRITE_OPERATIONS)


def test_the_readme_matrix_is_the_modules_matrix() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("<!-- shape-matrix:start")
    body = readme[readme.index("\n", start) + 1 : readme.index("<!-- shape-matrix:end -->")]
    assert body.strip() == markdown_table()


def test_cdc_clean_removes_cdc_logs_with_their_slice(tmp_path: Path) -> None:
    """``CleanPlanner``: with CDC on, clean the log files whatever the table type; a COW table's CDC
    log (``.<fileId>_<commit>.log.1_<token>.cdc``, ``HoodieCDCLogger``) goes with its slice.

    The census left the suffix's release open: ``HoodieCDCUtils.CDC_LOGFILE_SUFFIX`` became ``.cdc``
    (from ``-cdc``) in HUDI-5082 (apache/hudi#7042, Oct 2022), before 0.13.0, so every table version
    hts opens (6+, Hudi 0.14+) names CDC logs with ``.cdc``."""
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=False))
    writer.insert(rows(range(6), 1))
    commits = [writer.upsert(rows(range(6), ts)).instant.requested_time for ts in (2, 3, 4)]
    cdc(path)
    cdc_logs = {}
    for slice_ in HoodieTable.open(str(path)).file_system_view().all_file_slices():
        if slice_.base_instant_time in commits and slice_.base_file is not None:
            name = f".{slice_.file_id}_{slice_.base_instant_time}.log.1_0-1-0.cdc"
            (path / slice_.partition_path / name).write_bytes(b"#HUDI#")
            cdc_logs[slice_.base_instant_time, slice_.partition_path] = name
    assert {ts for ts, _ in cdc_logs} == set(commits)
    code = main(
        [
            "run",
            "clean",
            str(path),
            "--spark-master",
            "in-process",
            "--option",
            "hoodie.clean.commits.retained=1",
        ]
    )
    assert code == 0
    for (ts, partition), name in cdc_logs.items():
        base_left = any(p.name.endswith(f"_{ts}.parquet") for p in (path / partition).iterdir())
        assert (path / partition / name).exists() == base_left, (ts, name)
    assert any(not (path / p / n).exists() for (_, p), n in cdc_logs.items())


def test_cdc_clustering_and_log_compaction_commit_operation_types_cdc_readers_skip(tmp_path: Path) -> None:
    """``HoodieCDCExtractor`` keeps only ``WriteOperationType.yieldChanges`` commits: CLUSTER and
    LOG_COMPACT are skipped, so these services need no CDC log."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(1, 12, 2), 3))
    cdc(path)
    options = ["--spark-master", "in-process", "--option", "hoodie.log.compaction.blocks.threshold=1"]
    assert main(["run", "logcompaction", str(path), *options]) == 0
    assert main(["run", "clustering", str(path), "--spark-master", "in-process"]) == 0
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    operations = {
        i.action.value: table.commit_metadata(i).operation_type
        for i in timeline.completed()
        if i.action in (Action.REPLACE_COMMIT, Action.DELTA_COMMIT)
        and table.commit_metadata(i).operation_type in ("CLUSTER", "LOG_COMPACT")
    }
    assert operations == {"replacecommit": "CLUSTER", "deltacommit": "LOG_COMPACT"}


def test_a_non_bucket_verdict_is_kept_until_its_witness_file_group_is_replaced(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    table = HoodieTable.open(str(path))
    first = table.shape()
    witness = first.not_bucket_witness
    assert witness is not None and not first.has(Shape.SIMPLE_BUCKET)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(3), 7))
    table.reload()
    second = table.shape()
    assert second is not first and second.not_bucket_witness == witness
    HoodieWriter(HoodieTable.open(str(path))).write(rows(range(3), 8), WriteOperation.INSERT_OVERWRITE_TABLE)
    table.reload()
    third = table.shape()
    assert third.not_bucket_witness is not None and third.not_bucket_witness != witness
    assert third.not_bucket_witness in {s.group_id for s in table.file_system_view().latest_file_slices()}


def test_the_matrix_names_every_service_and_write_operation() -> None:
    from hoodie.services.base import KNOWN_SERVICES
    from hoodie.shape.matrix import SERVICE_OPERATIONS

    assert set(SERVICE_OPERATIONS) == set(KNOWN_SERVICES)
    assert set(WRITE_OPERATIONS) == {o.value for o in WriteOperation}


class IndexCreatedMidRun(LocalRunner):
    """Runs the tasks, then (as Apache Hudi's ``CREATE INDEX`` could, meanwhile) registers an
    expression index on the table: a shape that refuses what is running."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    def run(self, fn: Any, tasks: Any, description: str) -> Any:
        out = super().run(fn, tasks, description)
        expression_index(self.path)
        return out


def test_the_commit_checks_the_shape_again(tmp_path: Path) -> None:
    """A compaction allowed when it started, on a table that gained a refused shape while it ran:
    its commit (under the lock) refuses it, and nothing completes."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    ctx = ServiceContext(HoodieTable.open(str(path)))
    compaction = service_named("compaction")
    scheduled = compaction.schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    with pytest.raises(UnsupportedShapeError, match="expression index table .* compaction is refused"):
        compaction.execute(ctx, scheduled.instant_time, IndexCreatedMidRun(path))
    found = HoodieTable.open(str(path)).reload().get(scheduled.instant_time, Action.COMPACTION)
    assert found is not None and found.is_inflight  # not completed; left for Hudi's writers


def test_a_write_checks_the_shape_again_when_it_commits(tmp_path: Path) -> None:
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)

    class Racing(HoodieWriter):
        def _complete(self, *args: Any, **kwargs: Any) -> Any:
            expression_index(path)  # lands after the write's own check, before its commit
            return super()._complete(*args, **kwargs)

    before = TableReader(HoodieTable.open(str(path))).snapshot().num_rows
    with pytest.raises(UnsupportedShapeError, match=r"expression index table .* write \(upsert\) is refused"):
        Racing(HoodieTable.open(str(path))).upsert(rows(range(40, 44), 5))
    table = HoodieTable.open(str(path))
    assert not table.reload().pending().writes()  # the failed write cleaned up after itself
    assert TableReader(table).snapshot().num_rows == before


def test_an_unmaintained_secondary_index_refuses_writes_only(
    table_copy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A secondary index Hudi built on a column hts keeps no index for (a decimal): writes, which
    must update it, are refused naming it; services, which keep secondary keys, are not."""
    path = table_copy("sample_table/mor/avro/v9_txns_simple_meta")
    defs = path / ".hoodie" / ".index_defs" / "index.json"
    defs.write_text(
        defs.read_text().replace('"sourceFields" : [ "txn_date" ]', '"sourceFields" : [ "amount" ]')
    )
    shape = HoodieTable.open(str(path)).shape()
    found = shape.feature(Shape.SECONDARY_INDEX)
    assert found is not None and "secondary_index_txn_date_idx in hoodie.table.metadata.partitions" in (
        found.evidence
    )
    assert shape.refusal("compaction") is None and shape.refusal("clustering") is None
    data = path.parent / "in.parquet"
    pq.write_table(TableReader(HoodieTable.open(str(path))).snapshot().slice(0, 1), data)
    before = table_hash(path)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) != 0
    err = capsys.readouterr().err
    assert "unmaintained secondary index table" in err and "is on 'amount'" in err, err
    assert "write (upsert) is refused" in err
    assert table_hash(path) == before


def test_a_secondary_indexed_table_refuses_overwrites_and_partition_ttl(
    table_copy: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi's metadata writer refuses insert overwrites and delete_partition on a table with a secondary
    index (``HoodieBackedTableMetadataWriter.updateSecondaryIndexIfPresent``): hts refuses them before
    writing, naming the index; an upsert (which updates the index) still runs."""
    path = table_copy("sample_table/mor/avro/v9_txns_simple_meta")
    shape = HoodieTable.open(str(path)).shape()
    found = shape.feature(Shape.SECONDARY_INDEXED)
    named = "secondary_index_merchant_idx, secondary_index_txn_date_idx in hoodie.table.metadata.partitions"
    assert found is not None and named in found.evidence
    assert not shape.has(Shape.SECONDARY_INDEX)  # hts maintains this one
    data = path.parent / "in.parquet"
    pq.write_table(TableReader(HoodieTable.open(str(path))).snapshot().slice(0, 1), data)
    for argv, what in (
        (
            ["write", str(path), "--input", str(data), "--operation", "insert_overwrite"],
            "write (insert_overwrite)",
        ),
        (
            ["write", str(path), "--input", str(data), "--operation", "insert_overwrite_table"],
            "write (insert_overwrite_table)",
        ),
        (["run", "ttl", str(path), "--option", "hoodie.partition.ttl.strategy.days.retain=1"], "ttl"),
    ):
        before = table_hash(path)
        assert main(argv) != 0, argv
        err = capsys.readouterr().err
        assert f"secondary-indexed table ({named}" in err, err
        assert f"{what} is refused" in err and "Nothing was written" in err, err
        assert table_hash(path) == before
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) == 0


class ListingFileIO(LocalFileIO):
    """The local filesystem, recording every folder listed."""

    def __init__(self) -> None:
        super().__init__()
        self.listed: list[str] = []

    def list_dir(self, path: str) -> Any:
        self.listed.append(path)
        return super().list_dir(path)


def test_a_bucket_verdict_is_rechecked_from_the_new_writes_only(tmp_path: Path) -> None:
    """A bucket table's verdict is carried over a new write by reading its write stats: no partition
    is listed again; a file group without the bucket form (added as a writer without the bucket
    index would) ends it."""
    path = tmp_path / "t"
    path.mkdir()
    bucket_table(BUCKET_OPTIONS, TableVersion.EIGHT)(path)
    fileio = ListingFileIO()
    table = HoodieTable(fileio, str(path), HoodieTable.open(str(path)).config)
    first = table.shape()
    assert first.has(Shape.SIMPLE_BUCKET) and first.bucket is not None
    partitions = {str(path / f"p{i}") for i in range(8)}
    assert partitions & set(fileio.listed)  # the first verdict lists the file groups

    HoodieWriter(HoodieTable.open(str(path)), write_props=BUCKET_OPTIONS).upsert(
        rows(range(40, 46), 5, partitions=6)
    )
    table.reload()
    fileio.listed.clear()
    second = table.shape()
    assert second is not first and second.has(Shape.SIMPLE_BUCKET) and second.bucket is not None
    assert second.bucket.covered > first.bucket.covered
    assert not partitions & set(fileio.listed)

    result = HoodieWriter(HoodieTable.open(str(path)), write_props=BUCKET_OPTIONS).upsert(
        rows([7], 6, partitions=8)
    )
    (stat,) = [s for s in result.write_stats if s.partition_path == "p7"]
    assert stat.file_id is not None
    old, new = stat.file_id, "abcdefgh" + stat.file_id[8:]
    for p in sorted(path.rglob("*")):
        if p.is_file() and ".hoodie" in p.relative_to(path).parts:
            p.write_bytes(p.read_bytes().replace(old.encode(), new.encode()))
        elif p.is_file() and old in p.name:
            p.rename(p.with_name(p.name.replace(old, new)))
    table.reload()
    fileio.listed.clear()
    third = table.shape()
    assert not third.has(Shape.SIMPLE_BUCKET) and third.refusal("clustering") is None
    assert third.not_bucket_witness == FileGroupId("p7", new)
    assert not partitions & set(fileio.listed)


def _log_compaction_shape(path: Path, shape: Shape) -> str:
    """Build ``shape`` at ``path`` as Hudi's writers leave it; returns the evidence expected."""
    if shape is Shape.CUSTOM_MERGE:  # a v6 payload class Hudi 1.x infers CUSTOM for
        base_table(path)
        payload = "org.apache.hudi.common.model.PartialUpdateAvroPayload"
        _write_props(path, {"hoodie.compaction.payload.class": payload})
        return payload
    options: dict[str, Any] = {"metadata_table": False, "table_version": TableVersion.NINE}
    if shape is Shape.MULTI_FIELD_ORDERING:
        options["ordering_fields"] = ["ts", "v"]
    else:
        options["ordering_fields"] = ["ts"]
        options["extra_properties"] = {"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}
    from hoodie.write.create import create_table
    from tests.tables import SCHEMA

    table = create_table(
        str(path),
        table_name="t",
        table_type=TableType.MERGE_ON_READ,
        schema=SCHEMA,
        record_key_fields=["id"],
        partition_fields=["p"],
        **options,
    )
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    writer.upsert(rows(range(0, 12, 2), 2))
    writer.upsert(rows(range(0, 12, 3), 3))
    if shape is Shape.MULTI_FIELD_ORDERING:
        return "hoodie.table.ordering.fields=ts,v"
    return "hoodie.table.partial.update.mode=IGNORE_DEFAULTS"


@pytest.mark.parametrize(
    "shape",
    [Shape.CUSTOM_MERGE, Shape.MULTI_FIELD_ORDERING, Shape.PARTIAL_UPDATES],
    ids=lambda s: s.name.lower(),
)
def test_log_compaction_is_refused_on_merges_it_does_not_implement(
    shape: Shape, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Log compaction merges with the vectorized commit-time / event-time merge of full records
    over the meta fields; these shapes need more, so it is refused naming the shape, every file
    unchanged. The table's other services are not refused."""
    path = tmp_path / "t"
    evidence = _log_compaction_shape(path, shape)
    found = HoodieTable.open(str(path)).shape().feature(shape)
    assert found is not None and evidence in found.evidence, found
    assert HoodieTable.open(str(path)).shape().refusal("compaction") is None
    before = table_hash(path)
    argv = ["run", "logcompaction", str(path), "--spark-master", "in-process"]
    assert main([*argv, "--option", "hoodie.log.compaction.blocks.threshold=1"]) != 0
    err = capsys.readouterr().err
    assert shape.value in err and evidence in err and "logcompaction is refused" in err, err
    assert table_hash(path) == before


def _rows_read(data: pa.Table) -> dict[str, tuple[int, str, str]]:
    return {r["id"]: (r["ts"], r["v"], r["p"]) for r in data.to_pylist()}


def test_a_partial_update_table_reads_and_is_serviced_as_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The partial-update case, column by column: IS_PARTIAL blocks keep the columns they lack and
    FILL_UNAVAILABLE keeps the stored value where the marker came (in file groups without a partial
    block, see :func:`partial_update_model`), in reads, after compaction, and through later writes
    and every other service (log compaction refused, nothing written)."""
    path = tmp_path / "t"
    path.mkdir()
    partial_updates(path)
    model = {k: (ts, v, f"p{int(k[1:]) % 3}") for k, (ts, v) in partial_update_model().items()}

    def check(hudi_rs: bool) -> None:
        assert _rows_read(TableReader(HoodieTable.open(str(path))).snapshot()) == model
        if hudi_rs:  # hudi-rs reads complete records only: after compaction every slice is a base file
            built = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option(
                "hoodie.metadata.enable", "false"
            )
            assert _rows_read(pa.Table.from_batches(built.build().read())) == model

    check(hudi_rs=False)
    run = ["run", "compaction", str(path), "--spark-master", "in-process"]
    assert main(run) == 0, capsys.readouterr().err
    check(hudi_rs=True)
    # a later upsert with the marker on k1 (kept: partial1) and new values elsewhere
    batch = rows([1, 5, 7], 4)
    v = pa.array([UNAVAILABLE, "v5@4", "v7@4"])
    data = tmp_path / "upsert.parquet"
    pq.write_table(batch.set_column(batch.schema.get_field_index("v"), "v", v), data)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) == 0
    model.update({"k1": (4, "partial1", "p1"), "k5": (4, "v5@4", "p2"), "k7": (4, "v7@4", "p1")})
    check(hudi_rs=False)
    before = table_hash(path)
    assert main(["run", "logcompaction", str(path), "--spark-master", "in-process"]) != 0
    err = capsys.readouterr().err
    assert "partial-update mode" in err and "refused" in err and table_hash(path) == before
    for service in ("clustering", "compaction", "clean", "archival"):
        assert main(["run", service, str(path), "--spark-master", "in-process"]) == 0, capsys.readouterr().err
        check(hudi_rs=service != "clustering")


def test_is_partial_blocks_without_a_partial_update_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Spark SQL's partial MERGE INTO leaves IS_PARTIAL blocks in a table without any partial-update
    property: reads and compaction keep the columns a block lacks (KEEP_VALUES); log compaction is
    refused with the shape message naming the block, nothing written."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    before_logs = set(path.rglob(".*.log.*"))
    partial = rows([1, 3], 1)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        partial.set_column(partial.schema.get_field_index("v"), "v", pa.array(["partial1", "partial3"]))
    )
    for log in set(path.rglob(".*.log.*")) - before_logs:
        _partial_block(log, ("ts", "v"))
    ts = {i: 2 if i % 2 == 0 else 1 for i in range(12)}  # base_table's inserts and upserts
    model = {f"k{i}": (t, f"v{i}@{t}", f"p{i % 3}") for i, t in ts.items()}
    model.update({"k1": (1, "partial1", "p1"), "k3": (1, "partial3", "p0")})
    assert _rows_read(TableReader(HoodieTable.open(str(path))).snapshot()) == model
    before = table_hash(path)
    assert main(["run", "logcompaction", str(path), "--spark-master", "in-process"]) != 0
    err = capsys.readouterr().err
    assert "partial-update log blocks table" in err and "IS_PARTIAL=true" in err and "refused" in err, err
    assert table_hash(path) == before
    assert main(["run", "compaction", str(path), "--spark-master", "in-process"]) == 0
    assert _rows_read(TableReader(HoodieTable.open(str(path))).snapshot()) == model
    built = HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false")
    assert _rows_read(pa.Table.from_batches(built.build().read())) == model


PAYLOAD_MERGE = {
    "hoodie.record.merge.mode": "CUSTOM",
    "hoodie.record.merge.strategy.id": PAYLOAD_BASED_STRATEGY_ID,
    "hoodie.compaction.payload.class": PARTIAL_UPDATE_PAYLOAD,
}


def _with_partial_block(path: Path) -> None:
    """A partial update of ``v`` on k1 and k3, written as Spark SQL's MERGE INTO writes it."""
    before_logs = set(path.rglob(".*.log.*"))
    partial = rows([1, 3], 1)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        partial.set_column(partial.schema.get_field_index("v"), "v", pa.array(["partial1", "partial3"]))
    )
    for log in set(path.rglob(".*.log.*")) - before_logs:
        _partial_block(log, ("ts", "v"))


def test_is_partial_blocks_under_a_merger_without_partial_merge_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hudi's reader fails on an IS_PARTIAL block when the table's merger has no partialMerge (the
    payload-based merger): reads are refused naming the block, and compaction, clustering and indexing
    are refused when they schedule (the headers of the slices' logs are read), nothing written."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    _write_props(path, PAYLOAD_MERGE)
    _with_partial_block(path)
    shape = Shape.UNMERGED_PARTIAL_BLOCKS.value
    with pytest.raises(UnsupportedShapeError, match=f"{shape} table \\(IS_PARTIAL=true in .*read is refused"):
        TableReader(HoodieTable.open(str(path))).snapshot()
    for service in ("compaction", "clustering", "logcompaction"):
        before = table_hash(path)
        assert main(["run", service, str(path), "--spark-master", "in-process"]) != 0
        err = capsys.readouterr().err
        # log compaction is refused on the table's CUSTOM merge mode already, before any block is read
        named = (
            "custom merge mode table" if service == "logcompaction" else f"{shape} table (IS_PARTIAL=true in"
        )
        assert named in err and f"{service} is refused" in err and table_hash(path) == before, err
        if service != "logcompaction":
            assert "PayloadRecordMerger" in err, err
    before = table_hash(path)
    indexing = ["run", "indexing", str(path), "--option", "hoodie.metadata.record.index.enable=true"]
    assert main(indexing) != 0
    err = capsys.readouterr().err
    assert f"{shape} table (IS_PARTIAL=true in" in err and "indexing is refused" in err, err
    assert table_hash(path) == before


def test_a_compaction_planned_before_the_merger_changed_is_refused_when_it_runs(tmp_path: Path) -> None:
    """A plan written elsewhere (Hudi's scheduler, or before the merge properties changed) is checked
    again when it runs, before any base file is written."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    _with_partial_block(path)
    ctx = ServiceContext(HoodieTable.open(str(path)), {"hoodie.compact.inline.max.delta.commits": "1"})
    scheduled = service_named("compaction").schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    _write_props(path, PAYLOAD_MERGE)
    before = table_hash(path)
    table = HoodieTable.open(str(path))
    with pytest.raises(UnsupportedShapeError, match="IS_PARTIAL=true in .*compaction is refused"):
        service_named("compaction").execute(ServiceContext(table, {}), scheduled.instant_time, LocalRunner())
    assert table_hash(path) == before


class CountingFileIO(LocalFileIO):
    """The local filesystem, counting the bytes read from log files."""

    def __init__(self) -> None:
        super().__init__()
        self.log_bytes = 0

    def read_bytes(self, path: str) -> bytes:
        data = super().read_bytes(path)
        self.log_bytes += len(data) if ".log." in path else 0
        return data

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        data = super().read_range(path, offset, length)
        self.log_bytes += len(data) if ".log." in path else 0
        return data


def test_the_schedule_time_check_reads_log_block_headers_not_their_records(tmp_path: Path) -> None:
    """The planned slices' logs are read up to each block's header: a 3 MiB partial block costs at
    most the 1 MiB prefix a header is looked for in, not its records."""
    from hoodie.services.compaction_plan import compaction_operation, slice_of
    from hoodie.services.partial_check import check_planned_slices

    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    _write_props(path, PAYLOAD_MERGE)
    before_logs = set(path.rglob(".*.log.*"))
    big = rows([1], 1)
    HoodieWriter(HoodieTable.open(str(path))).upsert(
        big.set_column(big.schema.get_field_index("v"), "v", pa.array(["x" * (3 << 20)]))
    )
    (log,) = set(path.rglob(".*.log.*")) - before_logs
    _partial_block(log, ("ts", "v"))
    assert log.stat().st_size > 3 << 20
    fileio = CountingFileIO()
    table = HoodieTable(fileio, str(path), HoodieTable.open(str(path)).config)
    timeline = table.reload()
    slices = [slice_of(compaction_operation(s)) for s in table.file_system_view().latest_file_slices()]
    with pytest.raises(UnsupportedShapeError, match=f"IS_PARTIAL=true in .*{log.name}"):
        check_planned_slices(table, timeline, "compaction", slices)
    assert 0 < fileio.log_bytes <= (1 << 20) + 64 * 1024, fileio.log_bytes


def _add_operation_column(parquet: Path, op: str) -> None:
    """Rewrite a base file as Flink's compaction writes it in changelog mode: ``_hoodie_operation``
    right after ``_hoodie_file_name`` (``HoodieAvroUtils.addMetadataFields(schema, true)``)."""
    data = pq.read_table(parquet)
    at = data.schema.get_field_index("_hoodie_file_name") + 1
    pq.write_table(data.add_column(at, "_hoodie_operation", pa.array([op] * data.num_rows)), parquet)


def test_the_operation_field_is_seen_in_the_base_files_of_the_latest_commit_with_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``TableSchemaResolver.hasOperationField``: the latest completed commit that wrote files
    (here inserts into base files) is looked at, and a clean after it does not make it look again;
    clustering is refused naming the base file, and nothing is written; clean is handled."""
    path = tmp_path / "t"
    HoodieWriter(new_table(path, version=TableVersion.EIGHT, metadata_table=False)).insert(rows(range(8), 1))
    for parquet in path.rglob("*.parquet"):
        _add_operation_column(parquet, "I")
    table = HoodieTable.open(str(path))
    shape = table.shape()
    found = shape.feature(Shape.OPERATION_FIELD)
    assert found is not None and ".parquet" in found.evidence, shape.features
    last = table.timeline.completed().writes().last()
    assert last is not None and last.requested_time in found.evidence
    before = table_hash(path)
    assert main(["run", "clustering", str(path), "--spark-master", "in-process"]) != 0
    err = capsys.readouterr().err
    assert Shape.OPERATION_FIELD.value in err and found.evidence in err and "clustering is refused" in err
    assert table_hash(path) == before
    # A commit that wrote no data file leaves the verdict as it was, without reading a file again.
    assert main(["run", "clean", str(path), "--spark-master", "in-process"]) == 0
    table.reload()
    assert table.shape().operation_probe is shape.operation_probe


def test_the_operation_field_in_a_commit_schema_and_its_absence(tmp_path: Path) -> None:
    """A commit whose ``schema`` holds ``_hoodie_operation`` names the shape too; a table whose
    latest data files lack the column is not this shape (older blocks meet the log scan's refusal)."""
    path = base_table(tmp_path / "t")
    table = HoodieTable.open(str(path))
    assert not table.shape().has(Shape.OPERATION_FIELD)
    last = table.timeline.completed().writes().last()
    assert last is not None
    completed = next((path / ".hoodie").glob(f"{last.requested_time}.deltacommit"))
    meta = json.loads(completed.read_text())
    schema = json.loads(meta["extraMetadata"]["schema"])
    schema["fields"].insert(0, {"name": "_hoodie_operation", "type": ["null", "string"], "default": None})
    meta["extraMetadata"]["schema"] = json.dumps(schema)
    completed.write_text(json.dumps(meta))
    shape = HoodieTable.open(str(path)).shape()
    with pytest.raises(
        UnsupportedShapeError, match=f"_hoodie_operation in the schema of commit {last.requested_time}"
    ):
        shape.check("write", "upsert")
    shape.check("clean")
    shape.check("archival")


def test_a_write_told_to_add_the_operation_field_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hoodie.allow.operation.metadata.field=true`` given to a write (Hudi's writers would add the
    column; hts's would not) is refused naming the option, on an existing table and with ``--create``."""
    path = base_table(tmp_path / "t")
    data = tmp_path / "in.parquet"
    pq.write_table(rows(range(4), 3), data)
    option = ["--option", "hoodie.allow.operation.metadata.field=true"]
    before = table_hash(path)
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert", *option]) != 0
    err = capsys.readouterr().err
    assert Shape.OPERATION_FIELD.value in err and "hoodie.allow.operation.metadata.field=true" in err
    assert table_hash(path) == before
    created = tmp_path / "new"
    argv = ["write", str(created), "--input", str(data), "--operation", "insert", "--create"]
    assert main([*argv, "--record-key", "id", *option]) != 0
    assert Shape.OPERATION_FIELD.value in capsys.readouterr().err
    assert not created.exists()
    assert main(["write", str(path), "--input", str(data), "--operation", "upsert"]) == 0  # without it


def test_a_large_log_file_is_looked_at_only_up_to_the_header_its_commit_wrote(tmp_path: Path) -> None:
    """A log file over SMALL_LOG is not read whole for the shape: only the block the latest commit
    wrote (its write stat's offset), up to the header, which names ``_hoodie_operation``."""
    from hoodie.io import usage
    from hoodie.shape.operation_field import SMALL_LOG

    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, version=TableVersion.EIGHT, metadata_table=False))
    writer.insert(rows(range(4), 1, partitions=1))
    big = rows(range(4), 2, partitions=1)
    writer.upsert(big.set_column(big.schema.get_field_index("v"), "v", pa.array(["x" * SMALL_LOG] * 4)))
    (log,) = list(path.rglob(".*.log.*"))
    _operation_block(log)
    assert log.stat().st_size > SMALL_LOG
    with usage.measure() as used:
        shape = HoodieTable.open(str(path)).shape()
    found = shape.feature(Shape.OPERATION_FIELD)
    assert found is not None and f"{log.name}@0" in found.evidence, shape.features
    assert 0 < used.read_from[str(log)] <= SMALL_LOG < log.stat().st_size
