"""CDC tables under the table services: clean removes CDC logs with their slice; clustering and log
compaction commit with operation types the CDC query skips; the metadata table lists CDC logs and
indexes only data files; after archival a query from before the active timeline is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie.cdc.reader import read_cdc
from hoodie.config.table_config import TableType, TableVersion
from hoodie.errors import HoodieError
from hoodie.metadata.table import MetadataTable
from hoodie.models.clean import CleaningPolicy
from hoodie.services.base import LocalRunner, ServiceContext
from hoodie.services.clean import CleanPolicy, execute_clean, schedule_clean
from hoodie.services.clustering import ClusteringPolicy, execute_clustering, schedule_clustering
from hoodie.services.logcompaction import LogCompactionPolicy, execute_log_compaction, schedule_log_compaction
from hoodie.table import HoodieTable
from hoodie.write.options import WriteOptions
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.services.cdc_support import cdc_query, cdc_table, compact, metadata_lists_every_file
from tests.tables import rows, snapshot


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_clean_removes_cdc_logs_with_their_slice(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, TableType.COPY_ON_WRITE, version, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    for ts in range(2, 6):
        writer.upsert(rows([0, 1, 2], ts))
    cdc_logs = {p.name for p in path.rglob("*.cdc")}
    assert len(cdc_logs) == 4 * 3
    ctx = ServiceContext(HoodieTable.open(str(path)))
    policy = CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    scheduled = schedule_clean(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_clean(ctx, scheduled.instant_time, LocalRunner())
    latest = {
        s.base_file.commit_time
        for s in HoodieTable.open(str(path)).file_system_view().latest_file_slices()
        if s.base_file
    }
    kept = {p.name for p in path.rglob("*.cdc")}
    assert kept == {n for n in cdc_logs if n.split("_")[1].split(".")[0] in latest}
    assert len(kept) == 3
    metadata_lists_every_file(path)


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.EIGHT])
def test_clean_removes_compaction_cdc_logs_with_their_slice(tmp_path: Path, version: TableVersion) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, TableType.MERGE_ON_READ, version, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(6), 1))
    compactions = []
    for ts in range(2, 5):
        writer.upsert(rows([0, 1, 2], ts))
        compactions.append(compact(path))
    writer.upsert(rows([0, 1, 2], 9))  # logs of the latest slices, beside its compaction CDC logs
    by_instant = {c: {p.name for p in path.rglob(f"*_{c}.log.*.cdc")} for c in compactions}
    assert all(len(names) == 3 for names in by_instant.values())
    ctx = ServiceContext(HoodieTable.open(str(path)))
    policy = CleanPolicy(policy=CleaningPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    scheduled = schedule_clean(ctx, policy)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_clean(ctx, scheduled.instant_time, LocalRunner())
    assert {p.name for p in path.rglob("*.cdc")} == by_instant[compactions[-1]]
    metadata_lists_every_file(path)


def test_clustering_and_log_compaction_commit_as_no_cdc_source(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = cdc_table(path, TableType.MERGE_ON_READ, TableVersion.EIGHT, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table, options=WriteOptions(small_file_limit=0))
    for b in range(3):
        writer.insert(rows(range(b * 10, b * 10 + 10), 1))
    for ts in range(2, 6):
        last = writer.upsert(rows([0, 10, 20], ts)).instant.requested_time
    ctx = ServiceContext(HoodieTable.open(str(path)), options={"hoodie.log.compaction.blocks.threshold": "2"})
    scheduled = schedule_log_compaction(ctx, LogCompactionPolicy.from_options(ctx.options))
    assert scheduled is not None and scheduled.instant_time is not None
    execute_log_compaction(ctx, scheduled.instant_time, LocalRunner())
    ctx = ServiceContext(HoodieTable.open(str(path)))
    clustered = schedule_clustering(ctx, ClusteringPolicy.from_options(ctx.options))
    assert clustered is not None and clustered.instant_time is not None
    execute_clustering(ctx, clustered.instant_time, LocalRunner())
    table = HoodieTable.open(str(path))
    tl = table.reload()
    ops = {i.requested_time: table.commit_metadata(i, tl).operation_type for i in tl.completed().writes()}
    assert ops[scheduled.instant_time] == "LOG_COMPACT" and ops[clustered.instant_time] == "CLUSTER"
    end = max(ops)
    assert cdc_query(path, last, end) == [] and cdc_query(path, last, end, from_compaction=True) == []


@pytest.mark.parametrize("table_type", [TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ])
def test_metadata_table_lists_cdc_logs_and_indexes_only_data_files(
    tmp_path: Path, table_type: TableType
) -> None:
    from hoodie.services.indexing import execute_indexing, schedule_indexing

    path = tmp_path / "t"
    table = cdc_table(path, table_type, TableVersion.NINE, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    writer.insert(rows(range(12), 1))
    build = {
        "hoodie.metadata.index.column.stats.enable": "true",
        "hoodie.metadata.index.bloom.filter.enable": "true",
        "hoodie.metadata.record.index.enable": "true",
    }
    ctx = ServiceContext(HoodieTable.open(str(path)), options=build)
    scheduled = schedule_indexing(ctx)
    assert scheduled is not None and scheduled.instant_time is not None
    execute_indexing(ctx, scheduled.instant_time, LocalRunner())
    writer = HoodieWriter(HoodieTable.open(str(path)))
    writer.upsert(rows([0, 1, 2, 12], 2))
    writer.delete(rows([3], 3).select(["id", "p"]))
    if table_type is TableType.MERGE_ON_READ:
        compact(path)
    metadata_lists_every_file(path)
    mdt = MetadataTable.open(HoodieTable.open(str(path)))
    stats = mdt.read_partition("column_stats")
    assert stats and not [
        k for k, v in stats.items() if v["ColumnStatsMetadata"]["fileName"].endswith(".cdc")
    ]
    assert snapshot(path) == hudi_rs_rows(path)  # hudi-rs reads the table, CDC logs and all


@pytest.mark.parametrize("version", [TableVersion.SIX, TableVersion.NINE])
def test_a_query_from_before_the_active_timeline_is_refused(tmp_path: Path, version: TableVersion) -> None:
    from hoodie.services.archival import execute_archival

    path = tmp_path / "t"
    table = cdc_table(path, TableType.COPY_ON_WRITE, version, "DATA_BEFORE_AFTER")
    writer = HoodieWriter(table)
    first = writer.insert(rows(range(3), 1)).instant.requested_time
    for ts in range(2, 20):
        writer.upsert(rows([ts % 3], ts))
    options = {
        "hoodie.keep.min.commits": "5",
        "hoodie.keep.max.commits": "8",
        "hoodie.cleaner.commits.retained": "3",
    }
    execute_archival(ServiceContext(HoodieTable.open(str(path)), options=options))
    active = HoodieTable.open(str(path)).reload()
    start = active.completed().writes().first()
    assert start is not None and start.requested_time > first
    with pytest.raises(HoodieError, match="has to be in the active timeline"):
        read_cdc(HoodieTable.open(str(path)), first)
    changes = read_cdc(HoodieTable.open(str(path)), start.requested_time)
    assert set(changes["op"].to_pylist()) == {"u"} and len(changes) > 0
