"""Writing and decoding CDC log files.

A CDC log file is an ordinary Hudi log file named with the ``.cdc`` suffix,
``.<fileId>_<instant>.log.1_<writeToken>.cdc``, that the writing instant creates beside the base
file it writes (``HoodieWriteHandle.createLogWriter(instant, CDC_LOGFILE_SUFFIX, empty)``: no
previous log, so version 1 and this task's write token, in every table version). It holds
``CDC_DATA`` blocks (``HoodieCDCDataBlock``: an Avro data block) whose header carries the
INSTANT_TIME and the SCHEMA of the mode (:mod:`hoodie.cdc.schemas`). ``HoodieCDCLogger`` flushes a
block when its records reach ``hoodie.logfile.data.block.max.size``; closing always flushes, so a
logger that saw no change still writes one empty block.

The changes of one file group are computed by key from two tables, the rows before (the old base
file) and the rows after (the new base file), with Arrow kernels:
inserts are keys only after, deletes keys only before, updates keys in both whose row changed
(another ``_hoodie_commit_time``: a merge that keeps the stored record keeps its meta fields,
which is when Hudi logs nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.cdc.schemas import (
    AFTER,
    BEFORE,
    LOGFILE_SUFFIX,
    OP,
    RECORD_KEY,
    TS_MS,
    CDCOperation,
    SupplementalLoggingMode,
    cdc_schema,
    schema_text,
)
from hoodie.errors import CorruptLogBlockError, InstantExistsError
from hoodie.file_group.log_block import BlockType, HeaderKey, LogBlock, encode_block
from hoodie.file_group.log_file import LogFile
from hoodie.file_group.log_reader import read_blocks
from hoodie.io.fileio import FileIO, join
from hoodie.merge.trace import MergeTrace
from hoodie.schema.avro_arrow import (
    avro_to_arrow_schema,
    decode_avro_block_content,
    encode_avro_block_content,
)
from hoodie.schema.meta_fields import (
    COMMIT_TIME_METADATA_FIELD,
    HOODIE_META_COLUMNS_WITH_OPERATION,
    RECORD_KEY_METADATA_FIELD,
)

MAX_BLOCK_BYTES = 256 * 1024 * 1024
"""``hoodie.logfile.data.block.max.size`` default (``HoodieStorageConfig``)."""


@dataclass(frozen=True)
class Changes:
    """The changes of one file group: per change an op, the key, and row indices into the
    before/after tables (-1: no such image)."""

    ops: pa.Array  # string: i/u/d
    keys: pa.Array  # string
    before: np.ndarray  # int64 index into the before table, -1 for none
    after: np.ndarray  # int64 index into the after table, -1 for none

    def __len__(self) -> int:
        return len(self.ops)


def _keys(table: pa.Table) -> pa.Array:
    column = table[RECORD_KEY_METADATA_FIELD]
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return arr if pa.types.is_string(arr.type) else pc.cast(arr, pa.string())


def _ops(codes: np.ndarray) -> pa.Array:
    labels = pa.array([CDCOperation.INSERT.value, CDCOperation.UPDATE.value, CDCOperation.DELETE.value])
    return labels.take(pa.array(codes, pa.int8()))


def _positions(bk: pa.Array, ak: pa.Array) -> np.ndarray:
    """For each key of ``bk``, its position in ``ak`` (-1: gone). A merge keeps the stored rows in
    their order, so when nothing was deleted the keys line up and no hash table is needed."""
    n = len(bk)
    if len(ak) >= n and (n == 0 or pc.all(pc.equal(bk, ak.slice(0, n))).as_py()):
        return np.arange(n, dtype=np.int64)
    found = pc.index_in(bk, value_set=ak)
    out: np.ndarray = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return out


def diff_by_key(before: pa.Table, after: pa.Table) -> Changes:
    """The changes that turn ``before`` into ``after`` (both with meta fields; keys unique in each):
    updates and deletes in ``before``'s order, then inserts in ``after``'s order.

    A kept key is updated when its row carries another ``_hoodie_commit_time``: one instant writes
    one version of a key, so an equal commit time is the same version (a merge that keeps the
    stored record keeps its meta fields)."""
    bk, ak = _keys(before), _keys(after)
    after_pos = _positions(bk, ak)
    found = after_pos >= 0
    b_idx = np.arange(len(bk), dtype=np.int64)
    kept_b, kept_a = b_idx[found], after_pos[found]
    if len(kept_a) == len(bk) and np.array_equal(kept_a, b_idx):
        # aligned: the stored rows are the first rows of the output, in order
        changed = pc.not_equal(
            before[COMMIT_TIME_METADATA_FIELD], after[COMMIT_TIME_METADATA_FIELD].slice(0, len(bk))
        )
    else:
        changed = pc.not_equal(
            before[COMMIT_TIME_METADATA_FIELD].take(pa.array(kept_b)),
            after[COMMIT_TIME_METADATA_FIELD].take(pa.array(kept_a)),
        )
    changed_np = pc.fill_null(changed, True).to_numpy(zero_copy_only=False).astype(bool)
    upd_b, upd_a = kept_b[changed_np], kept_a[changed_np]
    del_b = b_idx[~found]
    matched = np.zeros(len(ak), dtype=bool)
    matched[kept_a] = True
    new_a = np.flatnonzero(~matched).astype(np.int64)
    return _changes(bk, ak, upd_b, upd_a, del_b, new_a)


def _changes(
    bk: pa.Array,
    ak: pa.Array,
    upd_b: np.ndarray,
    upd_a: np.ndarray,
    del_b: np.ndarray,
    new_a: np.ndarray,
) -> Changes:
    """Updates (before/after rows), deletes (before rows) and inserts (after rows), in that order."""
    n_u, n_d, n_i = len(upd_b), len(del_b), len(new_a)
    before_idx = np.concatenate([upd_b, del_b, np.full(n_i, -1, np.int64)])
    after_idx = np.concatenate([upd_a, np.full(n_d, -1, np.int64), new_a])
    codes = np.concatenate([np.ones(n_u, np.int8), np.full(n_d, 2, np.int8), np.zeros(n_i, np.int8)])
    keys = pa.concat_arrays([bk.take(pa.array(upd_b)), bk.take(pa.array(del_b)), ak.take(pa.array(new_a))])
    return Changes(_ops(codes), keys, before_idx, after_idx)


def traced_changes(trace: MergeTrace, before: pa.Table, after: pa.Table) -> Changes:
    """:func:`diff_by_key` of a merge's base rows ``before`` (the trace's) and its output ``after``,
    read off the merge's trace instead of looked up by key."""
    upd_b, upd_a, del_b, new_a = trace.positions()
    return _changes(_keys(before), _keys(after), upd_b, upd_a, del_b, new_a)


def _image(table: pa.Table, idx: np.ndarray, image_type: pa.StructType) -> pa.Array:
    """A struct column of ``table``'s data fields at ``idx`` (null where -1)."""
    valid = idx >= 0
    safe = pa.array(np.where(valid, idx, 0) if len(table) else np.zeros(0, np.int64), pa.int64())
    arrays = []
    for f in image_type:
        if len(table):
            col = table[f.name].take(safe)
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        else:
            col = pa.nulls(len(idx), f.type)
        arrays.append(col.cast(f.type) if col.type != f.type else col)
    return pa.StructArray.from_arrays(arrays, fields=list(image_type), mask=pa.array(~valid))


def cdc_table(
    changes: Changes,
    mode: SupplementalLoggingMode,
    schema: Mapping[str, Any],
    instant_time: str,
    before: pa.Table,
    after: pa.Table,
) -> pa.Table:
    """The CDC records of ``changes`` as a table of the mode's CDC schema ``schema``."""
    arrow = avro_to_arrow_schema(schema)
    n = len(changes)
    columns: dict[str, pa.Array] = {OP: changes.ops}
    if mode is SupplementalLoggingMode.DATA_BEFORE_AFTER:
        columns[TS_MS] = pa.array([instant_time] * n, pa.string())
    else:
        columns[RECORD_KEY] = changes.keys
    if mode is not SupplementalLoggingMode.OP_KEY_ONLY:
        image_type = arrow.field(BEFORE).type
        columns[BEFORE] = _image(before, changes.before, image_type)
        if mode is SupplementalLoggingMode.DATA_BEFORE_AFTER:
            columns[AFTER] = _image(after, changes.after, image_type)
    return pa.Table.from_arrays([columns[f.name] for f in arrow], schema=arrow)


def cdc_blocks(table: pa.Table, schema: Mapping[str, Any], instant_time: str) -> bytes:
    """CDC_DATA blocks of ``table``'s rows, one per ``MAX_BLOCK_BYTES`` of records."""
    header = {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_text(schema)}
    n = table.num_rows
    per_block = n
    if n and table.nbytes > MAX_BLOCK_BYTES:
        per_block = max(1, n * MAX_BLOCK_BYTES // table.nbytes)
    parts = []
    for start in range(0, max(n, 1), max(per_block, 1)):
        chunk = table.slice(start, per_block)
        parts.append(encode_block(BlockType.CDC_DATA, header, encode_avro_block_content(chunk, schema)))
    return b"".join(parts)


@dataclass(frozen=True)
class CDCLogFile:
    """A CDC log file a write made: its path relative to the table and its size."""

    path: str
    size: int


def write_cdc_log(
    fileio: FileIO,
    base_path: str,
    partition: str,
    file_id: str,
    instant_time: str,
    write_token: str,
    mode: SupplementalLoggingMode,
    table_schema: Mapping[str, Any],
    changes: Changes,
    before: pa.Table,
    after: pa.Table,
) -> CDCLogFile:
    """Write the CDC log file of ``changes`` for one file group (the caller marks it APPEND first)."""
    schema = cdc_schema(mode, table_schema)
    table = cdc_table(changes, mode, schema, instant_time, before, after)
    data = cdc_blocks(table, schema, instant_time)
    name = cdc_log_file(file_id, instant_time, write_token).name
    path = join(base_path, partition, name)
    try:
        fileio.create_new(path, data)
    except FileExistsError as e:
        raise InstantExistsError(f"CDC log file {path} already exists") from e
    return CDCLogFile(join(partition, name), len(data))


def cdc_log_file(file_id: str, instant_time: str, write_token: str) -> LogFile:
    return LogFile(file_id, instant_time, 1, write_token, "log", LOGFILE_SUFFIX)


# -- reading ------------------------------------------------------------------------------------


def read_cdc_blocks(fileio: FileIO, base_path: str, path: str) -> list[LogBlock]:
    """The CDC_DATA blocks of the CDC log file at ``path`` (relative to the table)."""
    data = fileio.read_bytes(join(base_path, path))
    blocks = read_blocks(data, path)
    for b in blocks:
        if b.block_type is not BlockType.CDC_DATA:
            raise CorruptLogBlockError(f"{path}: a {b.block_type.name} block in a CDC log file")
    return blocks


def decode_cdc_block(block: LogBlock, schema: Mapping[str, Any]) -> pa.Table:
    """The records of a CDC block, read with ``schema`` (the reader's CDC schema of the mode)."""
    writer = block.schema or schema_text(schema)
    return decode_avro_block_content(block.content, writer, avro_to_arrow_schema(schema))


def read_cdc_records(
    fileio: FileIO, base_path: str, paths: Sequence[str], schema: Mapping[str, Any]
) -> pa.Table:
    """Every CDC record of the CDC log files ``paths``, in file and block order."""
    arrow = avro_to_arrow_schema(schema)
    tables = [decode_cdc_block(b, schema) for p in paths for b in read_cdc_blocks(fileio, base_path, p)]
    return pa.concat_tables(tables) if tables else arrow.empty_table()


def data_fields(schema: pa.Schema) -> list[str]:
    return [n for n in schema.names if n not in HOODIE_META_COLUMNS_WITH_OPERATION]
