"""CDC logs of the writes that rewrite a base file: COW merges and MOR compaction.

As Hudi's ``HoodieMergeHandleWithChangeLog`` (COW upsert/delete, and a MERGE_ON_READ small file
rewritten by a delta commit) and 1.1's ``FileGroupReaderBasedMergeHandle`` (compaction) do: the
changes between the old base file and the new one go to a CDC log file beside the new base file,
and the write stat's ``cdcStats`` maps the log's path to its size. An insert appended to a small
file without merging (Hudi's ``HoodieConcatHandle``, which logs nothing, so Spark's reader fails on
it) logs the appended rows as inserts.

A COW write skips the log where ``HoodieCDCExtractor.parseWriteStat`` infers the changes from the
stat alone: a delete that leaves the file group empty (``BASE_FILE_DELETE``) and a write whose
every record is new and that dropped none (``BASE_FILE_INSERT``). Everywhere else the extractor
requires the log ("There should be a cdc log file"), even when no record changed; then, as Hudi's
logger does on close, the log holds one empty block. Compaction always writes it (1.1 closes the
logger for every file group it compacts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.cdc.logger import CDCLogFile, Changes, cdc_log_file, diff_by_key, inserts_only, write_cdc_log
from hoodie.cdc.schemas import SupplementalLoggingMode, cdc_enabled, logging_mode
from hoodie.config.table_config import TableConfig
from hoodie.file_group.file_slice import FileSlice
from hoodie.io.fileio import FileIO, join
from hoodie.read.slice_reader import read_parquet
from hoodie.schema.avro_arrow import META_FIELDS
from hoodie.write.markers import IOType, WriteMarkers

_DIFF_COLUMNS = ("_hoodie_commit_time", "_hoodie_record_key")


@dataclass(frozen=True)
class CDCWrite:
    """What a handle needs to log changes: the mode and the table schema (with meta fields)."""

    mode: SupplementalLoggingMode
    table_schema: Mapping[str, Any]

    @classmethod
    def of(cls, config: TableConfig, table_schema: Mapping[str, Any]) -> CDCWrite | None:
        """The CDC settings of a table, None when CDC is off."""
        return cls(logging_mode(config), table_schema) if cdc_enabled(config) else None


def extractor_infers(
    *, delete_operation: bool, writes: int, deletes: int, inserts: int, updates: int
) -> bool:
    """Whether Hudi's CDC extractor derives a base-file write's changes without a CDC log."""
    if delete_operation and writes == 0 and deletes != 0:
        return True  # BASE_FILE_DELETE
    # BASE_FILE_INSERT. Hudi's handle also skips the log when every old record was deleted and only
    # new ones written; the reader would then report the inserts and lose the deletes, so hts writes
    # the log there (the reader prefers cdcStats whenever present).
    return updates == 0 and writes == inserts and deletes == 0


def merge_changes(before: pa.Table, after: pa.Table, instant_time: str, *, concat: bool) -> Changes:
    """The changes of a COW merge; ``concat`` (insert without merging) logs the appended rows as inserts."""
    if concat:
        ours = pc.fill_null(pc.equal(after["_hoodie_commit_time"], instant_time), False)
        return inserts_only(after, np.flatnonzero(ours.to_numpy(zero_copy_only=False)))
    return diff_by_key(before, after)


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
) -> dict[str, int]:
    """The CDC log of compacting ``file_slice`` into ``merged`` (the new base file's rows): the diff
    between the old base file and the merged output, as ``FileGroupReaderBasedMergeHandle``'s
    ``CDCCallback`` logs it (inserts, updates with before/after, deletes)."""
    # The stored rows: their keys and commit times for the diff, their data for the images (the
    # other meta columns, the unique sequence numbers above all, are not decoded).
    needed = pa.schema([f for f in schema if f.name in _DIFF_COLUMNS or f.name not in META_FIELDS])
    if file_slice.base_file is not None:
        path = join(base_path, file_slice.partition_path, file_slice.base_file.name)
        before = read_parquet(fileio, path, needed)
    else:
        before = needed.empty_table()
    after = pa.concat_tables(merged) if merged else schema.empty_table()
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
