"""Partition TTL in the daemon: scheduled by a policy, triggered over REST, with its reasons in the run."""

from __future__ import annotations

from pathlib import Path

from hoodie.config.table_config import TableType
from hoodie.table import HoodieTable
from tests.daemon.helpers import running_daemon, wait_for
from tests.services.test_ttl import DAYS, hudi_rs_keys, keys, write
from tests.tables import new_table, rows


def _partitions(path: Path) -> list[str]:
    view = HoodieTable.open(str(path)).file_system_view()
    return sorted({s.partition_path for s in view.latest_file_slices()})


def test_a_policy_deletes_expired_partitions_and_a_trigger_runs_at_once(tmp_path: Path) -> None:
    by_policy, by_trigger = tmp_path / "tables" / "policy", tmp_path / "tables" / "trigger"
    for path in (by_policy, by_trigger):
        new_table(path, table_type=TableType.COPY_ON_WRITE)
        write(path, 40, rows(range(6), 1))
        write(path, 1, rows([2, 5], 2), "upsert")
    policy = {"enabled": True, "interval_s": 0.2, "options": {DAYS: "10"}}
    overrides = {
        "defaults": {"policies": {"ttl": policy}},
        "tables": {
            "static": [{"path": str(by_trigger), "id": "trigger", "policies": {"ttl": {"enabled": False}}}]
        },
    }
    with running_daemon(tmp_path, **overrides) as (_daemon, client):
        wait_for(lambda: _partitions(by_policy) == ["p2"], 60, "the policy's partition TTL")
        runs = wait_for(
            lambda: [
                r
                for r in client.get("/v1/runs", params={"table": "policy", "service": "ttl"}).json()
                if r["state"] == "succeeded"
            ],
            30,
            "the recorded run",
        )
        assert runs[0]["trigger"] == "policy"
        assert _partitions(by_trigger) == ["p0", "p1", "p2"]  # its policy is off

        run = client.post("/v1/tables/trigger/ttl", json={"options": {DAYS: "10"}}).json()
        done = wait_for(
            lambda: (r := client.get(f"/v1/runs/{run['id']}").json())["state"] == "succeeded" and r,
            60,
            "the triggered partition TTL",
        )
        assert "p0: last written at" in str(done["details"])
    for path in (by_policy, by_trigger):
        assert _partitions(path) == ["p2"]
        assert keys(path) == hudi_rs_keys(path) == {"k2", "k5"}
