"""Compaction plans as Hudi writes them (``HoodieCompactionPlan``): the operation for a file slice
(with the metrics Hudi's strategies read), a plan of operations in Hudi's order, and the slice an
operation names. Data compaction, log compaction, the metadata table's compaction and indexing all
build and read plans through these."""

from __future__ import annotations

from collections.abc import Sequence

from hoodie.errors import TableServiceError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_slice import FileSlice, SliceFiles
from hoodie.file_group.log_file import LogFile
from hoodie.models.compaction import CompactionOperation, CompactionPlan
from hoodie.models.compaction import CompactionStrategy as StrategyRecord

_MB = 1024 * 1024


def compaction_operation(
    file_slice: FileSlice, logs: Sequence[LogFile] | None = None, *, bytes_without_base: int = 0
) -> CompactionOperation:
    """The plan entry for one slice (or ``logs`` of it), with the metrics Hudi's strategies read.

    ``bytes_without_base`` is the write estimate of a slice that has no base file yet.
    """
    files = SliceFiles.of(file_slice)
    if logs is not None:
        files = files._replace(
            log_file_names=[lf.name for lf in logs], log_file_sizes=[lf.size for lf in logs]
        )
    return operation_of(files, bytes_without_base=bytes_without_base)


def operation_of(files: SliceFiles, *, bytes_without_base: int = 0) -> CompactionOperation:
    """``compaction_operation`` of a slice given by its files' names and sizes."""
    logs = files.log_file_names
    log_size = sum(files.log_file_sizes)
    has_base = files.base_file_name is not None
    base_size = files.base_file_size if has_base else 0
    io_read = (base_size + log_size) // _MB
    io_write = (base_size if has_base else bytes_without_base) // _MB
    return CompactionOperation(
        base_instant_time=files.base_instant_time,
        delta_file_paths=list(logs),
        data_file_path=files.base_file_name,
        file_id=files.file_id,
        partition_path=files.partition_path,
        metrics={
            "TOTAL_LOG_FILES": float(len(logs)),
            "TOTAL_IO_MB": float(io_read + io_write),
            "TOTAL_IO_READ_MB": float(io_read),
            "TOTAL_LOG_FILES_SIZE": float(log_size),
            "TOTAL_IO_WRITE_MB": float(io_write),
        },
        bootstrap_file_path=None,
    )


def compaction_plan(
    ops: list[CompactionOperation],
    *,
    strategy: StrategyRecord | None = None,
    preserve_hoodie_metadata: bool = False,
    missing_schedule_partitions: Sequence[str] | None = (),
) -> CompactionPlan | None:
    """A plan of ``ops`` in partition and file-id order, or None when there are none.

    ``missing_schedule_partitions`` is None when incremental planning is off, as Hudi writes it.
    """
    if not ops:
        return None
    ops.sort(key=lambda op: (op.partition_path or "", op.file_id or ""))
    return CompactionPlan(
        operations=ops,
        extra_metadata={},
        strategy=strategy,
        preserve_hoodie_metadata=preserve_hoodie_metadata,
        missing_schedule_partitions=None
        if missing_schedule_partitions is None
        else list(missing_schedule_partitions),
    )


def slice_of(op: CompactionOperation) -> FileSlice:
    """The file slice a plan operation names (file names only; paths of plan version 1 are cut)."""
    base = None
    if op.data_file_path:
        name = op.data_file_path.rsplit("/", 1)[-1]  # plan version 1 held absolute paths
        base = BaseFile.parse(name)
        if base is None:
            raise TableServiceError(
                f"compaction operation names {op.data_file_path!r}, which is not a base file"
            )
    logs = []
    for path in op.delta_file_paths or ():
        lf = LogFile.parse(path.rsplit("/", 1)[-1])
        if lf is None:
            raise TableServiceError(f"compaction operation names {path!r}, which is not a log file")
        logs.append(lf)
    logs.sort(key=lambda lf: lf.sort_key)
    return FileSlice(op.partition_path or "", op.file_id or "", op.base_instant_time or "", base, tuple(logs))
