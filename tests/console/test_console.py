"""The console in headless Chromium against ``hts serve`` serving real tables: a MERGE_ON_READ
table hts wrote, one Apache Hudi wrote (a fixture), and one that cannot be opened.

The fleet page shows what ``GET /v1/tables`` says; a compaction triggered from the console (by
keyboard, through the confirmation dialog) completes and shows on the runs page; a read-only token
sees no action and the API refuses it one; axe-core finds no serious or critical violation on any
page. Screenshots go to the test's temporary folder (``HTS_CONSOLE_SCREENSHOT=<path>`` also copies
the fleet page's, with the compaction running, there: the README's ``docs/console.png``).
"""

from __future__ import annotations

import os
import re
import shutil
import urllib.error
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select

from tests.conftest import FIXTURES
from tests.console.browser import (
    ADMIN,
    READER,
    TOKENS,
    Daemon,
    accessible,
    axe_violations,
    fleet_rows,
    page,
    sign_in,
    tab_order,
    wait,
)
from tests.daemon.helpers import ServeProcess, mor_table, request_compaction, wait_for

TYPES = {"MERGE_ON_READ": "MOR", "COPY_ON_WRITE": "COW"}
SCREENSHOT_MAX_BYTES = 200 * 1024


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    root = tmp_path_factory.mktemp("console")
    tables = root / "tables"
    mor_table(tables / "orders", upserts=2)
    with zipfile.ZipFile(FIXTURES / "quickstart_trips_table" / "mor" / "avro" / "v8_trips_8i3u1d.zip") as zf:
        zf.extractall(root / "unzipped")
    trips = next(p.parent.parent for p in (root / "unzipped").rglob(".hoodie/hoodie.properties"))
    shutil.copytree(trips, tables / "trips")
    broken = tables / "broken" / ".hoodie"
    broken.mkdir(parents=True)
    (broken / "hoodie.properties").write_text("hoodie.table.name=broken\nhoodie.table.type=NOT_A_TYPE\n")
    # Each compaction task pauses 1 s after writing, so that a run is seen running with progress.
    slow_tasks = {"HTS_CRASH_AT": "compaction.task_after_write", "HTS_CRASH_ACTION": "pause:1"}
    serve = ServeProcess(root, "console", env=slow_tasks, api={"tokens": TOKENS}).start()
    try:
        daemon = Daemon(serve)
        # trips: a failed run (a bad option value), then paused with a compaction pending.
        bad = {"options": {"hoodie.compaction.target.io": "lots"}}
        failed = daemon.post("/v1/tables/trips/compaction", bad)
        wait_for(lambda: daemon.get(f"/v1/runs/{failed['id']}")["state"] == "failed", 60, "the failed run")
        daemon.post("/v1/tables/trips/pause")
        request_compaction(tables / "trips")
        wait_for(lambda: daemon.get("/v1/tables/trips")["pending"], 60, "the pending compaction on trips")
        yield daemon
    finally:
        serve.stop()


def test_the_fleet_page_shows_what_the_api_says(daemon: Daemon, browser: WebDriver, tmp_path: Path) -> None:
    wait_for(lambda: all(t["health"] != "opening" for t in daemon.get("/v1/tables")), what="tables opened")
    sign_in(browser, daemon, ADMIN)
    assert browser.find_element(By.ID, "scope").get_attribute("data-scope") == "admin"
    api = daemon.get("/v1/tables")
    expected = [(t["id"], TYPES.get(t["type"] or "", ""), t["health"]) for t in api]
    assert expected == [("broken", "", "error"), ("orders", "MOR", "ok"), ("trips", "MOR", "paused")]
    cells = fleet_rows(browser)
    assert [(c["Table"], c["Type"], c["State"]) for c in cells] == expected
    assert api[0]["error"][:100] in cells[0]["Notes"], "the fleet shows why a table cannot be served"
    # Each table's health score, with the worst of its reasons under it, as GET /v1/tables scores it.
    for shown, listed in zip(cells, api, strict=True):
        score, *why = shown["Health score"].split("\n")
        assert score == str(listed["health_score"]), listed["id"]
        # the worst reason under it, unless it is the table's error (shown under Notes)
        worst = listed["health_reasons"][0]["message"] if listed["health_reasons"] else None
        shown_worst = worst[:100] if worst and worst != listed["error"] else None
        assert (why[0][:100] if why else None) == shown_worst, listed["id"]
    assert api[0]["health_score"] == 0 and 0 < api[2]["health_score"] < 100
    (pending,) = daemon.get("/v1/tables/trips")["pending"]
    trips = cells[2]["Pending"]
    assert trips.startswith("compaction: 1 pending, oldest ") and trips.endswith(" (limit 1 h)")
    (failed,) = daemon.get("/v1/runs?table=trips&state=failed")
    assert cells[2]["Recent failures"].startswith(f"1 failed (last: compaction) {failed['error'][:60]}")
    assert "paused" in cells[2]["Notes"]
    assert pending["service"] == "compaction"
    assert f"console at {daemon.url}/" in daemon.serve.log(), "hts serve says where the console is"
    accessible(browser, "fleet", tmp_path)

    # Only the tables needing attention: the unreadable one, and the one with a failed run.
    browser.find_element(By.NAME, "trouble").click()
    browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()

    def shown_ids(d: WebDriver) -> list[str] | None:
        if "trouble=1" not in d.current_url:
            return None
        rows = d.find_elements(By.CSS_SELECTOR, "#fleet tbody tr")
        return [r.find_element(By.TAG_NAME, "td").text for r in rows]

    assert wait(browser, lambda d: shown_ids(d) == ["broken", "trips"], "the filtered fleet")
    assert browser.find_element(By.CSS_SELECTOR, "#fleet caption").text == "Tables (2 of 3)"

    # Every page an operator opens is accessible, including an Apache Hudi table's.
    page(browser, daemon.url + "/#/tables/trips", "Table trips")
    assert browser.find_element(By.ID, "timeline").find_elements(By.CSS_SELECTOR, "tbody tr")
    accessible(browser, "table-trips", tmp_path)
    page(browser, daemon.url + "/#/tables/broken", "Table broken")
    accessible(browser, "table-broken", tmp_path)


def test_a_compaction_triggered_from_the_console_completes_and_shows_in_runs(
    daemon: Daemon, browser: WebDriver, tmp_path: Path
) -> None:
    sign_in(browser, daemon, ADMIN)
    page(browser, daemon.url + "/#/tables/orders", "Table orders")
    accessible(browser, "table-orders", tmp_path)
    actions = browser.find_elements(By.CSS_SELECTOR, "button.action")
    reached = tab_order(browser)
    assert actions and all(a in reached for a in actions), "every action is reachable by Tab"

    Select(browser.find_element(By.ID, "trigger-service")).select_by_value("compaction")
    run_now = browser.find_element(By.ID, "trigger-run")
    run_now.send_keys(Keys.ENTER)  # by keyboard: the confirmation dialog opens, Cancel focused
    wait(browser, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    assert "Run compaction on table orders now?" in browser.find_element(By.ID, "confirm-text").text
    assert browser.switch_to.active_element == browser.find_element(By.ID, "confirm-cancel")
    assert axe_violations(browser) == [], "the confirmation dialog"
    browser.switch_to.active_element.send_keys(Keys.TAB)
    browser.switch_to.active_element.send_keys(Keys.ENTER)  # Confirm
    queued = re.compile(r"Run (\d+) \(compaction on orders\)")
    notice = wait(browser, lambda d: queued.search(d.find_element(By.ID, "notice").text), "the run's notice")
    run_id = int(notice.group(1))

    # The fleet shows it running, with its progress in file groups.
    browser.get(daemon.url + "/#/")

    def running(d: WebDriver) -> str | None:
        d.find_element(By.ID, "refresh").click()
        text = next((c["Running"] for c in fleet_rows(d) if c["Table"] == "orders"), "")
        return text if re.fullmatch(rf"compaction #{run_id} [0-3] of 3", text) else None

    assert wait(browser, running, "the run's progress on the fleet page", 60)
    screenshot = tmp_path / "fleet-running.png"
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(screenshot))
    assert screenshot.stat().st_size < SCREENSHOT_MAX_BYTES, f"{screenshot} is too big for the README"
    if os.environ.get("HTS_CONSOLE_SCREENSHOT"):
        shutil.copyfile(screenshot, os.environ["HTS_CONSOLE_SCREENSHOT"])

    done = wait_for(
        lambda: (r := daemon.get(f"/v1/runs/{run_id}"))["state"] not in ("queued", "running") and r,
        60,
        "the compaction run",
    )
    assert done["state"] == "succeeded", done
    assert done["trigger"] == "api" and done["details"]["files_written"] > 0

    page(browser, daemon.url + "/#/runs?table=orders&service=compaction", "Runs")
    rows = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
    cells = {(c := r.find_elements(By.TAG_NAME, "td"))[0].text: c[6].text for r in rows}
    assert cells[f"#{run_id}"] == "succeeded"
    accessible(browser, "runs", tmp_path)
    page(browser, daemon.url + f"/#/runs/{run_id}", f"Run {run_id}")
    assert '"files_written"' in browser.find_element(By.ID, "run-details").text
    cost = done["cost"]
    assert cost["files_read"] > 0 and cost["bytes_read"] > 0 and cost["storage_requests"] > 0, cost
    shown = browser.find_element(By.CSS_SELECTOR, "section[aria-labelledby='s-cost'] dl")
    figures = dict(
        zip(
            [t.text for t in shown.find_elements(By.TAG_NAME, "dt")],
            [d.text for d in shown.find_elements(By.TAG_NAME, "dd")],
            strict=True,
        )
    )
    assert figures["files read"] == str(cost["files_read"]), figures
    assert figures["storage requests"] == str(cost["storage_requests"]), figures
    assert figures["bytes read"], "the bytes the run read, in units"
    accessible(browser, "run", tmp_path)

    # The compaction is on the table's timeline in the console, completed.
    page(browser, daemon.url + "/#/tables/orders", "Table orders")
    timeline = browser.find_element(By.ID, "timeline").text
    assert done["instant"] in timeline

    # A failed run offers a retry; declining the confirmation does nothing, and what the API
    # refuses (trips is paused) is shown with its reason.
    (failed,) = daemon.get("/v1/runs?table=trips&state=failed")
    page(browser, daemon.url + "/#/runs?table=trips&state=failed", "Runs")
    retry = browser.find_element(By.XPATH, f"//button[text()='Retry run {failed['id']}']")
    retry.click()
    wait(browser, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    browser.find_element(By.ID, "confirm-cancel").click()
    wait(browser, lambda d: d.find_element(By.ID, "notice").text == "Nothing done.", "nothing done")
    runs_before = len(daemon.get("/v1/runs?table=trips"))
    browser.find_element(By.XPATH, f"//button[text()='Retry run {failed['id']}']").click()
    wait(browser, lambda d: d.find_element(By.ID, "confirm").get_attribute("open") is not None, "the dialog")
    browser.find_element(By.ID, "confirm-ok").click()

    def refusal(d: WebDriver) -> str | None:
        text: str = d.find_element(By.ID, "notice").text
        return text if text.startswith("Refused") else None

    refused = wait(browser, refusal, "the refusal")
    assert refused == "Refused: table trips is paused; resume it first"
    assert len(daemon.get("/v1/runs?table=trips")) == runs_before


def test_a_read_only_token_cannot_act(daemon: Daemon, browser: WebDriver, tmp_path: Path) -> None:
    sign_in(browser, daemon, READER)
    assert browser.find_element(By.ID, "scope").get_attribute("data-scope") == "read"
    for url, heading in (
        ("/#/", "Fleet"),
        ("/#/tables/orders", "Table orders"),
        ("/#/runs", "Runs"),
    ):
        page(browser, daemon.url + url, heading)
        assert browser.find_elements(By.CSS_SELECTOR, "button.action") == [], f"no action on {heading}"
        assert browser.find_elements(By.ID, "trigger-run") == []
        if heading.startswith("Table"):
            assert "Read-only token" in browser.find_element(By.CLASS_NAME, "readonly").text
    accessible(browser, "runs-read-only", tmp_path)
    # The API refuses the token too, whatever the page shows.
    status = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        fetch("/v1/tables/orders/compaction", {method: "POST",
          headers: {Authorization: "Bearer " + sessionStorage.getItem("hts.token")}})
          .then((r) => done(r.status));
        """
    )
    assert status == 403
    with pytest.raises(urllib.error.HTTPError) as refused:
        daemon.serve.request("POST", "/v1/tables/orders/pause", headers={"Authorization": f"Bearer {READER}"})
    refused.value.close()
    assert refused.value.code == 403
