"""Hudi's simple bucket index: file ids and the hash that picks a record's bucket (``BucketIdentifier``).

A simple bucket index names each file group after its bucket: the first 8 characters of a new
file id prefix (a UUID) are replaced by the bucket number as 8 decimal digits
(``BucketIdentifier.newBucketFileIdPrefix``), and the bucket is read back as
``Integer.parseInt(fileId.substring(0, 8))`` (``bucketIdFromFileId``). Flink's non-blocking
concurrency control writes one fixed id per bucket (``newBucketFileIdForNBCC``):
``{bucket:08d}-0000-0000-0000-000000000000-0``.

None of the bucket settings is persisted in ``hoodie.properties``; a table is recognised as a
bucket table only from its file ids (a random UUID starts with 8 decimal digits about 2.3% of the
time, so every file group must have the form before the table counts as one).

A record's bucket hashes values taken from its record key (:func:`bucket_ids`). How they are
taken changed in Hudi 1.0.0 (HUDI-8403, ``KeyGenUtils.extractRecordKeysByFields`` reading values
up to the last ``,`` before the next ``:``, and hashing keys without ``,`` or without ``:`` whole);
Hudi 0.13-0.15 split at every ``,`` (:func:`legacy_hash_keys`). Whether every 0.14/0.15 build
hashes a key without ``:`` whole or split at its commas is UNCONFIRMED (the 0.14 source was not
available to read), so both readings are kept and a writer treats keys on which they differ as
undecidable.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hoodie.index.java_hash import java_list_hash, java_string_hashes

_BUCKET_FILE_ID = re.compile(r"^(\d{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}(?:-\d+)?$")
NBCC_FILE_ID_TAIL = "-0000-0000-0000-000000000000-0"


def bucket_id_str(bucket: int) -> str:
    """The bucket as Hudi writes it in a file id: 8 decimal digits (``bucketIdStr``)."""
    if not 0 <= bucket <= 99_999_999:
        raise ValueError(f"bucket id {bucket} does not fit 8 decimal digits")
    return f"{bucket:08d}"


def is_bucket_file_id(file_id: str) -> bool:
    """Whether ``file_id`` has the bucket form (8 digits, then the rest of a UUID, then ``-N``)."""
    return _BUCKET_FILE_ID.match(file_id) is not None


def bucket_id_from_file_id(file_id: str) -> int:
    """The bucket number of a bucket-index file id (``bucketIdFromFileId``)."""
    if not is_bucket_file_id(file_id):
        raise ValueError(f"file id {file_id!r} is not a bucket-index file id")
    return int(file_id[:8])


def new_bucket_file_id(bucket: int, index: int = 0) -> str:
    """A new file id for ``bucket``: a random UUID whose first 8 characters are the bucket number."""
    return f"{bucket_id_str(bucket)}{str(uuid.uuid4())[8:]}-{index}"


def nbcc_bucket_file_id(bucket: int) -> str:
    """The fixed file id Hudi gives a bucket under non-blocking concurrency control."""
    return f"{bucket_id_str(bucket)}{NBCC_FILE_ID_TAIL}"


def is_nbcc_bucket_file_id(file_id: str) -> bool:
    return is_bucket_file_id(file_id) and file_id.endswith(NBCC_FILE_ID_TAIL)


# -- hashing (BucketIdentifier.getBucketId) ----------------------------------------------------
#
# A record's bucket is ``(hashKeys.hashCode() & Integer.MAX_VALUE) % numBuckets``: ``hashKeys``
# is a ``List<String>`` taken from the record key, hashed with ``List.hashCode`` (``31 * h +
# element hash``, starting at 1, a null element hashing to 0) over ``String.hashCode`` (``31 * h +
# code unit`` over the UTF-16 code units, so a character outside the BMP counts twice). The
# modulo is taken of the non-negative value (Hudi 0.10's test-only overload took it of the signed
# hash; every writer path masks first).

_NULL_PLACEHOLDER = "__null__"
_EMPTY_PLACEHOLDER = "__empty__"
_INT_MAX = 0x7FFFFFFF


class BucketHashError(ValueError):
    """A record key that Hudi's hash-key extraction cannot take apart (Java would fail or loop)."""


def bucket_of_hash_keys(hash_keys: Sequence[str | None], num_buckets: int) -> int:
    """``BucketIdentifier.getBucketId(List<String>, int)``."""
    return (java_list_hash(hash_keys) & _INT_MAX) % num_buckets


def _index_of(text: str, char: str, start: int) -> int:
    return text.find(char, max(start, 0))


def _last_index_of(text: str, char: str, start: int) -> int:
    return -1 if start < 0 else text.rfind(char, 0, start + 1)


def hash_keys(record_key: str, fields: Sequence[str]) -> list[str | None]:
    """The values Hudi hashes for ``record_key`` (``KeyGenUtils.extractRecordKeysByFields``, Hudi 1.0+).

    A key without a ``,`` or without a ``:`` is hashed whole. Otherwise it is read as
    ``field:value`` pairs, a value running to the last ``,`` before the next ``:`` (so values may
    hold commas, and colons when no comma follows them); the values of ``fields`` are kept in the
    key's order, ``__null__`` becoming null and ``__empty__`` the empty string. No kept value:
    the whole key.
    """
    if "," not in record_key or ":" not in record_key:
        return [record_key]
    match_all = not fields or (len(fields) == 1 and fields[0] == "")
    values: list[str | None] = []
    n = len(record_key)
    processed = 0
    budget = 4 * n + 16  # Java loops forever on some malformed keys; we stop and say so
    while processed < n:
        sep1 = record_key.find(":", processed)
        if sep1 < 0:
            raise BucketHashError(f"record key {record_key!r}: no ':' after position {processed}")
        field = record_key[processed:sep1]
        sep2 = _index_of(record_key, ":", sep1 + 1)
        if match_all or field in fields:
            if sep2 < 0:
                value, processed = record_key[sep1 + 1 :], n
            else:
                comma = _last_index_of(record_key, ",", sep2)
                while comma < sep1 and sep2 > 0:
                    sep2 = _index_of(record_key, ":", sep2 + 1)
                    comma = _last_index_of(record_key, ",", sep2)
                if comma > 0:
                    value, processed = record_key[sep1 + 1 : comma], comma + 1
                else:
                    value, processed = record_key[sep1 + 1 :], n
            values.append(
                None if value == _NULL_PLACEHOLDER else "" if value == _EMPTY_PLACEHOLDER else value
            )
        elif sep2 < 0:
            processed = n
        else:
            comma = _last_index_of(record_key, ",", sep2)
            while comma < sep1:
                budget -= 1
                if budget < 0:
                    raise BucketHashError(
                        f"record key {record_key!r}: Hudi's hash-key extraction does not terminate on it"
                    )
                sep2 = _index_of(record_key, ":", sep2 + 1)
                comma = _last_index_of(record_key, ",", sep2)
            processed = n if comma < 0 else comma + 1
    return values if values else [record_key]


def legacy_hash_keys(record_key: str, fields: Sequence[str]) -> list[list[str | None]]:
    """The value lists Hudi 0.13-0.15 may hash for ``record_key`` (``extractRecordKeysByFields``
    before HUDI-8403): the key split at every ``,``, each part at its first ``:``, parts of other
    fields dropped, parts without ``:`` kept whole. Whether a key without ``:`` is split at all
    differs between builds, so both readings are returned when they differ.
    """
    split: list[str | None] = []
    for part in java_split(record_key):
        name, sep, value = part.partition(":")
        if not sep:
            split.append(part)
        elif not fields or name in fields:
            split.append(None if value == _NULL_PLACEHOLDER else "" if value == _EMPTY_PLACEHOLDER else value)
    readings = [split]
    if ":" not in record_key and split != [record_key]:
        readings.append([record_key])
    return readings


def java_split(text: str, sep: str = ",") -> list[str]:
    """Java's ``String.split`` for a one-character literal separator (trailing empty parts dropped)."""
    parts = text.split(sep)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return [] if parts == [""] and text == "" else parts


def bucket_ids(record_keys: Sequence[str], fields: Sequence[str], num_buckets: int) -> npt.NDArray[np.int64]:
    """The bucket of every record key (``BucketIdentifier.getBucketId(recordKey, fields, n)``)."""
    if num_buckets <= 0:
        raise ValueError(f"the number of buckets must be positive, got {num_buckets}")
    parsed = [i for i, k in enumerate(record_keys) if "," in k and ":" in k]  # complex keys
    whole = record_keys if not parsed else [k for k in record_keys if "," not in k or ":" not in k]
    list_hashes = np.uint32(31) + java_string_hashes(whole)  # List.hashCode of [key]
    buckets = (list_hashes & np.uint32(_INT_MAX)).astype(np.int64) % num_buckets
    if not parsed:
        return buckets
    out = np.empty(len(record_keys), dtype=np.int64)
    mask = np.ones(len(record_keys), dtype=bool)
    mask[parsed] = False
    out[mask] = buckets
    for i in parsed:
        out[i] = bucket_of_hash_keys(hash_keys(record_keys[i], fields), num_buckets)
    return out
