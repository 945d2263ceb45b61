"""A failing table in the console, in headless Chromium against ``hts serve``: its compaction is
suspended after ``retry.suspend_after`` (2) failed runs in a row, the table page shows the
suspension with its last error, a read-only token sees no way to lift it, and an operator resumes
it from the console (admin token, through the confirmation dialog); the compaction then completes.
The fleet page shows each table's health score as ``GET /v1/tables`` gives it, before and after;
axe-core finds no serious or critical violation on the suspended table's page.

The failure is real: a log file the compaction plan names is removed, so every attempt fails when
its task reads it (as in tests/daemon/test_health.py); the file is put back before resuming.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from hoodie.table import HoodieTable
from hoodie.timeline.instant import Action
from tests.console.browser import (
    ADMIN,
    READER,
    TOKENS,
    Daemon,
    accessible,
    fleet_rows,
    page,
    sign_in,
    tab_order,
    wait,
)
from tests.daemon.helpers import ServeProcess, mor_table, request_compaction, wait_for

SUSPEND_AFTER = 2


@dataclass
class Failing:
    daemon: Daemon
    path: Path
    instant: str
    log_file: Path
    kept: bytes


def _runs(daemon: Daemon, table: str, state: str) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = daemon.get(f"/v1/runs?table={table}&state={state}")
    return runs


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Failing]:
    root = tmp_path_factory.mktemp("suspension")
    mor_table(root / "tables" / "orders")
    flaky = root / "tables" / "flaky"
    mor_table(flaky)
    instant = request_compaction(flaky)
    log_file = sorted(p for p in flaky.rglob("*.log.*") if ".hoodie" not in p.parts)[0]
    kept = log_file.read_bytes()
    log_file.unlink()
    retry = {"max_attempts": 1, "suspend_after": SUSPEND_AFTER}
    serve = ServeProcess(root, "suspension", api={"tokens": TOKENS}, retry=retry).start()
    try:
        daemon = Daemon(serve)
        # 1: the watcher finds the plan and fails on it (and gives the instant up after one attempt);
        # 2: an operator retries it through the API, fails again, and compaction is suspended there.
        wait_for(lambda: _runs(daemon, "flaky", "failed"), 60, "the watcher's failed compaction")
        retried = daemon.post("/v1/tables/flaky/compaction", {"instant": instant})
        wait_for(lambda: daemon.get(f"/v1/runs/{retried['id']}")["state"] == "failed", 60, "the retry")
        yield Failing(daemon, flaky, instant, log_file, kept)
    finally:
        serve.stop()


def _scores_as_listed(driver: WebDriver, daemon: Daemon) -> list[dict[str, Any]]:
    """The fleet page shows each table's health score and worst reason as GET /v1/tables gives them.

    Scores follow the watcher's looks (a dead attempt's heartbeat stays a reason until the next look
    sees its instant completed), so one may change between the page's fetch and this one: the page
    is loaded again until both show the same state (a page that stays wrong fails).
    """
    seen: list[Any] = []

    def agree(d: WebDriver) -> list[dict[str, Any]] | None:
        if seen:  # the same URL again only scrolls: load the page anew
            d.refresh()
        page(d, daemon.url + "/#/", "Fleet")
        listed: list[dict[str, Any]] = daemon.get("/v1/tables")
        shown = [(c["Table"], *c["Health score"].split("\n")) for c in fleet_rows(d)]
        got = [(name, score, why[0][:100] if why else None) for name, score, *why in shown]
        worst = [t["health_reasons"][0]["message"][:100] if t["health_reasons"] else None for t in listed]
        want = [(t["id"], str(t["health_score"]), w) for t, w in zip(listed, worst, strict=True)]
        seen[:] = [got, want]
        return listed if got == want else None

    try:
        listed = wait(driver, agree, "the fleet page to show the scores GET /v1/tables gives")
    except TimeoutException:
        raise AssertionError(f"page (table, score, worst reason) vs API: {seen}") from None
    assert all(t["error"] is None for t in listed), listed
    return listed


def _section_rows(driver: WebDriver, heading: str) -> list[list[str]]:
    """The cells of the table in the page's section headed ``heading`` (none: no such section)."""
    slug = "s-" + heading.lower().replace(" ", "-")
    section = driver.find_elements(By.CSS_SELECTOR, f"section[aria-labelledby='{slug}']")
    if not section:
        return []
    rows = section[0].find_elements(By.CSS_SELECTOR, "tbody tr")
    return [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows]


def test_a_failing_table_is_suspended_after_n_failures_and_resumed_from_the_console(
    failing: Failing, browser: WebDriver, tmp_path: Path
) -> None:
    daemon = failing.daemon
    detail = daemon.get("/v1/tables/flaky")
    suspension = detail["suspended"]["compaction"]
    assert suspension["consecutive_failures"] == SUSPEND_AFTER
    (last,) = [r for r in _runs(daemon, "flaky", "failed") if r["id"] == suspension["last_run"]]
    assert failing.log_file.name in last["error"] and suspension["last_error"] == last["error"]

    # A read-only token sees the suspension and its last error, and no way to lift it.
    sign_in(browser, daemon, READER)
    page(browser, daemon.url + "/#/tables/flaky", "Table flaky")
    (row,) = _section_rows(browser, "Suspended services")
    assert row == ["compaction", last["error"]]
    assert browser.find_elements(By.CSS_SELECTOR, "button.action") == []
    assert "Read-only token" in browser.find_element(By.CLASS_NAME, "readonly").text

    # The fleet: flaky marked suspended, its score lowered by the suspension; orders untouched.
    sign_in(browser, daemon, ADMIN)
    listed = {t["id"]: t for t in _scores_as_listed(browser, daemon)}
    flaky = next(c for c in fleet_rows(browser) if c["Table"] == "flaky")
    assert "suspended compaction" in flaky["Notes"]
    worst = listed["flaky"]["health_reasons"][0]
    assert worst["code"] == "suspended" and worst["service"] == "compaction", worst
    score = listed["flaky"]["health_score"]
    assert score == max(0, 100 - sum(r["penalty"] for r in listed["flaky"]["health_reasons"]))
    assert listed["orders"]["health_score"] == 100 and listed["orders"]["health_reasons"] == []
    stats = browser.find_elements(By.CSS_SELECTOR, "dl.stats > div")
    counts = {d.find_element(By.TAG_NAME, "dt").text: d.find_element(By.TAG_NAME, "dd").text for d in stats}
    assert counts["Suspended"] == "1"
    accessible(browser, "fleet-suspended", tmp_path)
    # Only the suspended table needs attention (the hash changes: wait for the page drawn again).
    browser.get(daemon.url + "/#/?trouble=1")
    wait(browser, lambda d: [c["Table"] for c in fleet_rows(d)] == ["flaky"], "the tables needing attention")

    # The suspended table's page, for an operator: the suspension, the failing service, a Resume.
    page(browser, daemon.url + "/#/tables/flaky", "Table flaky")
    (row,) = _section_rows(browser, "Suspended services")
    assert row == ["compaction", last["error"], "Resume compaction"]
    (row,) = _section_rows(browser, "Failing services")
    assert row == ["compaction", str(SUSPEND_AFTER), "suspended", f"#{last['id']}", last["error"]]
    accessible(browser, "table-suspended", tmp_path)
    resume = browser.find_element(By.XPATH, "//button[text()='Resume compaction']")
    assert resume in tab_order(browser), "Resume is reachable by Tab"

    def dialog_open(d: WebDriver) -> bool:
        return d.find_element(By.ID, "confirm").get_attribute("open") is not None

    # Declining the confirmation lifts nothing.
    browser.find_element(By.XPATH, "//button[text()='Resume compaction']").click()
    wait(browser, dialog_open, "the confirmation dialog")
    question = browser.find_element(By.ID, "confirm-text").text
    assert question == "Resume compaction on table flaky? It was suspended after repeated failures."
    browser.find_element(By.ID, "confirm-cancel").click()
    wait(browser, lambda d: d.find_element(By.ID, "notice").text == "Nothing done.", "nothing done")
    assert daemon.get("/v1/tables/flaky")["suspended"]["compaction"]["suspended"]

    # The operator mends the table, then resumes compaction from the console.
    failing.log_file.write_bytes(failing.kept)
    browser.find_element(By.XPATH, "//button[text()='Resume compaction']").click()
    wait(browser, dialog_open, "the confirmation dialog")
    browser.find_element(By.ID, "confirm-ok").click()
    wait(browser, lambda d: d.find_element(By.ID, "notice").text == "compaction on flaky resumed.", "resumed")
    assert daemon.get("/v1/tables/flaky")["suspended"] == {}
    wait(browser, lambda d: not _section_rows(d, "Suspended services"), "the page without the suspension")

    # Nothing holds the plan back now: the watcher runs it, and it completes.
    succeeded = wait_for(lambda: _runs(daemon, "flaky", "succeeded"), 60, "the compaction after resuming")
    assert [r["instant"] for r in succeeded] == [failing.instant]
    completed = HoodieTable.open(str(failing.path)).reload().get(failing.instant, Action.COMPACTION)
    assert completed is not None and completed.is_completed
    detail = daemon.get("/v1/tables/flaky")
    assert detail["failures"] == {} and "suspended" not in {r["code"] for r in detail["health_reasons"]}
    listed = {t["id"]: t for t in _scores_as_listed(browser, daemon)}
    assert listed["flaky"]["health_score"] >= score + worst["penalty"]
    assert "suspended" not in next(c for c in fleet_rows(browser) if c["Table"] == "flaky")["Notes"]
