"""The console benchmark's machinery at a small size: a real ``hts serve`` over a copied fleet.

No wall-clock assertions (shared, noisy machines): only that the fleet was made as described,
every requested compaction showed in the fleet as queued before timing, and the figures are
consistent.
"""

from __future__ import annotations

from pathlib import Path

from bench import console


def test_the_fleet_page_bench_times_both_responses_over_the_whole_fleet(tmp_path: Path) -> None:
    fig = console.fleet_page(tmp_path, tables=100, rounds=3)
    assert fig.tables == 100 and fig.broken == 1 and fig.pending == 10
    assert fig.rounds == 3 and fig.tables_s > 0 and fig.fleet_s > 0 and fig.whoami_s > 0
    assert fig.ratio == fig.fleet_s / fig.tables_s
    assert 0 < fig.fleet_bytes < fig.tables_bytes, "the fleet leaves defaults out"
    tables = sorted(p.name for p in (tmp_path / "tables").iterdir())
    assert tables == [f"t{n:04d}" for n in range(100)]
