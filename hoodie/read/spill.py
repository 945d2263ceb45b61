"""Compaction of a file slice whose log records do not fit the memory budget: an external merge.

Hudi bounds a compaction's log records with ``hoodie.memory.compaction.max.size`` and spills the
rest of its ``ExternalSpillableMap`` under ``hoodie.memory.spillable.map.path``. hts does the
same job as an external merge by key, with the vectorized merge's semantics unchanged:

1. The log blocks are decoded in order, a part at a time (the next part on a thread meanwhile),
   and every entry (data row or delete entry, with its processing sequence number) goes to one of
   N buckets by a hash of its key:
   data rows to the bucket's Arrow IPC spill file, delete entries (keys and ordering values,
   small) to memory.
2. Each bucket is merged by :func:`~hoodie.merge.vectorized.merge_logs` on its own (a key lives in
   one bucket, and its entries keep their processing order there): its winning data rows go to a
   second spill file; only each key's outcome stays in memory (key, delete/reset flags, ordering
   value, first sequence number) — not the rows. Two buckets merge at a time, on threads.
3. The base file streams through :class:`~hoodie.merge.vectorized.BaseMerger` against those
   outcomes, batch by batch, exactly as the in-memory path does; a base key finds its log key by
   a binary search in the log keys, sorted once (no hash table rebuilt per batch), and the next
   batch is decoded on a thread meanwhile.
4. The log rows to emit are read back from the spill files in the in-memory path's order (by
   the first appearance of their key in the logs), a window at a time.

The output equals the in-memory path's row for row, in the same order. The spill directory is
removed when the merge ends, completes or fails. Partial updates, custom mergers and payloads
(the per-record engine) and CDC tables (the before images) stay on the in-memory path.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import CorruptLogBlockError, TableServiceError
from hoodie.file_group.base_file_writer import BaseFileWriter
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType, LogBlock
from hoodie.io.fileio import FileIO
from hoodie.merge.log_entries import DeleteEntries, MergeSpec, ordering_types
from hoodie.merge.vectorized import BaseMerger, LogMerge, MergeCounts, merge_logs
from hoodie.read.log_scanner import ScanStats, scan_log_blocks
from hoodie.read.read_ahead import read_ahead_from_first
from hoodie.read.slice_reader import (
    BASE_BATCH_ROWS,
    SliceReadOptions,
    decode_data_block,
    decode_delete_block,
    iter_parquet,
    iter_read_slice,
    project_table,
)
from hoodie.read.spill_blocks import SMALL_BLOCK, WINDOW, LazyLogs, NotStreamable
from hoodie.read.spill_budget import IN_MEMORY_FACTOR, MAX_BUCKETS, MAX_SIZE_KEY, MemoryBudget, spills
from hoodie.read.spill_keys import KeyIndex, bucket_of
from hoodie.schema.avro_arrow import iter_avro_block_content

log = logging.getLogger(__name__)

#: Rows per record batch of a winners file: the emit pass holds about one batch per bucket.
_WINNER_BATCH_ROWS = 8192
#: Rows per row group of a spilled slice's new base file: the writer buffers one row group's rows
#: (Arrow, about 200 bytes a row on the bench) before encoding it; 1M rows would take a fifth of 1 GiB.
SPILL_ROW_GROUP_ROWS = BASE_BATCH_ROWS
#: Rows per batch of the base file in the base pass (two are held: one merged, one read ahead).
SPILL_BATCH_ROWS = BASE_BATCH_ROWS // 2
#: Arrow's (and Hudi's, ``hoodie.parquet.page.size``) dictionary page limit for a full row group,
#: and the least a spilled slice's smaller row groups get.
_DICTIONARY_BYTES = 1024 * 1024
_MIN_DICTIONARY_BYTES = 64 * 1024
_SEQ = "_hts_spill_seq"
#: Buckets merged at once in pass 2.
_MERGE_THREADS = 2


def iter_compacted_slice(
    fileio: FileIO,
    base_path: str,
    file_slice: FileSlice,
    opts: SliceReadOptions,
    budget: MemoryBudget,
    *,
    log_bytes: int,
    cdc: bool = False,
    writer: BaseFileWriter | None = None,
) -> Iterator[pa.Table]:
    """The merged rows of ``file_slice`` for compaction: in memory when its logs (``log_bytes``
    in all, as the caller found them checking the plan's files) fit ``budget``, else by the
    external merge (same rows, same order), when the output's ``writer`` also buffers smaller
    row groups (:data:`SPILL_ROW_GROUP_ROWS`)."""
    if not spills(opts, log_bytes, budget, cdc=cdc):
        yield from iter_read_slice(fileio, base_path, file_slice, opts)
        return
    # Each bucket's log rows should take about an eighth of the budget (at most MAX_BUCKETS files):
    # merging a bucket holds its rows and their winners while the base pass holds a row group.
    buckets = min(MAX_BUCKETS, max(1, math.ceil(log_bytes * IN_MEMORY_FACTOR / (budget.max_size / 8))))
    if writer is not None:
        in_memory_rows = writer.row_group_rows
        writer.row_group_rows = min(in_memory_rows, SPILL_ROW_GROUP_ROWS)
        # The dictionary limit shrinks with the row group: each row group tries the same share of
        # its values as dictionary entries as the in-memory path's does (a high-cardinality column
        # fills the dictionary, then falls back to plain), not 4x the share at 4x the encoding cost.
        writer.dictionary_pagesize_limit = max(
            _MIN_DICTIONARY_BYTES, _DICTIONARY_BYTES * writer.row_group_rows // in_memory_rows
        )
        writer.encode_ahead = True  # Parquet encoding (GIL released) overlaps the merge
    yield from iter_spilled_slice(fileio, base_path, file_slice, opts, budget, buckets)


@dataclass
class _Bucket:
    """One bucket's spilled log entries: data rows in an IPC file, delete entries in memory."""

    path: Path
    writer: pa.ipc.RecordBatchFileWriter | None = None
    rows: int = 0
    # In processing order: ("data", rows) spans of the spill file, or delete entries with seqs.
    segments: list[tuple[int, DeleteEntries | None, npt.NDArray[np.int64] | None]] = field(
        default_factory=list
    )

    def add_data(self, table: pa.Table) -> None:
        if self.writer is None:
            self.writer = pa.ipc.new_file(str(self.path), table.schema)
        self.writer.write_table(table)
        self.rows += table.num_rows
        if self.segments and self.segments[-1][1] is None:
            n, _, _ = self.segments[-1]
            self.segments[-1] = (n + table.num_rows, None, None)
        else:
            self.segments.append((table.num_rows, None, None))

    def add_deletes(self, entries: DeleteEntries, seqs: npt.NDArray[np.int64]) -> None:
        self.segments.append((len(entries), entries, seqs))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


@dataclass
class _Outcomes:
    """Per distinct log key, bucket by bucket: what the merge of its log entries left."""

    keys: list[pa.Array] = field(default_factory=list)
    is_delete: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    is_reset: list[npt.NDArray[np.bool_]] = field(default_factory=list)
    first_seq: list[npt.NDArray[np.int64]] = field(default_factory=list)
    ordering: list[list[pa.Array]] = field(default_factory=list)
    buckets: list[int] = field(default_factory=list)  # the bucket of each list entry
    entries: int = 0


@dataclass
class _Settled:
    """The outcomes over all buckets, a key's code being its position in bucket order, in compact
    arrays for the base pass and the emit pass (the keys themselves are in the :class:`KeyIndex`)."""

    is_delete: npt.NDArray[np.bool_]
    is_reset: npt.NDArray[np.bool_]
    ordering: list[pa.Array]
    spans: dict[int, tuple[int, int]]  # bucket -> its codes [start, end)
    by_first: npt.NDArray[Any]  # codes (int32 or int64) by the first appearance of their key
    bucket: npt.NDArray[np.uint8]  # per code (MAX_BUCKETS <= 256)
    entries: int

    @property
    def keys(self) -> int:
        return len(self.is_delete)


def _settle(out: _Outcomes) -> tuple[_Settled, KeyIndex]:
    """Concatenate the buckets' outcomes, freeing each list as it goes."""
    n = sum(len(k) for k in out.keys)
    code_type = np.int32 if n < 2**31 else np.int64
    first_seq = np.concatenate(out.first_seq)
    out.first_seq = []
    by_first = np.argsort(first_seq, kind="stable").astype(code_type)
    del first_seq
    spans: dict[int, tuple[int, int]] = {}
    bucket = np.empty(n, dtype=np.uint8)
    start = 0
    for b, keys in zip(out.buckets, out.keys, strict=True):
        spans[b] = (start, start + len(keys))
        bucket[start : start + len(keys)] = b
        start += len(keys)
    settled = _Settled(
        is_delete=np.concatenate(out.is_delete),
        is_reset=np.concatenate(out.is_reset),
        ordering=[pa.concat_arrays(v) for v in out.ordering],
        spans=spans,
        by_first=by_first,
        bucket=bucket,
        entries=out.entries,
    )
    out.is_delete, out.is_reset, out.ordering = [], [], []
    index = KeyIndex(out.keys, code_type)
    out.keys = []
    return settled, index


def _entries(
    block: LogBlock, opts: SliceReadOptions, lazy: LazyLogs | None
) -> Iterator[pa.Table | DeleteEntries]:
    """A log block's entries in processing order, a bounded part at a time."""
    if lazy is not None and lazy.content_range(block) is not None:
        if block.block_type is BlockType.AVRO_DATA and opts.on_read is None and block.schema:
            yield from lazy.iter_avro(block, opts.schema)
            return
        block = lazy.content(block)
    if block.block_type is BlockType.DELETE:
        d = decode_delete_block(block, opts.table_version)
        yield DeleteEntries(pa.array(d.keys, pa.string()), d.ordering_values, d.ordering_classes)
    elif block.block_type is BlockType.AVRO_DATA and opts.on_read is None:
        if not block.schema:
            raise CorruptLogBlockError(
                f"{block.log_file}@{block.offset}: Avro data block has no SCHEMA header"
            )
        yield from iter_avro_block_content(
            block.content,
            block.schema,
            opts.schema,
            rows=BASE_BATCH_ROWS,
            source=f"{block.log_file}@{block.offset}",
        )
    elif block.block_type is BlockType.PARQUET_DATA and opts.on_read is None:
        where = f"{block.log_file}@{block.offset}"
        try:
            pf = pq.ParquetFile(pa.BufferReader(block.content))
            for batch in pf.iter_batches(batch_size=BASE_BATCH_ROWS):
                yield project_table(pa.Table.from_batches([batch]), opts.schema, where)
        except pa.ArrowInvalid as e:
            raise CorruptLogBlockError(f"{where}: Parquet data block is unreadable: {e}") from e
    else:
        yield decode_data_block(block, opts.schema, on_read=opts.on_read)


def _parts(
    blocks: list[LogBlock], opts: SliceReadOptions, lazy: LazyLogs | None
) -> Iterator[pa.Table | DeleteEntries]:
    """The entries of ``blocks`` in processing order, each block released once decoded."""
    while blocks:
        block = blocks.pop(0)  # released as we go: memory holds one log file's bytes at most
        yield from _entries(block, opts, lazy)
        del block


def _spill_logs(
    blocks: list[LogBlock], opts: SliceReadOptions, buckets: list[_Bucket], lazy: LazyLogs | None
) -> int:
    """Pass 1: every log entry to its key's bucket, with its processing sequence number."""
    key = opts.key_field
    seq = 0
    # The next part is read and decoded on a thread while this one is bucketed and written.
    for part in read_ahead_from_first(_parts(blocks, opts, lazy), 1, "hts-spill-parts"):
        n = len(part) if isinstance(part, DeleteEntries) else part.num_rows
        if n == 0:
            continue
        seqs = np.arange(seq, seq + n, dtype=np.int64)
        seq += n
        keys = part.keys if isinstance(part, DeleteEntries) else part[key].combine_chunks()
        where = bucket_of(keys, len(buckets))
        # One stable gather groups the part by bucket (each bucket's rows keep their order).
        order = np.argsort(where, kind="stable")
        bounds = np.searchsorted(where[order], np.arange(len(buckets) + 1))
        if isinstance(part, DeleteEntries):
            for b in range(len(buckets)):
                rows = order[bounds[b] : bounds[b + 1]]
                if len(rows):
                    picked = DeleteEntries(
                        part.keys.take(pa.array(rows)),
                        [part.ordering_values[j] for j in rows.tolist()],
                        [part.ordering_classes[j] for j in rows.tolist()],
                    )
                    buckets[b].add_deletes(picked, seqs[rows])
            continue
        grouped = part.append_column(_SEQ, pa.array(seqs)).take(pa.array(order))
        del part
        for b in range(len(buckets)):
            if bounds[b + 1] > bounds[b]:
                buckets[b].add_data(grouped.slice(int(bounds[b]), int(bounds[b + 1] - bounds[b])))
    for bucket in buckets:
        bucket.close()
    return seq


def _load(bucket: _Bucket) -> tuple[list[pa.Table | DeleteEntries], npt.NDArray[np.int64]]:
    """A bucket's entries back in processing order, and their sequence numbers."""
    # Read into memory (an OSFile, not a memory map whose pages would stay resident).
    data = None
    if bucket.rows:
        with pa.OSFile(str(bucket.path)) as f:
            data = pa.ipc.open_file(f).read_all()
    batches: list[pa.Table | DeleteEntries] = []
    seqs: list[npt.NDArray[np.int64]] = []
    pos = 0
    for n, deletes, delete_seqs in bucket.segments:
        if deletes is not None and delete_seqs is not None:
            batches.append(deletes)
            seqs.append(delete_seqs)
            continue
        assert data is not None
        part = data.slice(pos, n)
        pos += n
        seqs.append(np.asarray(part[_SEQ].to_numpy(), dtype=np.int64))
        batches.append(part.drop_columns([_SEQ]))
    return batches, np.concatenate(seqs) if seqs else np.zeros(0, np.int64)


@dataclass
class _BucketMerge:
    """What merging one bucket's log entries left: per distinct key (in first-appearance order),
    its outcome, and the file of its winning data rows."""

    keys: pa.Array
    is_delete: npt.NDArray[np.bool_]
    is_reset: npt.NDArray[np.bool_]
    first_seq: npt.NDArray[np.int64]
    ordering: list[pa.Array]
    entries: int
    winners: Path | None


def _merge_bucket(bucket: _Bucket, spec: MergeSpec, ord_types: list[pa.DataType]) -> _BucketMerge | None:
    """Pass 2: merge one bucket's log entries; keep the outcomes, spill the winning rows."""
    batches, seqs = _load(bucket)
    bucket.segments = []
    logs = merge_logs(batches, spec, ord_types)
    del batches
    bucket.path.unlink(missing_ok=True)
    if logs is None:
        return None
    won = logs.winner
    assert logs.entry_codes is not None
    _, first = np.unique(logs.entry_codes, return_index=True)  # dictionary: first-appearance order
    merged = _BucketMerge(
        keys=logs.dictionary,
        is_delete=logs.is_delete[won],
        is_reset=logs.is_reset[won],
        first_seq=seqs[first],
        ordering=list(logs.winner_ordering),
        entries=logs.entries,
        winners=None,
    )
    # Winning data rows of keys that are not deletes, in code order (= first-appearance order).
    pos = logs.data_pos[won]
    rows = pos[~logs.is_delete[won] & (pos >= 0)]
    if logs.log_data is None or not len(rows):
        return merged
    merged.winners = bucket.path.with_suffix(".winners")
    winners = logs.log_data.take(pa.array(rows))
    with pa.ipc.new_file(str(merged.winners), winners.schema) as w:
        w.write_table(winners, max_chunksize=_WINNER_BATCH_ROWS)
    return merged


def _merge_buckets(
    buckets: list[_Bucket], spec: MergeSpec, ord_types: list[pa.DataType]
) -> tuple[_Outcomes, list[Path | None]]:
    """Pass 2 over every bucket, two at a time (Arrow and numpy release the GIL: both cores work;
    memory holds two buckets' rows, each about an eighth of the budget), outcomes in bucket order."""
    out = _Outcomes()
    winners: list[Path | None] = []
    with ThreadPoolExecutor(max_workers=_MERGE_THREADS, thread_name_prefix="hts-spill-merge") as pool:
        pending: list[Future[_BucketMerge | None] | None] = [
            pool.submit(_merge_bucket, b, spec, ord_types) for b in buckets
        ]
        try:
            for index, done in enumerate(pending):
                assert done is not None
                merged = done.result()
                pending[index] = None  # its outcome is taken: the future lets go of it
                winners.append(merged.winners if merged is not None else None)
                if merged is None:
                    continue
                out.entries += merged.entries
                out.keys.append(merged.keys)
                out.is_delete.append(merged.is_delete)
                out.is_reset.append(merged.is_reset)
                out.first_seq.append(merged.first_seq)
                out.buckets.append(index)
                if not out.ordering:
                    out.ordering = [[] for _ in merged.ordering]
                for values, acc in zip(merged.ordering, out.ordering, strict=True):
                    acc.append(values)
        finally:
            for future in pending:
                if future is not None:
                    future.cancel()
    return out, winners


class _Winners:
    """A cursor over one bucket's spilled winning rows, yielding only those to emit, in order."""

    def __init__(self, path: Path | None, emit: npt.NDArray[np.bool_]) -> None:
        self.file = pa.OSFile(str(path)) if path is not None else None
        self.reader = pa.ipc.open_file(self.file) if self.file is not None else None
        self.emit = emit  # per winning row of the file
        self.batch = 0
        self.pos = 0  # winning rows read so far
        self.pending: list[pa.Table] = []
        self.pending_rows = 0

    def take(self, n: int) -> pa.Table | None:
        reader = self.reader
        while self.pending_rows < n and reader is not None and self.batch < reader.num_record_batches:
            rb = reader.get_batch(self.batch)
            self.batch += 1
            keep = self.emit[self.pos : self.pos + rb.num_rows]
            self.pos += rb.num_rows
            if keep.any():
                self.pending.append(pa.Table.from_batches([rb.filter(pa.array(keep))]))
                self.pending_rows += int(np.count_nonzero(keep))
        if n == 0 or not self.pending:
            return None
        have = pa.concat_tables(self.pending)
        out, rest = have.slice(0, n), have.slice(n)
        self.pending = [rest] if rest.num_rows else []
        self.pending_rows = rest.num_rows
        if out.num_rows != n:
            raise TableServiceError(f"spill file {self.reader} holds {out.num_rows} rows to emit, not {n}")
        return out


def _emit(settled: _Settled, emit: npt.NDArray[np.bool_], winners: list[Path | None]) -> Iterator[pa.Table]:
    """Pass 4: the log rows to emit, by the first appearance of their key in the logs."""
    cursors: dict[int, _Winners] = {}
    for b, (start, end) in settled.spans.items():
        # A key without a winning row is a delete; rows in the file follow the key order.
        cursors[b] = _Winners(winners[b], emit[start:end][~settled.is_delete[start:end]])
    try:
        chosen = settled.by_first[emit[settled.by_first]]
        for lo in range(0, len(chosen), BASE_BATCH_ROWS):
            window = settled.bucket[chosen[lo : lo + BASE_BATCH_ROWS]]
            pieces = []
            for b in np.unique(window):
                piece = cursors[int(b)].take(int(np.count_nonzero(window == b)))
                if piece is not None:
                    pieces.append(piece)
            merged = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
            # Pieces are grouped by bucket; put each row back at its place in the window.
            grouped = np.argsort(window, kind="stable")
            at = np.empty(len(window), dtype=np.int64)
            at[grouped] = np.arange(len(window), dtype=np.int64)
            yield merged.take(pa.array(at))
    finally:
        for cursor in cursors.values():
            if cursor.file is not None:
                cursor.file.close()


def _scan(
    fileio: FileIO,
    base_path: str,
    file_slice: FileSlice,
    opts: SliceReadOptions,
    stats: ScanStats,
    lazy: LazyLogs | None,
) -> list[LogBlock]:
    return scan_log_blocks(
        fileio,
        base_path,
        file_slice,
        is_committed=opts.is_committed,
        latest_instant=opts.latest_instant,
        instant_range=opts.instant_range,
        report=opts.report,
        stats=stats,
        read_log=lazy.read if lazy is not None else None,
    )


def iter_spilled_slice(
    fileio: FileIO,
    base_path: str,
    file_slice: FileSlice,
    opts: SliceReadOptions,
    budget: MemoryBudget,
    buckets: int,
) -> Iterator[pa.Table]:
    """The merged rows of ``file_slice`` by the external merge over ``buckets`` buckets (see the
    module docstring); the spill directory is gone when the iteration ends or fails."""
    base_file = file_slice.base_file_path(base_path)
    base_batches: Iterable[pa.Table] = (
        read_ahead_from_first(  # one batch decoded (without the GIL) while the one before merges
            iter_parquet(
                fileio, base_file, opts.schema, SPILL_BATCH_ROWS, on_read=opts.on_read, low_memory=True
            ),
            1,
            "hts-spill-read",
        )
        if base_file
        else ()
    )
    # Large blocks keep their content in the file until it is decoded, a window at a time.
    lazy: LazyLogs | None = LazyLogs(
        fileio, min(SMALL_BLOCK, budget.max_size // 16), min(WINDOW, max(4096, budget.max_size // 32))
    )
    scanned = ScanStats()
    try:
        blocks = _scan(fileio, base_path, file_slice, opts, scanned, lazy)
    except NotStreamable as e:  # e.g. a corrupt block: read the log files whole, as the reader does
        log.info("%s: log files read whole (%s)", file_slice.file_id, e)
        lazy, scanned = None, ScanStats()
        blocks = _scan(fileio, base_path, file_slice, opts, scanned, None)
    if any(b.is_partial for b in blocks):
        yield from iter_read_slice(fileio, base_path, file_slice, opts)  # partial updates: per record
        return
    for f in dataclasses.fields(ScanStats):
        setattr(opts.stats, f.name, getattr(opts.stats, f.name) + getattr(scanned, f.name))
    spec = opts.merge_spec
    counts = MergeCounts()
    if opts.info is not None:
        opts.info.counts = counts
    if not blocks:
        for batch in base_batches:
            counts.base_rows += batch.num_rows
            yield batch
        return
    ord_types = ordering_types([], spec, opts.schema.empty_table())
    root = Path(tempfile.mkdtemp(prefix="hts-spill-", dir=budget.spill_path))
    log.info(
        "%s: log records over %s=%d spill into %d buckets under %s",
        file_slice.file_id,
        MAX_SIZE_KEY,
        budget.max_size,
        buckets,
        root,
    )
    try:
        spilled = [_Bucket(root / f"bucket-{i}.arrow") for i in range(buckets)]
        try:
            _spill_logs(blocks, opts, spilled, lazy)
        finally:
            for bucket in spilled:
                bucket.close()
        del blocks
        outcomes, winners = _merge_buckets(spilled, spec, ord_types)
        if not outcomes.keys:
            for batch in base_batches:
                counts.base_rows += batch.num_rows
                yield batch
            return
        settled, index = _settle(outcomes)
        del outcomes
        summary = LogMerge(
            dictionary=pa.nulls(settled.keys),  # the keys are in the index
            winner=np.arange(settled.keys, dtype=np.int64),
            is_delete=settled.is_delete,
            is_reset=settled.is_reset,
            data_pos=np.broadcast_to(np.int64(-1), (settled.keys,)),  # unused by the base pass: no memory
            log_data=None,
            winner_ordering=settled.ordering,
            entries=settled.entries,
        )
        merger = BaseMerger(summary, spec, counts, index)
        pool = pa.default_memory_pool()
        for batch in base_batches:
            kept = merger.merge_batch(batch)
            del batch
            if kept.num_rows:
                yield kept
            del kept
            # Freed pages are reused by the next batch (no page faults) until RSS nears the budget;
            # then they go back to the OS and RSS stays near the live bytes.
            if budget.over_release_share():
                pool.release_unused()
        merger.codes_of = None  # the base pass is over: drop the keys
        del index, summary
        settled.ordering = []
        emit = ~settled.is_delete & ~merger.base_won
        counts.log_inserts = int(np.count_nonzero(emit & ~merger.base_has))
        del merger
        yield from _emit(settled, emit, winners)
    finally:
        shutil.rmtree(root, ignore_errors=True)
