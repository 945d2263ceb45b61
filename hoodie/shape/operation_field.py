"""The operation meta field ``_hoodie_operation``: how a table is known to carry it, from storage.

Facts settled from Apache Hudi's source:

- A writer adds the field when its config says ``hoodie.allow.operation.metadata.field=true``
  (``HoodieWriteConfig.ALLOW_OPERATION_METADATA_FIELD``; Flink's changelog mode sets it). It is a
  writer option: ``hoodie.properties`` has no key for it (``HoodieTableConfig``), and the commit's
  ``schema`` is the writer schema without meta fields (Flink's ``FlinkWriteClients`` gives the
  source schema). Its writers put the column after ``_hoodie_file_name`` in every file they write
  (``HoodieWriteHandle``: ``HoodieAvroUtils.addMetadataFields(writeSchema, allowOperationMetadataField)``),
  the log blocks' ``SCHEMA`` header included (``HoodieAppendHandle``), and fill it with the record's
  ``HoodieOperation`` name (``I``, ``-U``, ``+U``, ``D``).
- Hudi itself knows the table has it from the data files only: ``TableSchemaResolver.hasOperationField``
  reads the schema of the files of the latest completed commit that wrote any
  (``getLastCommitMetadataWithValidData``: commits, delta commits and replace commits by requested time,
  newest first, the first whose write stats name a file), a base file's footer or the schema of the
  last data block of a log file (``readSchemaFromLogFile``). Flink's compaction and clustering take
  the changelog mode from there too (``CompactionUtil.inferChangelogMode``, which notes that the mode
  is no table config), and so write base files with the column.
- Readers then take rows marked ``D`` or ``-U`` as deletes (``RecordContext.isDeleteHoodieOperation``,
  ``HoodieOperation.isDeleteRecord``).

So the shape is recognised here as Hudi does: the schema of a file of the latest completed commit that
wrote data (plus the ``schema`` of that commit or a newer one, in case a writer recorded the field
there: a reader schema with the column takes the deletes too). One footer, or one log file (whole
when small, else the header of the block the commit wrote), is read, only when those commits
changed since the last look.
"""

from __future__ import annotations

import json
import posixpath
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hoodie.errors import CorruptLogBlockError
from hoodie.io.fileio import join
from hoodie.schema.meta_fields import OPERATION_METADATA_FIELD

if TYPE_CHECKING:
    from hoodie.table import HoodieTable


@dataclass(frozen=True, slots=True)
class OperationFieldProbe:
    """What was looked at (the latest commits with a schema and with data files) and the evidence
    found there (None: the table has no operation field, as Hudi sees it)."""

    looked_at: tuple[str | None, str | None]
    evidence: str | None
    read: str | None = None
    """The data file whose schema was read (None: the commit's schema told, or no data file yet)."""


def _fields(schema: str | None) -> list[str]:
    try:
        parsed = json.loads(schema or "{}")
    except ValueError:
        return []
    fields = parsed.get("fields") if isinstance(parsed, dict) else None
    return [str(f.get("name")) for f in fields or () if isinstance(f, dict)]


def _is_log_file(path: str) -> bool:
    from hoodie.file_group.log_file import LogFile

    return LogFile.parse(posixpath.basename(path)) is not None


SMALL_LOG = 1024 * 1024
"""A log file up to this size is read whole (one request after the open); a larger one from the block
its commit started writing at (the write stat's ``logOffset``), up to its header."""
_BLOCK_HEAD = struct.Struct(">6sqii")  # magic, block length, log format version, block type


def _last_data_block_schema(data: bytes, path: str) -> tuple[str | None, str]:
    from hoodie.file_group.log_reader import read_blocks

    blocks = [b for b in read_blocks(data, path) if b.block_type.is_data and not b.is_corrupt]
    if not blocks:
        return None, path
    return blocks[-1].schema, f"{path}@{blocks[-1].offset}"


def _header_schema_at(prefix: bytes, offset: int, path: str) -> str | None:
    """The SCHEMA header of the data block starting ``prefix`` (None if it is not one, or is cut)."""
    from hoodie.file_group.log_block import LOG_FORMAT_VERSION, MAGIC, BlockType, HeaderKey, decode_header

    try:
        magic, _length, version, type_id = _BLOCK_HEAD.unpack_from(prefix, 0)
        if magic != MAGIC or version != LOG_FORMAT_VERSION or not BlockType(type_id).is_data:
            return None
        header, _ = decode_header(prefix, _BLOCK_HEAD.size, f"{path}@{offset}")
    except (struct.error, ValueError, IndexError, CorruptLogBlockError):
        return None
    return header.get(HeaderKey.SCHEMA)


def _log_schema(table: HoodieTable, path: str, offset: int) -> tuple[str | None, str]:
    """The schema of the last data block of a log file (``TableSchemaResolver.readSchemaFromLogFile``)
    and where it was found. A large file is read only at ``offset``, the first block the commit wrote
    (its blocks share the writer schema); anything unusual there reads the file whole."""
    with table.fileio.open_input(path) as f:
        size = f.size()
        if size <= SMALL_LOG:
            return _last_data_block_schema(bytes(f.read()), path)
        f.seek(offset)
        schema = _header_schema_at(bytes(f.read(SMALL_LOG)), offset, path)
    if schema is not None:
        return schema, f"{path}@{offset}"
    return _last_data_block_schema(table.fileio.read_bytes(path), path)


def _base_file_fields(table: HoodieTable, path: str) -> list[str]:
    import pyarrow.parquet as pq

    with table.fileio.open_input(path) as f:
        return list(pq.read_schema(f).names)


def _data_file_evidence(
    table: HoodieTable, instant: str, files: list[tuple[str, int]]
) -> tuple[str | None, str | None]:
    """The evidence in the first of ``files`` (path, the offset the commit wrote at) that gives a
    schema, as ``fetchSchemaFromFiles`` takes it, and that file. Hudi's order is a hash map's
    (``getFileIdAndFullPaths``) and one commit's files share its writer schema, so base files are
    taken first: a footer is the cheaper read. A file gone since (cleaned) is passed over."""
    for path, offset in sorted(files, key=lambda f: _is_log_file(f[0])):
        try:
            if _is_log_file(path):
                schema, where = _log_schema(table, path, offset)
                if schema is None:
                    continue
                fields = _fields(schema)
            elif path.endswith(".parquet"):
                fields, where = _base_file_fields(table, path), path
            else:
                continue
        except FileNotFoundError:
            continue
        if OPERATION_METADATA_FIELD in fields:
            latest = f"a data file of the latest commit with data, {instant}"
            return f"{OPERATION_METADATA_FIELD} in the schema of {where}, {latest}", path
        return None, path
    return None, None


def operation_field(table: HoodieTable, previous: OperationFieldProbe | None) -> OperationFieldProbe:
    """Whether ``table`` carries ``_hoodie_operation``; ``previous`` is reused while the latest commits
    with a schema and with data files are the ones it looked at."""
    schema_commit = data_commit = None
    schema_text: str | None = None
    files: list[tuple[str, int]] = []
    for instant in reversed(table.timeline.completed().writes().instants):
        metadata = table.commit_metadata(instant)
        if schema_commit is None and metadata.schema:
            schema_commit, schema_text = instant.requested_time, metadata.schema
        if data_commit is None:
            stats = [s for ss in (metadata.partition_to_write_stats or {}).values() for s in ss or ()]
            files = [(join(table.base_path, s.path), s.log_offset or 0) for s in stats if s.path]
            if files:
                data_commit = instant.requested_time
        if data_commit is not None:  # the commit schemas looked at: this one's and newer ones'
            break
    looked_at = (schema_commit, data_commit)
    if previous is not None and previous.looked_at == looked_at:
        return previous
    if schema_commit is not None and OPERATION_METADATA_FIELD in _fields(schema_text):
        return OperationFieldProbe(
            looked_at, f"{OPERATION_METADATA_FIELD} in the schema of commit {schema_commit}"
        )
    if data_commit is None:
        return OperationFieldProbe(looked_at, None)
    return OperationFieldProbe(looked_at, *_data_file_evidence(table, data_commit, files))
