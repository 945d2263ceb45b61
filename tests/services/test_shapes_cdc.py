"""CDC tables as a shape: COW CDC writes are handled; clean removes CDC logs with their slice; clustering
and log compaction commit operation types the CDC readers skip.
"""

from __future__ import annotations

from pathlib import Path

from hoodie.config.table_config import TableType, TableVersion
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from service.cli import main
from tests.services.shapes_support import base_table, cdc
from tests.tables import new_table, rows


def test_cow_cdc_writes_are_handled(tmp_path: Path) -> None:
    """CDC tables are written as Hudi writes them (the CDC tests check the logs' content): an upsert
    rewrites a file group with a CDC log named in ``cdcStats``; a bulk insert writes none."""
    path = tmp_path / "t"
    HoodieWriter(new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=False)).insert(
        rows(range(4), 1)
    )
    cdc(path)
    upsert = HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(2), 2))
    assert upsert.write_stats and all(s.cdc_stats for s in upsert.write_stats)
    for stat in upsert.write_stats:
        assert all((path / log).is_file() and log.endswith(".cdc") for log in stat.cdc_stats or {})
    result = HoodieWriter(HoodieTable.open(str(path))).bulk_insert(rows(range(10, 12), 2))
    assert result.num_inserts == 2 and not any(s.cdc_stats for s in result.write_stats)


def test_cdc_clean_removes_cdc_logs_with_their_slice(tmp_path: Path) -> None:
    """``CleanPlanner``: with CDC on, clean the log files whatever the table type; a COW table's CDC
    log (``.<fileId>_<commit>.log.1_<token>.cdc``, ``HoodieCDCLogger``) goes with its slice.

    The census left the suffix's release open: ``HoodieCDCUtils.CDC_LOGFILE_SUFFIX`` became ``.cdc``
    (from ``-cdc``) in HUDI-5082 (apache/hudi#7042, Oct 2022), before 0.13.0, so every table version
    hts opens (6+, Hudi 0.14+) names CDC logs with ``.cdc``."""
    path = tmp_path / "t"
    writer = HoodieWriter(new_table(path, table_type=TableType.COPY_ON_WRITE, metadata_table=False))
    writer.insert(rows(range(6), 1))
    commits = [writer.upsert(rows(range(6), ts)).instant.requested_time for ts in (2, 3, 4)]
    cdc(path)
    cdc_logs = {}
    for slice_ in HoodieTable.open(str(path)).file_system_view().all_file_slices():
        if slice_.base_instant_time in commits and slice_.base_file is not None:
            name = f".{slice_.file_id}_{slice_.base_instant_time}.log.1_0-1-0.cdc"
            (path / slice_.partition_path / name).write_bytes(b"#HUDI#")
            cdc_logs[slice_.base_instant_time, slice_.partition_path] = name
    assert {ts for ts, _ in cdc_logs} == set(commits)
    code = main(
        [
            "run",
            "clean",
            str(path),
            "--spark-master",
            "in-process",
            "--option",
            "hoodie.clean.commits.retained=1",
        ]
    )
    assert code == 0
    for (ts, partition), name in cdc_logs.items():
        base_left = any(p.name.endswith(f"_{ts}.parquet") for p in (path / partition).iterdir())
        assert (path / partition / name).exists() == base_left, (ts, name)
    assert any(not (path / p / n).exists() for (_, p), n in cdc_logs.items())


def test_cdc_clustering_and_log_compaction_commit_operation_types_cdc_readers_skip(tmp_path: Path) -> None:
    """``HoodieCDCExtractor`` keeps only ``WriteOperationType.yieldChanges`` commits: CLUSTER and
    LOG_COMPACT are skipped, so these services need no CDC log."""
    path = base_table(tmp_path / "t", version=TableVersion.EIGHT)
    HoodieWriter(HoodieTable.open(str(path))).upsert(rows(range(1, 12, 2), 3))
    cdc(path)
    options = ["--spark-master", "in-process", "--option", "hoodie.log.compaction.blocks.threshold=1"]
    assert main(["run", "logcompaction", str(path), *options]) == 0
    assert main(["run", "clustering", str(path), "--spark-master", "in-process"]) == 0
    table = HoodieTable.open(str(path))
    timeline = table.reload()
    operations = {
        i.action.value: table.commit_metadata(i).operation_type
        for i in timeline.completed()
        if i.action in (Action.REPLACE_COMMIT, Action.DELTA_COMMIT)
        and table.commit_metadata(i).operation_type in ("CLUSTER", "LOG_COMPACT")
    }
    assert operations == {"replacecommit": "CLUSTER", "deltacommit": "LOG_COMPACT"}
