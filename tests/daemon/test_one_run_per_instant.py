"""One instant, one run: the instant a REST trigger plans is carried out by the trigger's run, and
the watcher, which sees that plan on the timeline before its execution starts, records none."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from hoodie.services.base import ServiceContext, service_named
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from tests.daemon.helpers import mor_table, running_daemon, wait_for


def test_a_rest_trigger_leaves_one_run_for_its_instant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    with running_daemon(tmp_path) as (daemon, client):
        entry = wait_for(lambda: (e := daemon.registry.get("t")) is not None and e.watch is not None and e)
        service = service_named("compaction")
        plan = service.schedule
        planned: list[str] = []
        looked = threading.Event()

        def schedule_then_let_the_watcher_look(ctx: ServiceContext, **kwargs: Any) -> Any:
            scheduled = plan(ctx, **kwargs)
            assert scheduled is not None and scheduled.instant_time is not None
            planned.append(scheduled.instant_time)
            # The plan is on the timeline and its execution has not started: the watcher looks.
            looks = entry.watch.looks
            wait_for(lambda: entry.watch.looks >= looks + 3, what="three watch ticks")
            looked.set()
            return scheduled

        monkeypatch.setattr(service, "schedule", schedule_then_let_the_watcher_look)
        run = client.post("/v1/tables/t/compaction").json()
        done = wait_for(
            lambda: (
                (r := client.get(f"/v1/runs/{run['id']}").json())["state"] not in ("queued", "running") and r
            ),
            what="the trigger's run",
        )
        assert looked.is_set() and done["state"] == "succeeded", done
        (instant,) = planned
        assert done["instant"] == instant == done["details"]["instant"]
        completed = HoodieTable.open(str(path)).reload().get(instant, Action.COMMIT)
        assert completed is not None and completed.is_completed
        # Later ticks find the instant completed: still no second run.
        looks = entry.watch.looks
        wait_for(lambda: entry.watch.looks >= looks + 3, what="three more watch ticks")
        runs = client.get("/v1/runs").json()
        assert [(r["id"], r["instant"], r["state"]) for r in runs] == [(run["id"], instant, "succeeded")]
        metrics = client.get("/metrics").text
        assert 'hts_runs_total{outcome="succeeded",service="compaction",table="t"} 1.0' in metrics
        assert 'outcome="skipped"' not in metrics
