"""Tagging incoming keys to the file groups that already hold them (Hudi's bloom index).

For each live file slice of a partition: candidate keys are those inside the base file's
``[min, max]`` record-key range that its bloom filter may contain; only then is the base file's
key column read to confirm. Keys living only in log blocks are found by decoding just the key
column of the slice's data blocks, so records Hudi wrote into logs are found too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.bloom import BLOOM_FILTER_FOOTER_KEY, BLOOM_TYPE_FOOTER_KEY, deserialize_bloom_filter
from hoodie.file_group.base_file_writer import MAX_RECORD_KEY_FOOTER, MIN_RECORD_KEY_FOOTER
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType
from hoodie.io.fileio import FileIO
from hoodie.read.log_scanner import scan_log_blocks
from hoodie.read.slice_reader import decode_data_block, decode_delete_block
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD

_KEY_SCHEMA = pa.schema([pa.field(RECORD_KEY_METADATA_FIELD, pa.string())])


@dataclass(frozen=True, slots=True)
class TaggedKeys:
    """For each incoming key (by position), the slice holding it or None."""

    slices: list[FileSlice | None]

    def found(self) -> np.ndarray:
        return np.array([s is not None for s in self.slices], dtype=bool)


def _base_candidates(fileio: FileIO, path: str, keys: pa.Array) -> pa.Array:
    with fileio.open_input(path) as f:
        meta = pq.ParquetFile(f).metadata.metadata or {}
    mask = np.ones(len(keys), dtype=bool)
    lo = meta.get(MIN_RECORD_KEY_FOOTER.encode())
    hi = meta.get(MAX_RECORD_KEY_FOOTER.encode())
    if lo is not None and hi is not None:
        in_range = pc.and_(pc.greater_equal(keys, lo.decode()), pc.less_equal(keys, hi.decode()))
        mask &= np.asarray(in_range.to_numpy(zero_copy_only=False), dtype=bool)
    text = meta.get(BLOOM_FILTER_FOOTER_KEY.encode())
    if text is not None and mask.any():
        type_code = (meta.get(BLOOM_TYPE_FOOTER_KEY.encode()) or b"SIMPLE").decode()
        bloom = deserialize_bloom_filter(text, type_code)
        idx = np.nonzero(mask)[0]
        maybe = bloom.might_contain_many(keys.take(pa.array(idx)))
        mask[idx[~np.asarray(maybe, dtype=bool)]] = False
    return keys.filter(pa.array(mask))


def _slice_keys(
    fileio: FileIO,
    base_path: str,
    file_slice: FileSlice,
    keys: pa.Array,
    table_version: int,
    is_committed: Callable[[str], bool],
) -> pa.Array:
    """Which of ``keys`` the slice holds (exact)."""
    found: list[pa.Array] = []
    base = file_slice.base_file_path(base_path)
    if base is not None:
        candidates = _base_candidates(fileio, base, keys)
        if len(candidates):
            with fileio.open_input(base) as f:
                column = pq.ParquetFile(f).read(columns=[RECORD_KEY_METADATA_FIELD]).column(0)
            present = pc.is_in(candidates, value_set=column.combine_chunks().cast(pa.string()))
            found.append(candidates.filter(present))
    if file_slice.log_files:
        log_keys: list[pa.Array] = []
        for block in scan_log_blocks(
            fileio, base_path, file_slice, is_committed=is_committed, latest_instant=None
        ):
            if block.block_type is BlockType.DELETE:
                log_keys.append(pa.array(decode_delete_block(block, table_version).keys, pa.string()))
            else:
                log_keys.append(
                    decode_data_block(block, _KEY_SCHEMA)[RECORD_KEY_METADATA_FIELD].combine_chunks()
                )
        if log_keys:
            in_logs = pc.is_in(keys, value_set=pa.concat_arrays(log_keys))
            found.append(keys.filter(in_logs))
    if not found:
        return pa.array([], pa.string())
    return pa.concat_arrays(found)


def tag_keys(
    fileio: FileIO,
    base_path: str,
    slices_by_partition: Mapping[str, Sequence[FileSlice]],
    keys: pa.Array,
    partitions: pa.Array,
    table_version: int,
    is_committed: Callable[[str], bool],
) -> TaggedKeys:
    """Locate each ``(partition, key)`` in the latest slices of its partition."""
    out: list[FileSlice | None] = [None] * len(keys)
    part_values = partitions.to_pylist()
    by_partition: dict[str, list[int]] = {}
    for i, p in enumerate(part_values):
        by_partition.setdefault(p, []).append(i)
    for partition, positions in by_partition.items():
        slices = slices_by_partition.get(partition, ())
        if not slices:
            continue
        pos = np.asarray(positions, dtype=np.int64)
        part_keys = keys.take(pa.array(pos))
        for file_slice in slices:
            held = _slice_keys(fileio, base_path, file_slice, part_keys, table_version, is_committed)
            if not len(held):
                continue
            hits = np.asarray(pc.is_in(part_keys, value_set=held).to_numpy(zero_copy_only=False), dtype=bool)
            for i in pos[hits]:
                if out[i] is None:
                    out[i] = file_slice
    return TaggedKeys(out)
