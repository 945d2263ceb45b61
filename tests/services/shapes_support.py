"""The census's shapes as Hudi's writers leave them on storage, and the helpers the shape tests share
(``test_shapes*.py``): a base table, a hash of its files, file ids renamed, properties set.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from hoodie.config.table_config import TableVersion, update_table_properties
from hoodie.file_group.log_block import BlockType, HeaderKey, encode_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.index.bucket import bucket_id_str
from hoodie.io.fileio import LocalFileIO
from hoodie.read.slice_reader import decode_data_block
from hoodie.schema.avro_arrow import avro_to_arrow_schema, encode_avro_block_content
from hoodie.shape.matrix import Shape
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.tables import new_table, rows


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


def file_ids(path: Path) -> list[str]:
    table = HoodieTable.open(str(path))
    return sorted({s.file_id for s in table.file_system_view().latest_file_slices()})


def rename_file_ids(path: Path, new_id: Callable[[int, str], str]) -> list[str]:
    """Give every file group the id ``new_id(n, old)`` (same length) everywhere Hudi names it: data
    and log file names and the timeline's plans and commit metadata (table version 6: JSON)."""
    mapping = {old: new_id(n, old) for n, old in enumerate(file_ids(path))}
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


def bucket_file_id(n: int, old: str) -> str:
    return bucket_id_str(n) + old[8:]


def write_props(path: Path, updates: dict[str, str]) -> None:
    """Set keys in ``hoodie.properties`` without opening the table (it may refuse to open)."""
    update_table_properties(LocalFileIO(), str(path / ".hoodie"), updates)


# -- the census, as Hudi's writers leave each shape on storage -------------------------------------


def cdc(path: Path) -> None:  # HoodieTableConfig.CDC_ENABLED / CDC_SUPPLEMENTAL_LOGGING_MODE
    write_props(
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
    rename_file_ids(path, bucket_file_id)
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
    write_props(path, {"hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json"})


def metadata_table_of_version_6(path: Path) -> None:
    """A version-6 table whose properties list a built ``files`` partition (Hudi 0.14/0.15 with
    ``hoodie.metadata.enable``, its default on Spark)."""
    write_props(path, {"hoodie.table.metadata.partitions": "files"})


def with_metadata_table(extra_partition: str) -> Callable[[Path], None]:
    """The base table's writes on a version-8 table with a metadata table, whose properties then
    list ``extra_partition`` as built (as a later Hudi's indexer would leave a new partition kind)."""

    def build(path: Path) -> None:
        shutil.rmtree(path)
        writer = HoodieWriter(new_table(path, version=TableVersion.EIGHT))
        writer.insert(rows(range(12), 1))
        writer.upsert(rows(range(0, 12, 2), 2))
        built = HoodieTable.open(str(path)).config.metadata_partitions
        write_props(path, {"hoodie.table.metadata.partitions": ",".join([*built, extra_partition])})

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


def partial_block(log: Path, columns: tuple[str, ...]) -> None:
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
        partial_block(log, ("ts", "v"))


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


def operation_block(log: Path) -> None:
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
            operation_block(log)


def open_refused(updates: dict[str, str]) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        write_props(path, updates)

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
