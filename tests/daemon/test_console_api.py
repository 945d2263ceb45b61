"""The API the console reads besides the rest: ``GET /v1/fleet`` (every table in one compact
response), ``GET /v1/whoami`` and ``GET /v1/tables/{id}/storage``; and the console's own files."""

from __future__ import annotations

import shutil
import zipfile
from collections import Counter
from importlib import resources
from pathlib import Path

import hudi

from service.cli import console_url
from service.console import ASSETS, HEADERS
from service.fleet import ERROR_CHARS
from service.schemas import Fleet
from service.settings import load_settings
from tests.conftest import FIXTURES
from tests.daemon.helpers import mor_table, request_compaction, running_daemon, wait_for

ADMIN = "admin-token-0123456789"
READER = "read-token-0123456789"
TOKENS = {
    "tokens": [
        {"token": ADMIN, "scope": "admin", "name": "ops"},
        {"token": READER, "scope": "read", "name": "viewer"},
    ]
}


def _trips(root: Path) -> Path:
    """A MERGE_ON_READ table Apache Hudi wrote (version 8, inserts, updates and a delete)."""
    with zipfile.ZipFile(FIXTURES / "quickstart_trips_table" / "mor" / "avro" / "v8_trips_8i3u1d.zip") as zf:
        zf.extractall(root / "unzipped")
    found = next(p.parent.parent for p in (root / "unzipped").rglob(".hoodie/hoodie.properties"))
    return Path(shutil.copytree(found, root / "tables" / "trips"))


def test_the_fleet_says_per_table_what_is_pending_queued_failed_and_why_a_table_is_down(
    tmp_path: Path,
) -> None:
    mor_table(tmp_path / "tables" / "late")
    mor_table(tmp_path / "tables" / "quiet")
    broken = tmp_path / "tables" / "broken" / ".hoodie"
    broken.mkdir(parents=True)
    (broken / "hoodie.properties").write_text("hoodie.table.name=broken\n")
    table_options = {"hoodie.compact.inline.max.delta.seconds": "1"}
    static = [{"path": str(tmp_path / "tables" / "late"), "id": "late", "options": table_options}]
    with running_daemon(tmp_path, tables={"static": static}) as (daemon, client):
        wait_for(lambda: client.get("/v1/tables/late").json()["health"] == "ok", what="late opened")
        # A run that fails: a bad option value.
        bad = {"options": {"hoodie.compaction.target.io": "lots"}}
        failed = client.post("/v1/tables/quiet/compaction", json=bad).json()
        wait_for(
            lambda: client.get(f"/v1/runs/{failed['id']}").json()["state"] == "failed", what="a failed run"
        )
        client.post("/v1/tables/quiet/pause")
        paused = client.post("/v1/tables/quiet/compaction", json=bad)
        assert paused.status_code == 409, "paused: refused before any run"
        client.post("/v1/tables/quiet/resume")
        client.post("/v1/pause")
        ts = request_compaction(tmp_path / "tables" / "late")
        wait_for(lambda: client.get("/v1/tables/late").json()["pending"], what="the pending compaction")
        wait_for(lambda: daemon.queue.counts().get("compaction", (0, 0)) == (1, 0), what="it queued")

        response = client.get("/v1/fleet")
        assert response.status_code == 200 and response.headers["content-type"] == "application/json"
        fleet = response.json()
        assert Fleet.model_validate(fleet).model_dump(mode="json", exclude_defaults=True) == fleet
        assert fleet["paused"] is True and fleet["failure_window_s"] == 86400
        tables = {t["id"]: t for t in fleet["tables"]}
        assert [t["id"] for t in fleet["tables"]] == [t["id"] for t in client.get("/v1/tables").json()]
        summaries = {t["id"]: t for t in client.get("/v1/tables").json()}
        for table_id, row in tables.items():
            assert row["health"] == summaries[table_id]["health"]
            assert row.get("type") == summaries[table_id]["type"]
            # the health score, and the worst reason it is below 100, as GET /v1/tables scores it
            assert row["health_score"] == summaries[table_id]["health_score"]
            reasons = summaries[table_id]["health_reasons"]
            worst = reasons[0]["message"] if reasons else None
            cut = worst if worst is None or len(worst) <= ERROR_CHARS else worst[: ERROR_CHARS - 1] + "…"
            assert row.get("health_reason") == cut, table_id

        late = tables["late"]
        (pending,) = late["pending"]
        assert pending["service"] == "compaction" and pending["count"] == 1
        assert pending["limit_s"] == 1.0, "the table's hoodie.compact.inline.max.delta.seconds"
        detail = client.get("/v1/tables/late").json()
        assert detail["pending"][0]["instant"] == ts
        assert 0 <= pending["oldest_s"] <= detail["pending"][0]["age_seconds"] + 1
        assert late["queued"] == 1 and "failures" not in late and "running" not in late

        quiet = tables["quiet"]
        run = client.get(f"/v1/runs/{failed['id']}").json()
        assert quiet["failures"] == {
            "count": 1,
            "run": failed["id"],
            "service": "compaction",
            "at": run["finished_at"],
            "error": run["error"][: ERROR_CHARS - 1] + "…"
            if len(run["error"]) > ERROR_CHARS
            else run["error"],
        }
        assert quiet["health_score"] < 100
        assert quiet["health_reason"].startswith("compaction: 1 consecutive failed")
        scored = {"health_score", "health_reason"}
        assert set(quiet) == {"id", "type", "health", "failures", *scored}, "defaults are left out"

        down = tables["broken"]
        assert down["health"] == "error" and "type" not in down
        whole = summaries["broken"]["error"]
        assert "hoodie.table.version is missing" in whole
        assert down["error"] == (whole if len(whole) <= ERROR_CHARS else whole[: ERROR_CHARS - 1] + "…")


def test_whoami_names_the_token_and_its_scope(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    with running_daemon(tmp_path, api=TOKENS) as (_daemon, client):
        me = client.get("/v1/whoami", headers={"Authorization": f"Bearer {READER}"}).json()
        assert me["auth"] is True and me["scope"] == "read" and me["name"] == "viewer"
        assert "compaction" in me["triggerable"] and "rollback" not in me["triggerable"]
        admin = client.get("/v1/whoami", headers={"Authorization": f"Bearer {ADMIN}"}).json()
        assert admin["scope"] == "admin" and admin["name"] == "ops"
        assert client.get("/v1/whoami").status_code == 401
        unknown = client.get("/v1/whoami", headers={"Authorization": "Bearer not-a-token-at-all"})
        assert unknown.status_code == 401 and unknown.json() == {"error": "unknown token"}
        assert client.get("/v1/fleet").status_code == 401
        assert client.get("/v1/fleet", headers={"Authorization": f"Bearer {READER}"}).status_code == 200
    with running_daemon(tmp_path / "open") as (_daemon, client):
        me = client.get("/v1/whoami").json()
        assert me["auth"] is False and me["scope"] == "admin" and me["name"] is None


def test_storage_summarises_file_groups_as_hudi_rs_lists_them(tmp_path: Path) -> None:
    path = _trips(tmp_path)
    with running_daemon(tmp_path) as (_daemon, client):
        storage = client.get("/v1/tables/trips/storage")
        assert storage.status_code == 200, storage.text
        body = storage.json()
    slices = hudi.HudiTableBuilder.from_base_uri(str(path)).build().get_file_slices()
    assert body["file_groups"] == len(slices) > 0
    assert body["base_files"] == sum(1 for s in slices if s.base_file_name)
    assert body["log_files"] == sum(len(s.log_file_names) for s in slices) > 0
    files = [f for s in slices for f in (s.base_file_relative_path(), *s.log_files_relative_paths()) if f]
    assert body["bytes"] == sum((path / f).stat().st_size for f in files)
    per_partition = Counter(s.partition_path for s in slices)
    assert {p["partition"]: p["file_groups"] for p in body["partitions"]} == per_partition
    assert body["partitions_total"] == len(per_partition)
    properties = (path / ".hoodie" / "hoodie.properties").read_text()
    partitions = next(
        (
            line.split("=", 1)[1]
            for line in properties.splitlines()
            if line.startswith("hoodie.table.metadata.partitions=")
        ),
        "",
    )
    assert [p["name"] for p in body["metadata_partitions"]] == [p for p in partitions.split(",") if p]
    assert body["metadata_table"] is (path / ".hoodie" / "metadata" / ".hoodie").is_dir()
    # Hudi's metadata writer refuses delete_partition on a secondary-indexed table: TTL is refused there.
    secondary = any(p.startswith("secondary_index_") for p in partitions.split(","))
    assert set(body["refused"]) == ({"ttl"} if secondary else set()) and isinstance(body["shape"], list)
    assert all("secondary-indexed table" in why for why in body["refused"].values())


def test_the_console_is_served_from_the_package_with_a_strict_policy(tmp_path: Path) -> None:
    mor_table(tmp_path / "tables" / "t")
    folder = resources.files("service.console")
    with running_daemon(tmp_path, api=TOKENS) as (_daemon, client):
        page = client.get("/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert page.content == folder.joinpath("index.html").read_bytes()
        for name, value in HEADERS.items():
            assert page.headers[name] == value
        assert "script-src 'self'" in page.headers["content-security-policy"]
        again = client.get("/", headers={"If-None-Match": page.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        for name, media_type in ASSETS.items():
            if name == "index.html":
                continue
            asset = client.get(f"/console/{name}")
            assert asset.status_code == 200 and asset.headers["content-type"] == media_type
            assert asset.content == folder.joinpath(name).read_bytes()
            assert b"http://" not in asset.content and b"https://" not in asset.content, f"{name}: no CDN"
        missing = client.get("/console/../api.py")
        assert missing.status_code == 404
        assert client.get("/console/nothing.js").json() == {"error": "no console file 'nothing.js'"}
        spec = client.get("/openapi.json").json()
        assert "/" not in spec["paths"] and not any(p.startswith("/console") for p in spec["paths"])
        assert {"/v1/fleet", "/v1/whoami", "/v1/tables/{table_id}/storage"} <= set(spec["paths"])


def test_the_console_address_hts_serve_logs_is_one_a_browser_here_opens() -> None:
    def url(host: str, port: int = 8080) -> str:
        api = {"host": host, "port": port, "tokens": [{"token": ADMIN, "scope": "admin"}]}
        return console_url(load_settings(overrides={"api": api}, environ={}))

    assert url("127.0.0.1") == "http://127.0.0.1:8080/"
    assert url("0.0.0.0", 9090) == "http://127.0.0.1:9090/"
    assert url("::1") == "http://[::1]:8080/"


def test_every_console_file_is_package_data() -> None:
    """An installed (not editable) hts ships the console: pyproject's package data covers each file."""
    import fnmatch
    import tomllib

    from tests.conftest import REPO

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]["service"]
    folder = REPO / "service" / "console"
    shipped = {
        f.name for f in folder.iterdir() if any(fnmatch.fnmatch(f"console/{f.name}", g) for g in globs)
    }
    assert set(ASSETS) <= shipped
    assert {f.name for f in folder.iterdir() if f.suffix in (".js", ".css", ".html")} == set(ASSETS)
