"""Many small tables for the daemon and watch benchmarks, built once and copied.

The daemon and watch sections watch hundreds of tiny MERGE_ON_READ tables (create, a two-row
insert, and, where said, a one-row upsert, so a compaction can be requested). Writing each with
:class:`hoodie.write.writer.HoodieWriter` is set-up, not measurement, and on moto's S3 emulator it
costs about 200 requests and over a second a table. So one table (the template) is written by
HoodieWriter on local disk in each run, with the same calls, and the others are byte copies of it:
every file as written, except ``hoodie.properties`` (the table's and its metadata table's), which
names the copy (``hoodie.table.name``, the record name in ``hoodie.table.create.schema``) and so
carries that name's ``hoodie.table.checksum``. The schema in the commit metadata and the data files
keeps the template's record name (``t0000_record``): nothing the daemon watches depends on it.
Object-store fleets are uploaded with plain PUTs, every file and, as pyarrow's S3 filesystem leaves
them when HoodieWriter writes there, an empty ``<folder>/`` marker per folder; all before any
measured request is counted.

The template is written afresh in each run (never cached): its instants are as recent as a writer's
would be, which the daemon's idle/active watching reads.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64())])
PROPERTIES = "hoodie.properties"


def table_name(n: int) -> str:
    return f"t{n:04d}"


def write_template(path: Path, *, with_logs: bool, metadata_table: bool | None = None) -> Path:
    """The template table ``t0000`` at ``path``: create, insert two rows, optionally upsert one."""
    from hoodie.config.table_config import TableType
    from hoodie.write.create import create_table
    from hoodie.write.writer import HoodieWriter

    table = create_table(
        str(path),
        table_name=table_name(0),
        table_type=TableType.MERGE_ON_READ,
        schema=SCHEMA,
        record_key_fields=["id"],
        ordering_fields=["ts"],
        metadata_table=metadata_table,
    )
    writer = HoodieWriter(table)
    writer.insert(pa.table({"id": ["a", "b"], "ts": [1, 1]}, schema=SCHEMA))
    if with_logs:
        writer.upsert(pa.table({"id": ["a"], "ts": [2]}, schema=SCHEMA))
    return path


def _rename(template: Path, copy: Path, name: str) -> None:
    """Write the copy's ``hoodie.properties`` files: the template's, named ``name`` (checksum anew)."""
    from hoodie.config.table_config import TableKeys, create_table_properties, read_table_properties
    from hoodie.io.fileio import FileIO

    fileio, _ = FileIO.for_uri(str(template))
    old = table_name(0)
    for props_file in template.rglob(PROPERTIES):
        meta = props_file.parent
        props = read_table_properties(fileio, str(meta))
        props[TableKeys.NAME.key] = name + props[TableKeys.NAME.key][len(old) :]
        schema = props.get(TableKeys.CREATE_SCHEMA.key)
        if schema is not None:  # the Avro record's name and namespace, as create_table derives them
            props[TableKeys.CREATE_SCHEMA.key] = schema.replace(
                f'"{old}_record"', f'"{name}_record"'
            ).replace(f'"hoodie.{old}"', f'"hoodie.{name}"')
        props.pop(TableKeys.CHECKSUM.key, None)  # create_table_properties writes the new name's
        create_table_properties(fileio, str(copy / meta.relative_to(template)), props)


def copy_table(template: Path, dest: Path, n: int) -> Path:
    """Table ``n`` at ``dest``: the template's files, named :func:`table_name` ``(n)``."""
    if n == 0:
        shutil.copytree(template, dest, copy_function=shutil.copyfile)
        return dest
    shutil.copytree(template, dest, copy_function=shutil.copyfile, ignore=shutil.ignore_patterns(PROPERTIES))
    _rename(template, dest, table_name(n))
    return dest


def local_tables(
    root: Path, count: int, *, with_logs: bool, metadata_table: bool | None = None
) -> list[Path]:
    """``count`` tables ``root/t0000`` ... on local disk, copies of one written template."""
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="template-", dir=root.parent) as scratch:
        template = write_template(
            Path(scratch) / table_name(0), with_logs=with_logs, metadata_table=metadata_table
        )
        return [copy_table(template, root / table_name(n), n) for n in range(count)]


def upload(endpoint: Any, local: Path, prefix: str, threads: int = 8) -> int:
    """PUT every file under ``local`` to ``s3://<bucket>/<prefix>/<relative path>``, and an empty
    ``<relative path>/`` object per folder below ``local`` and ``<prefix>/`` (pyarrow's folder
    markers); the count."""
    paths = [local, *local.rglob("*")]
    s3 = endpoint.client("s3")

    def put(path: Path) -> None:
        rel = path.relative_to(local).as_posix()
        key = prefix if rel == "." else f"{prefix}/{rel}"
        if path.is_dir():
            s3.put_object(Bucket=endpoint.bucket, Key=f"{key}/", Body=b"")
        else:
            s3.put_object(Bucket=endpoint.bucket, Key=key, Body=path.read_bytes())

    try:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(put, paths))
    finally:
        s3.close()
    return len(paths)


def s3_tables(endpoint: Any, scratch: Path, prefix: str, count: int) -> list[str]:
    """``count`` MERGE_ON_READ tables with a base file and a log file (compactable), without a
    metadata table, at ``s3://<bucket>/<prefix>/t0000`` ...: built on local disk under ``scratch``
    and uploaded."""
    s3 = endpoint.client("s3")
    try:
        if endpoint.bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
            s3.create_bucket(Bucket=endpoint.bucket)
    finally:
        s3.close()
    local = scratch / f"s3-{prefix}-{os.getpid()}"
    shutil.rmtree(local, ignore_errors=True)
    try:
        # watching is measured, not metadata-table upkeep
        local_tables(local, count, with_logs=True, metadata_table=False)
        upload(endpoint, local, prefix)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return [f"s3://{endpoint.bucket}/{prefix}/{table_name(n)}" for n in range(count)]
