"""The web console in a real headless Chromium, against a real ZooKeeper with two provider
processes and a consumer process under load: an operator finds the service, sees both providers
and the consumer's reach, types a rule with an error and sees it marked at its line, fixes it,
sees the dry run, pushes it and watches the consumer's traffic follow with no failed call, then
rolls it back; takes a provider out of service and back; and calls a method from the browser.

Set ``DUBBO_PY_CONSOLE_SCREENSHOTS=docs/images/console`` to (re)make the screenshots
docs/console.md shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.browser import chromium, screenshot
from tests.support.console_process import ConsoleProcess
from tests.support.processes import ROOT, ProviderProcess
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.e2e, pytest.mark.zookeeper]

KEY = "demo.Greeter:1.0.0:.condition-router"
BOTH = """\
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
conditions:
  - method = SayHello => host = 127.0.0.1
"""
WINDOW = 10
_WINDOW_LINE = re.compile(r"^\s*calls\s+\d+-\d+\s+(.*)$")


class LoadedConsumer:
    """examples/quickstart/consumer.py calling without pause, reporting where every
    ``WINDOW`` calls landed; the lines are collected as they come."""

    def __init__(self, registry: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable, str(ROOT / "examples" / "quickstart" / "consumer.py"),
                "--registry", registry, "--calls", "10000000", "--interval", "0.005",
                "--report-every", str(WINDOW),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def mark(self) -> int:
        with self._lock:
            return len(self.lines)

    def windows(self, since: int = 0) -> list[dict[str, int]]:
        with self._lock:
            lines = self.lines[since:]
        out = []
        for line in lines:
            match = _WINDOW_LINE.match(line)
            if match:
                counts = {}
                for part in match.group(1).split(", "):
                    where, _, count = part.rpartition(": ")
                    counts[where] = int(count)
                out.append(counts)
        return out

    def failures(self) -> list[str]:
        with self._lock:
            return [ln for ln in self.lines if "failed" in ln or "Traceback" in ln]

    def wait_for(self, predicate: Callable[[dict[str, int]], bool], since: int, what: str) -> int:
        """Wait until a window after ``since`` satisfies ``predicate`` and the two windows
        after it do too (the traffic has settled); returns the mark after them."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            windows = self.windows(since)
            for index in range(len(windows) - 2):
                if all(predicate(w) for w in windows[index : index + 3]):
                    return self.mark()
            time.sleep(0.1)
        raise AssertionError(f"consumer traffic never settled: {what}; saw {self.windows(since)}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def zk_registry(zookeeper: ZooKeeperServer) -> str:
    return f"zookeeper://{zookeeper.address}/console-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def shots() -> Path | None:
    folder = os.environ.get("DUBBO_PY_CONSOLE_SCREENSHOTS")
    return (ROOT / folder) if folder else None


@pytest.fixture
def fleet(
    zk_registry: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ProviderProcess, ProviderProcess]]:
    # Every process (providers and the consumer) opens a QoS port: the console's live figures.
    monkeypatch.setenv("DUBBO_PY_QOS_PORT", "0")
    first = ProviderProcess(zk_registry, "--warmup", "0").start()
    second = ProviderProcess(zk_registry, "--warmup", "0").start()
    yield first, second
    first.kill()
    second.kill()


def cli(registry: str, *args: str, auth: str = "") -> str:
    env = {**os.environ, "DUBBO_PY_REGISTRY_AUTH": auth} if auth else None
    done = subprocess.run(
        [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_css(driver: Any, css: str, timeout: float = 30) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def reload_until(driver: Any, url: str, predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        driver.get(url)
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"the page never showed {what}")


def _slug(address: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in address)


def type_rule(driver: Any, text: str) -> None:
    editor = wait_css(driver, "#rule-text")
    editor.clear()
    editor.send_keys(text)


def test_operator_steers_live_traffic_from_the_browser(
    zk_registry: str,
    fleet: tuple[ProviderProcess, ProviderProcess],
    tmp_path: Path,
    shots: Path | None,
) -> None:
    first, second = fleet
    auth = "ops:console-secret"
    # A rule already in force that lets SayHello reach both providers (the operator edits it).
    rule_file = tmp_path / "both.yaml"
    rule_file.write_text(BOTH, encoding="utf-8")
    cli(zk_registry, "rules", "push", str(rule_file), "--operator", "alice", auth=auth)
    consumer = LoadedConsumer(zk_registry)
    try:
        both = {first.address, second.address}
        consumer.wait_for(lambda w: set(w) == both, 0, "calls spread over both providers")
        with (
            ConsoleProcess(zk_registry, env={"DUBBO_PY_REGISTRY_AUTH": auth}) as console,
            chromium() as driver,
        ):
            _find_the_service(driver, console.url, first, second, shots)
            _edit_push_and_roll_back(driver, console.url, consumer, first, second, shots)
            _disable_and_enable_a_provider(driver, console.url, consumer, first, second, shots)
            _call_from_the_browser(driver, console.url, first, second, shots)
        assert consumer.failures() == []
    finally:
        consumer.stop()


def _find_the_service(
    driver: Any, url: str, first: ProviderProcess, second: ProviderProcess, shots: Path | None
) -> None:
    driver.get(url + "/")
    search = wait_css(driver, "#service-search")
    search.send_keys("Greet")
    # The list as searched (not the one the page opened with, which the search replaces).
    row = wait_css(driver, '#services-table[data-query="Greet"] tr[data-service="demo.Greeter"]')
    assert "demo.Greeter:1.0.0:.condition-router" in row.text
    screenshot(driver, shots, "services")
    row.find_element("css selector", "a").click()
    wait_css(driver, "#service-name")
    addresses = {r.get_attribute("data-address") for r in css(driver, "tr.provider-row")}
    assert addresses == {first.address, second.address}

    def consumer_reaches_both() -> bool:
        rows = css(driver, 'table.matrix[data-method="SayHello"] tr.reach-row')
        reached = [c.get_attribute("data-provider") for c in css(driver, "td.cell.yes")]
        return len(rows) == 1 and set(reached) >= {first.address, second.address}

    reload_until(driver, driver.current_url, consumer_reaches_both, "the consumer's reach")

    def live(column: str) -> list[str]:
        # Read in one script: the cells are swapped in place every 2 s.
        script = (
            "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent)"
        )
        return [str(t).strip() for t in driver.execute_script(script, f"td.{column}")]

    def live_rates() -> list[float]:
        return [float(t) for t in live("live-rate") if re.fullmatch(r"[0-9.]+", t)]

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(live_rates()) == 2 and min(live_rates()) > 0):
        time.sleep(0.5)
    # Both providers serve the consumer's load: each shows calls per second from its QoS port.
    assert len(live_rates()) == 2 and min(live_rates()) > 0, live("live-rate")
    assert all(re.fullmatch(r"[0-9.]+", t) for t in live("live-p99")), live("live-p99")
    screenshot(driver, shots, "service")


def _edit_push_and_roll_back(
    driver: Any,
    url: str,
    consumer: LoadedConsumer,
    first: ProviderProcess,
    second: ProviderProcess,
    shots: Path | None,
) -> None:
    driver.get(f"{url}/rule?key={KEY}")
    assert wait_css(driver, "#rule-text").get_attribute("value") == BOTH
    broken = BOTH.replace("host = 127.0.0.1", f"address {second.address}")
    type_rule(driver, broken)
    wait_css(driver, "#validate").click()
    error = wait_css(driver, "#rule-error")
    assert error.get_attribute("data-line") == "5"
    assert "line 5, column" in error.text
    marked = css(driver, "#gutter .error-line")
    assert [m.get_attribute("data-line") for m in marked] == ["5"]
    screenshot(driver, shots, "rule-error")

    fixed = BOTH.replace("host = 127.0.0.1", f"address = {second.address}")
    type_rule(driver, fixed)
    wait_css(driver, "#dry-run").click()
    wait_css(driver, "#dry-run-reach")
    rows = css(driver, "#dry-run-reach tr.reach-change")
    changes = {
        (
            r.find_element("css selector", ".before").text,
            r.find_element("css selector", ".after").text,
        )
        for r in rows
    }
    assert any(after == second.address and first.address in before for before, after in changes), (
        changes
    )
    assert css(driver, "#gutter .error-line") == []
    screenshot(driver, shots, "dry-run")

    since = consumer.mark()
    wait_css(driver, "#push").click()
    assert "pushed demo.Greeter:1.0.0:.condition-router" in wait_css(driver, "#pushed").text
    consumer.wait_for(lambda w: set(w) == {second.address}, since, "only the second provider")

    driver.get(f"{url}/rule/history?key={KEY}")
    entries = css(driver, "tr.history-row")
    assert [e.find_element("css selector", ".action").text for e in entries] == ["push", "push"]
    assert [e.find_element("css selector", ".who").text.split()[0] for e in entries] == [
        "ops",
        "alice",
    ]
    screenshot(driver, shots, "history")
    since = consumer.mark()
    wait_css(driver, "#rollback").click()
    wait_css(driver, "tr.history-row .action")
    reload_until(
        driver,
        f"{url}/rule/history?key={KEY}",
        lambda: "rollback (to #0)" in css(driver, "tr.history-row .action")[0].text,
        "the rollback in the history",
    )
    both = {first.address, second.address}
    consumer.wait_for(lambda w: set(w) == both, since, "both providers again after the rollback")


def _disable_and_enable_a_provider(
    driver: Any,
    url: str,
    consumer: LoadedConsumer,
    first: ProviderProcess,
    second: ProviderProcess,
    shots: Path | None,
) -> None:
    page = f"{url}/service/demo.Greeter"
    driver.get(page)
    since = consumer.mark()
    row = wait_css(driver, f'tr.provider-row[data-address="{first.address}"]')
    row.find_element("css selector", "button.toggle-provider").click()
    reload_until(
        driver,
        page,
        lambda: (
            "disabled" in css(driver, f'tr.provider-row[data-address="{first.address}"]')[0].text
        ),
        "the provider disabled",
    )
    consumer.wait_for(lambda w: set(w) == {second.address}, since, "the disabled provider left")
    screenshot(driver, shots, "provider-disabled")
    since = consumer.mark()
    row = wait_css(driver, f'tr.provider-row[data-address="{first.address}"]')
    row.find_element("css selector", "button.toggle-provider").click()
    reload_until(
        driver,
        page,
        lambda: (
            "serving" in css(driver, f'tr.provider-row[data-address="{first.address}"]')[0].text
        ),
        "the provider enabled again",
    )
    both = {first.address, second.address}
    consumer.wait_for(lambda w: set(w) == both, since, "both providers again after enabling")


def _call_from_the_browser(
    driver: Any, url: str, first: ProviderProcess, second: ProviderProcess, shots: Path | None
) -> None:
    # The call goes through the rules in force now (both providers): it is served by one.
    driver.get(f"{url}/call?service=demo.Greeter&version=1.0.0")
    form = wait_css(driver, 'form.call-form[data-method="SayHello"]')
    form.find_element("css selector", 'input[data-field="name"]').send_keys("ada")
    form.find_element("css selector", "button.call-button").click()
    served = wait_css(driver, "#call-result-SayHello .served-by", timeout=60)
    reply = wait_css(driver, "#call-result-SayHello pre.reply").text
    assert '"message": "Hello, ada!"' in reply
    assert served.text in reply
    assert served.text in {first.address, second.address}
    screenshot(driver, shots, "call")
