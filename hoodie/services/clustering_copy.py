"""Binary-copy clustering: a group that only bin-packs is stitched, not decoded and rewritten.

Apache Hudi chooses it with ``hoodie.clustering.execution.strategy.class`` =
``...SparkBinaryCopyClusteringExecutionStrategy`` (or its ``SparkStreamCopy...`` subclass),
which lands in the plan's ``strategy.strategyClassName``. Its ``supportBinaryStreamCopy`` falls
back to the sort-and-size rewrite unless the table is COPY_ON_WRITE with Parquet base files and
the plan has no sort columns; then each group becomes ONE file (whatever ``numOutputFileGroups``
says), named with a new file id, holding its inputs' row groups in input order
(:mod:`hoodie.parquet.copy`). Records keep ``_hoodie_commit_time`` and ``_hoodie_commit_seqno``
(the strategy ignores ``preserveHoodieMetadata``); ``_hoodie_file_name`` becomes the new name.

On top of Hudi's file checks, hts copies only groups whose slices are base files alone and whose
files' schema is the table's (the schema the rewrite would write); any other group is rewritten,
so the rows come out the same either way.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pyarrow.parquet as pq

from hoodie.config.table_config import BaseFileFormat, TableType
from hoodie.file_group.base_file import BaseFile, write_token
from hoodie.file_group.file_slice import FileSlice
from hoodie.io.fileio import join
from hoodie.models.commit import RuntimeStats, WriteStat
from hoodie.parquet.copy import CopyPlan, binary_copy, plan_binary_copy
from hoodie.services.base import TaskResult, crash_point
from hoodie.services.slice_tasks import SliceTask
from hoodie.table import HoodieTable
from hoodie.write.markers import IOType, WriteMarkers

log = logging.getLogger(__name__)

RUN_PACKAGE = "org.apache.hudi.client.clustering.run.strategy."
"""The package of Hudi's Spark/Java clustering execution strategies."""
BINARY_COPY_STRATEGIES = frozenset(
    {
        RUN_PACKAGE + "SparkBinaryCopyClusteringExecutionStrategy",
        RUN_PACKAGE + "SparkStreamCopyClusteringExecutionStrategy",
    }
)
SORT_COLUMNS_KEY = "hoodie.clustering.plan.strategy.sort.columns"


def binary_copy_refusal(table: HoodieTable, strategy: str | None, params: dict[str, str]) -> str | None:
    """Why a plan's groups are rewritten instead of copied (``SparkBinaryCopy...supportBinaryStreamCopy``)."""
    if strategy not in BINARY_COPY_STRATEGIES:
        return f"execution strategy {strategy}"
    reason = _table_refusal(table, params)
    if reason is not None:
        log.info("%s: clustering with %s rewrites its groups: %s", table.base_path, strategy, reason)
    return reason


def _table_refusal(table: HoodieTable, params: dict[str, str]) -> str | None:
    if table.config.table_type is not TableType.COPY_ON_WRITE:
        return f"hoodie.table.type={table.config.table_type.value}"
    if params.get(SORT_COLUMNS_KEY):
        return f"{SORT_COLUMNS_KEY}={params[SORT_COLUMNS_KEY]}"
    if table.config.base_file_format is not BaseFileFormat.PARQUET:
        return f"hoodie.table.base.file.format={table.config.base_file_format.value}"
    return None


def _plan_group(job: SliceTask, slices: list[FileSlice], partition: str) -> CopyPlan | str:
    table = job.table
    paths = []
    for file_slice in slices:
        if file_slice.log_files or file_slice.base_file is None:
            return f"file group {file_slice.file_id} has log files"
        paths.append(join(table.base_path, partition, file_slice.base_file.name))
    plan = plan_binary_copy(table.fileio, paths, job.compression)
    if isinstance(plan, str):
        return plan
    # The files share one Parquet schema (the plan checked it); it must read as the table's.
    with table.fileio.open_input(paths[0]) as source:
        found = pq.ParquetFile(source).schema_arrow
    if not found.equals(job.schema, check_metadata=False):
        return f"{paths[0]} does not have the table's schema"
    return plan


def copy_group(
    task: dict[str, Any], job: SliceTask, slices: list[FileSlice], partition: str
) -> TaskResult | None:
    """Stitch the group's base files into one new file; None (nothing written) if it does not qualify."""
    started = time.monotonic()
    if task.get("binary_copy_refusal") is not None:
        return None
    plan = _plan_group(job, slices, partition)
    if isinstance(plan, str):
        log.info(
            "clustering %s group %s: rewriting, not copying: %s", job.instant_time, task["group_index"], plan
        )
        return None
    table = job.table
    new = BaseFile(task["file_ids"][0], write_token(0, int(task["group_index"]), 0), job.instant_time)
    WriteMarkers(table.fileio, table.paths, job.instant_time).create(partition, new.name, IOType.CREATE)
    result = binary_copy(table.fileio, plan, join(table.base_path, partition, new.name))
    crash_point("clustering.task_after_write")
    elapsed = int((time.monotonic() - started) * 1000)
    stat = WriteStat(
        file_id=new.file_id,
        path=join(partition, new.name),
        prev_commit="null",
        num_writes=result.num_rows,
        num_deletes=0,
        num_update_writes=0,
        total_write_bytes=result.size,
        total_write_errors=0,
        partition_path=partition,
        total_log_records=0,
        total_updated_records_compacted=0,
        num_inserts=result.num_rows,
        total_log_blocks=0,
        total_corrupt_log_block=0,
        total_rollback_blocks=0,
        file_size_in_bytes=result.size,
        runtime_stats=RuntimeStats(total_scan_time=0, total_create_time=elapsed, total_upsert_time=0),
        total_log_files_compacted=0,
        total_log_read_time_ms=0,
        total_log_size_compacted=0,
        num_updates=0,
    )
    return {"write_stats": [stat.to_avro()], "rows": result.num_rows, "scan_ms": 0, "task_ms": elapsed}
