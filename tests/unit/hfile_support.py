"""What the HFile tests share (``test_hfile*.py``): the fixture table whose metadata table they read,
our writer's arguments to rewrite an HFile, a byte flipped.
"""

from __future__ import annotations

from typing import Any

from hoodie.hfile import RESERVED_FILE_INFO_KEYS, HFileReader

MDT_TABLE = "sample_table/mor/avro/v9_txns_simple_meta"


def rewrite_args(reader: HFileReader) -> dict[str, Any]:
    """What to give our writer to write the same file again: the caller's file info and meta blocks."""
    info = {
        k: v
        for k, v in reader.file_info.items()
        if k not in RESERVED_FILE_INFO_KEYS and not k.startswith(b"hfile.")
    }
    metas = {}
    for name in reader.meta_block_names:
        payload = reader.meta_block(name)
        assert payload is not None
        metas[name] = payload
    return {"file_info": info, "meta_blocks": metas}


def flip_byte(data: bytes, pos: int) -> bytes:
    return data[:pos] + bytes([data[pos] ^ 0x40]) + data[pos + 1 :]
