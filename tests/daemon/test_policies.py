"""Self-scheduling by policy: off unless configured, Hudi's trigger configs, per-table overrides,
only on the leader when leader election is on."""

from __future__ import annotations

import time
from pathlib import Path

from hoodie.config.table_config import TableType
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from hoodie.write.writer import HoodieWriter
from service.locks.leader import LeaderElection
from service.locks.zookeeper_client import ZookeeperClients
from tests.conftest import hudi_rs_rows
from tests.daemon.helpers import mor_table, running_daemon, wait_for
from tests.servers.zookeeper import ZooKeeperServer
from tests.tables import new_table, rows


def _completed_commits(path: Path) -> int:
    return len(HoodieTable.open(str(path)).reload().completed().actions(Action.COMMIT))


def test_no_policy_means_no_plans(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path, upserts=6)
    files = sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir())
    with running_daemon(tmp_path) as (daemon, client):
        for _ in range(3):
            wait_for(lambda: daemon.last_tick is not None)
            time.sleep(0.3)
        assert client.get("/v1/runs").json() == []
    assert sorted(p.name for p in (path / ".hoodie" / "timeline").iterdir()) == files


def test_compaction_by_num_commits_with_a_per_table_override(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    due, off = tables / "due", tables / "off"
    mor_table(due, upserts=3)
    mor_table(off, upserts=3)
    before = hudi_rs_rows(due)
    policy = {"enabled": True, "interval_s": 0.2, "options": {"hoodie.compact.inline.max.delta.commits": "2"}}
    overrides = {
        "defaults": {"policies": {"compaction": policy}},
        "tables": {
            "static": [{"path": str(off), "id": "off", "policies": {"compaction": {"enabled": False}}}]
        },
    }
    with running_daemon(tmp_path, **overrides) as (_daemon, client):
        wait_for(lambda: _completed_commits(due) == 1, 60, "the policy's compaction to complete")
        runs = wait_for(
            lambda: (
                (r := client.get("/v1/runs", params={"table": "due"}).json())
                and all(x["state"] == "succeeded" for x in r)
                and len(r) == 2
                and r
            )
        )
        kinds = sorted((r["kind"], r["trigger"]) for r in runs)
        assert kinds == [("execute", "policy"), ("schedule", "policy")]
        scheduled = next(r for r in runs if r["kind"] == "schedule")
        assert "delta commits" in scheduled["details"]["reason"]
        time.sleep(1.0)  # more intervals pass: nothing new is due, and nothing is recorded
        assert len(client.get("/v1/runs", params={"table": "due"}).json()) == 2
        assert client.get("/v1/runs", params={"table": "off"}).json() == []
        metrics = client.get("/metrics").text
        assert 'hts_scheduled_total{service="compaction",table="due",trigger="policy"} 1.0' in metrics
    assert _completed_commits(off) == 0
    assert hudi_rs_rows(due) == before


def test_archival_and_clean_policies(tmp_path: Path) -> None:
    path = tmp_path / "tables" / "cow"
    writer = HoodieWriter(new_table(path, table_type=TableType.COPY_ON_WRITE))
    writer.insert(rows(range(12), 0))
    for n in range(1, 9):
        writer.upsert(rows(range(0, 12, 3), n))
    before = hudi_rs_rows(path)
    active_before = len(HoodieTable.open(str(path)).reload().completed())
    options = {
        "hoodie.cleaner.commits.retained": "2",
        "hoodie.keep.min.commits": "3",
        "hoodie.keep.max.commits": "4",
    }
    policies = {
        "clean": {"enabled": True, "interval_s": 0.2, "options": options},
        "archival": {"enabled": True, "interval_s": 0.2, "options": options},
    }
    with running_daemon(tmp_path, defaults={"policies": policies}) as (_daemon, client):

        def archived() -> list[dict[str, object]]:
            runs = client.get("/v1/runs", params={"table": "cow", "service": "archival"}).json()
            return [r for r in runs if r["state"] == "succeeded"]

        wait_for(archived, 60, "an archival run")
        wait_for(
            lambda: [
                r
                for r in client.get("/v1/runs", params={"service": "clean"}).json()
                if r["kind"] == "execute"
            ],
            60,
            "a clean run",
        )
    active_after = len(HoodieTable.open(str(path)).reload().completed())
    assert active_after < active_before, "the active timeline was archived down"
    assert hudi_rs_rows(path) == before


def test_only_the_leader_schedules(tmp_path: Path, zookeeper: ZooKeeperServer) -> None:
    path = tmp_path / "tables" / "t"
    mor_table(path, upserts=3)
    clients = ZookeeperClients()
    other = LeaderElection(zookeeper.connect, "/hts/leader", "other-replica", clients=clients)
    other.start()
    wait_for(lambda: other.is_leader, 30, "the other replica to lead")
    policy = {"enabled": True, "interval_s": 0.2, "options": {"hoodie.compact.inline.max.delta.commits": "1"}}
    overrides = {
        "defaults": {"policies": {"compaction": policy}},
        "ha": {"leader_election": True, "zookeeper_url": zookeeper.connect},
    }
    try:
        with running_daemon(tmp_path, **overrides) as (daemon, client):
            time.sleep(1.5)
            assert not daemon.is_leader and _completed_commits(path) == 0, "a follower does not schedule"
            assert "hts_leader 0.0" in client.get("/metrics").text
            other.stop()
            wait_for(lambda: daemon.is_leader, 30, "leadership to move to the daemon")
            wait_for(lambda: _completed_commits(path) == 1, 60, "the new leader's compaction")
    finally:
        other.stop()
