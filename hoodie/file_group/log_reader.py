"""Reading the blocks of a log file, with Hudi's corrupt-block detection.

A block is corrupt when its length cannot be read, when the trailing length does not equal the
leading one, or when the next bytes after it are neither a magic nor the end of the file (a
crashed writer leaves exactly that). Fewer bytes than a magic at the end of a file are the end of
it, as for Hudi (``HoodieLogFileReader.readMagic`` reaches EOF), not a corrupt block. A corrupt
block spans up to the next magic or the end of file; it is reported and reading continues after
it. A file that does not begin with the magic is not a log file at all, and that is an error.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

from hoodie.errors import CorruptLogBlockError
from hoodie.file_group.log_block import LOG_FORMAT_VERSION, MAGIC, BlockType, LogBlock, decode_header

log = logging.getLogger(__name__)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


@dataclass(slots=True)
class CorruptBlockReport:
    """Where corrupt blocks were found (what Hudi counts as ``totalCorruptLogBlock``)."""

    locations: list[tuple[str, int, int]] = field(default_factory=list)

    def add(self, log_file: str, offset: int, size: int) -> None:
        self.locations.append((log_file, offset, size))

    def __len__(self) -> int:
        return len(self.locations)


def _next_magic(buf: bytes, start: int) -> int:
    idx = buf.find(MAGIC, start)
    return len(buf) if idx < 0 else idx


def _block_is_corrupt(buf: bytes, after_magic: int, block_length: int) -> bool:
    trailer_pos = after_magic + 8 + block_length - 8
    if block_length < 8 or trailer_pos + 8 > len(buf):
        return True
    (trailer,) = _I64.unpack_from(buf, trailer_pos)
    if trailer - len(MAGIC) != block_length:
        return True
    # HoodieLogFileReader.isBlockCorrupted: after the footer, either the next magic or the end of
    # the file; fewer bytes than a magic count as the end (readFully hits EOF).
    following = after_magic + 8 + block_length
    return len(buf) - following >= len(MAGIC) and buf[following : following + len(MAGIC)] != MAGIC


def iter_blocks(buf: bytes, log_file: str) -> Iterator[LogBlock]:
    """Yield every block of the log file ``buf`` (named ``log_file`` in errors and reports)."""
    pos = 0
    n = len(buf)
    while n - pos >= len(MAGIC):  # fewer bytes than a magic: the end (a torn start of a block)
        block_start = pos
        if buf[pos : pos + len(MAGIC)] != MAGIC:
            raise CorruptLogBlockError(
                f"{log_file}: no log block magic {MAGIC!r} at offset {pos}; this is not a Hudi log file "
                "or it was overwritten"
            )
        after_magic = pos + len(MAGIC)
        if after_magic + 8 > n:
            block_length = -1
        else:
            (block_length,) = _I64.unpack_from(buf, after_magic)
        if block_length < 0 or _block_is_corrupt(buf, after_magic, block_length):
            end = _next_magic(buf, after_magic)
            log.warning(
                "%s: corrupt log block at offset %d (%d bytes); skipping it",
                log_file,
                block_start,
                end - block_start,
            )
            yield LogBlock(
                BlockType.CORRUPT, {}, buf[after_magic:end], block_start, end - block_start, log_file
            )
            pos = end
            continue
        yield _parse_block(buf, after_magic, block_length, block_start, log_file)
        pos = after_magic + 8 + block_length


def _parse_block(
    buf: bytes, after_magic: int, block_length: int, block_start: int, log_file: str
) -> LogBlock:
    source = f"{log_file}@{block_start}"
    pos = after_magic + 8
    end = pos + block_length
    try:
        version, type_id = struct.unpack_from(">ii", buf, pos)
    except struct.error as e:
        raise CorruptLogBlockError(f"{source}: truncated block") from e
    if version != LOG_FORMAT_VERSION:
        raise CorruptLogBlockError(f"{source}: unsupported log format version {version} (expected 1)")
    try:
        block_type = BlockType(type_id)
    except ValueError as e:
        raise CorruptLogBlockError(f"{source}: unknown log block type id {type_id}") from e
    header, pos = decode_header(buf, pos + 8, source)
    (content_length,) = _I64.unpack_from(buf, pos)
    pos += 8
    if content_length < 0 or pos + content_length > end - 12:
        raise CorruptLogBlockError(f"{source}: content length {content_length} runs past the block end")
    content = buf[pos : pos + content_length]
    footer, _ = decode_header(buf, pos + content_length, source)
    return LogBlock(block_type, header, content, block_start, block_length + 14, log_file, footer)


def read_blocks(data: bytes, log_file: str, report: CorruptBlockReport | None = None) -> list[LogBlock]:
    """All blocks of one log file; corrupt blocks are included and added to ``report``."""
    blocks = list(iter_blocks(data, log_file))
    if report is not None:
        for b in blocks:
            if b.is_corrupt:
                report.add(log_file, b.offset, b.size)
    return blocks
