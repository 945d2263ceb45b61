"""HFile v3, the base-file and log-block format of Hudi's metadata table."""

from __future__ import annotations

from hoodie.hfile.blocks import BlockType, CompressionCodec, IndexEntry
from hoodie.hfile.reader import BLOOM_FILTER_META_BLOCK, HFileReader
from hoodie.hfile.trailer import Trailer
from hoodie.hfile.writer import DEFAULT_BLOCK_SIZE, RESERVED_FILE_INFO_KEYS, write_hfile

__all__ = [
    "BLOOM_FILTER_META_BLOCK",
    "DEFAULT_BLOCK_SIZE",
    "RESERVED_FILE_INFO_KEYS",
    "BlockType",
    "CompressionCodec",
    "HFileReader",
    "IndexEntry",
    "Trailer",
    "write_hfile",
]
