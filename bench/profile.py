"""Where our read spends its time: a stage breakdown and a cProfile of ``snapshot()``.

The breakdown re-runs the steps of ``read_slice`` one by one with the functions it calls
(base Parquet read, log scan, Avro block decode, vectorized merge); their sum is close to, not
exactly, one ``snapshot()``.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import time
from collections.abc import Callable
from typing import TypeVar

from bench.data import BenchData
from bench.readers import read_ours
from hoodie.file_group.file_slice import FileSlice
from hoodie.file_group.log_block import BlockType
from hoodie.merge.vectorized import merge_slice
from hoodie.read.log_scanner import scan_log_blocks
from hoodie.read.reader import TableReader, table_schema
from hoodie.read.slice_reader import SliceReadOptions, decode_data_block, read_parquet
from hoodie.table import HoodieTable

T = TypeVar("T")


def _timed(stages: list[tuple[str, float]], name: str, fn: Callable[[], T]) -> T:
    start = time.perf_counter()
    out = fn()
    stages.append((name, time.perf_counter() - start))
    return out


def stage_breakdown(data: BenchData, repeat: int = 3) -> list[tuple[str, float]]:
    """Seconds per stage of a read of the benchmark's single file slice (best of ``repeat``)."""
    runs = [_stages_once(data) for _ in range(repeat)]
    return [(name, min(run[i][1] for run in runs)) for i, (name, _) in enumerate(runs[0])]


def _stages_once(data: BenchData) -> list[tuple[str, float]]:
    stages: list[tuple[str, float]] = []

    def plan() -> tuple[HoodieTable, SliceReadOptions, list[FileSlice]]:
        table = HoodieTable.open(str(data.table_path))
        reader = TableReader(table)
        schema = table_schema(table)
        view = table.file_system_view(None, reader.timeline)
        opts = reader._options(view, schema, None)
        slices = view.latest_file_slices(None)
        return table, opts, slices

    table, opts, slices = _timed(stages, "open table, timeline, schema, file listing", plan)
    assert len(slices) == 1
    s = slices[0]
    path = s.base_file_path(table.base_path)
    assert path is not None
    schema = opts.schema
    base = _timed(
        stages, "read base file (pyarrow, projected)", lambda: read_parquet(table.fileio, path, schema)
    )
    blocks = _timed(
        stages,
        "read log file + scan blocks",
        lambda: scan_log_blocks(
            table.fileio,
            table.base_path,
            s,
            is_committed=opts.is_committed,
            latest_instant=opts.latest_instant,
        ),
    )
    data_blocks = [b for b in blocks if b.block_type is BlockType.AVRO_DATA]
    decoded = _timed(
        stages, "decode Avro data block", lambda: [decode_data_block(b, schema) for b in data_blocks]
    )
    _timed(
        stages,
        "merge (vectorized: keys, ranks, filter, take, concat)",
        lambda: merge_slice(base, list(decoded), opts.merge_spec),
    )
    return stages


def cprofile_read(data: BenchData, top: int = 25) -> str:
    """``pstats`` text of one profiled ``snapshot()``, by internal time and by cumulative time.

    cProfile charges a hook per Python call, so loops of many small calls (the Avro block's
    per-record framing) look several times slower here than they are; the stage breakdown
    has the unprofiled figures.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    read_ours(data)
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()
