"""Crash safety: an execution killed at any step leaves a table that reads the same; the next
``execute`` rolls back the partial attempt and completes it; no orphan files remain.

The executor runs as ``hts execute`` in a subprocess that ``HTS_CRASH_AT`` kills (os._exit) at a
named point: after the instant went inflight, in the middle of writing a data file, after
writing a file, and right before completing. Heartbeats beat every 100 ms in these tests, so the
dead attempt counts as abandoned a moment later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hoodie.config.table_config import TableVersion
from hoodie.read.reader import TableReader
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import age_heartbeats, hts, new_table

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("p", pa.string())])


def _table(path: Path, version: TableVersion, **extra: Any) -> None:
    table = new_table(path, version=version, schema=SCHEMA, **extra)
    writer = HoodieWriter(table)
    writer.insert(
        pa.table(
            {"id": [f"k{i}" for i in range(40)], "ts": [1] * 40, "p": [f"p{i % 4}" for i in range(40)]},
            schema=SCHEMA,
        )
    )
    writer.upsert(
        pa.table(
            {
                "id": [f"k{i}" for i in range(0, 40, 3)],
                "ts": [2] * 14,
                "p": [f"p{i % 4}" for i in range(0, 40, 3)],
            },
            schema=SCHEMA,
        )
    )


def _data_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and ".hoodie" not in p.parts}


def _rows(path: Path) -> list[str]:
    data = TableReader(HoodieTable.open(str(path))).snapshot()
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
@pytest.mark.parametrize(
    "crash_at",
    [
        "compaction.after_inflight",
        "compaction.task_mid_write",
        "compaction.task_after_write",
        "compaction.before_complete",
    ],
)
def test_killed_compaction_recovers(tmp_path: Path, crash_at: str, version: TableVersion) -> None:
    path = tmp_path / "t"
    _table(path, version)
    before_rows = _rows(path)
    before_rs = hudi_rs_rows(path)
    before_files = _data_files(path)
    scheduled = hts("schedule", "compaction", str(path))
    assert scheduled.returncode == 0, scheduled.stderr
    ts = scheduled.stdout.split()[2]

    killed = hts("execute", "compaction", str(path), "--spark-master", "in-process", crash_at=crash_at)
    assert killed.returncode == 97, killed.stderr
    table = HoodieTable.open(str(path))
    instant = table.timeline.get(ts, Action.COMPACTION)
    assert instant is not None and not instant.is_completed
    # The dead attempt is invisible to readers.
    assert _rows(path) == before_rows
    assert hudi_rs_rows(path) == before_rs

    age_heartbeats(path)  # the dead attempt's heartbeat expires
    resumed = hts("execute", "compaction", str(path), "--spark-master", "in-process")
    assert resumed.returncode == 0, resumed.stderr
    assert f"completed compaction {ts}" in resumed.stdout

    table = HoodieTable.open(str(path))
    done = table.timeline.get(ts)
    assert done is not None and done.is_completed
    assert _rows(path) == before_rows
    assert hudi_rs_rows(path) == before_rs
    # No orphans: the only new data files are the ones the completed commit lists.
    written = {s.path for s in table.commit_metadata(done).write_stats()}
    assert _data_files(path) - before_files == written
    assert not (path / ".hoodie" / ".temp" / ts).exists()


def test_a_live_attempt_is_not_rolled_back(tmp_path: Path, capsys: Any) -> None:
    path = tmp_path / "t"
    _table(path, TableVersion.EIGHT)
    ts = hts("schedule", "compaction", str(path)).stdout.split()[2]
    killed = hts(
        "execute",
        "compaction",
        str(path),
        "--spark-master",
        "in-process",
        crash_at="compaction.before_complete",
    )
    assert killed.returncode == 97
    # Default heartbeat (60 s x 2): the attempt still looks alive, so execute leaves it alone.
    again = hts("execute", "compaction", str(path), "--spark-master", "in-process")
    assert again.returncode == 0, again.stderr
    assert "heartbeat is alive" in again.stderr
    instant = HoodieTable.open(str(path)).timeline.get(ts, Action.COMPACTION)
    assert instant is not None and instant.is_inflight


def _mdt_listing(path: Path) -> dict[str, dict[str, int]]:
    from hoodie.metadata.table import MetadataTable

    return MetadataTable.open(HoodieTable.open(str(path))).list_files()


def _disk_listing(path: Path, partitions: list[str]) -> dict[str, dict[str, int]]:
    return {
        p: {
            f.name: f.stat().st_size
            for f in (path / p).iterdir()
            if not f.name.startswith(".hoodie_partition")
        }
        for p in partitions
    }


def test_crash_between_metadata_update_and_completion(tmp_path: Path) -> None:
    """Killed after the metadata table took the compaction's deltacommit but before the data
    instant completed: readers (ours and hudi-rs, which lists files through the metadata table)
    ignore the update; the next run rolls the metadata-table instant back with the data attempt,
    redoes both, and the metadata table's listing equals the directories again."""
    path = tmp_path / "t"
    _table(path, TableVersion.EIGHT, metadata_table=True)
    assert (path / ".hoodie" / "metadata" / "files").is_dir()
    before_rows, before_rs, before_listing = _rows(path), hudi_rs_rows(path), _mdt_listing(path)
    assert before_listing == _disk_listing(path, sorted(before_listing))
    ts = hts("schedule", "compaction", str(path)).stdout.split()[2]

    killed = hts(
        "execute",
        "compaction",
        str(path),
        "--spark-master",
        "in-process",
        crash_at="metadata.before_data_complete",
    )
    assert killed.returncode == 97, killed.stderr
    mdt_timeline = HoodieTable.open(str(path / ".hoodie" / "metadata")).timeline
    mdt_instant = mdt_timeline.get(ts)
    assert mdt_instant is not None and mdt_instant.is_completed  # the metadata update landed...
    instant = HoodieTable.open(str(path)).timeline.get(ts, Action.COMPACTION)
    assert instant is not None and not instant.is_completed  # ...the data instant did not
    assert _mdt_listing(path) == before_listing  # so the metadata table still lists the old files
    assert _rows(path) == before_rows
    assert hudi_rs_rows(path) == before_rs

    age_heartbeats(path)
    resumed = hts("execute", "compaction", str(path), "--spark-master", "in-process")
    assert resumed.returncode == 0, resumed.stderr
    table = HoodieTable.open(str(path))
    assert table.timeline.is_completed(ts)
    listing = _mdt_listing(path)
    assert listing == _disk_listing(path, sorted(listing))
    new_bases = {n for files in listing.values() for n in files if n.endswith(f"_{ts}.parquet")}
    assert len(new_bases) == 4  # one compacted base file per partition is listed
    assert _rows(path) == before_rows
    assert hudi_rs_rows(path) == before_rs
    mdt = HoodieTable.open(str(path / ".hoodie" / "metadata")).timeline
    assert [i.requested_time for i in mdt.completed() if i.requested_time == ts] == [ts]
