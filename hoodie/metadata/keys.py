"""Metadata-table record keys and how keys map to file groups (hudi-format.md §6.1, §6.2).

Every function here is a fact of the on-disk format that Apache Hudi's Java writers and hudi-rs
agree on: changing any of them makes the metadata table unreadable to them.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import xxhash

from hoodie.index.java_hash import java_string_hash, java_string_hashes

__all__ = [
    "ALL_PARTITIONS_KEY",
    "NON_PARTITIONED_NAME",
    "column_stats_key",
    "decode_file_id",
    "encode_file_id",
    "file_group_index",
    "file_group_indexes",
    "hash_id",
    "java_string_hash",
    "partition_id",
    "partition_stats_key",
    "secondary_index_key",
    "secondary_index_record_key",
    "secondary_index_shard_key",
]

ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_NAME = "."
"""How the metadata table names the single partition of a non-partitioned table."""

_XXH64_SEED = 0xFFFFFFFFDABADABA  # Java passes the int 0xdabadaba to a long parameter


def file_group_index(record_key: str, num_file_groups: int) -> int:
    """Which of a partition's ``num_file_groups`` file groups holds ``record_key``."""
    if num_file_groups <= 0:
        raise ValueError(f"a metadata partition needs at least one file group, got {num_file_groups}")
    # Java: Math.abs(Math.abs(hashCode) % n); Math.abs(MIN_VALUE) stays negative, hence the outer abs.
    h = java_string_hash(record_key)
    h = h if h == -(1 << 31) else abs(h)
    return abs(int(h - num_file_groups * int(h / num_file_groups)))  # Java's truncating remainder


_HASH_CHUNK = 1 << 16


def file_group_indexes(record_keys: Sequence[str], num_file_groups: int) -> np.ndarray:
    """:func:`file_group_index` of many keys at once."""
    if num_file_groups <= 0:
        raise ValueError(f"a metadata partition needs at least one file group, got {num_file_groups}")
    out = np.empty(len(record_keys), dtype=np.int64)
    for start in range(0, len(record_keys), _HASH_CHUNK):  # bounds the code-unit matrix's memory
        h = java_string_hashes(record_keys[start : start + _HASH_CHUNK]).astype(np.int64)
        signed = np.where(h >= 1 << 31, h - (1 << 32), h)
        magnitude = np.where(signed == -(1 << 31), signed, np.abs(signed))
        out[start : start + len(h)] = np.abs(np.fmod(magnitude, num_file_groups))  # truncating, as Java
    return out


@lru_cache(maxsize=65536)  # column and partition names repeat across every file of a commit
def hash_id(text: str) -> str:
    """XXH64 (Hudi's seed) of ``text``, big-endian, standard base64 with padding (12 characters)."""
    return base64.b64encode(xxhash.xxh64(text.encode("utf-8"), seed=_XXH64_SEED).digest()).decode("ascii")


def partition_id(partition_path: str) -> str:
    """The metadata table's name for a data partition: the path, or ``.`` when non-partitioned."""
    return partition_path or NON_PARTITIONED_NAME


def _file_index_id(file_name: str) -> str:
    """Hudi's ``FileIndexID``: the MD5 of the file name, standard base64."""
    return base64.b64encode(hashlib.md5(file_name.encode("utf-8")).digest()).decode("ascii")


def column_stats_key(column: str, partition_path: str, file_name: str) -> str:
    """The ``column_stats`` key of ``column`` in data file ``file_name`` of ``partition_path``."""
    return hash_id(column) + hash_id(partition_id(partition_path)) + _file_index_id(file_name)


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    """The ``bloom_filters`` key of base file ``file_name`` of ``partition_path``
    (``HoodieMetadataPayload.getBloomFilterRecordKey``: partition id, then file id)."""
    return hash_id(partition_id(partition_path)) + _file_index_id(file_name)


def partition_stats_key(column: str, partition_path: str) -> str:
    """The ``partition_stats`` key of ``column`` in ``partition_path``."""
    return hash_id(column) + hash_id(partition_id(partition_path))


_SECONDARY_SEPARATOR = "$"
_SECONDARY_ESCAPE = "\\"
_NULL_CHAR = "\x00"


def _escape(value: str | None) -> str:
    """``SecondaryIndexKeyUtils.escapeSpecialChars``: ``\\``, ``$`` and NUL get a ``\\`` before
    them; null is a lone NUL."""
    if value is None:
        return _NULL_CHAR
    if not any(c in value for c in (_SECONDARY_ESCAPE, _SECONDARY_SEPARATOR, _NULL_CHAR)):
        return value
    return "".join(
        _SECONDARY_ESCAPE + c if c in (_SECONDARY_ESCAPE, _SECONDARY_SEPARATOR, _NULL_CHAR) else c
        for c in value
    )


def secondary_index_key(secondary_value: str | None, record_key: str) -> str:
    """``<secondary value>$<record key>``, each escaped (a null value is a lone NUL character,
    as the ``\\x00$TXN-003`` keys Hudi wrote in the fixtures)."""
    return _escape(secondary_value) + _SECONDARY_SEPARATOR + _escape(record_key)


def _separator_position(key: str) -> int:
    """Where the first unescaped ``$`` of a secondary-index key is."""
    i = 0
    while i < len(key):
        c = key[i]
        if c == _SECONDARY_ESCAPE:
            i += 2
            continue
        if c == _SECONDARY_SEPARATOR:
            return i
        i += 1
    raise ValueError(f"secondary index key {key!r} has no unescaped '$' separator")


def secondary_index_shard_key(key: str) -> str:
    """What picks a secondary-index key's file group in index version V2 (table version 9): the
    escaped value and its ``$`` separator, so every entry of one value shares a file group
    (verified on the v9 fixture's two indexes; V1 hashes the whole key)."""
    return key[: _separator_position(key) + 1]


def secondary_index_record_key(key: str) -> str:
    """The data-table record key inside a secondary-index key (the part after the unescaped ``$``)."""
    rest = key[_separator_position(key) + 1 :]
    out, j = [], 0
    while j < len(rest):
        if rest[j] == _SECONDARY_ESCAPE and j + 1 < len(rest):
            j += 1
        out.append(rest[j])
        j += 1
    return "".join(out)


def encode_file_id(file_id: str) -> dict[str, object]:
    """The record index's location fields for ``file_id`` (fileIdEncoding 0 for ``<uuid>-<n>``)."""
    return dict(_encoded_file_id(file_id))


@lru_cache(maxsize=65536)
def _encoded_file_id(file_id: str) -> tuple[tuple[str, object], ...]:
    return tuple(_encode_file_id(file_id).items())


def _encode_file_id(file_id: str) -> dict[str, object]:
    head, sep, tail = file_id.rpartition("-")
    if sep and tail.isdigit():
        try:
            u = uuid.UUID(head)
        except ValueError:
            u = None
        if u is not None and str(u) == head.lower():
            high, low = u.int >> 64, u.int & 0xFFFFFFFFFFFFFFFF
            return {
                "fileIdHighBits": high - (1 << 64) if high >> 63 else high,
                "fileIdLowBits": low - (1 << 64) if low >> 63 else low,
                "fileIndex": int(tail),
                "fileId": "",
                "fileIdEncoding": 0,
            }
    return {
        "fileIdHighBits": None,
        "fileIdLowBits": None,
        "fileIndex": None,
        "fileId": file_id,
        "fileIdEncoding": 1,
    }


def decode_file_id(info: dict[str, object]) -> str:
    """The file id a record-index entry points at (either encoding)."""
    if info.get("fileIdEncoding") == 1:
        return str(info.get("fileId") or "")
    high = int(info["fileIdHighBits"]) & 0xFFFFFFFFFFFFFFFF  # type: ignore[call-overload]
    low = int(info["fileIdLowBits"]) & 0xFFFFFFFFFFFFFFFF  # type: ignore[call-overload]
    return f"{uuid.UUID(int=(high << 64) | low)}-{info['fileIndex']}"
