"""The three timed readers of the benchmark table, and how their results are compared.

``ours``
    ``TableReader(HoodieTable.open(path)).snapshot()``: timeline, file listing, base file,
    log scan, Avro decode and merge, end to end.
``hudi-rs``
    ``HudiTableBuilder.from_base_uri(path)...build().read()`` made into one ``pyarrow.Table``.
``floor``
    What a columnar engine minimally does: pyarrow reads the base file and a Parquet file of
    the same updates, drops the base rows whose key is updated and appends the updates. It
    knows the updates win (they do by construction) and so compares no ordering values; it
    meets no deletes and no key written twice in the log, so it looks for neither; and it reads
    the updates from a snappy Parquet file where ours decodes the (larger, uncompressed) Avro
    block. Its rows equal ours, meta columns included (checked before timing).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from hudi import HudiTableBuilder

from bench.data import BenchData
from hoodie.read.reader import TableReader
from hoodie.schema.meta_fields import RECORD_KEY_METADATA_FIELD as RECORD_KEY
from hoodie.table import HoodieTable


def read_ours(data: BenchData) -> pa.Table:
    return TableReader(HoodieTable.open(str(data.table_path))).snapshot()


def read_hudi_rs(data: BenchData) -> pa.Table:
    table = (
        HudiTableBuilder.from_base_uri(str(data.table_path))
        .with_hudi_option("hoodie.metadata.enable", "false")
        .build()
    )
    return pa.Table.from_batches(table.read())


def read_floor(data: BenchData) -> pa.Table:
    base = pq.read_table(data.base_file)
    updates = pq.read_table(data.updates_parquet)
    updated = pc.is_in(base[RECORD_KEY], value_set=updates[RECORD_KEY])
    return pa.concat_tables([base.filter(pc.invert(updated)), updates])


READERS: dict[str, Callable[[BenchData], pa.Table]] = {
    "ours": read_ours,
    "hudi-rs": read_hudi_rs,
    "floor": read_floor,
}


def normalized(table: pa.Table) -> pa.Table:
    """``table`` sorted by record key, one chunk per column, every field nullable.

    hudi-rs declares the meta columns non-nullable where Hudi's schemas say nullable; that
    difference is not a difference in the rows.
    """
    schema = pa.schema([f.with_nullable(True) for f in table.schema])
    return table.cast(schema).sort_by(RECORD_KEY).combine_chunks()


def differences(expected: pa.Table, actual: pa.Table) -> list[str]:
    """What differs between two normalized tables: row count, column names, types, values."""
    if expected.num_rows != actual.num_rows:
        return [f"{actual.num_rows:,} rows instead of {expected.num_rows:,}"]
    if expected.column_names != actual.column_names:
        return [f"columns {actual.column_names} instead of {expected.column_names}"]
    out = []
    for name in expected.column_names:
        a, b = expected[name], actual[name]
        if a.type != b.type:
            out.append(f"{name}: type {b.type} instead of {a.type}")
        elif not a.equals(b):
            unequal = pc.invert(pc.fill_null(pc.equal(a, b), False))
            both_null = pc.and_(pc.is_null(a), pc.is_null(b))
            bad = pc.sum(pc.and_not(unequal, both_null)).as_py() or 0
            out.append(f"{name}: {bad:,} value(s) differ")
    return out
