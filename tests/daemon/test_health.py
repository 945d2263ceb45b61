"""Health scores, auto-suspension and run costs, through a real daemon on real tables."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from hoodie.io import usage
from hoodie.services.base import ServiceContext
from hoodie.services.compaction import execute_compaction
from hoodie.services.savepoint import create_savepoint
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from service.api import create_app
from service.health import timeline_reasons
from service.queue import RunKind, RunTrigger, WorkItem
from service.store import SCHEMA, RunStore
from tests.conftest import fixture_path
from tests.daemon.helpers import mor_table, request_compaction, running_daemon, wait_for

ADMIN = {"Authorization": "Bearer admin-secret-0123456789"}
READ = {"Authorization": "Bearer read-secret-0123456789"}
TOKENS = [
    {"name": "ops", "scope": "admin", "token": "admin-secret-0123456789"},
    {"name": "viewer", "scope": "read", "token": "read-secret-0123456789"},
]


def _finished(client: TestClient, run_id: int) -> dict[str, Any] | None:
    run: dict[str, Any] = client.get(f"/v1/runs/{run_id}", headers=READ).json()
    return run if run["state"] not in ("queued", "running") else None


def _runs(client: TestClient, table: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = client.get("/v1/runs", params={"table": table}, headers=READ).json()
    return runs


def test_a_failing_service_is_suspended_after_n_failed_runs_kept_across_a_restart_and_resumed(
    tmp_path: Path,
) -> None:
    flaky = tmp_path / "tables" / "flaky"
    mor_table(flaky)
    bad_ts = request_compaction(flaky)
    # A log file the plan compacts goes missing: every attempt fails when its task reads it.
    log_file = sorted(p for p in flaky.rglob("*.log.*") if ".hoodie" not in p.parts)[0]
    kept = log_file.read_bytes()
    log_file.unlink()
    settings: dict[str, Any] = {
        "retry": {"max_attempts": 1, "suspend_after": 3},
        "api": {"tokens": TOKENS},
    }

    with running_daemon(tmp_path, **settings) as (first_daemon, client):
        # 1: the watcher finds the plan and fails on it (then gives the instant up) ...
        first = wait_for(
            lambda: [r for r in _runs(client, "flaky") if r["state"] == "failed"], what="a failure"
        )
        assert len(first) == 1 and first[0]["trigger"] == "watch"
        # ... 2 and 3: an operator retries it twice; the third failed run in a row suspends compaction.
        for n in (2, 3):
            run = client.post("/v1/tables/flaky/compaction", json={"instant": bad_ts}, headers=ADMIN)
            assert run.status_code == 202, run.text
            run_id = run.json()["id"]
            done = wait_for(lambda: _finished(client, run_id), what=f"failure {n}")  # noqa: B023
            assert done["state"] == "failed" and log_file.name in done["error"], done
            assert done["cost"]["core_seconds"] > 0, "a failed run costs CPU too"
        table = client.get("/v1/tables/flaky", headers=READ).json()
        suspended = table["suspended"]["compaction"]
        assert suspended["suspended"] and suspended["consecutive_failures"] == 3
        assert suspended["last_run"] == done["id"] and suspended["last_error"] == done["error"]
        assert table["failures"]["compaction"] == suspended
        assert first_daemon.suspended == {
            ("flaky", "compaction"): f"suspended after 3 consecutive failed runs (last: run {done['id']}: "
            f"{done['error']})"
        }
        (listed,) = [t for t in client.get("/v1/tables", headers=READ).json() if t["id"] == "flaky"]
        assert listed["suspended"] == table["suspended"]
        reasons = {r["code"]: r for r in listed["health_reasons"]}
        assert reasons["suspended"]["service"] == "compaction" and reasons["suspended"]["value"] == 3
        assert listed["health_score"] == 100 - sum(r["penalty"] for r in listed["health_reasons"])
        refused = client.post("/v1/tables/flaky/compaction", json={"instant": bad_ts}, headers=ADMIN)
        assert refused.status_code == 409 and "suspended" in refused.json()["error"], refused.text
        metrics = client.get("/metrics").text
        assert 'hts_service_suspended{service="compaction",table="flaky"} 1.0' in metrics
        assert 'hts_service_consecutive_failures{service="compaction",table="flaky"} 3.0' in metrics
        assert f'hts_table_health_score{{table="flaky"}} {float(listed["health_score"])}' in metrics

    # A restart forgets the instants given up on, but not the suspension: nothing runs.
    with running_daemon(tmp_path, **settings) as (daemon, client):
        before = len(_runs(client, "flaky"))
        wait_for(lambda: daemon.last_tick is not None, what="a watch tick")
        ticks = daemon.last_tick
        wait_for(lambda: daemon.last_tick and daemon.last_tick > (ticks or 0) + 1.0, what="ticks")
        assert len(_runs(client, "flaky")) == before, "a suspended service runs nothing"
        assert client.get("/v1/tables/flaky", headers=READ).json()["suspended"]["compaction"]["suspended"]

        assert client.post("/v1/tables/flaky/services/compaction/resume", headers=READ).status_code == 403
        not_suspended = client.post("/v1/tables/flaky/services/clean/resume", headers=ADMIN)
        assert not_suspended.status_code == 409 and "clean is not suspended" in not_suspended.json()["error"]
        unknown = client.post("/v1/tables/flaky/services/defrag/resume", headers=ADMIN)
        assert unknown.status_code == 404 and "defrag" in unknown.json()["error"]
        assert client.post("/v1/tables/nope/services/compaction/resume", headers=ADMIN).status_code == 404

        log_file.write_bytes(kept)  # the operator mends the table, then resumes
        resumed = client.post("/v1/tables/flaky/services/compaction/resume", headers=ADMIN)
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["suspended"] is False and resumed.json()["consecutive_failures"] == 0
        compacted = wait_for(
            lambda: [r for r in _runs(client, "flaky") if r["state"] == "succeeded"], what="the compaction"
        )
        assert compacted[0]["instant"] == bad_ts
        assert HoodieTable.open(str(flaky)).reload().get(bad_ts, Action.COMPACTION).is_completed  # type: ignore[union-attr]
        cost = compacted[0]["cost"]
        details = compacted[0]["details"]
        assert cost["core_seconds"] > 0
        assert cost["bytes_written"] == details["bytes_written"] > 0
        assert cost["files_written"] == details["files_written"] > 0
        table = client.get("/v1/tables/flaky", headers=READ).json()
        assert table["suspended"] == {} and table["failures"] == {}
        assert "suspended" not in {r["code"] for r in table["health_reasons"]}
        runs = _runs(client, "flaky")
        totals = table["cost"]
        assert totals["runs"] == len([r for r in runs if r["cost"] is not None]) == 4
        assert abs(totals["core_seconds"] - sum(r["cost"]["core_seconds"] for r in runs)) < 1e-3
        assert totals["bytes_written"] == cost["bytes_written"]
        # What the runs read, as the storage layer transferred it, summed for the table and exported.
        assert cost["files_read"] > 0 and cost["bytes_read"] > 0 and cost["storage_requests"] > 0
        for name in ("bytes_read", "files_read", "storage_requests"):
            assert totals[name] == sum(r["cost"][name] for r in runs if r["cost"] is not None), name
        metrics = client.get("/metrics").text
        assert 'hts_run_files_read_total{service="compaction",table="flaky"}' in metrics
        assert 'hts_run_bytes_read_total{service="compaction",table="flaky"}' in metrics
        assert 'hts_service_suspended{service="compaction",table="flaky"} 0.0' in metrics
        assert 'hts_run_core_seconds_total{service="compaction",table="flaky"}' in metrics


def _timeline_files(path: Path, suffix: str) -> list[str]:
    """Requested times of the completed instants whose files end with ``suffix``."""
    files = (path / ".hoodie" / "timeline").glob(f"*{suffix}")
    return sorted(p.name.split(".")[0].split("_")[0] for p in files)


def test_health_reasons_measure_the_timeline_against_the_triggers(tmp_path: Path) -> None:
    lagging = tmp_path / "tables" / "lagging"
    mor_table(lagging, upserts=4)  # one insert, four delta commits of updates, no table service yet
    healthy = tmp_path / "tables" / "healthy"
    mor_table(healthy, upserts=1)
    savepointed = _timeline_files(lagging, ".deltacommit")[0]
    create_savepoint(ServiceContext(HoodieTable.open(str(lagging))), savepointed)
    options = {
        "hoodie.compact.inline.max.delta.commits": "2",
        "hoodie.compaction.logfile.num.threshold": "2",
        "hoodie.clean.commits.retained": "1",
        "hoodie.clean.max.commits": "1",
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "3",
    }
    with running_daemon(tmp_path, defaults={"options": options}) as (daemon, client):
        wait_for(lambda: daemon.last_tick is not None, what="a watch tick")
        tables = {t["id"]: t for t in client.get("/v1/tables").json()}
        assert [tables[t]["health"] for t in ("lagging", "healthy")] == ["ok", "ok"]
    deltas = _timeline_files(lagging, ".deltacommit")
    reasons = {(r["code"], r["instant"]): r for r in tables["lagging"]["health_reasons"]}
    backlog = reasons[("compaction_backlog", None)]
    assert (
        backlog["value"] == len(deltas) and backlog["threshold"] == 2 and backlog["service"] == "compaction"
    )
    # Each delta commit of updates adds a log file to every file group it touches.
    logs = reasons[("log_files_per_slice", None)]
    assert logs["value"] == len(deltas) - 1 and logs["threshold"] == 2
    clean = reasons[("clean_lag", None)]
    assert clean["value"] == len(deltas) and clean["threshold"] == 2
    archival = reasons[("archival_lag", None)]
    assert archival["value"] == len(deltas) and archival["threshold"] == 3
    assert reasons[("savepoint_holds_clean", savepointed)]["service"] == "clean"
    assert reasons[("savepoint_holds_archival", savepointed)]["service"] == "archival"
    penalties = sum(r["penalty"] for r in tables["lagging"]["health_reasons"])
    assert tables["lagging"]["health_score"] == max(0, 100 - penalties) < 100
    assert [r["penalty"] for r in tables["lagging"]["health_reasons"]] == sorted(
        (r["penalty"] for r in tables["lagging"]["health_reasons"]), reverse=True
    ), "worst first"
    assert tables["healthy"]["health_score"] == 100 and tables["healthy"]["health_reasons"] == []


def test_a_spark_run_costs_its_tasks_executor_run_time(tmp_path: Path, spark_runner: Any) -> None:
    table = mor_table(tmp_path / "orders")
    instant = request_compaction(tmp_path / "orders")
    ctx = ServiceContext(table)
    driver_started = time.thread_time()
    with usage.measure() as used:
        result = execute_compaction(ctx, instant, spark_runner)
    driver = time.thread_time() - driver_started
    assert result.write_stats, "the compaction wrote its file groups on Spark"
    # The driver thread mostly waits for the tasks; their executor run time is added from Spark.
    assert used.cpu_seconds >= driver + 0.001, (used.cpu_seconds, driver)
    assert usage.COST_KEY not in json.dumps(result.details)


MOR_FIXTURES = [
    "quickstart_trips_table/mor/avro/v6_trips_8i1u",
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
    "sample_table/mor/avro/v9_txns_simple_meta",
]


def _completed(base: Path) -> list[tuple[str, str]]:
    """(requested time, action) of the data table's completed instants, from the timeline's file names
    (layout 1: ``.hoodie/<ts>.<action>``; layout 2: ``.hoodie/timeline/<ts>_<completion>.<action>``)."""
    folder = base / ".hoodie" / "timeline"
    folder = folder if folder.is_dir() else base / ".hoodie"
    out = []
    for p in folder.iterdir():
        stem, _, action = p.name.partition(".")
        if action in ("commit", "deltacommit", "replacecommit", "clean") and stem[:1].isdigit():
            out.append((stem.split("_")[0], action))
    return sorted(out)


@pytest.mark.parametrize("name", MOR_FIXTURES)
def test_backlogs_of_tables_apache_hudi_wrote_match_their_timeline_files(
    fixture_root: Path, name: str
) -> None:
    base = fixture_path(fixture_root, name)
    table = HoodieTable.open(str(base))
    options = {
        "hoodie.compact.inline.max.delta.commits": "1",
        "hoodie.clean.commits.retained": "0",
        "hoodie.clean.max.commits": "1",
        "hoodie.keep.min.commits": "1",
        "hoodie.keep.max.commits": "2",
    }
    found = {r.code: r for r in timeline_reasons(table, table.reload(), options)}
    instants = _completed(base)
    compactions = [ts for ts, action in instants if action == "commit"]  # on MERGE_ON_READ: compactions
    deltas = [ts for ts, action in instants if action == "deltacommit" and ts > max(compactions, default="")]
    cleans = [ts for ts, action in instants if action == "clean"]
    commits = [ts for ts, action in instants if action != "clean"]
    since_clean = [ts for ts in commits if ts > max(cleans, default="")]
    expected = {"compaction_backlog": (len(deltas), 1), "clean_lag": (len(since_clean), 1)}
    expected["archival_lag"] = (len(commits), 2)
    for code, (value, threshold) in expected.items():
        if value > threshold:
            assert (found[code].value, found[code].threshold) == (value, threshold), (code, found.get(code))
        else:
            assert code not in found, found[code]
    assert "compaction_backlog" in found or "archival_lag" in found, "each fixture lags somewhere"


def test_clean_lag_follows_the_cleaning_policy(tmp_path: Path) -> None:
    table = mor_table(tmp_path / "orders", upserts=2)
    timeline = table.reload()
    commits = len(_timeline_files(tmp_path / "orders", ".deltacommit"))
    by_hours = {"hoodie.clean.policy": "KEEP_LATEST_BY_HOURS", "hoodie.clean.hours.retained": "1"}

    def lag(options: dict[str, str], now: float | None = None) -> tuple[float | None, float | None] | None:
        found = [r for r in timeline_reasons(table, timeline, options, now) if r.code == "clean_lag"]
        return (found[0].value, found[0].threshold) if found else None

    assert lag(by_hours) is None, "every commit is within the hours retained"
    assert lag(by_hours, time.time() + 2 * 3600) == (commits, 1), "two hours on, none of them was cleaned"
    versions = {"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS", "hoodie.clean.fileversions.retained": "1"}
    assert lag(versions) == (commits, 2)
    assert lag({"hoodie.clean.commits.retained": "1"}) == (commits, 2)
    assert lag({"hoodie.clean.commits.retained": str(commits)}) is None


def test_a_policy_that_keeps_failing_is_suspended_and_stops_scheduling(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "orders")
    bad = {"hoodie.compact.inline.trigger.strategy": "EVERY_FULL_MOON"}
    policies = {"compaction": {"enabled": True, "interval_s": 0.2, "options": bad}}
    with running_daemon(
        tmp_path, retry={"max_attempts": 1, "suspend_after": 2}, defaults={"policies": policies}
    ) as (daemon, client):
        suspended = wait_for(
            lambda: client.get("/v1/tables/orders").json()["suspended"].get("compaction"), what="suspension"
        )
        assert suspended["consecutive_failures"] == 2 and "EVERY_FULL_MOON" in suspended["last_error"]
        failed = [r for r in client.get("/v1/runs").json() if r["state"] == "failed"]
        assert [r["kind"] for r in failed] == ["schedule", "schedule"]
        ticks = daemon.last_tick or 0.0
        wait_for(lambda: (daemon.last_tick or 0.0) > ticks + 1.0, what="five intervals of the policy")
        assert len(client.get("/v1/runs").json()) == 2, "the suspended policy schedules nothing more"
    spec = create_app(daemon, manage_lifecycle=False).openapi()
    resume = spec["paths"]["/v1/tables/{table_id}/services/{service}/resume"]["post"]["responses"]
    assert sorted(resume) == ["200", "400", "404", "409"]


def test_a_policy_check_that_works_ends_the_failure_streak(tmp_path: Path) -> None:
    """Suspension counts failures *in a row*: a policy check that planned nothing worked, so the failed
    checks before it do not add up with the ones after it (it leaves no run, but ends the streak). It
    does not end a streak of failed executions (the test above: the policy finds the plan pending)."""
    mor_table(tmp_path / "tables" / "orders")
    bad = {"hoodie.compact.inline.trigger.strategy": "EVERY_FULL_MOON"}
    nothing_due = {"hoodie.compact.inline.max.delta.commits": "100"}
    with running_daemon(tmp_path, retry={"max_attempts": 1, "suspend_after": 3}) as (daemon, client):

        def check(options: dict[str, str]) -> int:
            item = WorkItem("orders", "compaction", RunKind.SCHEDULE, None, RunTrigger.POLICY, 0, options)
            assert daemon.queue.submit(item)[1]
            assert item.done.wait(30), "the policy check did not finish"
            return daemon.streaks[("orders", "compaction")].consecutive_failures

        assert [check(bad), check(bad)] == [1, 2]
        assert check(nothing_due) == 0
        assert [check(bad), check(bad)] == [1, 2]
        assert client.get("/v1/tables/orders").json()["suspended"] == {}, "never 3 failures in a row"
        assert [r["state"] for r in client.get("/v1/runs").json()] == ["failed"] * 4, "the check left no run"


def test_a_run_history_from_before_costs_and_suspensions_opens_and_keeps_its_runs(tmp_path: Path) -> None:
    old_schema = SCHEMA.split("CREATE TABLE IF NOT EXISTS service_streaks")[0]
    db = sqlite3.connect(tmp_path / "hts.db")
    with db:
        db.executescript(old_schema)
        db.execute(
            "INSERT INTO runs (table_id, table_path, service, kind, trigger, state, created_at, replica) "
            "VALUES ('orders', '/t', 'clean', 'run', 'api', 'succeeded', 1.0, 'r')"
        )
    db.close()
    store = RunStore(tmp_path, "r")
    (run,) = store.list()
    assert run.table_id == "orders" and run.cost is None
    store.update(run.id, cost={"core_seconds": 0.5, "bytes_written": 3, "files_written": 1})
    assert store.cost_totals("orders")["core_seconds"] == 0.5
    failed = store.record_outcome("orders", "clean", run.id, failed=True, error="boom", suspend_after=1)
    assert failed.suspended and failed.last_error == "boom"
    store.close()
    reopened = RunStore(tmp_path, "r")
    assert [s.suspended for s in reopened.streaks()] == [True]
    reopened.close()
