"""Log levels at runtime: what the QoS port's ``/switchLogLevel`` and ``/loggerInfo`` do (Dubbo's
``switchLogLevel`` and ``loggerInfo`` commands).

The levels are those of the ``dubbo_py`` logger hierarchy (and ``dubbo.accesslog``, the access
log's logger): an operator raises ``dubbo_py`` to DEBUG while a problem lasts and lowers it
again, without a restart. Dubbo's names and numbers are accepted (``0`` ALL ... ``6`` OFF);
Python's ``logging`` has no TRACE, so TRACE and ALL mean DEBUG's lowest neighbour (level 1:
everything), and OFF a level above CRITICAL (nothing).
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["LOG_LEVELS", "ROOT_LOGGER", "LogLevelError", "logger_info", "switch_log_level"]

#: The logger hierarchy these commands govern.
ROOT_LOGGER = "dubbo_py"
#: The access log's logger (:mod:`dubbo_py.qos.access_log`), also governed.
_ACCESS_LOGGER = "dubbo.accesslog"
#: Above CRITICAL: nothing is logged.
_OFF = logging.CRITICAL + 10

#: Dubbo's level names and numbers -> Python levels.
LOG_LEVELS: dict[str, int] = {
    "ALL": 1,
    "TRACE": 1,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": _OFF,
}
_NUMBERS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF")


class LogLevelError(ValueError):
    """A level or logger the commands do not accept (the message names it and what is)."""


def _name(level: int) -> str:
    if level >= _OFF:
        return "OFF"
    if level <= 1:
        return "ALL" if level == 1 else "NOTSET"
    return logging.getLevelName(level)


def _governed(name: str) -> bool:
    return name in (ROOT_LOGGER, _ACCESS_LOGGER) or name.startswith(ROOT_LOGGER + ".")


def switch_log_level(level: str, logger: str = ROOT_LOGGER) -> dict[str, str]:
    """Set ``logger`` (``dubbo_py`` or one below it, or ``dubbo.accesslog``) to ``level`` (a
    Dubbo level name or number, case-insensitive); ``{"logger", "level", "previous"}``.
    Raises :class:`LogLevelError` naming a bad level or logger (nothing changes then)."""
    text = level.strip().upper()
    if text.isdigit() and int(text) < len(_NUMBERS):
        text = _NUMBERS[int(text)]
    chosen = LOG_LEVELS.get(text)
    if chosen is None:
        known = ", ".join(_NUMBERS)
        raise LogLevelError(f"level: {level!r} is not a log level; known: {known} (or 0-6)")
    if not _governed(logger):
        raise LogLevelError(
            f"logger: {logger!r} is not dubbo-py's; expected {ROOT_LOGGER}, "
            f"{ROOT_LOGGER}.<module> or {_ACCESS_LOGGER}"
        )
    target = logging.getLogger(logger)
    previous = _name(target.getEffectiveLevel())
    target.setLevel(chosen)
    logging.getLogger(__name__).info("log level of %s: %s -> %s", logger, previous, text)
    return {"logger": logger, "level": _name(chosen), "previous": previous}


def logger_info() -> dict[str, Any]:
    """The adapter (Python's ``logging``), the effective level of ``dubbo_py``, and every logger
    of the hierarchy that has a level of its own."""
    own: dict[str, str] = {}
    for name, entry in sorted(logging.Logger.manager.loggerDict.items()):
        if isinstance(entry, logging.Logger) and _governed(name) and entry.level:
            own[name] = _name(entry.level)
    root = logging.getLogger(ROOT_LOGGER)
    return {
        "available_adapters": ["logging"],
        "current_adapter": "logging",
        "logger": ROOT_LOGGER,
        "level": _name(root.getEffectiveLevel()),
        "levels": own,
    }
