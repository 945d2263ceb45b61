"""The clustering benchmark's machinery at a tiny size: the table, both clusterings and the floor run,
and the binary copy and the rewrite leave the same rows (checked inside ``time_clustering``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from bench import clustering


def test_clustering_bench_runs_and_both_clusterings_agree(tmp_path: Path) -> None:
    table = clustering.ensure_table(tmp_path, 4_000, 4, log=lambda _msg: None)
    assert len(clustering._base_files(table)) == 4
    assert sum(pq.ParquetFile(p).metadata.num_rows for p in clustering._base_files(table)) == 4_000
    t = clustering.time_clustering(tmp_path, 4_000, 4, repeat=1)
    assert t.rows == 4_000 and t.files == 4 and t.input_bytes > 0
    assert all(x > 0 for x in [*t.binary_copy, *t.rewrite, *t.floor])
