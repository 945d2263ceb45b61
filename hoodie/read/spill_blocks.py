"""Log blocks read without holding their content: the external merge's view of the log files.

A log file is walked block by block with ranged reads (magic, length, trailer); a small block is
read whole, a large one keeps only its header and footer, and its content is read later, a window
at a time, so that memory holds one window of a large Avro data block, not the block. Anything
unusual (a corrupt block, a truncated header) raises :class:`NotStreamable`, and the caller
reads the log files whole instead, where the corrupt-block rules live.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from hoodie.errors import CorruptFileError, CorruptLogBlockError
from hoodie.file_group.log_block import LOG_FORMAT_VERSION, MAGIC, BlockType, LogBlock, decode_header
from hoodie.file_group.log_reader import iter_blocks
from hoodie.io.fileio import FileIO
from hoodie.schema.avro_arrow import decode_avro_records, frame_records

_I64 = struct.Struct(">q")
_HEAD = len(MAGIC) + 8  # magic, then the block length
SMALL_BLOCK = 8 * 1024 * 1024  # read whole
_PREFIX = 1024 * 1024  # of a large block: enough for its header (the schema)
WINDOW = 16 * 1024 * 1024  # of a large Avro block's content, decoded at a time
AVRO_BLOCK_VERSION = 3


class NotStreamable(Exception):
    """A log file the block walk does not handle; read it whole instead."""


@dataclass
class LazyLogs:
    """``read(path)`` for :func:`~hoodie.read.log_scanner.scan_log_blocks`: blocks whose large
    content stays in the file, at the position :meth:`content_range` gives."""

    fileio: FileIO
    small_block: int = SMALL_BLOCK  # blocks up to this size are read whole
    window: int = WINDOW
    ranges: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    def content_range(self, block: LogBlock) -> tuple[int, int] | None:
        """(offset, length) in the file of a block read without its content, else None."""
        return self.ranges.get((block.log_file, block.offset))

    def read(self, path: str) -> tuple[int, list[LogBlock]]:
        info = self.fileio.info(path)
        if info is None:
            raise NotStreamable(path)
        size, pos, blocks = info.size, 0, []
        while pos < size:
            head = self.fileio.read_range(path, pos, _HEAD)
            if len(head) < _HEAD or head[: len(MAGIC)] != MAGIC:
                raise NotStreamable(f"{path}@{pos}")
            (length,) = _I64.unpack_from(head, len(MAGIC))
            end = pos + _HEAD + length
            if length < 8 or end > size:
                raise NotStreamable(f"{path}@{pos}")
            tail = self.fileio.read_range(path, end - 8, 8 + min(len(MAGIC), size - end))
            (trailer,) = _I64.unpack_from(tail, 0)
            if trailer - len(MAGIC) != length or (end != size and tail[8:] != MAGIC):
                raise NotStreamable(f"{path}@{pos}")  # a corrupt block: the whole-file rules apply
            if length <= self.small_block:
                (block,) = list(iter_blocks(self.fileio.read_range(path, pos, end - pos), path))
                blocks.append(dataclasses.replace(block, offset=pos))
            else:
                blocks.append(self._large(path, pos, length))
            pos = end
        return size, blocks

    def _large(self, path: str, pos: int, length: int) -> LogBlock:
        source = f"{path}@{pos}"
        start = pos + _HEAD
        prefix = self.fileio.read_range(path, start, min(length, _PREFIX))
        try:
            version, type_id = struct.unpack_from(">ii", prefix, 0)
            if version != LOG_FORMAT_VERSION:
                raise NotStreamable(source)
            header, at = decode_header(prefix, 8, source)
            (content_length,) = _I64.unpack_from(prefix, at)
            block_type = BlockType(type_id)
        except (struct.error, IndexError, ValueError, CorruptLogBlockError) as e:
            raise NotStreamable(source) from e
        content_at = start + at + 8
        footer_at = content_at + content_length
        if content_length < 0 or footer_at > start + length - 8:
            raise NotStreamable(source)
        footer_bytes = self.fileio.read_range(path, footer_at, start + length - 8 - footer_at)
        try:
            footer, _ = decode_header(footer_bytes, 0, source)
        except (struct.error, IndexError, CorruptLogBlockError) as e:
            raise NotStreamable(source) from e
        self.ranges[(path, pos)] = (content_at, content_length)
        return LogBlock(block_type, header, b"", pos, length + _HEAD, path, footer)

    def content(self, block: LogBlock) -> LogBlock:
        """``block`` with its content read (for blocks decoded whole: deletes, Parquet)."""
        where = self.content_range(block)
        if where is None:
            return block
        return dataclasses.replace(block, content=self.fileio.read_range(block.log_file, *where))

    def iter_avro(self, block: LogBlock, schema: pa.Schema) -> Iterator[pa.Table]:
        """A large Avro data block's records as rows of ``schema``, a window at a time."""
        where = self.content_range(block)
        assert where is not None and block.schema
        path, (at, length) = block.log_file, where
        source = f"{path}@{block.offset}"
        head = self.fileio.read_range(path, at, 8)
        version, count = struct.unpack_from(">ii", head, 0)
        if version != AVRO_BLOCK_VERSION:
            raise CorruptLogBlockError(f"{source}: Avro block content version {version} is not supported")
        # Each window starts at a record: the part of a record cut off at a window's end is read
        # again at the start of the next (no copy joining the two, no second window-sized buffer).
        pos, end, seen, size = at + 8, at + length, 0, self.window
        while pos < end:
            want = min(size, end - pos)
            buf = self.fileio.read_range(path, pos, want)
            try:
                starts, p = frame_records(buf)
            except CorruptFileError as e:
                raise CorruptLogBlockError(f"{source}: {e}") from e
            if not starts:
                if want == end - pos:
                    raise CorruptLogBlockError(f"{source}: Avro block truncated ({want} bytes left over)")
                size *= 2  # a record longer than the window
                continue
            begins = np.array(starts, np.int64)
            lengths = np.append(begins[1:] - 4, p) - begins
            yield decode_avro_records(buf, np.column_stack([begins, lengths]), block.schema, schema)
            seen += len(starts)
            pos += p
            size = self.window
        if seen != count:
            raise CorruptLogBlockError(f"{source}: Avro block holds {seen} records, its header says {count}")
