"""Log blocks: the framing of Hudi's log format version 1, headers and block types.

On disk a block is ``#HUDI#``, int64 block length, int32 format version (1), int32 block type,
header entries, int64 content length, content, footer entries, and an int64 trailer equal to the
block length plus the six magic bytes. All integers are big-endian.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from hoodie.errors import CorruptLogBlockError

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1


class BlockType(IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6

    @property
    def is_data(self) -> bool:
        return self in (BlockType.AVRO_DATA, BlockType.HFILE_DATA, BlockType.PARQUET_DATA)


class HeaderKey(IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


class CommandType(IntEnum):
    ROLLBACK = 0


_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def encode_header(entries: Mapping[HeaderKey, str]) -> bytes:
    parts = [_I32.pack(len(entries))]
    for key, text in entries.items():  # on-disk order carries no meaning; keep the caller's
        value = text.encode()
        parts.append(_I32.pack(int(key)))
        parts.append(_I32.pack(len(value)))
        parts.append(value)
    return b"".join(parts)


def decode_header(buf: bytes | memoryview, pos: int, source: str) -> tuple[dict[HeaderKey, str], int]:
    """Parse header/footer entries at ``pos``; returns them and the position after them."""
    try:
        (count,) = _I32.unpack_from(buf, pos)
        pos += 4
        if count < 0 or count > 64:
            raise CorruptLogBlockError(f"{source}: implausible header entry count {count}")
        out: dict[HeaderKey, str] = {}
        for _ in range(count):
            key_id, length = struct.unpack_from(">ii", buf, pos)
            pos += 8
            if length < 0 or pos + length > len(buf):
                raise CorruptLogBlockError(f"{source}: header value length {length} runs past the block")
            try:
                key = HeaderKey(key_id)
            except ValueError as e:
                raise CorruptLogBlockError(f"{source}: unknown log block header key id {key_id}") from e
            out[key] = bytes(buf[pos : pos + length]).decode()
            pos += length
        return out, pos
    except struct.error as e:
        raise CorruptLogBlockError(f"{source}: truncated log block header") from e


def encode_block(
    block_type: BlockType,
    header: Mapping[HeaderKey, str],
    content: bytes,
    footer: Mapping[HeaderKey, str] | None = None,
) -> bytes:
    """One complete block, ready to be written to a log file."""
    header_bytes = encode_header(header)
    footer_bytes = encode_header(footer or {})
    block_length = 4 + 4 + len(header_bytes) + 8 + len(content) + len(footer_bytes) + 8
    return b"".join(
        (
            MAGIC,
            _I64.pack(block_length),
            _I32.pack(LOG_FORMAT_VERSION),
            _I32.pack(int(block_type)),
            header_bytes,
            _I64.pack(len(content)),
            content,
            footer_bytes,
            _I64.pack(block_length + len(MAGIC)),
        )
    )


@dataclass(frozen=True, slots=True)
class LogBlock:
    """A block as read from a log file. ``content`` is raw; decoding is up to the block's user.

    Corrupt blocks carry the bytes up to the next magic (or end of file) and no header.
    """

    block_type: BlockType
    header: Mapping[HeaderKey, str]
    content: bytes
    offset: int
    size: int
    log_file: str
    footer: Mapping[HeaderKey, str] = field(default_factory=dict)

    @property
    def instant_time(self) -> str | None:
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def is_rollback(self) -> bool:
        return self.block_type is BlockType.COMMAND and self.header.get(
            HeaderKey.COMMAND_BLOCK_TYPE, ""
        ).strip() == str(int(CommandType.ROLLBACK))

    @property
    def is_corrupt(self) -> bool:
        return self.block_type is BlockType.CORRUPT

    @property
    def compacted_block_times(self) -> tuple[str, ...]:
        raw = self.header.get(HeaderKey.COMPACTED_BLOCK_TIMES, "")
        return tuple(t for t in raw.split(",") if t)

    @property
    def is_partial(self) -> bool:
        return self.header.get(HeaderKey.IS_PARTIAL, "false").strip().lower() == "true"


def rollback_block(instant_time: str, target_instant_time: str) -> bytes:
    """A ROLLBACK command block (how table version 6 rolls back appended log blocks)."""
    header = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.COMMAND_BLOCK_TYPE: str(int(CommandType.ROLLBACK)),
        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
    }
    return encode_block(BlockType.COMMAND, header, b"")
