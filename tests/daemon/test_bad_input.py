"""Bad tables and bad plans: each gets a clear error on that table (API and metrics), nothing is
written to it, and the daemon keeps serving the others."""

from __future__ import annotations

from pathlib import Path

from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from tests.daemon.helpers import mor_table, request_compaction, running_daemon, wait_for


def _tree(path: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``path`` with its size and modification time."""
    files = [p for p in path.rglob("*") if p.is_file()]
    return {str(p.relative_to(path)): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}


def test_bad_tables_are_reported_and_left_alone(tmp_path: Path) -> None:
    tables = tmp_path / "tables"
    good = tables / "good"
    mor_table(good)
    good_ts = request_compaction(good)

    malformed = tables / "malformed"
    mor_table(malformed)
    bad_ts = request_compaction(malformed)
    (requested,) = (malformed / ".hoodie" / "timeline").glob(f"{bad_ts}.compaction.requested")
    requested.write_bytes(b"Obj\x01 this is not an Avro container")

    corrupt = tables / "corrupt"
    mor_table(corrupt)
    broken = "hoodie.table.name=corrupt\nhoodie.table.checksum=1\n"
    (corrupt / ".hoodie" / "hoodie.properties").write_text(broken)

    unknown = tables / "unknown"
    mor_table(unknown)
    props = unknown / ".hoodie" / "hoodie.properties"
    props.write_text(props.read_text().replace("hoodie.table.version=8", "hoodie.table.version=99"))

    bad = {name: _tree(tables / name) for name in ("malformed", "corrupt", "unknown")}
    with running_daemon(tmp_path, retry={"max_attempts": 2, "backoff_initial_s": 0.1}) as (daemon, client):
        wait_for(
            lambda: HoodieTable.open(str(good)).reload().get(good_ts, Action.COMPACTION).is_completed,  # type: ignore[union-attr]
            what="the good table's compaction",
        )

        def failed_runs() -> list[dict[str, object]]:
            runs = client.get("/v1/runs", params={"table": "malformed"}).json()
            return [r for r in runs if r["state"] == "failed"]

        failed = wait_for(failed_runs, what="the malformed plan's run to give up")
        assert failed[0]["attempts"] == 2, "retried with backoff up to retry.max_attempts"
        assert bad_ts in failed[0]["error"] and "compaction.requested" in failed[0]["error"]
        detail = client.get("/v1/tables/malformed").json()
        (pending,) = detail["pending"]
        assert pending["instant"] == bad_ts
        assert pending["blocked"].startswith("gave up after repeated failures")

        health = {t["id"]: t for t in client.get("/v1/tables").json()}
        assert health["good"]["health"] == "ok" and health["malformed"]["health"] == "ok"
        assert health["corrupt"]["health"] == "error"
        assert "hoodie.table.checksum=1 does not match" in health["corrupt"]["error"]
        assert health["unknown"]["health"] == "error" and "99" in health["unknown"]["error"]
        assert client.post("/v1/tables/corrupt/compaction").status_code == 409

        metrics = client.get("/metrics").text
        assert 'hts_table_up{table="corrupt"} 0.0' in metrics and 'hts_table_up{table="good"} 1.0' in metrics
        assert 'hts_table_errors_total{kind="InvalidTableConfigError",table="corrupt"}' in metrics
        assert 'hts_runs_total{outcome="failed",service="compaction",table="malformed"} 2.0' in metrics
        assert client.get("/readyz").json() == {"ready": True}, "bad tables do not make the daemon unready"
        assert daemon.gave_up == {
            ("malformed", bad_ts): "gave up after repeated failures: " + failed[0]["error"]
        }
    for name, before in bad.items():
        assert _tree(tables / name) == before, f"nothing was written to {name}"
