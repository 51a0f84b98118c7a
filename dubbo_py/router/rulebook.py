"""The rule book: compiled routers per rule source, each kept at its last good version.

A consumer watches several rule sources (registry router URLs, config-center documents). Each
change recompiles only that source. A rule that fails to parse is logged once with its source
and reason and the source's previous routers stay in force; deleting a source removes its
routers. The router chain is then the union of every source's routers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from dubbo_py.router.base import Router, RuleError
from dubbo_py.url import URL

__all__ = ["DocumentCompiler", "RuleBook", "UrlCompiler"]

log = logging.getLogger(__name__)

#: Compiles a config-center document (text, source) into routers; raises RuleError.
DocumentCompiler = Callable[[str, str], list[Router]]
#: Compiles a ``routers``-category URL (url, source) into a router; raises RuleError.
UrlCompiler = Callable[[URL, str], Router]


class RuleBook:
    """Routers by source, with last-good semantics and an error list for operators."""

    def __init__(
        self, documents: Mapping[str, DocumentCompiler], url_compiler: UrlCompiler | None
    ) -> None:
        self._documents = dict(documents)
        self._url_compiler = url_compiler
        self._lock = threading.Lock()
        self._by_source: dict[str, tuple[object, list[Router]]] = {}
        self.errors: dict[str, str] = {}

    def set_document(self, kind: str, source: str, text: str | None) -> bool:
        """Apply a config-center document of ``kind`` (None: deleted); True if routers changed."""
        if text is None or not text.strip():
            return self._drop(source)
        compiler = self._documents.get(kind)
        if compiler is None:
            return False
        return self._compile(source, text, lambda: compiler(text, source))

    def set_urls(self, source_prefix: str, urls: list[URL]) -> bool:
        """Apply the whole ``routers`` category (one source per URL); True if routers changed."""
        changed = False
        wanted = {f"{source_prefix}/{u.encode()}": u for u in urls if u.protocol != "empty"}
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

            changed |= self._compile(source, url, build)
        return changed

    def _compile(self, source: str, payload: object, build: Callable[[], list[Router]]) -> bool:
        with self._lock:
            current = self._by_source.get(source)
            if current is not None and current[0] == payload:
                return False
        try:
            routers = build()
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
            self._by_source[source] = (payload, routers)
            self.errors.pop(source, None)
        log.info("routing rule applied from %s: %s", source, [r.name for r in routers])
        return True

    def _drop(self, source: str) -> bool:
        with self._lock:
            self.errors.pop(source, None)
            return self._by_source.pop(source, None) is not None

    def routers(self) -> list[Router]:
        """Every compiled router, in source order (the chain sorts by priority)."""
        with self._lock:
            return [r for _, (_, routers) in sorted(self._by_source.items()) for r in routers]
