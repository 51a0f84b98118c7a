"""The rule book: compiled routers per rule source, each kept at its last good version.

A consumer watches several rule sources (registry router URLs, config-center documents). Each
change recompiles only that source. A rule that fails to parse is logged once with its source
and reason and the source's previous routers stay in force; deleting a source removes its
routers. The router chain is then the union of every source's routers.

A rule is also refused when it is too costly to use: compiling it takes longer than the rule
budget (:mod:`~dubbo_py.router.rule_budget`), or, once in force, it is *revoked* -- binding it to
the providers ran over budget, or a script rule kept exhausting its time budget at call time.
A revoked rule is treated exactly like an invalid one (one error log, ``errors`` names it, the
source's previous rules come back) and stays refused until its text changes; ``revocations``
counts such switch-offs per source for metrics.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from dubbo_py.errors import RuleError
from dubbo_py.router.base import Router
from dubbo_py.router.rule_budget import DEFAULT_RULE_BUDGET, budget_clock, elapsed_check
from dubbo_py.url import URL

__all__ = ["DocumentCompiler", "RuleBook", "SwitchingOffRouter", "UrlCompiler", "rule_version"]

log = logging.getLogger(__name__)

#: Compiles a config-center document (text, source) into routers; raises RuleError.
DocumentCompiler = Callable[[str, str], list[Router]]
#: Compiles a ``routers``-category URL (url, source) into a router; raises RuleError.
UrlCompiler = Callable[[URL, str], Router]


@runtime_checkable
class SwitchingOffRouter(Protocol):
    """Optional: a router that can find out, while in force, that it keeps failing (a script
    rule over its time budget call after call) and ask to be switched off."""

    def on_switch_off(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` (at most once) when this router should be switched off."""
        ...


def rule_version(payload: object) -> str:
    """A rule's version as every process that reads it sees it: the first 12 hex digits of the
    SHA-256 of its text (a router URL's encoded form)."""
    text = payload.encode() if isinstance(payload, URL) else str(payload)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


class _RouterUrl:
    """What a rule book keeps as the payload of a router URL's source: the source's last
    segment is the URL's encoded form (see :meth:`RuleBook.set_urls`)."""

    def __repr__(self) -> str:
        return "<router URL named by its source>"


_ROUTER_URL = _RouterUrl()


def _version(source: str, payload: object) -> str:
    """:func:`rule_version` of what ``source`` holds."""
    if payload is _ROUTER_URL:
        return rule_version(source.rpartition("/")[2])
    return rule_version(payload)


class RuleBook:
    """Routers by source, with last-good semantics and an error list for operators.

    ``budget`` (seconds) bounds compiling one rule; ``None`` disables the check."""

    def __init__(
        self,
        url_compiler: UrlCompiler | None = None,
        *,
        budget: float | None = DEFAULT_RULE_BUDGET,
    ) -> None:
        self._url_compiler = url_compiler
        self.budget = budget
        self._lock = threading.Lock()
        #: Source -> (payload, its routers, when this process applied them, epoch s): one
        #: tuple per source (a consumer of 1 000 services with 20 rules each has 20 000).
        self._by_source: dict[str, tuple[object, tuple[Router, ...], float]] = {}
        #: The entry each source had before its current one (what a revocation restores).
        self._previous: dict[str, tuple[object, tuple[Router, ...], float]] = {}
        #: Payloads revoked while in force: refused again until the source's text changes.
        self._refused: dict[str, object] = {}
        self._listeners: list[Callable[[], None]] = []
        self.errors: dict[str, str] = {}
        #: Rules switched off while in force (over budget when bound, a script over its time
        #: budget call after call), per source, since this rule book was made.
        self.revocations: dict[str, int] = {}

    def in_force(self) -> dict[str, tuple[str, float]]:
        """Each rule source in force: the version of its text (a short digest, the same on
        every process that reads the same rule) and when this process applied it (epoch s)."""
        with self._lock:
            return {
                source: (_version(source, payload), applied_at)
                for source, (payload, _, applied_at) in self._by_source.items()
            }

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Be called (from any thread) after a revocation changed the routers."""
        self._listeners.append(listener)

    def set_document(self, source: str, text: str | None, compiler: DocumentCompiler) -> bool:
        """Apply a config-center document (None: deleted), compiled by ``compiler``; True if
        routers changed."""
        if text is None or not text.strip():
            return self._drop(source)
        return self._compile(source, text, lambda: compiler(text, source))

    def set_urls(self, source_prefix: str, urls: list[URL]) -> bool:
        """Apply the whole ``routers`` category (one source per URL); True if routers changed."""
        changed = False
        wanted = {
            f"{source_prefix}/{u.encode(keep=False)}": u for u in urls if u.protocol != "empty"
        }
        with self._lock:
            stale = [s for s in self._by_source if s.startswith(source_prefix + "/")]
        for source in stale:
            if source not in wanted:
                changed |= self._drop(source)
        compiler = self._url_compiler
        if compiler is None:
            return changed
        for source, url in wanted.items():

            def build(url: URL = url, source: str = source) -> list[Router]:
                return [compiler(url, source)]

            # The source names the URL whole (its encoded full string), so the same source is
            # the same rule: the URL itself is not kept to compare the next one with (~350 B
            # per rule and service, issue 42).
            changed |= self._compile(source, _ROUTER_URL, build)
        return changed

    def _compile(self, source: str, payload: object, build: Callable[[], list[Router]]) -> bool:
        with self._lock:
            current = self._by_source.get(source)
            if current is not None and current[0] == payload:
                return False
            if source in self._refused:
                if self._refused[source] == payload:
                    return False  # revoked, and unchanged since: still refused
                del self._refused[source]
        started = budget_clock()
        try:
            routers = build()
            elapsed_check(f"compiling the rule from {source}", started, self.budget)
        except RuleError as exc:
            with self._lock:
                first = self.errors.get(source) != str(exc)
                self.errors[source] = str(exc)
            if first:
                kept = "previous rules stay in force" if current else "rule ignored"
                # RuleError's text starts with its source (path:line:column).
                log.error("invalid routing rule %s (%s)", exc, kept)
            return False
        with self._lock:
            if current is not None:
                self._previous[source] = current
            self._by_source[source] = (payload, tuple(routers), time.time())
            self.errors.pop(source, None)
        for router in routers:
            if isinstance(router, SwitchingOffRouter):
                router.on_switch_off(self._switch_off_callback(router))
        log.info("routing rule applied from %s: %s", source, [r.name for r in routers])
        return True

    def source_of(self, router: Router) -> tuple[str, str] | None:
        """The source that produced ``router`` and its version (None: not from this book,
        as the built-in routers)."""
        with self._lock:
            for source, (payload, routers, _) in self._by_source.items():
                if any(r is router for r in routers):
                    return source, _version(source, payload)
        return None

    def revoke(self, router: Router, reason: str) -> bool:
        """Refuse the rule that produced ``router`` as if it were invalid: log once, record
        ``reason`` in ``errors``, put the source's previous rules back (or none) and keep
        refusing that rule until its text changes. False if ``router`` is no longer in force
        (already revoked, replaced, or not from this book)."""
        with self._lock:
            found = next(
                (s for s, (_, rs, _) in self._by_source.items() if any(r is router for r in rs)),
                None,
            )
            if found is None:
                return False
            payload = self._by_source[found][0]
            self._refused[found] = payload
            previous = self._previous.pop(found, None)
            if previous is not None and previous[0] != payload:
                self._by_source[found] = (previous[0], previous[1], time.time())
                kept = "previous rules stay in force"
            else:
                del self._by_source[found]
                kept = "rule ignored"
            message = f"{found}: {reason}"
            self.errors[found] = message
            self.revocations[found] = self.revocations.get(found, 0) + 1
        log.error("routing rule switched off: %s (%s)", message, kept)
        return True

    def _switch_off_callback(self, router: Router) -> Callable[[str], None]:
        def switched_off(reason: str) -> None:
            if self.revoke(router, reason):
                for listener in self._listeners:
                    listener()

        return switched_off

    def _drop(self, source: str) -> bool:
        with self._lock:
            self.errors.pop(source, None)
            self._refused.pop(source, None)
            self._previous.pop(source, None)
            return self._by_source.pop(source, None) is not None

    def routers(self) -> list[Router]:
        """Every compiled router, in source order (the chain sorts by priority)."""
        with self._lock:
            return [r for _, (_, routers, _) in sorted(self._by_source.items()) for r in routers]
