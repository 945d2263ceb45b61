"""Hudi's meta field names, the one place hts spells them (``HoodieRecord``'s constants).

The five meta columns lead every record of a table that populates them, in the order of
``HoodieRecord.HOODIE_META_COLUMNS``; a table written with ``hoodie.allow.operation.metadata.field``
adds ``_hoodie_operation`` after them (``HOODIE_META_COLUMNS_WITH_OPERATION``). ``_hoodie_is_deleted``
is not a meta column but a data field a writer may add to mark deletes (``HOODIE_IS_DELETED_FIELD``).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMMIT_SEQNO_METADATA_FIELD",
    "COMMIT_TIME_METADATA_FIELD",
    "FILENAME_METADATA_FIELD",
    "HOODIE_IS_DELETED_FIELD",
    "HOODIE_META_COLUMNS",
    "HOODIE_META_COLUMNS_WITH_OPERATION",
    "OPERATION_METADATA_FIELD",
    "PARTITION_PATH_METADATA_FIELD",
    "RECORD_KEY_METADATA_FIELD",
]

COMMIT_TIME_METADATA_FIELD: Final = "_hoodie_commit_time"
COMMIT_SEQNO_METADATA_FIELD: Final = "_hoodie_commit_seqno"
RECORD_KEY_METADATA_FIELD: Final = "_hoodie_record_key"
PARTITION_PATH_METADATA_FIELD: Final = "_hoodie_partition_path"
FILENAME_METADATA_FIELD: Final = "_hoodie_file_name"
OPERATION_METADATA_FIELD: Final = "_hoodie_operation"
HOODIE_IS_DELETED_FIELD: Final = "_hoodie_is_deleted"

#: The five meta columns, in the order they lead every record.
HOODIE_META_COLUMNS: Final[tuple[str, ...]] = (
    COMMIT_TIME_METADATA_FIELD,
    COMMIT_SEQNO_METADATA_FIELD,
    RECORD_KEY_METADATA_FIELD,
    PARTITION_PATH_METADATA_FIELD,
    FILENAME_METADATA_FIELD,
)

#: The five meta columns and ``_hoodie_operation``, in the order a changelog table writes them.
HOODIE_META_COLUMNS_WITH_OPERATION: Final[tuple[str, ...]] = (*HOODIE_META_COLUMNS, OPERATION_METADATA_FIELD)
