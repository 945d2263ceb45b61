"""CDC logs of the writes that rewrite a base file: COW merges and MOR compaction.

As Hudi's ``HoodieMergeHandleWithChangeLog`` (COW upsert/delete, an insert merged into a small file,
and a MERGE_ON_READ small file rewritten by a delta commit) and 1.1's
``FileGroupReaderBasedMergeHandle`` (compaction) do: the changes between the old base file and the
new one go to a CDC log file beside the new base file, and the write stat's ``cdcStats`` maps the
log's path to its size.

A merge writes no log where ``HoodieCDCLogger.writeCDCDataIfNeeded`` skips it: when every record
the handle wrote is an insert (``recordsWritten == insertRecordsWritten``, which includes writing
none). ``HoodieCDCExtractor.parseWriteStat`` then infers the changes from the stat alone: a
delete operation that emptied the group is BASE_FILE_DELETE, and any other stat without updates
whose every written record is an insert is BASE_FILE_INSERT (1.x dropped 0.x's ``numDeletes == 0``
condition, under which such a stat failed with "There should be a cdc log file"). So a rewrite
that removed every old record and wrote only new ones reads as its inserts alone, in Hudi's reader
and in hts's: hts writes exactly what Hudi writes. Everywhere else the log is written, even when
no record changed; then, as Hudi's logger does on close, it holds one empty block. Compaction
always writes it (1.1 closes the logger for every file group it compacts).

An insert appended to a small file without merging (``HoodieConcatHandle``, chosen by
``HoodieMergeHandleFactory`` when ``hoodie.merge.allow.duplicate.on.inserts`` holds) logs nothing,
CDC table or not, and Hudi's reader fails on the commit; hts refuses that write on a CDC table
before the instant is requested (:func:`refuse_concat_on_cdc_table`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.cdc.logger import CDCLogFile, Changes, cdc_log_file, diff_by_key, traced_changes, write_cdc_log
from hoodie.cdc.schemas import SupplementalLoggingMode, cdc_enabled, logging_mode
from hoodie.config.table_config import TableConfig
from hoodie.errors import UnsupportedShapeError
from hoodie.file_group.file_slice import FileSlice
from hoodie.io.fileio import FileIO, join
from hoodie.merge.trace import MergeTrace
from hoodie.read.slice_reader import read_parquet
from hoodie.schema.meta_fields import (
    COMMIT_TIME_METADATA_FIELD,
    HOODIE_META_COLUMNS,
    RECORD_KEY_METADATA_FIELD,
)
from hoodie.write.bucket_info import Bucket
from hoodie.write.markers import IOType, WriteMarkers
from hoodie.write.options import ALLOW_DUPLICATE_ON_INSERTS

_DIFF_COLUMNS = (COMMIT_TIME_METADATA_FIELD, RECORD_KEY_METADATA_FIELD)


@dataclass(frozen=True)
class CDCWrite:
    """What a handle needs to log changes: the mode and the table schema (with meta fields)."""

    mode: SupplementalLoggingMode
    table_schema: Mapping[str, Any]

    @classmethod
    def of(cls, config: TableConfig, table_schema: Mapping[str, Any]) -> CDCWrite | None:
        """The CDC settings of a table, None when CDC is off."""
        return cls(logging_mode(config), table_schema) if cdc_enabled(config) else None


def handle_writes_log(writes: int, inserts: int) -> bool:
    """Whether Hudi's merge handle with change log writes a CDC log for a file it rewrote
    (``HoodieCDCLogger.writeCDCDataIfNeeded``: not when every written record is an insert)."""
    return writes != inserts


def refuse_concat_on_cdc_table(
    config: TableConfig, fileio: FileIO, base_path: str, buckets: Sequence[Bucket]
) -> None:
    """Refuse a write that would append inserts to a small file of a CDC table without a CDC log
    (``HoodieConcatHandle``), before anything is written: Hudi's CDC reader fails on such a commit
    (``numWrites != numInserts``). A small file that holds no record is no refusal: every record
    written is then an insert, which the reader infers (BASE_FILE_INSERT)."""
    if not cdc_enabled(config):
        return
    for bucket in buckets:
        base = bucket.file_slice.base_file if bucket.file_slice is not None else None
        if not (bucket.concat and bucket.rows and base is not None):
            continue
        where = join(bucket.partition, base.name)
        with fileio.open_input(join(base_path, where)) as f:
            if pq.ParquetFile(f).metadata.num_rows == 0:
                continue
        raise UnsupportedShapeError(
            base_path,
            "CDC",
            f"hoodie.table.cdc.enabled=true, {ALLOW_DUPLICATE_ON_INSERTS}=true, small file {where}",
            "write (insert)",
            "Hudi's HoodieConcatHandle would append the inserts to the small file and write no CDC "
            "log, and Hudi's CDC reader fails on such a commit (There should be a cdc log file); "
            f"write with {ALLOW_DUPLICATE_ON_INSERTS}=false (the inserts are merged and logged) or "
            "hoodie.parquet.small.file.limit=0",
        )


def log_changes(
    cdc: CDCWrite,
    fileio: FileIO,
    base_path: str,
    markers: WriteMarkers,
    partition: str,
    file_id: str,
    instant_time: str,
    write_token: str,
    changes: Changes,
    before: pa.Table,
    after: pa.Table,
) -> dict[str, int]:
    """Write the CDC log of one file group under an APPEND marker; returns its ``cdcStats``."""
    markers.create(partition, cdc_log_file(file_id, instant_time, write_token).name, IOType.APPEND)
    written: CDCLogFile = write_cdc_log(
        fileio,
        base_path,
        partition,
        file_id,
        instant_time,
        write_token,
        cdc.mode,
        cdc.table_schema,
        changes,
        before,
        after,
    )
    return {written.path: written.size}


def log_compaction_changes(
    cdc: CDCWrite,
    fileio: FileIO,
    base_path: str,
    markers: WriteMarkers,
    file_slice: FileSlice,
    instant_time: str,
    write_token: str,
    schema: pa.Schema,
    merged: list[pa.Table],
    trace: MergeTrace | None = None,
) -> dict[str, int]:
    """The CDC log of compacting ``file_slice`` into ``merged`` (the new base file's rows): the diff
    between the old base file and the merged output, as ``FileGroupReaderBasedMergeHandle``'s
    ``CDCCallback`` logs it (inserts, updates with before/after, deletes).

    With the vectorized merge's ``trace`` the old rows are those the merge read and the diff is
    where it put them; otherwise the old base file is read again and diffed by key."""
    after = pa.concat_tables(merged) if merged else schema.empty_table()
    if trace is not None and trace.complete:
        before = pa.concat_tables(trace.base_parts) if trace.base_parts else schema.empty_table()
        changes = traced_changes(trace, before, after)
    else:
        # The stored rows: their keys and commit times for the diff, their data for the images (the
        # other meta columns, the unique sequence numbers above all, are not decoded).
        needed = pa.schema(
            [f for f in schema if f.name in _DIFF_COLUMNS or f.name not in HOODIE_META_COLUMNS]
        )
        if file_slice.base_file is not None:
            path = join(base_path, file_slice.partition_path, file_slice.base_file.name)
            before = read_parquet(fileio, path, needed)
        else:
            before = needed.empty_table()
        changes = diff_by_key(before, after)
    return log_changes(
        cdc,
        fileio,
        base_path,
        markers,
        file_slice.partition_path,
        file_slice.file_id,
        instant_time,
        write_token,
        changes,
        before,
        after,
    )
