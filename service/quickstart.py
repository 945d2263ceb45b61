"""``make run`` until the daemon lands: a MERGE_ON_READ table written, upserted and read back."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from hoodie.config.table_config import TableType
from hoodie.read.reader import TableReader
from hoodie.schema.meta_fields import COMMIT_TIME_METADATA_FIELD
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter

SCHEMA = pa.schema(
    [
        ("uuid", pa.string()),
        ("ts", pa.int64()),
        ("rider", pa.string()),
        ("driver", pa.string()),
        ("fare", pa.float64()),
        ("city", pa.string()),
    ]
)

TRIPS = [
    ("334e26e9-8355-45cc-97c6-c31daf0df330", 1695159649087, "rider-A", "driver-K", 19.10, "san_francisco"),
    ("e96c4396-3fad-413a-a942-4cb36106d721", 1695091554788, "rider-C", "driver-M", 27.70, "san_francisco"),
    ("9909a8b1-2d15-4d3d-8ec9-efc48c536a00", 1695046462179, "rider-D", "driver-L", 33.90, "san_francisco"),
    ("1dced545-862b-4ceb-8b43-d2a568f6616b", 1695332066204, "rider-E", "driver-O", 93.50, "san_francisco"),
    ("e3cf430c-889d-4015-bc98-59bdce1e530c", 1695516137016, "rider-F", "driver-P", 34.15, "sao_paulo"),
    ("7a84095f-737f-40bc-b62f-6b69664712d2", 1695376420876, "rider-G", "driver-Q", 43.40, "sao_paulo"),
    ("3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04", 1695173887231, "rider-I", "driver-S", 41.06, "chennai"),
    ("c8abbe79-8d89-47ea-b4ce-4d224bae5bfa", 1695115999911, "rider-J", "driver-T", 17.85, "chennai"),
]


def _rows(rows: Sequence[tuple[object, ...]]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)


def _show(title: str, table: pa.Table) -> None:
    print(f"\n{title} ({table.num_rows} rows)")
    cols = [COMMIT_TIME_METADATA_FIELD, "rider", "driver", "fare", "city"]
    for row in sorted(table.select(cols).to_pylist(), key=lambda r: r["rider"]):
        print("  " + "  ".join(f"{row[c]!s:<18}" if c != "fare" else f"{row[c]:>7.2f}" for c in cols))


def run_quickstart(folder: Path) -> None:
    path = folder / "trips"
    if path.exists():
        shutil.rmtree(path)
    print(f"Creating MERGE_ON_READ table (table version 8) at {path}")
    table = create_table(
        str(path),
        table_name="trips",
        table_type=TableType.MERGE_ON_READ,
        schema=SCHEMA,
        record_key_fields=["uuid"],
        partition_fields=["city"],
        ordering_fields=["ts"],
        hive_style_partitioning=True,
    )
    writer = HoodieWriter(table)
    first = writer.insert(_rows(TRIPS))
    print(f"insert   -> {first.instant.requested_time}: {first.num_inserts} records")
    later = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
    updates = [
        (u, later, r, d, 0.0 if r == "rider-A" else f * 1.1, c)
        for (u, _, r, d, f, c) in TRIPS
        if r in ("rider-A", "rider-G")
    ]
    second = writer.upsert(_rows(updates))
    print(f"upsert   -> {second.instant.requested_time}: {second.num_updates} records into log files")
    third = writer.delete(_rows([t for t in TRIPS if t[2] == "rider-F"]))
    print(f"delete   -> {third.instant.requested_time}: {third.num_deletes} record in a delete block")
    table = HoodieTable.open(str(path))
    reader = TableReader(table)
    _show("Snapshot read (base files merged with log files)", reader.snapshot())
    _show("Read-optimized read (base files only)", TableReader(table).read_optimized())
    _show(
        f"Time travel to {first.instant.requested_time}",
        TableReader(table).snapshot(first.instant.requested_time),
    )
    print("\nTimeline:")
    for instant in table.reload():
        print(
            f"  {instant.requested_time} -> {instant.completion_time}  "
            f"{instant.action.value:<12} {instant.state.name}"
        )
    print(f"\nRead it with hudi-rs, Spark or `hts read {path} --out out.parquet`.")
