"""Log levels switched at runtime (Dubbo's switchLogLevel / loggerInfo): names and Dubbo's
numbers, the loggers that may be switched, and what loggerInfo reports."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from dubbo_py.qos.log_levels import LogLevelError, logger_info, switch_log_level


@pytest.fixture(autouse=True)
def restore_levels() -> Iterator[None]:
    names = ("dubbo_py", "dubbo_py.router", "dubbo.accesslog")
    before = {n: logging.getLogger(n).level for n in names}
    yield
    for name, level in before.items():
        logging.getLogger(name).setLevel(level)


def test_names_and_dubbos_numbers_set_the_dubbo_py_logger() -> None:
    logging.getLogger("dubbo_py").setLevel(logging.WARNING)
    assert switch_log_level("debug") == {
        "logger": "dubbo_py",
        "level": "DEBUG",
        "previous": "WARNING",
    }
    assert logging.getLogger("dubbo_py").level == logging.DEBUG
    assert switch_log_level("4")["level"] == "WARNING"  # Dubbo's 4 is WARN
    assert switch_log_level("6")["level"] == "OFF"
    assert not logging.getLogger("dubbo_py.router").isEnabledFor(logging.CRITICAL)
    assert switch_log_level("ALL")["level"] == "ALL"
    assert logging.getLogger("dubbo_py.router").isEnabledFor(logging.DEBUG)


def test_one_logger_below_and_the_access_log_may_be_switched_others_not() -> None:
    assert switch_log_level("ERROR", "dubbo_py.router")["logger"] == "dubbo_py.router"
    assert logging.getLogger("dubbo_py.router").level == logging.ERROR
    assert switch_log_level("OFF", "dubbo.accesslog")["level"] == "OFF"
    with pytest.raises(LogLevelError, match="'kazoo' is not dubbo-py's"):
        switch_log_level("DEBUG", "kazoo")
    with pytest.raises(LogLevelError, match="'LOUD' is not a log level"):
        switch_log_level("LOUD")
    with pytest.raises(LogLevelError):
        switch_log_level("7")


def test_logger_info_reports_the_effective_level_and_own_levels() -> None:
    switch_log_level("INFO")
    switch_log_level("ERROR", "dubbo_py.router")
    info = logger_info()
    assert info["current_adapter"] == "logging" and info["level"] == "INFO"
    assert info["levels"]["dubbo_py"] == "INFO"
    assert info["levels"]["dubbo_py.router"] == "ERROR"
