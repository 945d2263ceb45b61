"""Driving the console in headless Chromium: Debian's ``chromium`` and ``chromium-driver`` (both
installed by ``make install``), through selenium pointed at ``/usr/bin/chromedriver`` so that it
never downloads a driver; axe-core (``make install`` puts it in ``build/axe``) run inside pages."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.daemon.helpers import ServeProcess

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
AXE = REPO / "build" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
T = TypeVar("T")
ADMIN = "console-admin-token-0123"
READER = "console-read-token-01234"
TOKENS = [
    {"token": ADMIN, "scope": "admin", "name": "operator"},
    {"token": READER, "scope": "read", "name": "viewer"},
]


def _require(path: Path, how: str) -> None:
    if not path.exists():
        raise RuntimeError(f"{path} is missing: {how}")


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[WebDriver]:
    """Headless Chromium with a fresh ``--user-data-dir`` (``profile``), quit on exit."""
    _require(CHROMIUM, "run `make install` (it installs Debian's chromium and chromium-driver)")
    _require(CHROMEDRIVER, "run `make install` (it installs Debian's chromium and chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait(driver: WebDriver, check: Callable[[WebDriver], T], what: str, timeout_s: float = 30) -> T:
    waiting = WebDriverWait(
        driver, timeout_s, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException]
    )
    return waiting.until(check, f"waiting for {what}")


def page(driver: WebDriver, url: str, heading: str) -> WebElement:
    """Open ``url`` and wait until the console rendered the page whose ``<h1>`` is ``heading``."""
    driver.get(url)
    return wait(driver, lambda d: _heading(d, heading), f"the page {heading!r} at {url}")


def _heading(driver: WebDriver, text: str) -> WebElement | None:
    """The rendered page's heading when it reads ``text`` (and the page is not being replaced)."""
    found = driver.execute_script(
        "const h = document.querySelector('main > .page > h1, main > h1');"
        "const busy = document.querySelector('main [aria-busy]');"
        "return h && !busy && h.textContent === arguments[0] ? h : null",
        text,
    )
    return found if isinstance(found, WebElement) else None


def axe_violations(driver: WebDriver) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    _require(AXE, "run `make install` (it installs axe-core from npm into build/axe)")
    if not driver.execute_script("return typeof window.axe !== 'undefined'"):
        driver.execute_script(AXE.read_text())
    found = driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        axe.run(document, {resultTypes: ["violations"]})
          .then((r) => done(r.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
          }))))
          .catch((e) => done([{id: "axe-error", impact: "critical", help: String(e), nodes: []}]));
        """
    )
    assert isinstance(found, list)
    return [v for v in found if v["impact"] in ("serious", "critical")]


def tab_order(driver: WebDriver, limit: int = 400) -> list[WebElement]:
    """The elements Tab visits from the top of the page, once round."""
    body = driver.find_element(By.TAG_NAME, "body")
    driver.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
    seen: list[WebElement] = []
    for _ in range(limit):
        driver.switch_to.active_element.send_keys("\ue004")  # Tab
        focused = driver.switch_to.active_element
        if focused == body or (seen and focused == seen[0]):
            break
        seen.append(focused)
    return seen


class Daemon:
    """``hts serve`` as the console's tests call it: with a token (admin unless told)."""

    def __init__(self, serve: ServeProcess) -> None:
        self.serve = serve
        self.url = f"http://127.0.0.1:{serve.port}"

    def get(self, path: str, token: str = ADMIN) -> Any:
        return self.serve.request("GET", path, headers={"Authorization": f"Bearer {token}"})

    def post(self, path: str, body: Any = None, token: str = ADMIN) -> Any:
        return self.serve.request("POST", path, body, headers={"Authorization": f"Bearer {token}"})


def sign_in(driver: WebDriver, daemon: Daemon, token: str) -> None:
    """Sign in with ``token`` on a fresh tab session (the sign-in page checked by axe-core)."""
    driver.get(daemon.url + "/")
    driver.execute_script("sessionStorage.clear()")
    page(driver, daemon.url + "/", "Sign in")
    assert axe_violations(driver) == [], "the sign-in page"
    driver.find_element(By.ID, "token").send_keys(token + Keys.ENTER)
    page(driver, daemon.url + "/#/", "Fleet")


def accessible(driver: WebDriver, what: str, artifacts: Path) -> None:
    """A screenshot of the page as ``<artifacts>/<what>.png``, and no serious axe-core violation."""
    driver.save_screenshot(str(artifacts / f"{what}.png"))
    assert axe_violations(driver) == [], what


def fleet_rows(driver: WebDriver) -> list[dict[str, str]]:
    """The fleet table's rows as shown: column heading -> the cell's text."""
    headings = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#fleet thead th")]
    rows = driver.find_elements(By.CSS_SELECTOR, "#fleet tbody tr")
    cells = [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows]
    return [dict(zip(headings, texts, strict=True)) for texts in cells]
