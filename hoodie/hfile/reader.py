"""Reading HFiles (v3) as Apache Hudi writes them: metadata-table base files and the content of
HFILE_DATA log blocks.

Layout, from offset 0::

    data blocks (DATABLK*), with leaf index blocks (IDXLEAF2) among them in multi-level files
    meta blocks (METABLKc)              base files: one named "bloomFilter"
    intermediate index blocks (IDXINTE2), in files with three or more index levels
    -- load-on-open section, at trailer.load_on_open_data_offset --
    root data index (IDXROOT2)          trailer.data_index_count entries
    root meta index (IDXROOT2)          trailer.meta_index_count entries, present even if empty
    file info (FILEINF2)                "PBUF" + delimited InfoProto, at trailer.file_info_offset
    trailer                             the last 4096 bytes

Opening reads the trailer, the load-on-open section and any lower index levels; data and meta
blocks are read when needed (ranges through :class:`~hoodie.io.fileio.FileIO` for files on
storage). Every block read has its magic, sizes and checksums verified. Keys are the rows of the
HFile's KeyValues (the metadata-table record keys) as bytes, in unsigned byte order.
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from hoodie.errors import CorruptFileError, UnsupportedTableError
from hoodie.hfile.blocks import (
    HEADER_SIZE,
    SUPPORTED_CODECS,
    Block,
    BlockType,
    IndexEntry,
    decode_block,
    parse_data_block,
    parse_header,
    parse_nonroot_index,
    parse_root_index,
    row_of,
)
from hoodie.hfile.protobuf import ProtobufError, decode_info, read_delimited
from hoodie.hfile.trailer import TRAILER_SIZE, Trailer

if TYPE_CHECKING:
    from hoodie.file_group.log_block import LogBlock
    from hoodie.io.fileio import FileIO

BLOOM_FILTER_META_BLOCK = "bloomFilter"
SCHEMA_KEY = b"schema"
LAST_KEY = b"hfile.LASTKEY"
AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
CREATE_TIME_TS = b"hfile.CREATE_TIME_TS"
KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
MAX_MEMSTORE_TS_KEY = b"MAX_MEMSTORE_TS_KEY"
MAX_TAGS_LEN = b"hfile.MAX_TAGS_LEN"
TAGS_COMPRESSED = b"hfile.TAGS_COMPRESSED"
KEY_VALUE_VERSION_WITH_MEMSTORE_TS = 1
FILE_INFO_MAGIC = b"PBUF"

_CACHED_BLOCKS = 16


class _Bytes:
    """File content held in memory."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data).cast("B")
        self.size = len(self._view)

    def read(self, offset: int, length: int) -> memoryview:
        return self._view[offset : offset + length]


class _Ranges:
    """File content read by ranges through a FileIO."""

    def __init__(self, fileio: FileIO, path: str, size: int) -> None:
        self._fileio = fileio
        self._path = path
        self.size = size

    def read(self, offset: int, length: int) -> memoryview:
        return memoryview(self._fileio.read_range(self._path, offset, length))


class HFileReader:
    """A random-access reader of one HFile.

    ``source`` names the file in errors (a path, or a log file and block offset).
    """

    def __init__(self, data: bytes | bytearray | memoryview, *, source: str = "<hfile>") -> None:
        self._init(_Bytes(data), source)

    @classmethod
    def open(cls, fileio: FileIO, path: str) -> HFileReader:
        """A reader over the file at ``path``, reading only the blocks it needs."""
        info = fileio.info(path)
        if info is None or info.is_dir:
            raise FileNotFoundError(path)
        reader = cls.__new__(cls)
        reader._init(_Ranges(fileio, path, info.size), path)
        return reader

    @classmethod
    def from_log_block(cls, block: LogBlock) -> HFileReader:
        """The HFile that is the content of an HFILE_DATA log block (metadata-table logs)."""
        from hoodie.file_group.log_block import BlockType as LogBlockType

        if block.block_type is not LogBlockType.HFILE_DATA:
            raise ValueError(
                f"{block.log_file}@{block.offset}: a {block.block_type.name} block holds no HFile"
            )
        return cls(block.content, source=f"{block.log_file}@{block.offset}:HFILE_DATA")

    # -- opening ----------------------------------------------------------------------------------
    def _init(self, src: _Bytes | _Ranges, source: str) -> None:
        self._src = src
        self.source = source
        self._cache: OrderedDict[int, tuple[list[bytes], list[bytes]]] = OrderedDict()
        size = src.size
        if size < TRAILER_SIZE:
            raise CorruptFileError(
                f"{source}: {size} bytes, shorter than the {TRAILER_SIZE}-byte HFile trailer "
                "(truncated or not an HFile)"
            )
        trailer_offset = size - TRAILER_SIZE
        self.trailer = trailer = Trailer.parse(src.read(trailer_offset, TRAILER_SIZE), trailer_offset, source)
        self.codec = trailer.compression_codec
        if self.codec not in SUPPORTED_CODECS:
            raise UnsupportedTableError(
                f"{source}: HFile compression codec {self.codec.name} ({int(self.codec)}) is not supported "
                "(only GZ and NONE, as hudi-rs)"
            )
        start = trailer.load_on_open_data_offset
        if not 0 <= start < trailer_offset or not start <= trailer.file_info_offset < trailer_offset:
            raise CorruptFileError(
                f"{source}@{trailer_offset}: trailer offsets out of range (load-on-open {start}, "
                f"file info {trailer.file_info_offset}, trailer at {trailer_offset}; truncated file?)"
            )
        section = bytes(src.read(start, trailer_offset - start))

        def block_in_section(offset: int, expected: BlockType) -> Block:
            block = decode_block(memoryview(section)[offset - start :], offset, self.codec, source)
            if block.block_type is not expected:
                raise CorruptFileError(
                    f"{source}@{offset}: expected a {expected.name} block, found {block.block_type.name}"
                )
            return block

        root = block_in_section(start, BlockType.ROOT_INDEX)
        meta_root = block_in_section(start + root.header.on_disk_size, BlockType.ROOT_INDEX)
        info_block = block_in_section(trailer.file_info_offset, BlockType.FILE_INFO)

        self._file_info = self._parse_file_info(info_block)
        self._check_key_value_format()
        self._data_index = self._load_data_index(root)
        self._first_rows = [e.key for e in self._data_index]
        meta_entries = parse_root_index(
            meta_root.payload, trailer.meta_index_count, f"{source}@{meta_root.offset}"
        )
        self._meta_index = {
            key.decode(errors="replace"): IndexEntry(key, offset, size) for key, offset, size in meta_entries
        }

    def _parse_file_info(self, block: Block) -> dict[bytes, bytes]:
        where = f"{self.source}@{block.offset}"
        payload = block.payload
        if payload[:4] != FILE_INFO_MAGIC:
            raise CorruptFileError(f"{where}: file info block does not start with {FILE_INFO_MAGIC!r}")
        try:
            message, _ = read_delimited(payload, 4)
            return dict(decode_info(message))
        except ProtobufError as e:
            raise CorruptFileError(f"{where}: file info does not decode: {e}") from e

    def _check_key_value_format(self) -> None:
        version = self._file_info.get(KEY_VALUE_VERSION)
        self._memstore_ts = (
            version is not None
            and len(version) == 4
            and struct.unpack(">i", version)[0] == KEY_VALUE_VERSION_WITH_MEMSTORE_TS
        )
        self._tags = MAX_TAGS_LEN in self._file_info
        if self._file_info.get(TAGS_COMPRESSED, b"\x00") not in (b"\x00", b""):
            raise UnsupportedTableError(f"{self.source}: HFile with compressed cell tags is not supported")

    def _load_data_index(self, root: Block) -> list[IndexEntry]:
        trailer = self.trailer
        levels = trailer.num_data_index_levels
        if levels < 1:
            raise CorruptFileError(f"{self.source}: trailer says {levels} data index levels")
        entries = parse_root_index(root.payload, trailer.data_index_count, f"{self.source}@{root.offset}")
        for level in range(1, levels):
            expected = BlockType.LEAF_INDEX if level == levels - 1 else BlockType.INTERMEDIATE_INDEX
            lower: list[tuple[bytes, int, int]] = []
            for _, offset, size in entries:
                block = self._read_block(offset, size, expected)
                lower.extend(parse_nonroot_index(block.payload, f"{self.source}@{offset}"))
            entries = lower
        out = []
        for key, offset, size in entries:
            try:
                row = row_of(key)
            except ValueError as e:
                raise CorruptFileError(f"{self.source}: data index entry at {offset}: {e}") from e
            out.append(IndexEntry(row, offset, size))
        return out

    # -- blocks ----------------------------------------------------------------------------------
    def _read_block(self, offset: int, size: int, expected: BlockType) -> Block:
        limit = self._src.size - TRAILER_SIZE
        if offset < 0 or size < HEADER_SIZE or offset + size > limit:
            raise CorruptFileError(
                f"{self.source}@{offset}: index points to a {size}-byte {expected.name} block "
                f"outside the file's {limit} bytes of blocks (truncated file?)"
            )
        block = decode_block(self._src.read(offset, size), offset, self.codec, self.source)
        if block.block_type is not expected:
            if block.block_type is BlockType.ENCODED_DATA and expected is BlockType.DATA:
                raise UnsupportedTableError(
                    f"{self.source}@{offset}: encoded data blocks (HBase data block encoding) "
                    "are not supported"
                )
            raise CorruptFileError(
                f"{self.source}@{offset}: expected a {expected.name} block, found {block.block_type.name}"
            )
        if block.header.on_disk_size != size:
            raise CorruptFileError(
                f"{self.source}@{offset}: the index says the block is {size} bytes, "
                f"its header {block.header.on_disk_size}"
            )
        return block

    def _data_block(self, i: int, *, cache: bool = True) -> tuple[list[bytes], list[bytes]]:
        hit = self._cache.get(i)
        if hit is not None:
            self._cache.move_to_end(i)
            return hit
        entry = self._data_index[i]
        block = self._read_block(entry.offset, entry.size, BlockType.DATA)
        parsed = parse_data_block(
            block.payload, f"{self.source}@{entry.offset}", memstore_ts=self._memstore_ts, tags=self._tags
        )
        if cache:
            self._cache[i] = parsed
            if len(self._cache) > _CACHED_BLOCKS:
                self._cache.popitem(last=False)
        return parsed

    def blocks(self) -> Iterator[Block]:
        """Every block in file order, from offset 0 up to the trailer (decoded and verified)."""
        offset = 0
        limit = self._src.size - TRAILER_SIZE
        while offset < limit:
            header = parse_header(self._src.read(offset, HEADER_SIZE), f"{self.source}@{offset}")
            buf = self._src.read(offset, header.on_disk_size)
            yield decode_block(buf, offset, self.codec, self.source)
            offset += header.on_disk_size
        if offset != limit:
            raise CorruptFileError(f"{self.source}@{offset}: last block runs into the trailer at {limit}")

    # -- metadata --------------------------------------------------------------------------------
    @property
    def file_info(self) -> Mapping[bytes, bytes]:
        return MappingProxyType(self._file_info)

    @property
    def schema(self) -> str | None:
        """The Avro schema Hudi stores under ``schema`` in the file info (JSON), if any."""
        raw = self._file_info.get(SCHEMA_KEY)
        return raw.decode() if raw is not None else None

    @property
    def data_index(self) -> tuple[IndexEntry, ...]:
        """The lowest level of the data block index: one entry per data block, in key order."""
        return tuple(self._data_index)

    @property
    def meta_block_names(self) -> list[str]:
        return list(self._meta_index)

    def meta_block(self, name: str) -> bytes | None:
        """The payload of the meta block ``name`` (e.g. ``bloomFilter``), or None."""
        entry = self._meta_index.get(name)
        if entry is None:
            return None
        return self._read_block(entry.offset, entry.size, BlockType.META).payload

    @property
    def bloom_filter(self) -> bytes | None:
        """The ``bloomFilter`` meta block of a base HFile: the serialized filter's text."""
        return self.meta_block(BLOOM_FILTER_META_BLOCK)

    @property
    def first_key(self) -> bytes | None:
        """The smallest key (read from the first data block: an index key may be shortened)."""
        for i in range(len(self._data_index)):
            rows, _ = self._data_block(i)
            if rows:
                return rows[0]
        return None

    @property
    def last_key(self) -> bytes | None:
        raw = self._file_info.get(LAST_KEY)
        if not raw:
            return None
        try:
            return row_of(raw)
        except ValueError as e:
            raise CorruptFileError(f"{self.source}: file info {LAST_KEY.decode()}: {e}") from e

    def __len__(self) -> int:
        return self.trailer.entry_count

    # -- records ---------------------------------------------------------------------------------
    def items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(key, value)`` in key order; checks the count against the trailer at the end."""
        count = 0
        for i in range(len(self._data_index)):
            rows, values = self._data_block(i, cache=False)
            count += len(rows)
            yield from zip(rows, values, strict=True)
        if count != self.trailer.entry_count:
            raise CorruptFileError(
                f"{self.source}: {count} entries in the data blocks, trailer says {self.trailer.entry_count}"
            )

    def keys(self) -> Iterator[bytes]:
        for key, _ in self.items():
            yield key

    def get(self, key: bytes | str) -> bytes | None:
        """The value stored under ``key``, or None (one data block read at most)."""
        row = key.encode() if isinstance(key, str) else key
        i = bisect_right(self._first_rows, row) - 1
        if i < 0:
            return None
        rows, values = self._data_block(i)
        j = bisect_left(rows, row)
        return values[j] if j < len(rows) and rows[j] == row else None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, (bytes, str)) and self.get(key) is not None

    def scan_prefix(self, prefix: bytes | str) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(key, value)`` whose key starts with ``prefix``, in key order."""
        row = prefix.encode() if isinstance(prefix, str) else prefix
        i = max(bisect_right(self._first_rows, row) - 1, 0)
        for block in range(i, len(self._data_index)):
            rows, values = self._data_block(block)
            for j in range(bisect_left(rows, row), len(rows)):
                if not rows[j].startswith(row):
                    return
                yield rows[j], values[j]
