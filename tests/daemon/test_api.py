"""The daemon over its REST API: watching, the REST trigger, runs, pause, plans, TrueTime, auth."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from hoodie.metadata.table import MetadataTable
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from service.queue import WorkItem
from service.store import RunKind, RunTrigger
from tests.conftest import hudi_rs_rows
from tests.daemon.helpers import mor_table, request_compaction, running_daemon, wait_for
from tests.tables import snapshot

ADMIN = "admin-token-0123456789"
READER = "read-token-0123456789"


def _completed(path: Path, instant: str) -> bool:
    found = HoodieTable.open(str(path)).reload().get(instant, Action.COMPACTION)
    return found is not None and found.is_completed


def test_a_requested_compaction_is_found_and_executed(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "orders"
    mor_table(path)
    before = hudi_rs_rows(path)
    ts = request_compaction(path)
    with running_daemon(tmp_path) as (_daemon, client):
        wait_for(lambda: _completed(path, ts), what="the compaction to complete")
        runs = wait_for(lambda: [r for r in client.get("/v1/runs").json() if r["state"] == "succeeded"])
        assert runs[0]["instant"] == ts and runs[0]["trigger"] == "watch" and runs[0]["table"] == "orders"
        assert runs[0]["details"]["files_written"] == 3
        tables = client.get("/v1/tables").json()
        assert tables == [
            {
                "id": "orders",
                "path": str(path),
                "type": "MERGE_ON_READ",
                "version": 8,
                "name": "t",
                "health": "ok",
                "error": None,
                "paused": False,
                "source": "discovered",
                "health_score": 100,
                "health_reasons": [],
                "suspended": {},
            }
        ]
        metrics = client.get("/metrics").text
        assert 'hts_runs_total{outcome="succeeded",service="compaction",table="orders"} 1.0' in metrics
        assert 'hts_table_up{table="orders"} 1.0' in metrics
    assert hudi_rs_rows(path) == before


def test_pending_services_show_their_age_and_plans_preview(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    with running_daemon(tmp_path) as (daemon, client):
        client.post("/v1/pause")
        ts = request_compaction(path)
        detail = wait_for(lambda: client.get("/v1/tables/t").json()["pending"], what="the pending compaction")
        assert detail[0]["service"] == "compaction" and detail[0]["instant"] == ts
        assert detail[0]["state"] == "REQUESTED" and detail[0]["age_seconds"] >= 0
        table = client.get("/v1/tables/t").json()
        assert table["config"]["properties"]["hoodie.table.type"] == "MERGE_ON_READ"
        assert table["lock"] == {"provider": "InProcessServiceLock", "state": "connected"}
        plan = client.get(f"/v1/tables/t/plans/{ts}").json()
        assert plan["kind"] == "compaction" and len(plan["plan"]["operations"]) == 3
        assert {"baseInstantTime", "deltaFilePaths", "fileId"} <= set(plan["plan"]["operations"][0])
        timeline = client.get("/v1/tables/t/timeline").json()["instants"]
        assert timeline[-1] == {
            "requested_time": ts,
            "completion_time": None,
            "action": "compaction",
            "state": "REQUESTED",
        }
        metrics = client.get("/metrics").text
        assert 'hts_pending_instant_count{service="compaction",table="t"} 1.0' in metrics
        assert 'hts_oldest_pending_age_seconds{service="compaction",table="t"}' in metrics
        assert [r.state.value for r in daemon.store.list()] == ["queued"], "paused: queued, not started"
        client.post("/v1/resume")
        wait_for(lambda: _completed(path, ts), what="the compaction after resume")


def test_rest_trigger_schedules_and_executes_once_per_idempotency_key(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    before = snapshot(path)
    with running_daemon(tmp_path) as (_daemon, client):
        headers = {"Idempotency-Key": "nightly-2026-11-21"}
        first = client.post("/v1/tables/t/compaction", json={"options": {}}, headers=headers)
        assert first.status_code == 202, first.text
        again = client.post("/v1/tables/t/compaction", json={"options": {}}, headers=headers)
        assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
        run_id = first.json()["id"]
        done = wait_for(
            lambda: (r := client.get(f"/v1/runs/{run_id}").json())["state"] == "succeeded" and r,
            what="the run",
        )
        assert done["trigger"] == "api" and done["details"]["scheduled"] == done["details"]["instant"]
        completed = HoodieTable.open(str(path)).reload().completed().actions(Action.COMMIT)
        assert len(completed) == 1, "exactly one compaction, despite two requests"
        # Nothing left to compact: the trigger says so and writes nothing.
        nothing = client.post("/v1/tables/t/compaction").json()
        idle = wait_for(
            lambda: (r := client.get(f"/v1/runs/{nothing['id']}").json())["state"] != "queued" and r
        )
        wait_for(lambda: client.get(f"/v1/runs/{nothing['id']}").json()["state"] == "succeeded")
        assert client.get(f"/v1/runs/{idle['id']}").json()["details"]["scheduled"] is None
    assert snapshot(path) == before


def test_rest_trigger_builds_a_record_index(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    before = snapshot(path)
    with running_daemon(tmp_path) as (_daemon, client):
        body = {"options": {"hoodie.metadata.record.index.enable": "true"}}
        run = client.post("/v1/tables/t/indexing", json=body)
        assert run.status_code == 202, run.text
        done = wait_for(
            lambda: (r := client.get(f"/v1/runs/{run.json()['id']}").json())["state"] == "succeeded" and r,
            what="the indexing run",
        )
        assert done["details"]["records"] == {"record_index": 20}
        # The metadata table's own services, on demand: compaction when forced by the count.
        body = {"options": {"hoodie.metadata.compact.max.delta.commits": "1"}}
        services = client.post("/v1/tables/t/metadata", json=body).json()
        ran = wait_for(
            lambda: (r := client.get(f"/v1/runs/{services['id']}").json())["state"] == "succeeded" and r,
            what="the metadata run",
        )
        assert ran["kind"] == "run" and ran["details"]["compaction"] is not None
    table = HoodieTable.open(str(path))
    assert "record_index" in table.config.metadata_partitions
    indexed = MetadataTable.open(table, table.reload()).read_partition("record_index")
    assert sorted(indexed) == sorted(f"k{i}" for i in range(20))
    assert snapshot(path) == before


def test_run_history_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    with running_daemon(tmp_path) as (_daemon, client):
        run = client.post("/v1/tables/t/clean").json()
        wait_for(lambda: client.get(f"/v1/runs/{run['id']}").json()["state"] == "succeeded")
    with running_daemon(tmp_path) as (_daemon, client):
        kept = client.get("/v1/runs", params={"table": "t", "service": "clean"}).json()
        assert [r["id"] for r in kept] == [run["id"]] and kept[0]["state"] == "succeeded"


def test_cancel_a_running_compaction_rolls_it_back(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path)
    before = snapshot(path)
    ts = request_compaction(path)
    gate = threading.Event()
    from hoodie.services import compaction

    original = compaction.compact_file_group

    def slow(task: Any) -> Any:
        gate.wait(30)
        return original(task)

    compaction.compact_file_group = slow  # type: ignore[assignment]
    try:
        with running_daemon(tmp_path) as (_daemon, client):
            run = wait_for(lambda: [r for r in client.get("/v1/runs").json() if r["state"] == "running"])[0]
            cancelled = client.post(f"/v1/runs/{run['id']}/cancel")
            assert cancelled.status_code == 200
            gate.set()
            final = wait_for(
                lambda: (r := client.get(f"/v1/runs/{run['id']}").json())["state"] != "running" and r
            )
            assert final["state"] == "cancelled"
            again = client.post(f"/v1/runs/{run['id']}/cancel")
            assert again.status_code == 409 and "already ended (cancelled)" in again.json()["error"]
            blocked = wait_for(
                lambda: [
                    p["blocked"] for p in client.get("/v1/tables/t").json()["pending"] if p.get("blocked")
                ]
            )
            assert blocked[0].startswith(
                f"cancelled by an operator (run {run['id']})"
            )  # not re-run by itself
    finally:
        compaction.compact_file_group = original  # type: ignore[assignment]
    instant = HoodieTable.open(str(path)).reload().get(ts, Action.COMPACTION)
    assert instant is not None and instant.is_requested, "the plan is kept; the attempt was undone"
    assert snapshot(path) == before


def test_truetime_issues_increasing_times_in_the_table_timezone(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    with running_daemon(tmp_path) as (_daemon, client):
        wait_for(lambda: client.get("/readyz").status_code == 200, what="readiness")
        times = [client.post("/v1/tables/t/truetime").json()["instant_time"] for _ in range(5)]
        assert times == sorted(times) and len(set(times)) == 5 and all(len(t) == 17 for t in times)
        held = client.post("/v1/tables/t/truetime", json={"lock_held": True}).json()["instant_time"]
        assert held > times[-1]
        mark = tmp_path / "tables" / "t" / ".hoodie" / ".aux" / "hts" / "truetime"
        assert held in mark.read_text()
        assert 'hts_truetime_issued_total{table="t"} 6.0' in client.get("/metrics").text
    # Across a restart the mark keeps times increasing, even with the clock set back.
    with running_daemon(tmp_path) as (daemon, client):
        wait_for(lambda: client.get("/readyz").status_code == 200)
        entry = daemon.registry.get("t")
        assert entry is not None and entry.clock is not None
        entry.clock._clock_ms = lambda: 0  # the clock stepped back to 1970
        after = client.post("/v1/tables/t/truetime").json()["instant_time"]
        assert after > held
        assert 'hts_truetime_clock_behind_total{table="t"} 1.0' in client.get("/metrics").text


def test_tokens_and_scopes(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    tokens = [
        {"token": ADMIN, "scope": "admin", "name": "ops"},
        {"token": READER, "scope": "read", "name": "dash"},
    ]
    with running_daemon(tmp_path, api={"tokens": tokens}) as (_daemon, client):
        assert client.get("/livez").status_code == 200, "probes need no token"
        assert client.get("/metrics").status_code == 200
        missing = client.get("/v1/tables")
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        wrong = client.get("/v1/tables", headers={"Authorization": "Bearer not-a-token-at-all"})
        assert wrong.status_code == 401 and wrong.json() == {"error": "unknown token"}
        read = {"Authorization": f"Bearer {READER}"}
        assert client.get("/v1/tables", headers=read).status_code == 200
        refused = client.post("/v1/tables/t/compaction", headers=read)
        assert refused.status_code == 403 and "has scope 'read'" in refused.json()["error"]
        admin = {"Authorization": f"Bearer {ADMIN}"}
        assert client.post("/v1/tables/t/pause", headers=admin).json() == {"table": "t", "paused": True}


def test_bad_requests_get_clear_errors(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    with running_daemon(tmp_path) as (daemon, client):
        wait_for(lambda: client.get("/readyz").status_code == 200)
        unknown = client.get("/v1/tables/nope")
        assert unknown.status_code == 404 and unknown.json()["error"] == "no table 'nope' (known: t)"
        assert client.post("/v1/tables/t/vacuum").status_code == 404
        bad_body = client.post("/v1/tables/t/compaction", json={"instant": "yesterday"})
        assert (
            bad_body.status_code == 400
            and "instant" in bad_body.json()["error"]
            and "yesterday" in bad_body.json()["error"]
        )
        bad_options = client.post("/v1/tables/t/compaction", json={"options": {"k": 1.5}})
        assert bad_options.status_code == 400
        indexing = client.post("/v1/tables/t/indexing")
        assert (
            indexing.status_code == 400 and "hoodie.metadata.record.index.enable" in indexing.json()["error"]
        )
        secondary = client.post(
            "/v1/tables/t/indexing", json={"options": {"hoodie.metadata.index.secondary.enable": "true"}}
        )
        assert secondary.status_code == 400 and "no secondary index is defined" in secondary.json()["error"]
        expression = client.post(
            "/v1/tables/t/indexing", json={"options": {"hoodie.metadata.index.expression.enable": "true"}}
        )
        assert expression.status_code == 409 and "expr_index_" in expression.json()["error"]
        assert client.get("/v1/tables/t/plans/20990101000000000").status_code == 404
        assert client.get("/v1/runs/999").json() == {"error": "no run 999"}
        assert client.get("/v1/runs", params={"state": "exploded"}).status_code == 400
        bad_option_value = client.post(
            "/v1/tables/t/compaction", json={"options": {"hoodie.compaction.target.io": "lots"}}
        ).json()
        failed = wait_for(
            lambda: (r := client.get(f"/v1/runs/{bad_option_value['id']}").json())["state"] == "failed" and r
        )
        assert "hoodie.compaction.target.io='lots' is not a whole number" in failed["error"]
        assert daemon.store.get(bad_option_value["id"]) is not None
        assert (
            'hts_api_requests_total{code="404",method="GET",route="/v1/tables/{table_id}"} 1.0'
            in client.get("/metrics").text
        )


def test_an_idempotency_key_answered_with_queued_work_keeps_that_run(tmp_path: Path) -> None:
    """A key sent while the same work is queued already is answered with that run, and a retry with
    the same key after the run finished gets the same run again, not a second one."""
    path = tmp_path / "tables" / "t"
    mor_table(path)
    with running_daemon(tmp_path) as (daemon, client):
        daemon.queue.paused = True  # hold the work queued (a paused daemon refuses REST triggers)

        def submit(key: str) -> tuple[Any, bool]:
            item = WorkItem("t", "compaction", RunKind.TRIGGER, None, RunTrigger.API)
            return daemon.submit(item, decision="REST trigger", idempotency_key=key)

        (first, created), (joined, again) = submit("first"), submit("second")
        assert created and not again and joined.id == first.id
        client.post("/v1/resume")
        wait_for(lambda: client.get(f"/v1/runs/{first.id}").json()["state"] == "succeeded", what="the run")
        retried = client.post("/v1/tables/t/compaction", headers={"Idempotency-Key": "second"})
        assert retried.status_code == 200 and retried.json()["id"] == first.id
        assert [r.id for r in daemon.store.list()] == [first.id], "one run for both keys"
