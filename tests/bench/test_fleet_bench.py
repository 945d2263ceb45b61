"""The daemon and watch benchmarks' tables: copies of one written table are tables of their own, and
uploaded ones leave on S3 the objects HoodieWriter leaves when it writes the table there itself."""

from __future__ import annotations

import re
from pathlib import Path

import hudi
import pyarrow as pa

from bench import fleet, watch


def _rows(path: str) -> list[dict[str, object]]:
    got = hudi.HudiTableBuilder.from_base_uri(path).build().read()
    return sorted(pa.Table.from_batches(got).select(["id", "ts"]).to_pylist(), key=lambda r: str(r["id"]))


def test_copies_are_named_tables_with_the_templates_rows(tmp_path: Path) -> None:
    from hoodie.config.table_config import TableKeys, read_table_properties, table_checksum
    from hoodie.io.fileio import FileIO
    from hoodie.table import HoodieTable

    paths = fleet.local_tables(tmp_path / "tables", 3, with_logs=True)
    assert [p.name for p in paths] == ["t0000", "t0001", "t0002"]
    fileio, _ = FileIO.for_uri(str(paths[2]))
    for meta, name in (
        (paths[2] / ".hoodie", "t0002"),
        (paths[2] / ".hoodie/metadata/.hoodie", "t0002_metadata"),
    ):
        props = read_table_properties(fileio, str(meta))  # checks the checksum
        assert props[TableKeys.NAME.key] == name
        assert props[TableKeys.CHECKSUM.key] == str(table_checksum(props))
    schema = read_table_properties(fileio, str(paths[2] / ".hoodie"))[TableKeys.CREATE_SCHEMA.key]
    assert '"t0002_record"' in schema and '"hoodie.t0002"' in schema
    assert HoodieTable.open(str(paths[2])).config.table_name == "t0002"
    assert _rows(str(paths[0])) == _rows(str(paths[2])) == [{"id": "a", "ts": 2}, {"id": "b", "ts": 1}]


def _shape(keys: list[str]) -> list[str]:
    """Object keys with file ids and instant times blanked (they differ from one write to the next)."""
    uuid = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    return sorted(re.sub(r"\d{17}", "<instant>", re.sub(uuid, "<file id>", k)) for k in keys)


def test_uploaded_tables_are_the_objects_a_writer_on_s3_leaves(tmp_path: Path) -> None:
    from hoodie.config.table_config import TableType
    from hoodie.table import HoodieTable
    from hoodie.write.create import create_table
    from hoodie.write.writer import HoodieWriter

    with watch.aws() as endpoint:
        uris = watch.make_tables(endpoint, tmp_path, "copied", 2)
        written = create_table(
            f"s3://{endpoint.bucket}/written/t0001",
            table_name="t0001",
            table_type=TableType.MERGE_ON_READ,
            schema=fleet.SCHEMA,
            record_key_fields=["id"],
            ordering_fields=["ts"],
            metadata_table=False,
            **endpoint.storage_options(),
        )
        writer = HoodieWriter(written)
        writer.insert(pa.table({"id": ["a", "b"], "ts": [1, 1]}, schema=fleet.SCHEMA))
        writer.upsert(pa.table({"id": ["a"], "ts": [2]}, schema=fleet.SCHEMA))
        s3 = endpoint.client("s3")
        try:

            def keys(prefix: str) -> list[str]:
                found = s3.list_objects_v2(Bucket=endpoint.bucket, Prefix=prefix)["Contents"]
                return [o["Key"][len(prefix) :] for o in found]

            assert _shape(keys("copied/t0001/")) == _shape(keys("written/t0001/"))
            assert "copied/" in [o["Key"] for o in s3.list_objects_v2(Bucket=endpoint.bucket)["Contents"]]
        finally:
            s3.close()
        table = HoodieTable.open(uris[1], **endpoint.storage_options())
        assert table.config.table_name == "t0001"
    assert not list(tmp_path.iterdir()), "the local build is removed after the upload"
