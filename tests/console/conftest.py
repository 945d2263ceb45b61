"""Fixtures shared by the console's browser tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium.webdriver.remote.webdriver import WebDriver

from tests.console.browser import chromium


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """Headless Chromium with a fresh profile, one per test module."""
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as driver:
        yield driver
