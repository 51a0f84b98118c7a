"""What an application says when it starts and stops, and where it says it.

One INFO line when a provider is listening and registered, one when a consumer has its first
providers and rules, one when a signal stops ``serve()``; a registry that cannot be reached
when a provider registers is one clear error saying what to do.

``serve()`` is how a process runs a provider, so its lines must reach the terminal even when the
application configured no logging: :func:`ensure_logging` then gives the ``dubbo_py`` loggers a
stderr handler at INFO (``$DUBBO_PY_LOG_LEVEL`` chooses another level). That handler stands
aside as soon as the application configures logging itself (a root handler exists), so nothing
is printed twice and the application's configuration wins.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dubbo_py.errors import RegistryUnreachableError
from dubbo_py.registry.store.advice import start_advice

if TYPE_CHECKING:
    from dubbo_py.registry.directory import RegistryDirectory
    from dubbo_py.url import URL

__all__ = [
    "ENV_LOG_LEVEL",
    "RegistryUnreachableError",
    "consumer_ready",
    "ensure_logging",
    "provider_ready",
    "registry_unreachable",
    "stopping",
]

# The name docs/observability.md promises for start-up and shutdown, kept where the module
# moved (it was dubbo_py/rpc/application.py); the application's halves log through it too.
log = logging.getLogger("dubbo_py.rpc.application")

#: The level of dubbo-py's own log lines (DEBUG, INFO, WARNING, ERROR); default INFO under
#: ``serve()`` when the application configured no logging.
ENV_LOG_LEVEL = "DUBBO_PY_LOG_LEVEL"
_PACKAGE = "dubbo_py"
_FORMAT = "dubbo-py %(levelname)s: %(message)s"


class _Fallback(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to stderr only while the application has no logging configuration of its own."""

    def emit(self, record: logging.LogRecord) -> None:
        if not logging.getLogger().handlers:
            super().emit(record)


def _level(text: str) -> int | None:
    value = logging.getLevelName(text.strip().upper())
    return value if isinstance(value, int) else None


def ensure_logging() -> None:
    """Make dubbo-py's start-up and shutdown lines visible (see the module docstring)."""
    package = logging.getLogger(_PACKAGE)
    chosen = os.environ.get(ENV_LOG_LEVEL, "")
    level = _level(chosen) if chosen else None
    if chosen and level is None:
        log.warning("ignoring %s=%r: not a logging level", ENV_LOG_LEVEL, chosen)
    if level is not None:
        package.setLevel(level)
    if logging.getLogger().handlers or any(isinstance(h, _Fallback) for h in package.handlers):
        return
    handler = _Fallback(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT))
    package.addHandler(handler)
    if level is None and package.level == logging.NOTSET:
        package.setLevel(logging.INFO)
    # kazoo logs every failed connection attempt; dubbo-py says "unreachable" once instead.
    kazoo = logging.getLogger("kazoo")
    if kazoo.level == logging.NOTSET:
        kazoo.setLevel(logging.ERROR)


def _service(url: URL) -> str:
    return url.service_key


def provider_ready(
    application: str, address: str, urls: Sequence[URL], registry: str, qos: str | None = None
) -> None:
    """``greeter: serving hello.Greeter:1.0.0 on 127.0.0.1:50051 (registered in ...; QoS on
    127.0.0.1:22222)``."""
    services = ", ".join(_service(u) for u in urls)
    where = f"registered in {registry}" if registry else "no registry"
    if qos:
        where += f"; QoS on {qos}"
    log.info("%s: serving %s on %s (%s)", application, services, address, where)


def _rule_name(stage: str) -> str:
    # Config-center rules are named after their node; the key is what operators know.
    match = re.search(r"/dubbo/config/[^/]+/([^)]+)", stage)
    return match.group(1) if match else stage


def registry_unreachable(directory: RegistryDirectory) -> str | None:
    """The address of the directory's registry when it is not connected, else None."""
    store = directory.registry.store if directory.registry is not None else None
    if store is None or getattr(store, "connected", True) is not False:
        return None
    return str(getattr(store, "address", "the registry"))


def consumer_ready(
    application: str,
    directory: RegistryDirectory,
    waited: float,
    registry: str = "",
    took: float | None = None,
) -> None:
    """``shop: hello.Greeter:1.0.0 has 2 providers (a, b) and rules: key`` once a reference
    has its first provider list (or says it has none yet, where, and why). ``waited`` is the
    longest the reference would wait (its ``check``), ``took`` how long it really did."""
    service = _service(directory.consumer)
    providers = directory.providers
    rules = list(
        dict.fromkeys(
            _rule_name(name) for name, _ in directory.chain.stages if name not in ("mock", "tag")
        )
    )
    rule_text = f"rules: {', '.join(rules)}" if rules else "no routing rules"
    count = f"{len(providers)} provider{'s' if len(providers) != 1 else ''}"
    addresses = ", ".join(p.address for p in providers)
    unreachable = registry_unreachable(directory)
    if unreachable is not None:
        known = f"{count} from its cache ({addresses})" if providers else "no providers"
        log.warning(
            "%s: the registry %s does not answer (waited %gs): %s starts with %s and keeps "
            "trying; %s",
            application,
            unreachable,
            waited,
            service,
            known,
            start_advice(unreachable),
        )
    elif providers:
        log.info("%s: %s has %s (%s) and %s", application, service, count, addresses, rule_text)
    else:
        # Where, and how long it really waited: the registry answered at once with an empty
        # list (a wrong registry, a wrong version) reads differently from one that took `check`.
        where = f" in {registry}" if registry else ""
        spent = waited if took is None else took
        log.info(
            "%s: %s has no providers yet%s (the registry answered in %.2fs; calls fail until one "
            "registers there); %s",
            application,
            service,
            where,
            spent,
            rule_text,
        )


def stopping(application: str, signal_name: str, grace: float) -> None:
    """The line Ctrl-C (or SIGTERM) prints under ``serve()``."""
    log.info(
        "%s: %s received: unregistering, then finishing calls in flight (up to %gs)",
        application,
        signal_name,
        grace,
    )
