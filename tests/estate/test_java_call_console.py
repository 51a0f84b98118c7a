"""The console's "call a method" on a Java-interface service, in Debian's headless Chromium: a
live Apache Dubbo 3.3.6 provider of estate.UserService over ``dubbo://`` found through a real
ZooKeeper, the console a separate process (as ``dubbo-py console`` runs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import chromium
from tests.support.console_process import ConsoleProcess
from tests.support.java_estate import JavaDubboProvider

pytestmark = [pytest.mark.zookeeper, pytest.mark.e2e]

SERVICE = "estate.UserService"


@pytest.fixture(scope="module")
def provider(estate_registry: str, estate_group: str) -> Iterator[JavaDubboProvider]:
    with JavaDubboProvider(
        "--registry",
        estate_registry,
        "--application",
        "java-estate-call-console",
        "--name",
        "c1",
        "--version",
        "1.0.0",
        "--group",
        estate_group,
    ) as started:
        yield started


def wait_css(driver: Any, css: str, timeout: float = 30) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, css))
    )


def call_from_form(driver: Any, method: str, arguments: str, answer: str) -> str:
    """Type the arguments into the method's form, press Call, and return the text of the
    answer's ``answer`` element."""
    form = wait_css(driver, f'form.java-call-form[data-method="{method}"]')
    box = form.find_element("css selector", "textarea.arguments")
    box.clear()
    box.send_keys(arguments)
    form.find_element("css selector", "button.call-button").click()
    return str(wait_css(driver, f"#call-result-{method} {answer}", timeout=60).text)


def test_the_console_lists_the_signatures_and_calls_the_java_service(
    estate_registry: str, estate_group: str, provider: JavaDubboProvider
) -> None:
    with chromium() as driver, ConsoleProcess(estate_registry) as console:
        driver.get(f"{console.url}/call?service={SERVICE}&version=1.0.0&group={estate_group}")
        source = wait_css(driver, "#call-java-source").text
        assert "Signatures from the metadata report" in source
        legends = [
            e.text for e in driver.find_elements("css selector", "form.java-call-form legend")
        ]
        assert "estate.User getUser(java.lang.Long)" in legends
        assert "long sum(int[])" in legends
        types = " ".join(e.text for e in driver.find_elements("css selector", ".java-type"))
        assert "balance: java.math.BigDecimal" in types

        reply = call_from_form(driver, "getUser", "[7]", "pre.reply")
        assert '"name": "user-7@c1"' in reply
        assert '"balance": "12.50"' in reply
        assert '"created": "2023-11-14T22:13:20.123Z"' in reply
        served = wait_css(driver, "#call-result-getUser code.providers").text
        assert served == provider.address

        thrown = call_from_form(driver, "getUser", "[0]", ".call-error")
        assert "threw java.lang.IllegalArgumentException: no user 0 at c1" in thrown
        exception = wait_css(driver, "#call-result-getUser pre.java-exception").text
        assert '"class": "java.lang.IllegalStateException"' in exception  # the cause

        refused = call_from_form(driver, "save", '[{"id": 1,, "name": "x"}]', ".call-error")
        assert "the arguments are not JSON" in refused and "line 1, column 11" in refused

        saved = call_from_form(driver, "save", '[{"id": 4, "name": "zoë"}]', "pre.reply")
        assert '"name": "ZOË"' in saved


def test_the_protocol_picker_calls_a_triple_service_whose_url_does_not_say_no_idl(
    estate_registry: str, estate_group: str
) -> None:
    # A Java interface over Triple with Dubbo's default configuration registers no
    # `serialization`, so its URL looks like an IDL service's: the call page takes it for gRPC
    # (and its reflection finds nothing) until the operator ticks "no IDL", as `--no-idl` does.
    import html

    from tests.admin.test_console_http import Browser

    group = f"{estate_group}-noidl"
    with (
        JavaDubboProvider(
            "--registry", estate_registry, "--application", "java-estate-call-noidl",
            "--name", "n1", "--version", "1.0.0", "--group", group,
            "--protocol", "tri", "--serialization", "default",
        ) as provider,
        ConsoleProcess(estate_registry) as console,
    ):  # fmt: skip
        browser = Browser(console.url)
        where = f"/call?service={SERVICE}&version=1.0.0&group={group}"
        status, page = browser.get(where)
        assert status == 200 and 'id="call-java-source"' not in page, page
        status, page = browser.get(f"{where}&protocol=tri&no_idl=on")
        assert status == 200, page
        source = html.unescape(page[page.index('id="call-java-source"') :][:400])
        assert "Java interface over tri:// (no IDL) (1 provider)" in source, source
        assert "estate.User getUser(java.lang.Long)" in html.unescape(page)
        assert 'name="no_idl" value="on"' in page  # the method forms carry the choice
        status, answer = browser.post(
            "/call",
            {
                "service": SERVICE, "method": "getUser", "version": "1.0.0", "group": group,
                "protocol": "java", "java_protocol": "tri", "no_idl": "on",
                "types": "java.lang.Long", "json": "[7]",
            },
        )  # fmt: skip
        assert status == 200 and "user-7@n1" in answer, answer
        assert provider.address in answer
        status, refused = browser.get(f"{where}&protocol=http")
        assert "expected dubbo or tri" in html.unescape(refused)
