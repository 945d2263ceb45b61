"""Small tables for tests, keyed by ``id``, partitioned by ``p``, ordered by ``ts``, and ways to
break work on them.

``rows(ids, ts)`` gives each id a value that names its ordering value, so a read shows which
write won; ``new_table`` creates the table the rows fit. ``KilledWriter`` dies before completing
its write; ``hts`` runs the CLI in a subprocess, optionally killed at a crash point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from hoodie.config.table_config import TableType, TableVersion
from hoodie.services.base import CRASH_ENV
from hoodie.table import HoodieTable
from hoodie.write.create import create_table
from hoodie.write.writer import HoodieWriter

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string()), ("p", pa.string())])


def rows(
    ids: Iterable[int], ts: int, *, partitions: int = 3, schema: pa.Schema = SCHEMA, **extra: Any
) -> pa.Table:
    """Records ``k<i>`` in partition ``p<i % partitions>`` with ordering value ``ts``; ``extra``
    sets further columns of ``schema`` to one value for all."""
    return pa.Table.from_pylist(
        [{"id": f"k{i}", "ts": ts, "v": f"v{i}@{ts}", "p": f"p{i % partitions}", **extra} for i in ids],
        schema=schema,
    )


def new_table(
    path: Path | str,
    *,
    table_type: TableType = TableType.MERGE_ON_READ,
    version: TableVersion = TableVersion.EIGHT,
    schema: pa.Schema = SCHEMA,
    **options: Any,
) -> HoodieTable:
    """An empty table at ``path`` for rows of ``schema``; ``options`` go to ``create_table``."""
    return create_table(
        str(path),
        table_name="t",
        table_type=table_type,
        schema=schema,
        record_key_fields=["id"],
        partition_fields=["p"],
        ordering_fields=["ts"],
        table_version=version,
        **options,
    )


def table_with_requested_compaction(path: Path) -> str:
    """A MERGE_ON_READ table of inserts then updates, with a compaction requested: its instant time."""
    from hoodie.services.base import ServiceContext
    from hoodie.services.compaction import CompactionPolicy, schedule_compaction

    writer = HoodieWriter(new_table(path))
    writer.insert(rows(range(20), 1))
    writer.upsert(rows(range(0, 20, 2), 2))
    scheduled = schedule_compaction(ServiceContext(HoodieTable.open(str(path))), CompactionPolicy())
    assert scheduled is not None and scheduled.instant_time is not None
    return scheduled.instant_time


def define_secondary_index(path: Path, name: str, column: str, *, version: str = "V2") -> HoodieTable:
    """Register secondary index ``secondary_index_<name>`` on ``column`` in the table's index
    definitions, as Apache Hudi's ``CREATE INDEX`` does before building it (not built here)."""
    import json

    from hoodie.config.table_config import update_table_properties

    table = HoodieTable.open(str(path))
    defs_dir = path / ".hoodie" / ".index_defs"
    defs_dir.mkdir(exist_ok=True)
    defs_file = defs_dir / "index.json"
    defs = json.loads(defs_file.read_text()) if defs_file.exists() else {"indexDefinitions": {}}
    full = f"secondary_index_{name}"
    defs["indexDefinitions"][full] = {
        "indexName": full,
        "indexType": "secondary_index",
        "indexFunction": "identity",
        "sourceFields": [column],
        "indexOptions": {},
        "version": version,
    }
    defs_file.write_text(json.dumps(defs, indent=2))
    update_table_properties(
        table.fileio, table.paths.meta, {"hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json"}
    )
    return HoodieTable.open(str(path))


def snapshot(path: Path | str, *, drop: tuple[str, ...] = ("_hoodie_file_name",)) -> list[str]:
    """Our reader's snapshot of the table at ``path``, every column but ``drop``, as sorted strings."""
    from hoodie.read.reader import TableReader

    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return sorted(str(r) for r in data.drop_columns([c for c in drop if c in data.column_names]).to_pylist())


def age_heartbeats(path: Path | str, seconds: float = 600) -> None:
    """Make every heartbeat file of the table (and its metadata table) ``seconds`` old, as the
    heartbeat of a process dead that long is: the next executor finds its attempts abandoned
    without the tests shortening the heartbeat of the live ones."""
    old = time.time() - seconds
    for beat in Path(path).rglob(".heartbeat/*"):
        os.utime(beat, (old, old))


def data_files(path: Path | str) -> set[str]:
    """Every file of the table outside ``.hoodie``, relative to its base path."""
    root = Path(path)
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and ".hoodie" not in p.parts}


class Killed(Exception):
    """Stands for the process dying: the write's files and pending instant stay behind."""


class KilledWriter(HoodieWriter):
    """A writer that dies right before completing: no clean-up, and its heartbeat stops."""

    def _complete(self, *args: Any, **kwargs: Any) -> Any:
        raise Killed

    def _abort(self, *args: Any, **kwargs: Any) -> None:
        return None


def hts(*args: str, crash_at: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``hts ARGS`` in a fresh interpreter; with ``crash_at`` it exits at that crash point."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    if crash_at:
        env[CRASH_ENV] = crash_at
    command = [sys.executable, "-m", "service.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout, check=False)


FOOTER_READ = 64 * 1024
"""The tail pyarrow reads to find a Parquet footer (parquet-cpp's default footer read size); the
column chunks it then reads may lie in it and are read again."""
COALESCE_HOLE = 8 * 1024
"""pyarrow's pre-buffering reads the gaps under this size between the ranges it fetches
(``CacheOptions.hole_size_limit``): the base reader fetches a row group's key column on its own,
then the other columns, whose coalesced range may span a key column chunk this small again."""
