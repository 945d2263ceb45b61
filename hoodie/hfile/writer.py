"""Writing HFiles (v3) byte-compatible with the ones Apache Hudi writes through HBase.

The layout is HBase's, as in the metadata tables Hudi 1.0 wrote, which every reader accepts
(HBase's, Hudi's own Java reader, hudi-rs):

* data blocks filled until their uncompressed payload reaches ``block_size`` (Hudi's
  ``hoodie.hfile.block.size``, 1 MiB); a key is ``int16 rowLength | row | 0 | LATEST_TIMESTAMP |
  Put`` and every KeyValue ends with the memstore timestamp 0;
* meta blocks in name order (Hudi's base files carry ``bloomFilter``);
* a single-level root data index keyed by each block's full first key, or, with
  ``index_block_entries``, leaf index blocks written after the data blocks they cover (and
  intermediate levels as needed) as HBase does for large files;
* the meta index, the file info sorted by key (the caller's entries plus ``KEY_VALUE_VERSION``,
  ``MAX_MEMSTORE_TS_KEY``, ``hfile.AVG_KEY_LEN``, ``hfile.AVG_VALUE_LEN``,
  ``hfile.CREATE_TIME_TS`` and ``hfile.LASTKEY``), and the trailer, version 3.3;
* every block gzip-compressed exactly as HBase does (or not at all), with CRC32C checksums, and
  ``prevBlockOffset`` chaining the blocks of each type.

Hudi 1.1's own Java writer differs in details no reader depends on (NULL checksums, index keys
without the constant key suffix, file info in hash order, version 3.0).
"""

from __future__ import annotations

import operator
import struct
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import accumulate

from hoodie.errors import UnsupportedTableError
from hoodie.hfile.blocks import (
    GZIP_LEVEL,
    HEADER_SIZE,
    SUPPORTED_CODECS,
    BlockType,
    CompressionCodec,
    encode_block,
    encode_entries,
    encode_key,
    encode_nonroot_index,
    encode_root_index,
    join_entries,
)
from hoodie.hfile.protobuf import delimited, encode_info
from hoodie.hfile.reader import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    CREATE_TIME_TS,
    FILE_INFO_MAGIC,
    KEY_VALUE_VERSION,
    KEY_VALUE_VERSION_WITH_MEMSTORE_TS,
    LAST_KEY,
    MAX_MEMSTORE_TS_KEY,
)
from hoodie.hfile.trailer import COMPARATOR_CLASS_NAME, TRAILER_SIZE, Trailer

DEFAULT_BLOCK_SIZE = 1024 * 1024
"""Hudi's ``hoodie.hfile.block.size`` default (also what it uses for HFILE_DATA log blocks)."""

RESERVED_FILE_INFO_KEYS = frozenset({KEY_VALUE_VERSION, MAX_MEMSTORE_TS_KEY})
"""File info keys the writer sets itself (as are all keys starting with ``hfile.``)."""

_ROW_MAX = 0x7FFF


class _Output:
    """The file under construction: blocks appended in order, offsets and HBase's counters."""

    def __init__(self, codec: CompressionCodec, level: int) -> None:
        self.codec = codec
        self.level = level
        self.parts: list[bytes] = []
        self.offset = 0
        self.prev: dict[BlockType, int] = {}
        self.total_uncompressed = 0  # HBase's totalUncompressedBytes (without the root indexes)

    def write(self, block_type: BlockType, payload: bytes, *, counted: bool = True) -> tuple[int, int]:
        """Append a block; returns its offset and on-disk size."""
        block = encode_block(block_type, payload, self.codec, self.prev.get(block_type, -1), self.level)
        offset = self.offset
        self.parts.append(block)
        self.offset += len(block)
        self.prev[block_type] = offset
        if counted:
            self.total_uncompressed += HEADER_SIZE + len(payload)
        return offset, len(block)


def _file_info_key(key: bytes | str) -> bytes:
    raw = key.encode() if isinstance(key, str) else key
    if raw in RESERVED_FILE_INFO_KEYS or raw.startswith(b"hfile."):
        raise ValueError(f"HFile file info key {raw!r} is reserved: the writer sets it")
    return raw


@dataclass(frozen=True)
class RowsAndValues:
    """HFile entries as two lists of bytes, rows in strictly ascending order."""

    rows: list[bytes]
    values: list[bytes]

    def __post_init__(self) -> None:
        if len(self.rows) != len(self.values):
            raise ValueError(f"{len(self.rows)} rows but {len(self.values)} values")


def write_hfile(
    entries: Iterable[tuple[bytes | str, bytes]] | RowsAndValues,
    *,
    file_info: Mapping[bytes | str, bytes] | None = None,
    meta_blocks: Mapping[str, bytes] | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    compression: CompressionCodec = CompressionCodec.GZ,
    index_block_entries: int | None = None,
    create_time_ms: int = 0,
    compression_level: int = GZIP_LEVEL,
) -> bytes:
    """The bytes of an HFile holding ``entries``, which must be in strictly ascending key order.

    ``file_info`` adds file info entries (Hudi's ``schema``, and for base files
    ``bloomFilterTypeCode``, ``minRecordKey``, ``maxRecordKey``); ``meta_blocks`` adds named meta
    blocks (``bloomFilter``). ``index_block_entries`` (default: none, a single-level index as Hudi
    writes) caps the entries per index block and makes the data index multi-level when the
    file has more blocks than that. ``create_time_ms`` goes to ``hfile.CREATE_TIME_TS`` (Hudi's
    HBase-based writer leaves it 0). ``compression_level`` is the deflate level of GZ blocks
    (HBase's 6 by default; any level reads the same). ``entries`` may come as
    :class:`RowsAndValues`, lists a caller already built (no pass over pairs).
    """
    if compression not in SUPPORTED_CODECS:
        raise UnsupportedTableError(
            f"writing HFile compression codec {compression.name} ({int(compression)}) is not supported "
            "(only GZ and NONE)"
        )
    if block_size <= 0:
        raise ValueError(f"HFile block size must be positive, got {block_size}")
    if index_block_entries is not None and index_block_entries < 2:
        raise ValueError(f"index_block_entries must be at least 2, got {index_block_entries}")
    extra_info = {_file_info_key(k): v for k, v in (file_info or {}).items()}
    out = _Output(compression, compression_level)

    data_entries: list[tuple[bytes, int, int]] = []  # (full first key, offset, size) per data block
    upper: list[tuple[bytes, int, int]] = []  # root-level entries pointing at leaf index blocks
    leaf: list[tuple[bytes, int, int]] = []
    first_data = last_data = -1
    index_size = 0

    def write_leaf() -> None:
        nonlocal index_size
        payload = encode_nonroot_index(leaf)
        offset, size = out.write(BlockType.LEAF_INDEX, payload)
        index_size += len(payload)
        upper.append((leaf[0][0], offset, size))
        leaf.clear()

    def flush(payload: bytes, first_row: bytes) -> None:
        offset, size = out.write(BlockType.DATA, payload)
        nonlocal first_data, last_data
        first_data = offset if first_data < 0 else first_data
        last_data = offset
        entry = (encode_key(first_row), offset, size)
        data_entries.append(entry)
        if index_block_entries is not None:
            leaf.append(entry)
            if len(leaf) >= index_block_entries:
                write_leaf()

    # Whole-list passes (the metadata table writes hundreds of thousands of entries at a time).
    if isinstance(entries, RowsAndValues):
        rows, values = entries.rows, entries.values
    else:
        rows, values = [], []
        for key, value in entries:
            rows.append(key.encode() if isinstance(key, str) else bytes(key))
            values.append(value if type(value) is bytes else bytes(value))
    if not all(map(operator.lt, rows, rows[1:])):
        i = next(i for i in range(1, len(rows)) if rows[i] <= rows[i - 1])
        order = "duplicate" if rows[i] == rows[i - 1] else "out of order"
        raise ValueError(f"HFile keys must be strictly ascending: {rows[i]!r} {order} after {rows[i - 1]!r}")
    longest = max(rows, key=len, default=b"")
    if len(longest) > _ROW_MAX:
        raise ValueError(f"HFile key of {len(longest)} bytes is longer than {_ROW_MAX}: {longest[:40]!r}...")
    heads, sizes = encode_entries(rows, values)
    # A block closes after the entry that takes it to block_size or more (HBase's check).
    ends = list(accumulate(sizes))
    start = 0
    while start < len(rows):
        base = ends[start - 1] if start else 0
        stop = min(bisect_left(ends, base + block_size, lo=start) + 1, len(rows))
        flush(join_entries(heads[start:stop], rows[start:stop], values[start:stop]), rows[start])
        start = stop
    count = len(rows)
    key_total = sum(map(len, rows)) + 12 * count
    value_total = sum(map(len, values))
    previous: bytes | None = rows[-1] if rows else None

    # The last leaf; a file that never filled one keeps a single-level index (as HBase does).
    if index_block_entries is not None and upper and leaf:
        write_leaf()
    root = upper if upper else data_entries
    levels = 2 if upper else 1

    metas = dict(meta_blocks or {})
    meta_entries = []
    for name in sorted(metas, key=str.encode):
        offset, size = out.write(BlockType.META, metas[name])
        meta_entries.append((name.encode(), offset, size))

    # Intermediate levels while the root would hold too many entries.
    while index_block_entries is not None and len(root) > index_block_entries:
        next_level = []
        for start in range(0, len(root), index_block_entries):
            chunk = root[start : start + index_block_entries]
            payload = encode_nonroot_index(chunk)
            offset, size = out.write(BlockType.INTERMEDIATE_INDEX, payload, counted=False)
            index_size += len(payload)
            next_level.append((chunk[0][0], offset, size))
        root = next_level
        levels += 1

    load_on_open = out.offset
    root_payload = encode_root_index(root)
    index_size += len(root_payload)
    out.write(BlockType.ROOT_INDEX, root_payload, counted=False)
    out.write(BlockType.ROOT_INDEX, encode_root_index(meta_entries))

    info = dict(extra_info)
    info[KEY_VALUE_VERSION] = struct.pack(">i", KEY_VALUE_VERSION_WITH_MEMSTORE_TS)
    info[MAX_MEMSTORE_TS_KEY] = struct.pack(">q", 0)
    info[AVG_KEY_LEN] = struct.pack(">i", key_total // count if count else 0)
    info[AVG_VALUE_LEN] = struct.pack(">i", value_total // count if count else 0)
    info[CREATE_TIME_TS] = struct.pack(">q", create_time_ms)
    if previous is not None:
        info[LAST_KEY] = encode_key(previous)
    info_payload = FILE_INFO_MAGIC + delimited(encode_info(sorted(info.items())))
    file_info_offset, _ = out.write(BlockType.FILE_INFO, info_payload)

    trailer = Trailer(
        file_info_offset=file_info_offset,
        load_on_open_data_offset=load_on_open,
        uncompressed_data_index_size=index_size,
        total_uncompressed_bytes=out.total_uncompressed + TRAILER_SIZE,
        data_index_count=len(root),
        meta_index_count=len(meta_entries),
        entry_count=count,
        num_data_index_levels=levels,
        first_data_block_offset=first_data,
        last_data_block_offset=last_data,
        comparator_class_name=COMPARATOR_CLASS_NAME,
        compression_codec=compression,
    )
    out.parts.append(trailer.encode())
    return b"".join(out.parts)
