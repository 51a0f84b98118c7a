"""The console's pages fit a 1280 px wide window in a real headless Chromium (issue 35, finding
7: the service page's providers table scrolled sideways and clipped its Change column), and the
provider rows show each provider's own parameters (finding 6)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium
from tests.support.console_process import ConsoleProcess
from tests.support.processes import ProviderProcess

pytestmark = [pytest.mark.e2e]

WIDTH = 1280
#: What overflows the window: the page's scroll width, and every cell whose right edge is
#: beyond the window (or beyond its own table's visible box, when a wrapper scrolls).
OVERFLOW = """
const width = document.documentElement.clientWidth;
const out = [];
if (document.documentElement.scrollWidth > width) {
  out.push('page scrolls: ' + document.documentElement.scrollWidth + ' > ' + width);
}
for (const cell of document.querySelectorAll('th, td, button, input')) {
  const box = cell.getBoundingClientRect();
  if (box.width > 0 && box.right > width + 0.5) {
    out.push(cell.tagName + ' ' + (cell.className || cell.textContent.trim().slice(0, 20)) +
             ' ends at ' + Math.round(box.right));
  }
}
return out;
"""


@pytest.fixture
def service(tmp_path: Path) -> Iterator[str]:
    registry = f"sqlite://{tmp_path}/registry.db"
    first = ProviderProcess(registry, "--warmup", "0", "--tag", "gray").start()
    second = ProviderProcess(registry, "--warmup", "0").start()
    try:
        yield registry
    finally:
        first.kill()
        second.kill()


def _overflow(driver: Any, url: str) -> list[str]:
    driver.get(url)
    result: list[str] = driver.execute_script(OVERFLOW)
    return result


def test_console_pages_fit_1280_px_and_show_provider_parameters(
    service: str, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    with ConsoleProcess(service) as console, chromium() as driver:
        driver.set_window_size(WIDTH, 900)
        assert driver.execute_script("return window.innerWidth") == WIDTH
        page = f"{console.url}/service/demo.Greeter"
        assert _overflow(driver, page) == []
        rows = driver.find_elements(By.CSS_SELECTOR, "#providers .provider-row")
        assert len(rows) == 2
        shown = sorted(r.find_element(By.CSS_SELECTOR, "td.parameters").text for r in rows)
        assert shown == sorted(["—", "dubbo.tag=gray"])
        change = rows[0].find_element(By.CSS_SELECTOR, "td.change")
        assert change.find_element(By.CSS_SELECTOR, "button.toggle-provider").is_displayed()
        driver.save_screenshot(str(tmp_path / "service-1280.png"))
        for path in ("/", "/rules", "/route-test", "/call?service=demo.Greeter"):
            assert _overflow(driver, console.url + path) == [], path
