"""Bucket-index file ids (Hudi's ``BucketIdentifier``).

A simple bucket index names each file group after its bucket: the first 8 characters of a new
file id prefix (a UUID) are replaced by the bucket number as 8 decimal digits
(``BucketIdentifier.newBucketFileIdPrefix``), and the bucket is read back as
``Integer.parseInt(fileId.substring(0, 8))`` (``bucketIdFromFileId``). Flink's non-blocking
concurrency control writes one fixed id per bucket (``newBucketFileIdForNBCC``):
``{bucket:08d}-0000-0000-0000-000000000000-0``.

None of the bucket settings is persisted in ``hoodie.properties``; a table is recognised as a
bucket table only from its file ids (a random UUID starts with 8 decimal digits about 2.3% of the
time, so every file group must have the form before the table counts as one).
"""

from __future__ import annotations

import re
import uuid

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
