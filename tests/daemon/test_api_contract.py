"""The REST API's contract: the OpenAPI describes every status and body the daemon answers, and
schemathesis, over every operation with every check, finds nothing."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from service.api import create_app
from service.daemon import Daemon
from service.schemas import RUN_ID_MAX
from service.settings import load_settings
from tests.conftest import hudi_rs_rows
from tests.daemon.contract import run_campaign
from tests.daemon.helpers import mor_table, running_daemon, settings_data

CASES = 5000
EXAMPLES = 300
"""Per operation and phase; with the coverage and stateful phases, about 5,900 cases."""


def _openapi(root: Path, **overrides: object) -> dict[str, object]:
    settings = load_settings(overrides=settings_data(root, **overrides), environ={})
    app = create_app(Daemon(settings, replica_id="spec"), manage_lifecycle=False)
    with TestClient(app) as client:
        spec: dict[str, object] = client.get("/openapi.json").json()
        return spec


def test_schemathesis_finds_nothing_over_every_operation(tmp_path: Path) -> None:
    campaign = run_campaign(tmp_path, examples=EXAMPLES, timeout_s=900)
    report = campaign.report
    assert campaign.returncode == 0, campaign.summary()
    assert report["failures"] == [] and report["errors"] == [], campaign.summary()
    operations = report["operations"]
    paths = _openapi(tmp_path / "spec", api={"tokens": [{"token": "x" * 16, "scope": "admin"}]})["paths"]
    assert isinstance(paths, dict)
    assert operations["tested"] == operations["total"] == sum(len(p) for p in paths.values())
    assert all(phase["status"] == "success" for phase in report["phases"].values()), report["phases"]
    assert campaign.cases >= CASES, f"only {campaign.cases} cases"
    # What the fuzzed triggers did to the table kept its rows; the daemon wrote nothing where it ran.
    assert len(hudi_rs_rows(campaign.table)) == 20
    assert list(campaign.confined.iterdir()) == []


def test_the_openapi_lists_errors_as_they_are_answered(tmp_path: Path) -> None:
    spec = _openapi(tmp_path)
    components = spec["components"]
    assert isinstance(components, dict)
    assert "HTTPValidationError" not in components["schemas"], "validation errors answer 400, not 422"
    assert "securitySchemes" not in components, "no tokens configured: no auth"
    paths = spec["paths"]
    assert isinstance(paths, dict)
    run = paths["/v1/runs/{run_id}"]["get"]
    assert sorted(run["responses"]) == ["200", "400", "404"]
    assert run["responses"]["400"]["content"] == {
        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
    }
    (run_id,) = run["parameters"]
    assert run_id["schema"]["minimum"] == 1 and run_id["schema"]["maximum"] == RUN_ID_MAX
    compaction = paths["/v1/tables/{table_id}/compaction"]["post"]["responses"]
    assert sorted(compaction) == ["200", "202", "400", "404", "409"]
    metrics = paths["/metrics"]["get"]["responses"]
    assert list(metrics) == ["200"] and list(metrics["200"]["content"]) == ["text/plain; version=0.0.4"]

    secured = _openapi(tmp_path / "tokens", api={"tokens": [{"token": "t" * 16, "scope": "admin"}]})
    assert isinstance(secured["components"], dict) and secured["components"]["securitySchemes"] == {
        "HTTPBearer": {"type": "http", "scheme": "bearer", "description": "A token from api.tokens"}
    }
    secured_paths = secured["paths"]
    assert isinstance(secured_paths, dict)
    cancel = secured_paths["/v1/runs/{run_id}/cancel"]["post"]["responses"]
    assert sorted(cancel) == ["200", "400", "401", "403", "404", "409"]
    assert cancel["401"]["headers"]["WWW-Authenticate"]["required"] is True


def test_ids_beyond_their_range_and_undeclared_methods_are_refused(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    with running_daemon(tmp_path) as (_daemon, client):
        for method, path in (("GET", "/v1/runs/{}"), ("POST", "/v1/runs/{}/cancel")):
            for run_id in (RUN_ID_MAX + 1, 0, -1):
                answer = client.request(method, path.format(run_id))
                assert answer.status_code == 400, (method, run_id, answer.text)
                assert answer.json()["error"].startswith("invalid request: path.run_id")
            assert client.request(method, path.format(RUN_ID_MAX)).json() == {"error": f"no run {RUN_ID_MAX}"}
        bad_instant = client.get("/v1/tables/t/plans/2026112112000")
        assert bad_instant.status_code == 400 and "2026112112000" in bad_instant.json()["error"]
        assert client.get("/v1/runs", params={"limit": 1001}).status_code == 400
        lenient = client.post("/v1/tables/t/truetime", json={"lock_held": 0})
        assert lenient.status_code == 400 and "lock_held" in lenient.json()["error"]
        for method, path, allowed in (
            ("DELETE", "/v1/tables/t", "GET"),
            ("GET", "/v1/tables/t/compaction", "POST"),
            ("PUT", "/v1/runs/1/cancel", "POST"),
        ):
            refused = client.request(method, path)
            assert refused.status_code == 405 and refused.headers["allow"] == allowed, (method, path)
            assert refused.json() == {"error": "Method Not Allowed"}
        assert client.get("/v1/tables/").status_code == 404, "no redirect outside the OpenAPI"
