"""The console over HTTP, as a browser (or an attacker's page) talks to it: the host check, the
CSRF check on every write, writable as the registry's ACLs allow, versioned pushes that show a
concurrent change, errors at their line and column, and every write in the rule history."""

from __future__ import annotations

import html
import http.cookiejar
import os
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dubbo_py.admin.connection import open_admin_store
from dubbo_py.admin.rules.history import History
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.address import parse_registry_address
from dubbo_py.url import URL
from tests.support.console_process import ConsoleProcess
from tests.support.java_app_level import write_java_provider
from tests.support.zookeeper import ZooKeeperServer

KEY = "demo.Greeter:1.0.0:.condition-router"
RULE = """\
configVersion: v3.0
scope: service
key: demo.Greeter:1.0.0
conditions:
  - method = SayHello => host = 127.0.0.1
"""


class Browser:
    """Cookies kept between requests, the CSRF token read from the page as htmx sends it."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.token = ""

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        request = urllib.request.Request(self.base + path, headers=headers or {})
        status, body = self._open(request)
        found = re.search(r'"X-CSRF-Token": "([^"]+)"', body)
        if found:
            self.token = found.group(1)
        return status, body

    def post(
        self, path: str, form: dict[str, str], *, token: str | None = None, **headers: str
    ) -> tuple[int, str]:
        sent = {"X-CSRF-Token": self.token if token is None else token, "HX-Request": "true"}
        sent.update({k.replace("_", "-"): v for k, v in headers.items()})
        data = urllib.parse.urlencode(form).encode()
        return self._open(urllib.request.Request(self.base + path, data=data, headers=sent))

    def _open(self, request: urllib.request.Request) -> tuple[int, str]:
        try:
            with self.opener.open(request, timeout=60) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConsoleProcess, str]]:
    registry = f"sqlite://{tmp_path_factory.mktemp('console')}/registry.db"
    with ConsoleProcess(registry, "--operator", "carol") as console:
        yield console, registry


@pytest.fixture
def browser(embedded: tuple[ConsoleProcess, str]) -> Browser:
    client = Browser(embedded[0].url)
    client.get("/")
    return client


@pytest.fixture
def registry(embedded: tuple[ConsoleProcess, str]) -> Iterator[tuple[Registry, History]]:
    store = open_admin_store(parse_registry_address(embedded[1]), 20.0)
    yield Registry(store), History(store)
    store.close()


def test_writes_without_the_csrf_token_are_refused(
    browser: Browser, registry: tuple[Registry, History]
) -> None:
    form = {"key": KEY, "text": RULE, "version": "-1"}
    status, body = browser.post("/rule/push", form, token="")
    assert status == 403 and "CSRF" in body
    status, body = browser.post("/rule/push", form, token="forged")
    assert status == 403
    # The right token from another site's page is refused too.
    status, body = browser.post("/rule/push", form, Origin="http://evil.example")
    assert status == 403 and "another origin" in body
    assert registry[0].get_config(KEY) is None


def test_requests_naming_another_host_are_refused(browser: Browser) -> None:
    status, body = browser.get("/", headers={"Host": "evil.example"})
    assert status == 400 and "unknown host" in body


def test_push_records_who_and_a_stale_version_shows_the_conflict(
    browser: Browser, registry: tuple[Registry, History], embedded: tuple[ConsoleProcess, str]
) -> None:
    key = f"svc{uuid.uuid4().hex[:6]}.Greeter:1.0.0:.condition-router"
    rule = RULE.replace("demo.Greeter", key.split(":")[0])
    status, body = browser.post("/rule/push", {"key": key, "text": rule, "version": "-1"})
    assert status == 200 and f"pushed {key} to {embedded[1]} (version 0, history #0)" in body
    [entry] = registry[1].entries(key)
    assert (entry.action, entry.operator, entry.text) == ("push", "carol", rule)
    # A second editor still holding "absent" loses, and sees the text now in the registry.
    other = rule.replace("127.0.0.1", "127.0.0.2")
    status, body = browser.post("/rule/push", {"key": key, "text": other, "version": "-1"})
    assert 'id="conflict"' in body and "now version 0" in body
    doc = registry[0].get_config(key)
    assert doc is not None and doc.text == rule


def test_invalid_rule_is_marked_at_its_line_and_nothing_is_written(
    browser: Browser, registry: tuple[Registry, History]
) -> None:
    bad = RULE.replace("host = 127.0.0.1", "host 127.0.0.1")
    for action in ("validate", "dry-run", "push"):
        status, body = browser.post(f"/rule/{action}", {"key": KEY, "text": bad, "version": "-1"})
        assert status == 200
        assert 'data-line="5"' in body and "line 5, column" in body
        assert '<span class="ln error-line" data-line="5">' in body
    assert registry[0].get_config(KEY) is None


def test_route_test_form_shows_survivors_and_trace(browser: Browser) -> None:
    status, page = browser.get("/route-test")
    scenario = re.search(r'<textarea name="scenario"[^>]*>(.*?)</textarea>', page, re.S)
    assert status == 200 and scenario is not None
    import html

    text = html.unescape(scenario.group(1))
    status, body = browser.post("/route-test", {"scenario": text})
    assert "10.0.0.6" in body and 'id="route-trace"' in body
    assert "10.0.0.5:50051" not in body.split('id="route-trace"')[0].split("Providers reached")[1]
    status, body = browser.post("/route-test", {"scenario": text.replace("consumer:", "consumr:")})
    assert 'id="route-error"' in body


def test_an_open_zookeeper_is_writable_without_an_identity_as_for_the_cli(
    zookeeper: ZooKeeperServer,
) -> None:
    """Issue 35, finding 7: the console was read-only on an open ZooKeeper "until you start it
    with your registry identity", though the CLI had just written rules there with none."""
    registry = f"zookeeper://{zookeeper.address}/console-{uuid.uuid4().hex[:8]}"
    with ConsoleProcess(registry, "--operator", "dana", env={"DUBBO_PY_REGISTRY_AUTH": ""}) as c:
        client = Browser(c.url)
        status, page = client.get("/rules")
        assert status == 200 and 'id="readonly"' not in page
        status, body = client.post("/rule/push", {"key": KEY, "text": RULE, "version": "-1"})
        assert f"pushed {KEY} to {registry} (version 0, history #0)" in body, body
        store = open_admin_store(parse_registry_address(registry), 20.0)
        try:
            doc = Registry(store).get_config(KEY)
            assert doc is not None and doc.text == RULE
            # The same history the CLI writes and reads.
            [entry] = History(store).entries(KEY)
            assert (entry.action, entry.operator) == ("push", "dana")
        finally:
            store.close()


def test_a_secured_zookeeper_is_read_only_without_the_identity_that_owns_it(
    zookeeper: ZooKeeperServer,
) -> None:
    registry = f"zookeeper://{zookeeper.address}/console-{uuid.uuid4().hex[:8]}"
    secured = subprocess.run(
        [sys.executable, "-m", "dubbo_py.admin", "--registry", registry, "acl", "secure"],
        env={**os.environ, "DUBBO_PY_REGISTRY_AUTH": "admin:secret"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert secured.returncode == 0, secured.stderr
    with ConsoleProcess(registry, env={"DUBBO_PY_REGISTRY_AUTH": ""}) as console:
        client = Browser(console.url)
        status, page = client.get("/rules")
        banner = re.search(r'id="readonly">([^<]*)<', page)
        assert status == 200 and banner is not None, page
        assert html.unescape(banner.group(1)).startswith(
            f"read-only: {registry} refuses rule writes without an identity "
            "(/dubbo/config/dubbo (anyone: read; admin: all)); start the console with an "
            "identity that may write them (--auth or $DUBBO_PY_REGISTRY_AUTH)"
        )
        status, body = client.post("/rule/push", {"key": KEY, "text": RULE, "version": "-1"})
        assert "read-only" in body
    with ConsoleProcess(registry, env={"DUBBO_PY_REGISTRY_AUTH": "admin:secret"}) as console:
        client = Browser(console.url)
        status, page = client.get("/rules")
        assert 'id="readonly"' not in page
        status, body = client.post("/rule/push", {"key": KEY, "text": RULE, "version": "-1"})
        assert f"pushed {KEY} to {registry}" in body, body


def test_the_console_binds_loopback_by_default(embedded: tuple[ConsoleProcess, str]) -> None:
    assert embedded[0].url.startswith("http://127.0.0.1:")


def test_static_files_are_shipped_in_the_package() -> None:
    from dubbo_py.admin.console import app

    static = Path(app.__file__).parent / "static"
    assert (static / "htmx.min.js").stat().st_size > 10_000
    assert (static / "console.css").exists()


def test_provider_weight_is_a_versioned_write_in_the_history(
    browser: Browser, registry: tuple[Registry, History]
) -> None:
    service = f"svc{uuid.uuid4().hex[:6]}.Greeter"
    form = {"address": "127.0.0.1:50051", "version": "1.0.0", "group": "", "action": "weight"}
    status, body = browser.post(f"/service/{service}/provider", {**form, "weight": "40"})
    key = f"{service}:1.0.0:.configurators"
    assert status == 200 and f"wrote {key} to " in body and "(version 0, history #0)" in body
    status, body = browser.post(f"/service/{service}/provider", {**form, "weight": "-3"})
    assert "weight must be &gt;= 0" in body
    status, body = browser.post(f"/service/{service}/provider", {**form, "weight": "x"})
    assert "weight must be a whole number" in body
    doc = registry[0].get_config(key)
    assert doc is not None and "weight: 40" in doc.text and doc.version == 0
    [entry] = registry[1].entries(key)
    assert (entry.action, entry.operator) == ("console: weight 127.0.0.1:50051 40", "carol")


def test_the_service_page_shows_a_provider_once_with_its_levels(
    browser: Browser, registry: tuple[Registry, History]
) -> None:
    service = f"svc{uuid.uuid4().hex[:6]}.Greeter"
    both, interface_only = (
        URL.parse(f"tri://{host}:50051/{service}?application=greeter&methods=SayHello")
        for host in ("10.0.0.5", "10.0.0.6")
    )
    # As dubbo-py providers register by default: the provider URL and the instance.
    registry[0].register(both)
    InstancePublisher(registry[0].store, "greeter").add(both)
    registry[0].register(interface_only)
    status, body = browser.get(f"/service/{service}")
    assert status == 200, body
    rows = re.findall(
        r'<tr class="provider-row[^"]*" data-address="([^"]+)">(.*?)</tr>', body, re.S
    )
    levels = [
        # (a line may break after "+": the page fits 1280 px)
        (
            address,
            [c.replace("<wbr>", "") for c in re.findall(r'<td class="levels">(.*?)</td>', row)],
        )
        for address, row in rows
    ]
    assert levels == [
        ("10.0.0.5:50051", ["interface+application"]),
        ("10.0.0.6:50051", ["interface"]),
    ]
    # A service of a provider registered at the application level only has its page too.
    java = f"svc{uuid.uuid4().hex[:6]}.JavaOnly"
    write_java_provider(registry[0].store, "java-only", "10.0.0.8", 50071, java)
    status, body = browser.get(f"/service/{java}")
    assert status == 200 and '<td class="levels">application</td>' in body


def test_affinity_rules_in_the_editor(browser: Browser, registry: tuple[Registry, History]) -> None:
    app = f"app{uuid.uuid4().hex[:6]}"
    key = f"{app}.affinity-router"
    status, page = browser.get(f"/rule?key={key}")
    assert status == 200 and "affinityAware" in page and f"key: {app}" in page
    good = f"configVersion: v3.1\nscope: application\nkey: {app}\naffinityAware:\n  key: region\n"
    bad = good + "  ratio: 150\n"
    status, body = browser.post("/rule/validate", {"key": key, "text": bad, "version": "-1"})
    assert status == 200 and "affinityAware.ratio must be within 0..100" in body
    status, body = browser.post("/rule/push", {"key": key, "text": good, "version": "-1"})
    assert status == 200 and f"pushed {key}" in body
    doc = registry[0].get_config(key)
    assert doc is not None and doc.text == good
