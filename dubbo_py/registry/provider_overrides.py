"""Providers registered with their override rules applied, as Apache Dubbo's provider does.

Dubbo's ``RegistryProtocol`` reads a provider's override rules (configurators) before it
registers, registers its URL with the matching provider-side overrides applied, and registers it
again whenever they change (``OverrideListener``, ``reExport``). :class:`ProviderRegistry` does
the same for dubbo-py providers: ``register(url)`` of a provider URL watches the service's
``configurators`` category and its ``<service>:<version>:<group>.configurators`` and
``<application>.configurators`` documents, waits (bounded) until each has been read once, and
writes the URL with what they set (``weight``, ``disabled``, ``timeout``, ...); later changes
re-register it (the new URL first, then the old one removed, so consumers never see the provider
missing). ``unregister(url)`` with the URL as first given stops all that and removes whatever is
registered for it.

The overridden URL is what every level of registration carries: given ``through`` (the
application's register-mode registry, interface level and instance level), the instance's
metadata names the overridden service parameters too and its revision changes with them, as
Dubbo's re-export does (``ServiceDiscoveryRegistry`` removes the old URL from the application's
``MetadataInfo`` and adds the new one, and the instance is published with the new revision).
Consumers on the application level then see ``disabled``, ``weight`` or ``timeout`` exactly as
those on the interface level do; deleting the rule brings the original URL, and so the original
revision, back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from dubbo_py.errors import StoreError
from dubbo_py.registry import layout
from dubbo_py.registry.first_reads import FirstReads
from dubbo_py.registry.overrides import Configure, Validate, document_valid
from dubbo_py.registry.registry import Registry, is_empty
from dubbo_py.registry.store.base import Cancel
from dubbo_py.url import URL

__all__ = ["RULES_WAIT", "ProviderRegistry"]

log = logging.getLogger(__name__)

#: Seconds a provider waits for its override rules before registering without the unread ones.
RULES_WAIT = 3.0

_CATEGORY = "/" + layout.CONFIGURATORS


class _Export:
    """One provider URL kept in step with its override rules."""

    def __init__(self, owner: ProviderRegistry, url: URL) -> None:
        self.owner = owner
        self.original = url
        self.current: URL | None = None
        self._lock = threading.RLock()
        self._urls: list[URL] = []
        self._documents: dict[str, str] = {}
        self._cancels: list[Cancel] = []
        self._reads = FirstReads()
        self._closed = False

    def start(self, wait: float) -> None:
        interface = self.original.service_interface
        self._reads.expect(_CATEGORY, layout.category_path(interface, layout.CONFIGURATORS))
        keys = [
            layout.rule_key(
                interface, self.original.get_str("version"), self.original.get_str("group")
            )
            + ".configurators"
        ]
        application = self.original.get_str("application")
        if application:
            keys.append(f"{application}.configurators")
        for key in keys:
            self._reads.expect(key, layout.config_path(key))
        self._cancels.append(
            self.owner.subscribe(interface, self._on_category, (layout.CONFIGURATORS,))
        )
        for key in keys:
            self._cancels.append(self.owner.watch_config(key, self._document_listener(key)))
        try:
            self.owner.store.exists(layout.ROOT)
        except StoreError:
            # Unreachable: registering fails at once below, as it would without rules to read;
            # waiting for them first would only delay that error.
            wait = 0.0
            reachable = False
        else:
            reachable = True
        missing = self._reads.wait(wait)
        if missing and reachable:
            log.warning(
                "%s: registering before these override rules were read (the registry did not "
                "answer within %.1fs): %s; they apply as soon as they are read",
                interface,
                wait,
                ", ".join(missing),
            )
        with self._lock:
            target = self._configured()
            self.owner.base_register(target)
            self.current = target
        self.owner.registered_as(self.original, target)

    def _document_listener(self, key: str) -> Callable[[str | None], None]:
        def on_document(text: str | None) -> None:
            with self._lock:
                if text is None:
                    self._documents.pop(key, None)
                elif document_valid(self.owner.validate, key, text, log):
                    self._documents[key] = text
                self._refresh()
            self._reads.read(key)

        return on_document

    def _on_category(self, _category: str, urls: list[URL]) -> None:
        with self._lock:
            self._urls = [] if is_empty(urls) else list(urls)
            self._refresh()
        self._reads.read(_CATEGORY)

    def _configured(self) -> URL:
        return self.owner.configure([self.original], self._urls, self._documents)[0]

    def _refresh(self) -> None:
        # Before start() registers, only the rules are collected.
        if self._closed or self.current is None:
            return
        target = self._configured()
        if target == self.current:
            return
        old = self.current
        try:
            self.owner.base_register(target)
        except StoreError as exc:
            log.warning("could not register %s with its new overrides: %s", target, exc)
            return
        self.current = target
        self.owner.registered_as(self.original, target)
        try:
            self.owner.base_unregister(old)
        except StoreError as exc:
            log.warning("could not remove %s after its overrides changed: %s", old, exc)
        log.info(
            "override rules changed %s: registered %s", self.original.service_interface, target
        )

    def close(self) -> URL | None:
        with self._lock:
            self._closed = True
            cancels, self._cancels = self._cancels, []
            current = self.current
        for cancel in cancels:
            cancel()
        return current


class ProviderRegistry(Registry):
    """A :class:`Registry` on the same store whose provider registrations carry their override
    rules (see the module doc). Other URLs (consumers, rules) register as usual."""

    def __init__(
        self,
        base: Registry,
        configure: Configure,
        *,
        validate: Validate | None = None,
        wait: float = RULES_WAIT,
        on_registered: Callable[[URL, URL], None] | None = None,
        through: Registry | None = None,
    ) -> None:
        super().__init__(base.store, protect=base.protect)
        #: Where provider URLs (as overridden) are registered: ``through`` (every level the
        #: register mode names), else the interface level of ``base``'s store.
        self._through = through
        self.configure = configure
        #: Told (URL as given, URL as registered with its overrides) at each registration
        #: of a provider URL, the first and each after an override changed it.
        self.on_registered = on_registered
        self.validate = validate
        self.wait = wait
        self._exports: dict[URL, _Export] = {}
        self._exports_lock = threading.Lock()

    def register(self, url: URL) -> None:
        """Register; a provider URL with its override rules applied, kept in step with them."""
        if url.category != layout.PROVIDERS:
            super().register(url)
            return
        export = _Export(self, url)
        with self._exports_lock:
            previous = self._exports.pop(url, None)
            self._exports[url] = export
        if previous is not None:
            self._remove(previous)
        try:
            export.start(self.wait)
        except BaseException:
            with self._exports_lock:
                self._exports.pop(url, None)
            export.close()
            raise

    def unregister(self, url: URL) -> None:
        """Unregister ``url`` (as first given to :meth:`register`) and what stands for it."""
        with self._exports_lock:
            export = self._exports.pop(url, None)
        if export is None:
            if url.category == layout.PROVIDERS:
                self.base_unregister(url)
            else:
                super().unregister(url)
            return
        self._remove(export)

    def _remove(self, export: _Export) -> None:
        current = export.close()
        if current is not None:
            self.base_unregister(current)

    def registered(self, url: URL) -> URL | None:
        """What is registered for the provider URL ``url`` now (None when it is not)."""
        with self._exports_lock:
            export = self._exports.get(url)
        return None if export is None else export.current

    def registered_as(self, original: URL, current: URL) -> None:
        """Tell :attr:`on_registered` that ``original`` is registered as ``current`` (a
        listener that raises is logged: the registration stands)."""
        if self.on_registered is None:
            return
        try:
            self.on_registered(original, current)
        except Exception:
            log.exception("a provider registration listener failed for %s", current)

    def base_register(self, url: URL) -> None:
        """Register exactly ``url`` (no overrides applied), at every level."""
        if self._through is not None:
            self._through.register(url)
        else:
            super().register(url)

    def base_unregister(self, url: URL) -> None:
        """Unregister exactly ``url``, from every level."""
        if self._through is not None:
            self._through.unregister(url)
        else:
            super().unregister(url)
