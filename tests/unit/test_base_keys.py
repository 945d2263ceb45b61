"""Base keys looked up a row group at a time: the same batches and codes as batch by batch, and
snapshot reads of multi-row-group base files equal to hudi-rs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from hoodie.io.fileio import LocalFileIO
from hoodie.read.base_keys import RowGroupKeys
from hoodie.read.reader import TableReader
from hoodie.read.slice_reader import iter_parquet
from hoodie.table import HoodieTable
from hoodie.write.writer import HoodieWriter
from tests.conftest import hudi_rs_rows
from tests.tables import new_table, rows

KEY = "_hoodie_record_key"
SCHEMA = pa.schema([(KEY, pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _write(path: Path, n: int, row_group_size: int) -> pa.Table:
    table = pa.table(
        {
            KEY: pa.array([f"k{i:04d}" for i in range(n)]),
            "ts": pa.array(range(n), pa.int64()),
            "v": pa.array([f"v{i}" for i in range(n)]),
        }
    )
    pq.write_table(table, path, row_group_size=row_group_size)
    return table


def _lookup(keys: pa.Array, dictionary: pa.Array) -> np.ndarray:
    return np.asarray(
        pc.fill_null(pc.index_in(keys, value_set=dictionary), -1).to_numpy(zero_copy_only=False)
    )


@pytest.mark.parametrize(("row_group_size", "batch_rows"), [(10, 4), (10, 10), (7, 100), (100, 3)])
def test_split_read_gives_the_same_rows_and_codes(
    tmp_path: Path, row_group_size: int, batch_rows: int
) -> None:
    path = str(tmp_path / "base.parquet")
    _write(Path(path), 25, row_group_size)
    fileio = LocalFileIO()
    plain = list(iter_parquet(fileio, path, SCHEMA, batch_rows))
    keys = RowGroupKeys(KEY)
    split = list(iter_parquet(fileio, path, SCHEMA, batch_rows, keys=keys))
    assert keys.split
    assert pa.concat_tables(split).equals(pa.concat_tables(plain))
    assert all(b.schema == SCHEMA for b in split)
    # No batch spans two row groups: its first and last rows are in the same one.
    ends = np.cumsum([b.num_rows for b in split])
    assert all(
        (end - b.num_rows) // row_group_size == (end - 1) // row_group_size
        for end, b in zip(ends, split, strict=True)
    )
    dictionary = pa.array(["k0003", "k0011", "k0024", "k0999", "k0000"])
    codes_of = keys.codes_of(dictionary)
    for batch in split:
        batch_keys = batch[KEY].combine_chunks()
        assert codes_of(batch_keys).tolist() == _lookup(batch_keys, dictionary).tolist()


@pytest.mark.parametrize(
    ("keys_array", "dictionary"),
    [
        (
            pa.array([f"k{i:04d}" for i in range(12)], pa.large_string()),
            pa.array(["k0003"], pa.large_string()),
        ),
        (pa.array(range(12), pa.int64()), pa.array([3, 7], pa.int64())),
    ],
)
def test_other_key_types_are_looked_up_per_batch(
    tmp_path: Path, keys_array: pa.Array, dictionary: pa.Array
) -> None:
    path = str(tmp_path / "base.parquet")
    pq.write_table(pa.table({KEY: keys_array, "ts": pa.array(range(12), pa.int64())}), path, row_group_size=5)
    schema = pa.schema([(KEY, keys_array.type), ("ts", pa.int64())])
    keys = RowGroupKeys(KEY)
    batches = list(iter_parquet(LocalFileIO(), path, schema, 4, keys=keys))
    assert not keys.split
    assert pa.concat_tables(batches)[KEY].to_pylist() == keys_array.to_pylist()
    codes_of = keys.codes_of(dictionary)
    for batch in batches:
        assert codes_of(batch[KEY].combine_chunks()).tolist() == _lookup(batch[KEY], dictionary).tolist()


def test_a_batch_out_of_order_is_an_error(tmp_path: Path) -> None:
    path = str(tmp_path / "base.parquet")
    _write(Path(path), 20, 10)
    keys = RowGroupKeys(KEY)
    batches = list(iter_parquet(LocalFileIO(), path, SCHEMA, 5, keys=keys))
    codes_of = keys.codes_of(pa.array(["k0001"]))
    with pytest.raises(RuntimeError, match="a base batch of 5 rows is not rows 0.. of its row group's keys"):
        codes_of(batches[1][KEY].combine_chunks())


def test_discarded_keys_are_not_held(tmp_path: Path) -> None:
    path = str(tmp_path / "base.parquet")
    _write(Path(path), 20, 10)
    keys = RowGroupKeys(KEY)
    keys.discard()
    assert len(list(iter_parquet(LocalFileIO(), path, SCHEMA, 5, keys=keys))) == 4
    assert not keys._groups


def _rewrite_row_groups(table: HoodieTable, rows_per_group: int) -> int:
    """Rewrite each base file of ``table`` in place with small row groups (same rows, same footer
    key-value metadata): the reader then meets base files of several row groups."""
    count = 0
    for s in table.file_system_view().latest_file_slices(None):
        path = s.base_file_path(table.base_path)
        assert path is not None
        data = pq.read_table(path)
        pq.write_table(data, path, row_group_size=rows_per_group)
        count += pq.ParquetFile(path).num_row_groups
    return count


def test_snapshot_of_multi_row_group_base_files_equals_hudi_rs(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = new_table(path)
    writer = HoodieWriter(table)
    writer.bulk_insert(rows(range(60), ts=1))
    writer.upsert(rows(range(0, 60, 4), ts=2))  # newer: win
    writer.upsert(rows(range(1, 60, 8), ts=0))  # older: lose to the base rows
    writer.upsert(rows(range(60, 70), ts=3))  # new keys
    writer.delete(rows(range(2, 60, 10), ts=5).select(["id", "p"]))
    table = HoodieTable.open(str(path))
    assert _rewrite_row_groups(table, 3) > 6
    got = TableReader(HoodieTable.open(str(path))).snapshot()
    ours = sorted(str(r) for r in got.drop_columns(["_hoodie_file_name"]).to_pylist())
    assert ours == hudi_rs_rows(path)
    values = dict(zip(got["id"].to_pylist(), got["v"].to_pylist(), strict=True))
    assert (
        values["k0"] == "v0@2" and values["k1"] == "v1@1" and "k2" not in values and values["k65"] == "v65@3"
    )
