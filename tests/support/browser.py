"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven by Selenium,
for browser tests of the console. Nothing is downloaded: Selenium is pointed at the system
driver and browser; the browser runs with a throwaway profile and no background traffic."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1000",
)


def _binary(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


@contextmanager
def chromium() -> Iterator[Any]:
    """A Selenium WebDriver on headless Chromium; skips the test when the browser, its driver
    or Selenium is not installed (scripts/test.sh installs them)."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser = _binary("chromium", "chromium-browser")
    driver_path = _binary("chromedriver", "chromium-driver")
    if browser is None or driver_path is None:
        pytest.skip("needs Debian's chromium and chromium-driver (scripts/test.sh installs them)")
    profile = tempfile.mkdtemp(prefix="dubbo-py-chromium-")
    options = Options()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: Any, folder: Path | None, name: str) -> None:
    """Save the whole page as ``<folder>/<name>.png`` (the page's full height)."""
    if folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, max(700, min(int(height) + 40, 2400)))
    driver.save_screenshot(str(folder / f"{name}.png"))
    driver.set_window_size(1400, 1000)
