"""The read benchmark's machinery at a tiny size: generation, verification, timing, memory.

No wall-clock assertions: only that the three readers return the same merged rows and that the
measuring code runs and reports sane figures.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pytest

from bench import data as bench_data
from bench.cli import SECTIONS, main, selected_sections, targets
from bench.measure import measure_in_subprocess, time_readers
from bench.profile import stage_breakdown
from bench.readers import READERS, RECORD_KEY, differences, normalized
from bench.verify import check_agree, check_ours

ROWS = 20_000
UPDATES = 2_000


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> bench_data.BenchData:
    cache = tmp_path_factory.mktemp("bench-cache")
    return bench_data.ensure(ROWS, UPDATES, cache_dir=cache, log=lambda _msg: None)


def test_generated_table_is_one_file_group_with_an_avro_log_block(small: bench_data.BenchData) -> None:
    assert small.base_file.suffix == ".parquet"
    assert ".log." in small.log_file.name
    assert small.base_file.parent == small.log_file.parent == small.table_path
    again = bench_data.ensure(ROWS, UPDATES, cache_dir=small.root.parent, log=lambda _msg: None)
    assert again == small  # served from the cache, not regenerated


def test_the_three_readers_agree_on_the_merged_rows(small: bench_data.BenchData) -> None:
    ours = READERS["ours"](small)
    check_ours(small, ours)
    hudi_rs = READERS["hudi-rs"](small)
    floor = READERS["floor"](small)
    assert hudi_rs.num_rows == floor.num_rows == ours.num_rows == ROWS
    check_agree("hudi-rs", ours, hudi_rs)
    check_agree("floor", ours, floor)
    # and explicitly: every updated key carries the update's ordering value in all three
    _, upd = bench_data.make_inputs(ROWS, UPDATES)
    want = upd.sort_by(bench_data.KEY)[bench_data.ORDERING]
    for table in (ours, hudi_rs, floor):
        rows = normalized(table)
        got = rows.filter(pc.is_in(rows[RECORD_KEY], value_set=upd[bench_data.KEY]))
        assert got[bench_data.ORDERING].combine_chunks().equals(want.combine_chunks())


def test_differences_names_what_differs(small: bench_data.BenchData) -> None:
    ours = normalized(READERS["ours"](small))
    changed = ours.set_column(ours.schema.get_field_index("price"), "price", pc.add(ours["price"], 1.0))
    assert differences(ours, ours) == []
    assert differences(ours, changed) == [f"price: {ROWS:,} value(s) differ"]
    assert differences(ours, ours.slice(1)) == [f"{ROWS - 1:,} rows instead of {ROWS:,}"]


def test_timing_memory_and_profile_machinery(small: bench_data.BenchData) -> None:
    timings = time_readers(small, list(READERS), repeat=1)
    assert set(timings) == set(READERS)
    assert all(len(t.seconds) == 1 and t.best > 0 for t in timings.values())
    memory = {"ours": measure_in_subprocess("ours", small)}
    m = memory["ours"]
    assert m.result_rows == ROWS
    assert m.result_nbytes > 0 and m.peak_rss_delta >= 0 and m.baseline_rss > 0
    names = [t.name for t in targets(timings, memory)]
    assert len(names) == 3
    stages = stage_breakdown(small, repeat=1)
    assert len(stages) == 5 and all(s >= 0 for _, s in stages)


def test_cli_runs_end_to_end(small: bench_data.BenchData, capsys: pytest.CaptureFixture[str]) -> None:
    cache = small.root.parent
    args = ["--rows", str(ROWS), "--repeat", "1", "--no-memory", "--cache-dir", str(cache)]
    # The sections checked here; s3, watch and console have their own tiny-size tests in tests/bench,
    # and scaleout's standalone cluster is the Spark-cluster test's (tests/integration).
    sections = ("read", "compaction", "clustering", "clean", "planning", "metadata", "daemon")
    only = [arg for section in sections for arg in ("--only", section)]
    assert main([*args, *only, "--metadata-files", "12", "--planning-partitions", "30"]) == 0
    out = capsys.readouterr().out
    assert "identical to ours" in out
    assert "time ours / floor" in out and "time ours / hudi-rs" in out
    assert "planning over 30 partitions, 600 file groups" in out
    assert "clean planning / listing, metadata table on" in out
    assert "insert: 12 files" in out and "with record index, upsert: metadata update / data write" in out


def test_cache_key_changes_with_the_data_version() -> None:
    assert bench_data.DATA_VERSION in bench_data.cache_key(ROWS, UPDATES)
    assert bench_data.cache_key(ROWS, UPDATES) != bench_data.cache_key(ROWS, UPDATES + 1)


def test_make_bench_leaves_the_scaleout_section_to_make_bench_big() -> None:
    assert selected_sections(None) == set(SECTIONS) - {"scaleout"}
    assert selected_sections(["scaleout"]) == {"scaleout"}
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    assert "$(PY) -m bench --only scaleout" in makefile.split("bench-big: install", 1)[1]
