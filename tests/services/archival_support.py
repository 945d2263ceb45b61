"""The tables and helpers the archival tests share (``test_archival*.py``).

Tables are written by our writer (one insert and 35 upserts, plus a compaction for MERGE_ON_READ)
once per session and copied per test (the ``table_of`` fixture; this module is a pytest plugin named
in ``tests/conftest.py`` so that the session's tables are built once for every module); the keep
window is 10..15 commits instead of 20..30 so that each table stays small.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hudi import HudiReadOptions, HudiTableBuilder

from hoodie.config.table_config import TableType, TableVersion
from hoodie.read.reader import TableReader
from hoodie.services.base import LocalRunner, ServiceContext, service_named
from hoodie.services.compaction import CompactionPolicy, execute_compaction, schedule_compaction
from hoodie.table import HoodieTable
from hoodie.timeline.archived import ArchivedTimeline
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import new_table, rows

OPTIONS = {
    "hoodie.keep.min.commits": "10",
    "hoodie.keep.max.commits": "15",
    "hoodie.cleaner.commits.retained": "5",
}
UPSERTS = 35
COMPACT_AFTER = 15  # MERGE_ON_READ: compact after this many upserts

Maker = Callable[[TableType, TableVersion], Path]


def archival_rows(ids: list[int], ts: int) -> pa.Table:
    return rows(ids, ts, partitions=2)


def _build(path: Path, table_type: TableType, version: TableVersion) -> None:
    table = new_table(path, table_type=table_type, version=version)
    writer = HoodieWriter(table)
    writer.insert(archival_rows(list(range(12)), 0))
    for n in range(1, UPSERTS + 1):
        writer.upsert(archival_rows([n % 12, (n * 5) % 12], n))
        if table_type is TableType.MERGE_ON_READ and n == COMPACT_AFTER:
            ctx = ServiceContext(HoodieTable.open(str(path)))
            scheduled = schedule_compaction(ctx, CompactionPolicy())
            assert scheduled is not None and scheduled.instant_time is not None
            execute_compaction(ctx, scheduled.instant_time, LocalRunner())


@pytest.fixture(scope="session")
def _templates(tmp_path_factory: pytest.TempPathFactory) -> Maker:
    built: dict[tuple[TableType, TableVersion], Path] = {}

    def get(table_type: TableType, version: TableVersion) -> Path:
        key = (table_type, version)
        if key not in built:
            path = tmp_path_factory.mktemp("archival") / f"{table_type.value}_{version.value}"
            _build(path, table_type, version)
            built[key] = path
        return built[key]

    return get


@pytest.fixture()
def table_of(_templates: Maker, tmp_path: Path) -> Maker:
    """A private copy of a session-wide table with 36 (COW) or 37 (MOR) completed commits."""

    def make(table_type: TableType, version: TableVersion) -> Path:
        dst = tmp_path / f"{table_type.value}_{version.value}"
        shutil.copytree(_templates(table_type, version), dst)
        return dst

    return make


# -- helpers ------------------------------------------------------------------------------------


def open_table(path: Path) -> HoodieTable:
    return HoodieTable.open(str(path))


def commit_times(path: Path) -> list[str]:
    return [i.requested_time for i in open_table(path).timeline.completed().writes()]


def our_rows(path: Path, as_of: str | None = None) -> list[str]:
    data = TableReader(open_table(path)).snapshot(as_of=as_of)
    return sorted(str(r) for r in data.drop_columns(["_hoodie_file_name"]).to_pylist())


def _hudi_rs(path: Path, as_of: str) -> list[str]:
    table = (
        HudiTableBuilder.from_base_uri(str(path)).with_hudi_option("hoodie.metadata.enable", "false").build()
    )
    batches = table.read(HudiReadOptions().with_as_of_timestamp(as_of))
    data = pa.Table.from_batches(batches).drop_columns(["_hoodie_file_name"])
    return sorted(str(r) for r in data.to_pylist())


def file_slices(path: Path, as_of: str | None = None) -> list[tuple[Any, ...]]:
    """(partition, file id, base instant, base file, log files) of every slice."""
    view = open_table(path).file_system_view(as_of=as_of)
    slices = view.all_file_slices()
    return sorted(
        (
            s.partition_path,
            s.file_id,
            s.base_instant_time,
            s.base_file and s.base_file.name,
            tuple(lf.name for lf in s.log_files),
        )
        for s in slices
    )


@dataclasses.dataclass
class ReaderState:
    """What every reader sees: latest snapshot, time travel, file slices."""

    hudi_rs: list[str]
    ours: list[str]
    slices: list[tuple[Any, ...]]
    travel: dict[str, tuple[list[str], list[str], list[tuple[Any, ...]]]]

    @classmethod
    def of(cls, path: Path, as_of: list[str]) -> ReaderState:
        return cls(
            hudi_rs_rows(path),
            our_rows(path),
            file_slices(path),
            {ts: (our_rows(path, ts), _hudi_rs(path, ts), file_slices(path, ts)) for ts in as_of},
        )


def archived_timeline(path: Path) -> ArchivedTimeline:
    table = open_table(path)
    return ArchivedTimeline.load(
        table.fileio, table.paths, table.paths.layout, table_version=table.table_version
    )


def archival_context(path: Path, **extra: str) -> ServiceContext:
    return ServiceContext(open_table(path), options={**OPTIONS, **extra})


def run_archival(path: Path, **extra: str) -> list[str]:
    """Schedule and execute through the service protocol; returns the archived requested times."""
    service = service_named("archival")
    ctx = archival_context(path, **extra)
    scheduled = service.schedule(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    result = service.execute(ctx, scheduled.instant_time, LocalRunner())
    archived: list[str] = result.details["archived_instants"]
    assert archived == [i["requestedTime"] for i in scheduled.plan_json()["instants"]]
    assert result.instant.requested_time == archived[-1] == scheduled.instant_time
    return archived
