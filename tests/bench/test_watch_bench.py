"""The watch benchmark's machinery at a tiny size (S3 and SQS: moto's emulators in this process).

Counts are asserted (they are the budget); wall-clock figures only for consistency.
"""

from __future__ import annotations

from pathlib import Path

from bench import watch


def test_idle_tables_cost_what_the_store_answered_and_at_most_the_budget(tmp_path: Path) -> None:
    idle = watch.idle_requests(tmp_path, tables=2)
    assert idle.tables == 2 and idle.ceiling_s == 60
    assert idle.hts_per_table_hour == idle.store_per_table_hour == 60 <= watch.TARGET_IDLE_PER_HOUR
    assert idle.first_hour_per_table > idle.hts_per_table_hour, "opening and backing off cost more"


def test_a_long_idle_table_is_looked_at_within_the_ceiling(tmp_path: Path) -> None:
    reaction, ceiling = watch.long_idle_reaction(tmp_path, trials=3)
    assert reaction.samples == 3 and 0 < reaction.p50 <= reaction.p99 <= reaction.worst <= ceiling + 5


def test_active_s3_tables_see_every_request_start(tmp_path: Path) -> None:
    queued, started = watch.active_s3_latency(
        tmp_path, tables=3, requests=3, poll_s=0.5, latency_ms=5, spread_s=1.0
    )
    assert queued.samples == started.samples == 3
    assert 0 <= queued.p50 <= queued.p99 <= queued.worst and queued.worst <= started.worst


def test_event_reaction_is_measured_on_every_request(tmp_path: Path) -> None:
    reaction, queue = watch.event_reaction(tmp_path, requests=2, latency_ms=5)
    assert reaction.samples == 2 and reaction.worst > 0
    assert queue["sqs_receive"] >= 1 and queue["sqs_delete"] >= 1
