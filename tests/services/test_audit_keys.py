"""Audit of keys, partitions and types on tables laid out as Apache Hudi's writers lay them out: every
service either does what Hudi does (results equal a model of Hudi's semantics and hudi-rs's read) or
refuses naming the shape, every file unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.file_group.log_block import BlockType, encode_block
from hoodie.file_group.log_reader import read_blocks
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import decode_data_block
from hoodie.schema.avro_arrow import avro_to_arrow_schema, encode_avro_block_content
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.conftest import hudi_rs_rows
from tests.services.test_shapes import _write_props, table_hash
from tests.tables import new_table, rows

META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)


def _null_meta(table: pa.Table) -> pa.Table:
    for name in META_FIELDS:
        i = table.schema.get_field_index(name)
        table = table.set_column(
            i, table.schema.field(i), pa.nulls(table.num_rows, table.schema.field(i).type)
        )
    return table


def to_virtual_keys(path: Path) -> None:
    """Lay a table out as Hudi's writers do with ``hoodie.populate.meta.fields=false``: the property
    set (HoodieTableConfig.POPULATE_META_FIELDS), the meta columns in the files' schemas but null
    (HoodieAvroParquetWriter / HoodieSparkParquetWriter and HoodieAppendHandle populate them only with
    populateMetaFields); delete blocks keep the keys the writer's key generator made."""
    _write_props(path, {"hoodie.populate.meta.fields": "false"})
    for base in path.rglob("*.parquet"):
        if ".hoodie" in base.relative_to(path).parts:
            continue
        data = pq.read_table(base)
        pq.write_table(_null_meta(data).replace_schema_metadata(data.schema.metadata), base)
    for log in path.rglob(".*.log.*"):
        if ".hoodie" in log.relative_to(path).parts:
            continue
        out = []
        for block in read_blocks(log.read_bytes(), log.name):
            content = block.content
            if block.block_type is BlockType.AVRO_DATA:
                assert block.schema is not None
                schema = json.loads(block.schema)
                data = _null_meta(decode_data_block(block, avro_to_arrow_schema(schema)))
                content = encode_avro_block_content(data, schema)
            out.append(encode_block(block.block_type, block.header, content, block.footer))
        log.write_bytes(b"".join(out))


def _model_and_table(path: Path, table_type: TableType, record_key_fields: list[str]) -> dict[str, int]:
    """Inserts k0..k11, upserts the even ids, deletes k1 and k3 (MERGE_ON_READ: log files with data
    and delete blocks), then the virtual-keys layout. Returns id -> ts the table must read."""
    table = new_table(path, table_type=table_type, version=TableVersion.EIGHT, metadata_table=False)
    if record_key_fields != ["id"]:
        keys = {
            "hoodie.table.recordkey.fields": ",".join(record_key_fields),
            "hoodie.table.keygenerator.type": "COMPLEX",
        }
        _write_props(path, keys)
        table = HoodieTable.open(str(path))
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows(range(0, 12, 2), 2))
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.delete(rows([1, 3], 3))
    to_virtual_keys(path)
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
