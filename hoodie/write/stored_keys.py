"""Before a write: the key generator must make the keys the table already stores.

Hudi's writers key a record by the ``_hoodie_record_key`` and ``_hoodie_partition_path`` its key
generator makes, and an upsert finds the stored version of a record by them (the index looks keys
up in their partition). A configuration hts reads differently from the writer that filled the table
(a rendering of a value, a key generator option only the writer knew, a Spark SQL conversion) would
put updates into new records in other partitions: duplicates that no reader can merge. So before
anything is written, the writer rebuilds the keys of stored rows and refuses the write, naming the
row and the file, when they differ.

The rows checked are the first ones of the smallest base file among the latest file slices of the
partitions written to (or, when they hold none, of the table's first partition that holds any):
cheap, and written by whoever wrote the table; or of the smallest log-only slice when there is no
base file. A segment stored as ``default`` (writers before Hudi 0.12) is the null-value segment that
Hudi's writers now write as ``__HIVE_DEFAULT_PARTITION__``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import HoodieError, UnsupportedShapeError
from hoodie.file_group.view import FileSystemView
from hoodie.keygen import KeyGenerator
from hoodie.keygen.partition_path import (
    DEFAULT_PARTITION_PATH,
    DEPRECATED_DEFAULT_PARTITION_PATH,
    HIVE_STYLE_SEPARATOR,
    PARTITION_PATH_SEPARATOR,
)
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import iter_parquet
from hoodie.schema.avro_arrow import add_meta_fields, avro_to_arrow_schema
from hoodie.schema.internal_schema import SchemaOnRead
from hoodie.schema.meta_fields import PARTITION_PATH_METADATA_FIELD, RECORD_KEY_METADATA_FIELD
from hoodie.shape.matrix import Shape
from hoodie.table import HoodieTable

WITNESS_ROWS = 256
"""How many stored rows (at most) are rebuilt before a write."""
WITNESS_PARTITIONS = 16
"""How many partitions (at most) are looked into for stored rows when the write's own hold none."""

STORED_KEYS_REASON = (
    "Hudi's writers find the stored version of a record by the record key and partition path their key "
    "generator makes (KeyGenerator.getKey, HoodieIndex.tagLocation); hts's key generator makes other keys "
    "for rows this table stores, so its writes would add second copies of records"
)


def check_stored_keys(
    table: HoodieTable,
    view: FileSystemView,
    keygen: KeyGenerator,
    schema_json: Mapping[str, Any],
    operation: str,
    written: Sequence[str],
    *,
    on_read: SchemaOnRead | None = None,
) -> None:
    """Raise :class:`UnsupportedShapeError` (before anything is written) when ``keygen`` does not
    rebuild the meta keys of stored rows (``written``: the partitions the write goes to)."""
    if not table.config.populate_meta_fields:
        return  # no stored keys to compare (writes to such tables are refused by their shape)
    rows, path = _witness_rows(table, view, keygen, schema_json, written, on_read)
    if rows is None or RECORD_KEY_METADATA_FIELD not in rows.column_names:
        return
    rows = rows.slice(0, WITNESS_ROWS)
    stored = rows.filter(pc.is_valid(rows[RECORD_KEY_METADATA_FIELD]))
    if stored.num_rows == 0:
        return
    where = table.base_path
    try:
        keys = keygen.record_keys(stored)
        partitions = keygen.partition_paths(stored)
    except HoodieError as e:
        raise UnsupportedShapeError(
            where,
            Shape.KEY_GENERATOR.value,
            f"{RECORD_KEY_METADATA_FIELD}={stored[RECORD_KEY_METADATA_FIELD][0].as_py()!r} in {path}: {e}",
            f"write ({operation})",
            STORED_KEYS_REASON,
        ) from None
    hive = keygen.hive_style
    for key, part, our_key, our_part in zip(
        stored[RECORD_KEY_METADATA_FIELD].to_pylist(),
        stored[PARTITION_PATH_METADATA_FIELD].to_pylist(),
        keys.to_pylist(),
        partitions.to_pylist(),
        strict=True,
    ):
        if key != our_key:
            evidence = (
                f"{RECORD_KEY_METADATA_FIELD}={key!r} in {path} (hts's key generator makes {our_key!r})"
            )
        elif part is not None and _normal(part, hive) != _normal(our_part, hive):
            evidence = (
                f"{PARTITION_PATH_METADATA_FIELD}={part!r} of {key!r} in {path} (hts makes {our_part!r})"
            )
        else:
            continue
        raise UnsupportedShapeError(
            where, Shape.KEY_GENERATOR.value, evidence, f"write ({operation})", STORED_KEYS_REASON
        )


def _witness_rows(
    table: HoodieTable,
    view: FileSystemView,
    keygen: KeyGenerator,
    schema_json: Mapping[str, Any],
    written: Sequence[str],
    on_read: SchemaOnRead | None,
) -> tuple[pa.Table | None, str]:
    """The first stored rows of the smallest latest base file of the partitions the write goes to
    (else of the first partitions that hold any); without base files (a MERGE_ON_READ table whose
    inserts went to log files, as Flink's writers put them), the merged rows of the smallest log-only
    slice. ``None`` when the table stores no rows yet. Only partitions the write lists anyway are
    listed (the write's partitioner lists the table's partitions)."""
    existing = view.partitions()
    touched = sorted(set(written) & set(existing))
    slices = [s for s in view.latest_file_slices(touched) if not s.is_empty]
    for partition in existing[:WITNESS_PARTITIONS] if not slices else ():
        slices = [s for s in view.latest_file_slices([partition]) if not s.is_empty]
        if slices:
            break
    with_base = [s for s in slices if s.base_file is not None]
    if with_base:
        witness = min(with_base, key=lambda s: (s.total_size, s.partition_path, s.file_id))
        path = witness.base_file_path(table.base_path)
        assert path is not None
        full = avro_to_arrow_schema(add_meta_fields(dict(schema_json)))
        fields = (*keygen.record_key_fields, *keygen.partition_fields)
        wanted = {RECORD_KEY_METADATA_FIELD, PARTITION_PATH_METADATA_FIELD, *_top_level(fields)}
        schema = pa.schema([f for f in full if f.name in wanted])
        rows = next(iter_parquet(table.fileio, path, schema, WITNESS_ROWS, on_read=on_read), None)
        return rows, path
    if not slices:
        return None, ""
    witness = min(slices, key=lambda s: (s.total_size, s.partition_path, s.file_id))
    rows = TableReader(table).read_file_slices([witness])
    return rows, witness.log_file_paths(table.base_path)[0]


def _top_level(fields: Sequence[str]) -> list[str]:
    """The top-level columns holding ``fields`` (dotted names address nested fields, unless a
    top-level column has the dotted name itself)."""
    return [name for f in fields for name in (f, f.split(".", 1)[0])]


def _normal(path: str, hive_style: bool) -> str:
    """``path`` with segments of the pre-0.12 null value written as today's."""
    out = []
    for segment in path.split(PARTITION_PATH_SEPARATOR):
        name, sep, value = segment.partition(HIVE_STYLE_SEPARATOR) if hive_style else ("", "", segment)
        old_null = value == DEPRECATED_DEFAULT_PARTITION_PATH
        out.append(f"{name}{sep}{DEFAULT_PARTITION_PATH}" if old_null else segment)
    return PARTITION_PATH_SEPARATOR.join(out)
