"""Binary-copy clustering: a group that only bin-packs is stitched, not decoded and rewritten.

Apache Hudi chooses it with ``hoodie.clustering.execution.strategy.class`` =
``...SparkBinaryCopyClusteringExecutionStrategy`` (or its ``SparkStreamCopy...`` subclass),
which lands in the plan's ``strategy.strategyClassName``. Its ``supportBinaryStreamCopy`` falls
back to the sort-and-size rewrite unless the table is COPY_ON_WRITE with Parquet base files and
the plan has no sort columns; then each group becomes ONE file (whatever ``numOutputFileGroups``
says), named with a new file id, holding its inputs' row groups in input order
(:mod:`hoodie.parquet.copy`). Records keep ``_hoodie_commit_time`` and ``_hoodie_commit_seqno``
(the strategy ignores ``preserveHoodieMetadata``); ``_hoodie_file_name`` becomes the new name.

The decision is Hudi's ``performClustering``'s: ONE for the whole plan, before the instant goes
inflight (:func:`decide_binary_copy`). Hudi falls back to the sort-and-size rewrite of EVERY group
when any of its checks fails: the table type, a ``sort.columns`` param present in the plan
(even empty), the base file format, then ``ParquetBinaryCopyChecker`` over the data file of every
slice of every group (:mod:`hoodie.parquet.checker`). ``SparkStreamCopy...`` skips the checker
unless ``hoodie.clustering.plan.strategy.binary.copy.schema.evolution.enable`` (default false)
is set. So a plan comes out all copied or all rewritten, never part of each.

When Hudi would copy, hts copies exactly or refuses the plan (:class:`BinaryCopyRefused`,
nothing written) where it cannot write what Hudi writes:

- a slice with log files or without a base file (Hudi copies the data file alone, or fails);
- a group whose files' Parquet schemas differ (beyond the root's name and field ids, see
  :func:`hoodie.parquet.copy.schema_signature`): with schema evolution off Hudi writes the first
  file's schema, dropping other files' extra columns or failing on missing ones
  (``HoodieParquetBinaryCopyBase.processBlocksFromReader``); with it on Hudi writes the table's
  schema with null columns for what a file lacks, which hts does not: it copies only files whose
  schema reads as the table's;
- ``hoodie.parquet.compression.codec`` that is not a parquet-mr codec name, or LZO; input pages
  in LZO; encrypted files; a ``_hoodie_file_name`` that is not a plain string; bloom filters of
  different type codes in one group (Hudi's merger cannot OR them);
- a schema Hudi's checker throws on (:class:`hoodie.parquet.checker.UnsupportedSchema`).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.config.table_config import BaseFileFormat, TableType
from hoodie.errors import InvalidInputError, TableServiceError, UnsupportedShapeError
from hoodie.file_group.base_file import BaseFile, write_token
from hoodie.file_group.base_file_writer import write_base_file
from hoodie.file_group.file_slice import FileSlice
from hoodie.io.fileio import LocalFileIO, join
from hoodie.models.clustering import ClusteringPlan
from hoodie.models.commit import RuntimeStats, WriteStat
from hoodie.parquet.checker import UnsupportedSchema, file_info, verify_files
from hoodie.parquet.copy import binary_copy, codec_id, plan_binary_copy, read_file_footer, recompress
from hoodie.parquet.footer import FMD_SCHEMA
from hoodie.parquet.pages import ARROW_CODECS, LZ4_HADOOP
from hoodie.parquet.thrift import Struct, encode_struct
from hoodie.services.base import TaskResult, crash_point
from hoodie.services.slice_tasks import COMPRESSION_KEY, SliceTask
from hoodie.table import HoodieTable
from hoodie.write.markers import IOType, WriteMarkers

log = logging.getLogger(__name__)

RUN_PACKAGE = "org.apache.hudi.client.clustering.run.strategy."
"""The package of Hudi's Spark/Java clustering execution strategies."""
BINARY_COPY = RUN_PACKAGE + "SparkBinaryCopyClusteringExecutionStrategy"
STREAM_COPY = RUN_PACKAGE + "SparkStreamCopyClusteringExecutionStrategy"
BINARY_COPY_STRATEGIES = frozenset({BINARY_COPY, STREAM_COPY})
EXECUTION_KEY = "hoodie.clustering.execution.strategy.class"
SORT_COLUMNS_KEY = "hoodie.clustering.plan.strategy.sort.columns"
SCHEMA_EVOLUTION_KEY = "hoodie.clustering.plan.strategy.binary.copy.schema.evolution.enable"
"""``HoodieClusteringConfig.FILE_STITCHING_BINARY_COPY_SCHEMA_EVOLUTION_ENABLE`` (default false)."""


class BinaryCopyRefused(UnsupportedShapeError):
    """Hudi would binary-copy the plan (or fail on it) and hts cannot write what it writes.

    A shape refusal (the daemon shows it and does not retry); nothing is written.
    """


class _Refusal(Exception):
    """Why the plan is refused; :func:`decide_binary_copy` names the table, evidence and instant."""


@dataclass(frozen=True, slots=True)
class _Group:
    partition: str
    paths: list[str]


def _plan_groups(table: HoodieTable, plan: ClusteringPlan) -> list[_Group]:
    """Each group's data files, refusing slices binary copy cannot take as they are."""
    groups = []
    for k, group in enumerate(plan.input_groups or ()):
        paths = []
        partition = ""
        for info in group.slices or ():
            partition = info.partition_path or ""
            name = (info.data_file_path or "").rstrip("/").rsplit("/", 1)[-1]
            if not name:
                raise _Refusal(
                    f"group {k}: file group {partition}/{info.file_id} has no "
                    "base file; Hudi's binary copy copies data files only and fails on it"
                )
            if info.delta_file_paths:
                raise _Refusal(
                    f"group {k}: file group {partition}/{info.file_id} has log "
                    f"files ({info.delta_file_paths[0]}); Hudi's binary copy would copy its base file "
                    "alone and lose their records"
                )
            paths.append(join(table.base_path, partition, name))
        groups.append(_Group(partition, paths))
    return groups


def decide_binary_copy(
    table: HoodieTable,
    plan: ClusteringPlan,
    instant_time: str,
    options: Mapping[str, str],
    compression: str,
    schema: pa.Schema,
) -> bool:
    """Whether EVERY group of ``plan`` is copied (else every group is rewritten); see the module doc.

    Raises :class:`BinaryCopyRefused` where Hudi would copy and hts cannot write the same; it
    reads only footers, so nothing is written either way.
    """
    strategy = plan.strategy.strategy_class_name if plan.strategy else None
    operation = f"clustering {instant_time}"
    try:
        codec_id(compression)
    except InvalidInputError as exc:
        evidence = f"{COMPRESSION_KEY}={compression}"
        raise BinaryCopyRefused(table.base_path, "clustering codec", evidence, operation, str(exc)) from None
    if strategy not in BINARY_COPY_STRATEGIES:
        return False
    try:
        return _decide(table, plan, options, compression, schema, strategy)
    except _Refusal as exc:
        evidence = f"{EXECUTION_KEY}={strategy}"
        raise BinaryCopyRefused(
            table.base_path, "binary-copy clustering", evidence, operation, str(exc)
        ) from None


def write_rewritten_file(
    table: HoodieTable, path: str, data: pa.Table, avro_schema: dict[str, Any], compression: str
) -> int:
    """The decode-rewrite's output file written at ``path`` in Hudi's codec for ``compression``; its size.

    The codec is parquet-mr's for the name (:func:`hoodie.parquet.copy.codec_id`). pyarrow writes
    ``lz4`` as LZ4_RAW while parquet-mr writes LZ4 (Hadoop-framed): for ``lz4`` the file is written
    to a local temporary file in LZ4_RAW and its pages re-framed into ``path``.
    """
    code = codec_id(compression)
    if code != LZ4_HADOOP:
        arrow = ARROW_CODECS[code] or "none"  # pyarrow's name for it (UNCOMPRESSED is "none" there)
        return write_base_file(table.fileio, path, data, avro_schema, compression=arrow).size
    local = LocalFileIO()
    with tempfile.TemporaryDirectory(prefix="hts-lz4-") as scratch:
        staged = os.path.join(scratch, path.rstrip("/").rsplit("/", 1)[-1])
        write_base_file(local, staged, data, avro_schema, compression="lz4_raw")
        return recompress(local, staged, table.fileio, path, LZ4_HADOOP).size


def _decide(
    table: HoodieTable,
    plan: ClusteringPlan,
    options: Mapping[str, str],
    compression: str,
    schema: pa.Schema,
    strategy: str,
) -> bool:
    params = (plan.strategy.strategy_params if plan.strategy else None) or {}
    reason = _table_refusal(table, params)
    if reason is not None:
        log.info("%s: clustering with %s rewrites every group: %s", table.base_path, strategy, reason)
        return False
    evolution = str(options.get(SCHEMA_EVOLUTION_KEY, "false")).strip().lower() == "true"
    groups = _plan_groups(table, plan)
    footers = {p: read_file_footer(table.fileio, p) for g in groups for p in g.paths}
    if strategy == BINARY_COPY or evolution:
        try:
            reason = verify_files([file_info(meta, path) for path, meta in footers.items()])
        except UnsupportedSchema as exc:
            raise _Refusal(f"{exc}: Hudi's ParquetBinaryCopyChecker fails on this schema") from exc
        if reason is not None:
            log.info("%s: clustering with %s rewrites every group: %s", table.base_path, strategy, reason)
            return False
    checked: dict[bytes, bool] = {}  # Parquet schema bytes -> whether it reads as the table's
    for k, group in enumerate(groups):
        for path in group.paths if evolution else ():
            key = encode_struct(Struct({FMD_SCHEMA: footers[path].fields[FMD_SCHEMA]}))
            if key not in checked:
                with table.fileio.open_input(path) as source:
                    checked[key] = pq.ParquetFile(source).schema_arrow.equals(schema, check_metadata=False)
            if not checked[key]:
                raise _Refusal(
                    f"group {k}: {path} does not have the table's schema and "
                    f"{SCHEMA_EVOLUTION_KEY}=true: Hudi writes the table's schema with null columns for "
                    "what a file lacks, which hts does not"
                )
        found = plan_binary_copy(table.fileio, group.paths, compression, [footers[p] for p in group.paths])
        if isinstance(found, str):
            raise _Refusal(f"group {k}: {found}")
    return True


def _table_refusal(table: HoodieTable, params: dict[str, str]) -> str | None:
    if table.config.table_type is not TableType.COPY_ON_WRITE:
        return f"hoodie.table.type={table.config.table_type.value}"
    if params.get(SORT_COLUMNS_KEY) is not None:
        return f"{SORT_COLUMNS_KEY}={params[SORT_COLUMNS_KEY]}"
    if table.config.base_file_format is not BaseFileFormat.PARQUET:
        return f"hoodie.table.base.file.format={table.config.base_file_format.value}"
    return None


def copy_group(
    task: dict[str, Any], job: SliceTask, slices: list[FileSlice], partition: str
) -> TaskResult | None:
    """Stitch the group's base files into one new file; None when the plan is rewritten."""
    started = time.monotonic()
    if not task.get("binary_copy"):
        return None
    table = job.table
    paths = []
    for file_slice in slices:
        if file_slice.log_files or file_slice.base_file is None:  # the driver refused such plans
            raise TableServiceError(f"file group {file_slice.file_id} has log files or no base file")
        paths.append(join(table.base_path, partition, file_slice.base_file.name))
    plan = plan_binary_copy(table.fileio, paths, job.compression)
    if isinstance(plan, str):  # the driver planned every group: the inputs changed since
        raise TableServiceError(
            f"clustering {job.instant_time} group {task['group_index']} can no longer be copied: {plan}"
        )
    new = BaseFile(
        task["file_ids"][0], write_token(int(task["group_index"]), int(task["attempt"]), 0), job.instant_time
    )
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
