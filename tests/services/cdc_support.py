"""What the CDC tests share (``test_cdc*.py``): a CDC table, its state, the model of the changes
between two states, the CDC query, and the checks of ``cdcStats`` and of the metadata table's listing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hoodie.cdc.reader import read_cdc
from hoodie.config.table_config import TableType, TableVersion
from hoodie.metadata.table import MetadataTable
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from tests.tables import new_table

DATA = ("id", "ts", "v", "p")
Change = tuple[str, str, str | None, str | None]  # op, ts_ms, before, after (canonical JSON)


def cdc_table(path: Path, table_type: TableType, version: TableVersion, mode: str) -> HoodieTable:
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


def table_state(path: Path, columns: tuple[str, ...] = DATA) -> dict[str, dict[str, Any]]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return {r["id"]: {k: r[k] for k in columns} for r in data.to_pylist()}


def read_optimized_state(path: Path) -> dict[str, dict[str, Any]]:
    data = TableReader(HoodieTable.open(str(path))).read_optimized()
    return {r["id"]: {k: r[k] for k in DATA} for r in data.to_pylist()}


def row_image(row: dict[str, Any] | None) -> str | None:
    return None if row is None else json.dumps(row, sort_keys=True)


def changes_model(
    before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]], ts: str
) -> list[Change]:
    """The changes that turn one table state into the next, by key."""
    out: list[Change] = []
    for key in before.keys() | after.keys():
        b, a = before.get(key), after.get(key)
        if b == a:
            continue
        op = "i" if b is None else "d" if a is None else "u"
        out.append((op, ts, row_image(b), row_image(a)))
    return sorted(out, key=str)


def canonical_json(text: str | None) -> str | None:
    """A CDC image as canonical JSON (Hudi prints a missing Avro image as the text ``null``)."""
    if text is None:
        return None
    value = json.loads(text)
    return None if value is None else json.dumps(value, sort_keys=True)


def cdc_query(path: Path, begin: str, end: str, *, from_compaction: bool = False) -> list[Change]:
    out = read_cdc(HoodieTable.open(str(path)), begin, end, from_compaction=from_compaction)
    assert out.schema.names == ["op", "ts_ms", "before", "after"]
    return sorted(
        (
            (r["op"], r["ts_ms"], canonical_json(r["before"]), canonical_json(r["after"]))
            for r in out.to_pylist()
        ),
        key=str,
    )


def cdc_stats_match_files(path: Path, instant: str) -> int:
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


def metadata_lists_every_file(path: Path) -> None:
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


def completion_time(path: Path, instant: str) -> str:
    """Where Flink's range puts ``instant``: its completion time on a layout-2 timeline."""
    table = HoodieTable.open(str(path))
    found = next(i for i in table.reload() if i.requested_time == instant)
    return found.completion_time if table.paths.layout >= 2 and found.completion_time else instant


def compact(path: Path) -> str:
    ctx = ServiceContext(HoodieTable.open(str(path)))
    scheduled = schedule_compaction(ctx, CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    execute_compaction(ctx, scheduled.instant_time, LocalRunner())
    return scheduled.instant_time
