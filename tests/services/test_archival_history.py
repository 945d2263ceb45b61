"""Archival over several runs and through crashes: the LSM history merges its levels; a crashed
archival reads the same and the next run finishes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoodie.config.table_config import TableType, TableVersion
from hoodie.services.archival import execute_archival
from hoodie.timeline.history import latest_manifest
from hoodie.write.writer import HoodieWriter
from tests.services.archival_support import (
    OPTIONS,
    Maker,
    ReaderState,
    archival_context,
    archival_rows,
    archived_timeline,
    commit_times,
    open_table,
    run_archival,
)

REPO = Path(__file__).resolve().parents[2]


# -- the LSM history over several runs; crash safety ---------------------------------------------


def test_repeated_archival_merges_history_levels(table_of: Maker) -> None:
    path = table_of(TableType.MERGE_ON_READ, TableVersion.EIGHT)
    first = run_archival(path, **{"hoodie.timeline.compaction.batch.size": "2"})
    writer = HoodieWriter(open_table(path))
    for n in range(6):
        writer.upsert(archival_rows([n], 100 + n))
    commits = commit_times(path)
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0], keep[-1]])
    second = run_archival(path, **{"hoodie.timeline.compaction.batch.size": "2"})
    assert second == commits[:6]
    table = open_table(path)
    _, manifest = latest_manifest(table.fileio, table.paths)
    assert manifest.file_names() == [f"{first[0]}_{second[-1]}_1.parquet"]
    assert archived_timeline(path).requested_times() == first + second
    assert ReaderState.of(path, [keep[0], keep[-1]]) == before


def _crash(path: Path, point: str) -> None:
    script = (
        "import sys\n"
        "from hoodie.services.archival import execute_archival\n"
        "from hoodie.services.base import ServiceContext\n"
        "from hoodie.table import HoodieTable\n"
        f"execute_archival(ServiceContext(HoodieTable.open(sys.argv[1]), options={OPTIONS!r}))\n"
    )
    env = {**os.environ, "HTS_CRASH_AT": point, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script, str(path)], env=env, cwd=REPO, check=False)
    assert done.returncode == 97


@pytest.mark.parametrize(
    ("version", "point"),
    [
        (TableVersion.EIGHT, "archival.after_archive_write"),
        (TableVersion.EIGHT, "archival.mid_delete"),
        (TableVersion.NINE, "archival.before_history_compaction"),
        (TableVersion.SIX, "archival.after_archive_write"),
        (TableVersion.SIX, "archival.mid_delete"),
    ],
)
def test_a_crashed_archival_reads_the_same_and_the_next_run_finishes(
    table_of: Maker, version: TableVersion, point: str
) -> None:
    path = table_of(TableType.MERGE_ON_READ, version)
    commits = commit_times(path)
    keep = commits[-10:]
    before = ReaderState.of(path, [keep[0]])
    _crash(path, point)
    assert ReaderState.of(path, [keep[0]]) == before
    if point != "archival.before_history_compaction":
        execute_archival(archival_context(path))
    assert commit_times(path) == keep
    assert archived_timeline(path).requested_times() == commits[:-10]  # each archived instant once
    assert ReaderState.of(path, [keep[0]]) == before
