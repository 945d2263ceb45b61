"""The daemon and table shapes: a (table, service) the shape refuses is never scheduled or executed,
``GET /v1/tables/{id}`` shows why, and the other tables are served meanwhile."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from hoodie.config.table_config import update_table_properties
from hoodie.io.fileio import LocalFileIO
from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from tests.daemon.helpers import mor_table, request_compaction, running_daemon, wait_for
from tests.services.shapes_support import changelog, expression_index, table_hash


def _compaction_done(path: Path, instant: str) -> bool:
    found = HoodieTable.open(str(path)).reload().get(instant, Action.COMPACTION)
    return found is not None and found.is_completed


def test_refused_services_are_shown_and_never_run_while_other_tables_are_served(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    orders, expr, flink, boot = tables / "orders", tables / "expr", tables / "flink", tables / "boot"
    for path in (orders, expr, flink, boot):
        mor_table(path, upserts=2)
    update_table_properties(LocalFileIO(), str(boot / ".hoodie"), {"hoodie.bootstrap.base.path": "/src"})
    # A compaction is pending when Hudi's CREATE INDEX adds an expression index (hts's own scheduling
    # refuses on such a table): hts cannot evaluate the index's expression, so it must not commit
    # what the index would have to follow.
    expr_pending = request_compaction(expr)
    expression_index(expr)
    orders_pending = request_compaction(orders)
    expr_before, flink_before = table_hash(expr), table_hash(flink)
    every = {"enabled": True, "interval_s": 0.2}
    overrides = {
        "defaults": {
            "policies": {
                "compaction": {**every, "options": {"hoodie.compact.inline.max.delta.commits": "1"}},
                "clustering": {**every, "options": {"hoodie.clustering.async.max.commits": "1"}},
            }
        },
        "tables": {
            "static": [{"path": str(flink), "id": "flink", "options": {"hoodie.index.type": "FLINK_STATE"}}]
        },
    }
    with running_daemon(tmp_path, **overrides) as (daemon, client):
        wait_for(lambda: _compaction_done(orders, orders_pending), 60, "the other table's compaction")
        detail = client.get("/v1/tables/expr").json()
        assert {"compaction", "clustering", "clean"} <= set(detail["refused"])
        assert "expression index table" in detail["refused"]["compaction"]
        assert "expr_index_day" in detail["refused"]["compaction"]
        assert expr_pending in str(detail["pending"])  # left for Apache Hudi's writers
        flink_detail = client.get("/v1/tables/flink").json()
        assert set(flink_detail["refused"]) == {"clustering", "ttl"}
        assert (
            "Flink-state index table (hoodie.index.type=FLINK_STATE (declared))"
            in flink_detail["refused"]["clustering"]
        )
        assert client.get("/v1/tables/orders").json()["refused"] == {}
        boot_refused = client.get("/v1/tables/boot").json()["refused"]
        assert set(boot_refused) >= {"compaction", "clustering", "clean", "archival"}
        assert all("bootstrapped table (hoodie.bootstrap.base.path=/src)" in r for r in boot_refused.values())
        trigger = client.post("/v1/tables/expr/compaction", json={})
        assert trigger.status_code == 409 and "expression index table" in trigger.json()["error"]
        time.sleep(1.0)  # several watch ticks and policy intervals pass
        runs = client.get("/v1/runs").json()
        assert not [r for r in runs if r["table"] == "expr" and r["service"] == "compaction"]
        assert not [r for r in runs if r["table"] == "flink" and r["service"] == "clustering"]
        assert daemon.entry("expr").healthy and daemon.entry("flink").healthy
    assert not _compaction_done(expr, expr_pending)
    assert table_hash(expr) == expr_before
    # the Flink table is served (its compaction policy runs) but never clustered
    flink_timeline = HoodieTable.open(str(flink)).reload()
    assert not flink_timeline.actions(Action.REPLACE_COMMIT, Action.CLUSTERING)
    assert flink_timeline.completed().actions(Action.COMMIT)
    assert set(flink_before) < set(table_hash(flink))


def test_a_watch_tick_computes_a_tables_refusals_once(tmp_path: Path) -> None:
    """The tick's refusals (shape of the table) serve both the watched instants and the policies."""
    from service.daemon import Daemon
    from service.settings import load_settings
    from tests.daemon.helpers import settings_data

    mor_table(tmp_path / "tables" / "orders", upserts=1)
    every = {"enabled": True, "interval_s": 0.2}
    data = settings_data(tmp_path, defaults={"policies": {"compaction": every, "clustering": every}})
    calls: list[str] = []

    class Counting(Daemon):
        def refused(self, entry: Any) -> dict[str, str]:
            calls.append(entry.id)
            return super().refused(entry)

    daemon = Counting(load_settings(overrides=data, environ={}), replica_id="test")
    try:
        daemon.registry.refresh()
        assert daemon.registry.ids() == ["orders"]
        daemon.watch_tick()
        assert sorted(calls) == sorted(daemon.registry.ids())
    finally:
        daemon.stop(0)


def test_a_tables_refusals_are_judged_again_only_when_its_timeline_changes(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Every tick asks each table's refusals; an unchanged table's are not judged again (11 matrix
    cells a table a tick made the idle daemon's ticks cost twice the CPU), a new commit's are."""
    from hoodie.shape.table_shape import TableShape
    from hoodie.write.writer import HoodieWriter
    from service.daemon import Daemon
    from service.settings import load_settings
    from tests.daemon.helpers import settings_data
    from tests.tables import rows

    path = tmp_path / "tables" / "orders"
    mor_table(path, upserts=1)
    judged: list[str] = []
    real = TableShape.refused

    def counted(self: TableShape, *args: Any, **kwargs: Any) -> dict[str, str]:
        judged.append(self.where)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(TableShape, "refused", counted)
    daemon = Daemon(load_settings(overrides=settings_data(tmp_path), environ={}), replica_id="test")
    try:
        daemon.registry.refresh()
        for _ in range(3):
            daemon.watch_tick()
        entry = daemon.entry("orders")
        assert daemon.refused(entry) == {}
        assert len(judged) == 1
        HoodieWriter(HoodieTable.open(str(path))).upsert(rows([1, 3], 9))
        entry.watch.poke()
        daemon.watch_tick()  # the look reloads the timeline: a new one, judged again
        assert len(judged) == 2
        daemon.watch_tick()
        assert len(judged) == 2
    finally:
        daemon.stop(0)


def test_a_changelog_table_is_shown_refused_and_left_untouched_while_another_is_compacted(
    tmp_path: Path,
) -> None:
    """A table laid out as Flink's changelog writer leaves it (``_hoodie_operation`` in its log blocks)
    shows its refusals naming the log file; its compaction is never scheduled nor triggered, and no
    file of it changes, while the other table's requested compaction completes."""
    tables = tmp_path / "tables"
    orders, flink = tables / "orders", tables / "flink"
    for path in (orders, flink):
        mor_table(path, upserts=2)
    changelog(flink)
    orders_pending = request_compaction(orders)
    before = table_hash(flink)
    every = {"enabled": True, "interval_s": 0.2}
    policies = {"compaction": {**every, "options": {"hoodie.compact.inline.max.delta.commits": "1"}}}
    with running_daemon(tmp_path, defaults={"policies": policies}) as (daemon, client):
        wait_for(lambda: _compaction_done(orders, orders_pending), 60, "the other table's compaction")
        refused = client.get("/v1/tables/flink").json()["refused"]
        assert set(refused) == {"compaction", "logcompaction", "clustering", "indexing"}
        assert all("_hoodie_operation in the schema of" in r and ".log." in r for r in refused.values())
        trigger = client.post("/v1/tables/flink/compaction", json={})
        assert trigger.status_code == 409 and "operation metadata field" in trigger.json()["error"]
        time.sleep(1.0)  # several watch ticks and policy intervals pass
        assert not [r for r in client.get("/v1/runs").json() if r["table"] == "flink"]
        assert daemon.entry("flink").healthy
    assert table_hash(flink) == before
