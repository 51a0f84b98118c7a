"""The registry directory: one service's providers and rules, kept fresh by watches.

Every notification (providers, router URLs, configurators, config-center documents) rebuilds an
immutable :class:`~dubbo_py.router.chain.BoundChain` — the provider snapshot with every router
precomputed against it — and swaps it in with one assignment. A call reads ``directory.chain``
once and routes on that, so calls in flight finish on the snapshot they started with.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from dubbo_py.registry import layout, rule_kinds
from dubbo_py.registry.cache import NotifyCache
from dubbo_py.registry.empty_protection import EmptyProtection, SwitchedProviders
from dubbo_py.registry.first_reads import FirstReads
from dubbo_py.registry.matching import ProviderFilter
from dubbo_py.registry.overrides import Configure, Validate, document_valid
from dubbo_py.registry.provider_list import ProviderList
from dubbo_py.registry.registry import Registry, is_empty
from dubbo_py.registry.rule_kinds import WatchedKey
from dubbo_py.registry.store.base import Cancel
from dubbo_py.router.base import Router
from dubbo_py.router.chain import BoundChain, RouterChain
from dubbo_py.router.rule_budget import RuleBudgetError
from dubbo_py.router.rulebook import RuleBook
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

__all__ = [
    "Configure",
    "ConfigureConsumer",
    "RegistryDirectory",
    "RouterInForce",
    "ServiceRules",
]

log = logging.getLogger(__name__)

#: Consumer-side overrides: (consumer, configurator URLs, documents) -> parameters they set.
ConfigureConsumer = Callable[[URL, list[URL], Mapping[str, str]], Mapping[str, str]]
#: ``Registry.subscribe``'s signature: (interface, listener, categories) -> cancel.
Subscribe = Callable[[str, Callable[[str, list[URL]], None], Iterable[str]], Cancel]


def _no_overrides(
    providers: list[URL], _urls: list[URL], _documents: Mapping[str, str]
) -> list[URL]:
    return providers


def _version_group(version: str, group: str) -> str:
    return f"version={version or '(none)'} group={group or '(none)'}"


#: The categories a consumer subscribes to (the registry's default set).
_SUBSCRIBED = (layout.PROVIDERS, layout.ROUTERS, layout.CONFIGURATORS)


def _provider_application(provider: URL) -> str | None:
    """The provider's application: ``remote.application`` on a URL merged the Dubbo 2.7 way
    (Dubbo's ``getRemoteApplication``), else its ``application``."""
    params = provider.parameters
    return params.get("remote.application") or params.get("application")


def _category_source(category: str) -> str:
    # Config-center keys never start with "/", so the two kinds of source never collide.
    return f"/{category}"


@dataclass(frozen=True, slots=True)
class ServiceRules:
    """The config-center keys a consumer of one service watches (which keys: the rule-kind
    table, :mod:`dubbo_py.registry.rule_kinds`)."""

    service: str
    application: str
    rule_prefix: str

    @classmethod
    def for_consumer(cls, consumer: URL) -> ServiceRules:
        """Keys for this consumer URL."""
        return cls(
            consumer.service_interface,
            consumer.get_str("application"),
            layout.rule_key(
                consumer.service_interface, consumer.get_str("version"), consumer.get_str("group")
            ),
        )

    def static_keys(self) -> list[WatchedKey]:
        """Keys known before any provider is seen (the service's and the application's)."""
        return rule_kinds.service_keys(self.rule_prefix, self.application)

    def provider_app_keys(self, application: str) -> list[WatchedKey]:
        """Keys watched for each provider application seen (those Dubbo skips for the
        consumer's own application left out)."""
        return rule_kinds.provider_application_keys(application, self.application)


@dataclass(frozen=True, slots=True)
class RouterInForce:
    """One router of a directory's chain: its name and priority, and the rule source and
    version it was compiled from (None for the built-in routers)."""

    name: str
    priority: int
    source: str | None
    version: str | None


class RegistryDirectory:
    """Providers and routing of one service for one consumer.

    ``registry=None`` with ``static_providers`` gives a registry-less directory (direct
    ``tri://`` addresses). ``assemble`` turns the rule book's routers into the chain's (adding
    the built-in mock and tag routers: :func:`dubbo_py.router.factory.chain_routers`).
    """

    def __init__(
        self,
        consumer: URL,
        registry: Registry | None,
        rulebook: RuleBook,
        *,
        assemble: Callable[[list[Router]], list[Router]] = list,
        configure: Configure = _no_overrides,
        configure_consumer: ConfigureConsumer | None = None,
        validate_configurators: Validate | None = None,
        cache: NotifyCache | None = None,
        static_providers: Iterable[URL] = (),
        subscribe: Subscribe | None = None,
        empty_protection: Callable[[URL], bool | None] | None = None,
    ) -> None:
        self.consumer = consumer
        #: How categories are subscribed: the registry's, or one that reads providers at the
        #: application level too (:mod:`dubbo_py.registry.application.migration`).
        self._subscribe = subscribe
        self.registry = registry
        self.rules = ServiceRules.for_consumer(consumer)
        self._rulebook = rulebook
        self._assemble = assemble
        self._configure = configure
        self._configure_consumer = configure_consumer
        #: Parameters set by consumer-side overrides matching this consumer (``timeout`` in ms,
        #: ``retries``, ``loadbalance``, ...); read it from a listener.
        self.consumer_overrides: Mapping[str, str] = {}
        self._validate_configurators = validate_configurators
        self._cache = cache
        self._lock = threading.RLock()
        #: Orders listener calls (see :meth:`_notify`); re-entrant for a listener that rebuilds.
        self._notify_lock = threading.RLock()
        self._raw_providers: list[URL] = list(static_providers)
        #: Empty protection (``empty_protection``: its probe, whether a provider still serves
        #: the service): providers the registry lost at once are kept while they answer.
        self.empty_protection: EmptyProtection | None = (
            EmptyProtection(self.rules.service, empty_protection, self._rebuild_providers_soon)
            if empty_protection is not None and registry is not None
            else None
        )
        self._provider_list = ProviderList(ProviderFilter(consumer, self.rules.service), configure)
        self._configurator_urls: list[URL] = []
        self._configurator_docs: dict[str, str] = {}
        #: Provider applications whose keys are watched, with the cancels of those watches.
        self._provider_apps: dict[str, list[Cancel]] = {}
        self._cancels: list[Cancel] = []
        self._listeners: list[Callable[[BoundChain], None]] = []
        self._providers_seen = threading.Event()
        #: Sources (categories and config-center keys) watched but not yet read once; the
        #: reference waits for them before its first call.
        self._first_reads = FirstReads()
        self._version = 0
        self.providers: tuple[URL, ...] = ()
        self.chain: BoundChain = RouterChain().bind(Snapshot(()), consumer)
        #: The routers :attr:`chain` was bound from, in its order.
        self._routers: RouterChain = RouterChain()
        # A rule switched off while in force (a script over its budget call after call) is
        # reported from a call's thread: rebuild off that thread, the call goes on.
        rulebook.add_listener(self._rebuild_soon)
        if registry is None:
            self._providers_seen.set()
        self._rebuild(providers_changed=True)

    # ----------------------------------------------------------------- lifecycle

    def start(self, wait: float = 3.0) -> None:
        """Subscribe and watch, and return once the provider list *and* every rule source this
        consumer watches (routers, configurators, condition/tag/script/shard documents) have
        been read and applied -- or after ``wait`` s, with a warning naming what is missing.
        When the providers themselves have not been read by then, start from the local cache.
        Blocking: from an event loop, run it in a worker thread."""
        if self.registry is None:
            return
        registry = self.registry
        for category in _SUBSCRIBED:
            self._first_reads.expect(
                _category_source(category), layout.category_path(self.rules.service, category)
            )
        subscribe = self._subscribe or registry.subscribe
        self._cancels.append(subscribe(self.rules.service, self._on_category, _SUBSCRIBED))
        for watched in self.rules.static_keys():
            self._watch(watched)
        missing = self.wait_until_read(wait)
        if not self._providers_seen.is_set():
            self._load_cache()
            if not self.providers:
                self._rebuild()  # the reason calls fail says whether the registry is down
        if missing:
            log.warning(
                "%s: the registry did not answer within %.1fs for %s; calls start without them "
                "and they apply as soon as they are read",
                self.rules.service,
                wait,
                ", ".join(missing),
            )

    def wait_until_read(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` s until every watched source has been read once; returns the
        paths still unread (empty when all were)."""
        return self._first_reads.wait(timeout)

    def close(self) -> None:
        """Stop watching."""
        with self._lock:
            cancels, self._cancels = self._cancels, []
            for app_cancels in self._provider_apps.values():
                cancels += app_cancels
            self._provider_apps = {}
        if self.empty_protection is not None:
            self.empty_protection.stop()
        for cancel in cancels:
            cancel()

    def add_listener(self, listener: Callable[[BoundChain], None]) -> None:
        """Be called with each new bound chain (after every rebuild)."""
        self._listeners.append(listener)

    def wait_for_providers(self, timeout: float) -> bool:
        """Wait until a provider notification (or the cache) has been applied."""
        return self._providers_seen.wait(timeout)

    # ----------------------------------------------------------------- notifications

    def _watch(self, watched: WatchedKey, cancels: list[Cancel] | None = None) -> None:
        assert self.registry is not None
        self._first_reads.expect(watched.key, layout.config_path(watched.key))
        cancel = self.registry.watch_config_data(watched.key, _DocumentWatch(self, watched))
        (self._cancels if cancels is None else cancels).append(cancel)

    def _on_category(self, category: str, urls: list[URL]) -> None:
        real = [] if is_empty(urls) else urls
        self._apply_category(category, real, switched=isinstance(urls, SwitchedProviders))
        self._first_reads.read(_category_source(category))
        # Saved after the change is in force, as Dubbo's AbstractRegistry.notify does: the
        # disk write stays off the push -> applied path.
        if self._cache is not None:
            self._cache.save_urls(self.rules.service, category, real)

    def _apply_category(self, category: str, real: list[URL], *, switched: bool = False) -> None:
        with self._lock:
            if category == layout.PROVIDERS:
                self._raw_providers = real
                self._providers_seen.set()
                # Only the providers that arrived can bring an application not seen yet.
                self._watch_provider_apps(self._provider_list.arrivals(real))
                self._unwatch_gone_apps(real)
                self._rebuild(providers_changed=True, overrides_changed=False, switched=switched)
            elif category == layout.ROUTERS:
                if self._rulebook.set_urls(
                    layout.category_path(self.rules.service, category), real
                ):
                    self._rebuild()
            elif category == layout.CONFIGURATORS:
                self._configurator_urls = real
                self._rebuild(providers_changed=True)

    def _on_document(self, watched: WatchedKey, text: str | None) -> None:
        self._apply_document(watched, text)
        self._first_reads.read(watched.key)
        if self._cache is not None:  # after applying, as for categories
            self._cache.save_config(self.rules.service, watched.key, text)

    def _apply_document(self, watched: WatchedKey, text: str | None) -> None:
        key = watched.key
        if text is not None:
            # Fields the document holds that dubbo-py does not act on: logged once per
            # document version and counted (dubbo_py/rule_fields.py), never refused.
            watched.kind.note_unread(layout.config_path(key), text)
        with self._lock:
            if watched.kind.overrides:
                if text is None:
                    self._configurator_docs.pop(key, None)
                elif document_valid(self._validate_configurators, key, text, log):
                    self._configurator_docs[key] = text
                else:
                    return
                self._rebuild(providers_changed=True)
            elif self._rulebook.set_document(layout.config_path(key), text, watched.compile):
                self._rebuild()

    def _watch_provider_apps(self, providers: list[URL]) -> None:
        # Distinct applications first: a fleet has thousands of providers and a few apps.
        apps = {app for p in providers if (app := _provider_application(p))}
        for app in apps:
            if app and app not in self._provider_apps and self.registry is not None:
                cancels: list[Cancel] = []
                self._provider_apps[app] = cancels
                for watched in self.rules.provider_app_keys(app):
                    self._watch(watched, cancels)

    def _unwatch_gone_apps(self, providers: list[URL]) -> None:
        """Stop reading the rules of provider applications no provider belongs to any more
        (Dubbo's provider-application routers switch to the new providers' application). An
        empty provider list changes nothing, as in Dubbo, which keeps its subscription then.
        Called before the providers' rebuild, which applies the dropped rules."""
        if not providers or not self._provider_apps:
            return
        # Most notifications keep every application: stop at the first provider of each one
        # (one provider read when the service has one application) instead of reading all.
        gone = set(self._provider_apps)
        for provider in providers:
            gone.discard(_provider_application(provider))
            if not gone:
                return
        for app in gone:
            for cancel in self._provider_apps.pop(app):
                cancel()
            for watched in self.rules.provider_app_keys(app):
                self._first_reads.read(watched.key)  # no longer awaited
                if not watched.kind.overrides:
                    path = layout.config_path(watched.key)
                    if self._rulebook.set_document(path, None, watched.compile):
                        log.info(
                            "%s: no provider of %s left: %s no longer applies (the caller "
                            "rebuilds the chain)",
                            self.rules.service,
                            app,
                            path,
                        )

    def _load_cache(self) -> None:
        if self._cache is None:
            return
        urls = self._cache.urls(self.rules.service)
        configs = self._cache.configs(self.rules.service)
        if not urls.get(layout.PROVIDERS):
            return
        log.warning(
            "registry did not answer for %s; starting from the local cache %s",
            self.rules.service,
            self._cache.path,
        )
        with self._lock:
            if self._providers_seen.is_set():
                return  # the registry answered meanwhile: it wins
            watched = self.rules.static_keys()
            for provider in urls[layout.PROVIDERS]:
                app = _provider_application(provider)
                if app:
                    watched += self.rules.provider_app_keys(app)
            by_key = {w.key: w for w in watched}
            for key, text in configs.items():
                found = by_key.get(key)
                if found is None:
                    continue
                if found.kind.overrides:
                    self._configurator_docs[key] = text
                else:
                    self._rulebook.set_document(layout.config_path(key), text, found.compile)
            self._rulebook.set_urls(
                layout.category_path(self.rules.service, layout.ROUTERS),
                urls.get(layout.ROUTERS, []),
            )
            self._configurator_urls = urls.get(layout.CONFIGURATORS, [])
            self._raw_providers = urls[layout.PROVIDERS]
            self._providers_seen.set()
            self._rebuild(providers_changed=True)

    # ----------------------------------------------------------------- rebuilding

    def _rebuild(
        self,
        providers_changed: bool = False,
        overrides_changed: bool = True,
        switched: bool = False,
    ) -> None:
        """Rebuild the chain: with ``providers_changed``, the provider list first (with
        ``overrides_changed`` False, only the registered providers changed since the last
        time, so only those are judged and placed; with ``switched``, the list comes from
        another source now, :class:`~dubbo_py.registry.empty_protection.SwitchedProviders`)."""
        with self._lock:
            delta = None
            if providers_changed:
                providers = self._provider_list
                update = providers.update(
                    self._raw_providers,
                    self._configurator_urls,
                    self._configurator_docs,
                    overrides_changed,
                )
                if self.empty_protection is not None and switched:
                    self.empty_protection.reset()
                elif self.empty_protection is not None:
                    kept = self.empty_protection.apply(
                        providers.departed, providers.arrived, update.providers
                    )
                    if kept:  # rare: the registry lost most providers at once
                        update = providers.update(
                            [*self._raw_providers, *kept],
                            self._configurator_urls,
                            self._configurator_docs,
                            False,
                        )
                        # Its delta follows the list without the kept ones, not the chain's
                        # snapshot: the routers' masks are rebuilt.
                        update = replace(update, delta=None)
                if overrides_changed and self._configure_consumer is not None:
                    self.consumer_overrides = dict(
                        self._configure_consumer(
                            self.consumer, self._configurator_urls, self._configurator_docs
                        )
                    )
                self.providers, delta = update.providers, update.delta
                self._version += 1
            # A snapshot that follows the current one: the routers' masks are patched for the
            # providers that changed instead of rebuilt over the fleet (Snapshot.following).
            snapshot = (
                Snapshot.following(self.chain.snapshot, self.providers, self._version, delta=delta)
                if providers_changed
                else self.chain.snapshot
            )
            chain = self._bind_rules(snapshot)
            snapshot.settle()
            if not snapshot.providers:
                chain = replace(chain, empty_reason=self._why_no_provider())
            self.chain = chain
        self._notify(chain)

    def _notify(self, bound: BoundChain) -> None:
        """Tell the listeners about ``bound`` unless a newer chain was swapped in meanwhile.

        Rebuilds run on whichever thread brought the change (the store's, a revocation's, the
        cache load at start), and listeners run outside the directory's lock so a slow one
        cannot hold up the next notification. Without this, two rebuilds could reach their
        listeners in the opposite order to their swaps, and the reference would keep the older
        chain's providers (retained channels, quarantine, provider defaults) while calls route
        on the newer one. Serialised here, and a chain that is no longer current is skipped:
        whoever swapped in the newer one notifies it after this."""
        with self._notify_lock:
            if bound is not self.chain:
                return
            for listener in self._listeners:
                listener(bound)

    def _bind_rules(self, snapshot: Snapshot) -> BoundChain:
        """Bind the chain; a rule over the rule budget is revoked (its source's previous rules
        come back) and the chain bound again."""
        budget = self._rulebook.budget
        while True:
            rules = self._rulebook.routers()
            chain = RouterChain(self._assemble(rules))
            self._routers = chain
            try:
                return chain.bind(snapshot, self.consumer, budget, budgeted=rules)
            except RuleBudgetError as exc:
                if exc.router is None or not self._rulebook.revoke(exc.router, exc.reason):
                    # Not in the book any more (replaced meanwhile): bind what is there now.
                    chain = RouterChain(self._assemble(self._rulebook.routers()))
                    self._routers = chain
                    return chain.bind(snapshot, self.consumer)

    def _why_no_provider(self) -> str | None:
        """What an operator should know when no provider is usable: the registry is down, or
        the service's providers are registered only under other versions or groups."""
        if self.registry is not None and not self._providers_seen.is_set():
            if not self.registry.connected:
                return "registry unreachable (no provider known yet; retrying in the background)"
            return None
        interface = self.consumer.service_interface
        others = sorted(
            {
                (p.get_str("version"), p.get_str("group"))
                for p in self._raw_providers
                if p.protocol != "empty" and p.service_interface == interface
            }
        )
        if not others:
            return None
        wanted = _version_group(self.consumer.get_str("version"), self.consumer.get_str("group"))
        registered = ", ".join(_version_group(v, g) for v, g in others)
        return (
            f"no provider matches {wanted}; providers of {interface} are registered with "
            f"{registered}"
        )

    def _rebuild_providers_soon(self) -> None:
        # Called from empty protection's prober: rebuild on another thread (the prober must
        # not wait for the directory's lock, which a notification may hold while it applies).
        threading.Thread(
            target=self._rebuild,
            args=(True, False),
            name="dubbo-empty-protection-rebuild",
            daemon=True,
        ).start()

    def _rebuild_soon(self) -> None:
        threading.Thread(target=self._rebuild, name="dubbo-rules-rebuild", daemon=True).start()

    @property
    def rules_switched_off(self) -> dict[str, int]:
        """Rules switched off while in force, per source (a counter for metrics)."""
        return dict(self._rulebook.revocations)

    @property
    def rule_errors(self) -> dict[str, str]:
        """Rules currently refused (source -> reason); the last good ones stay in force."""
        return dict(self._rulebook.errors)

    def routers_in_force(self) -> list[RouterInForce]:
        """Each router of the chain in force, in its order: name, priority, and the rule
        source and version it came from (None for a built-in router)."""
        out = []
        for router in self._routers.routers:
            rule = self._rulebook.source_of(router)
            source, version = rule if rule is not None else (None, None)
            out.append(RouterInForce(router.name, router.priority, source, version))
        return out

    @property
    def rules_in_force(self) -> dict[str, tuple[str, float]]:
        """Rule sources in force: (version digest of the rule's text, when it was applied)."""
        return self._rulebook.in_force()


class _DocumentWatch:
    """What a directory's config watch calls with a document's data (the store's callback
    itself, see :meth:`Registry.watch_config_data`): an object of two slots rather than a
    closure over them (a directory watches 8 keys per provider application it
    sees; ~90 000 watches in a consumer of 1 000 services, docs/benchmarks.md)."""

    __slots__ = ("directory", "watched")

    def __init__(self, directory: RegistryDirectory, watched: WatchedKey) -> None:
        self.directory = directory
        self.watched = watched

    def __call__(self, data: bytes | None, _version: int) -> None:
        # Decoded here, as Registry.watch_config decodes for its callbacks: no wrapper object
        # per watch (80 000 watches in a consumer of 1 000 services, issue 42).
        text = None if data is None else data.decode("utf-8", errors="replace")
        self.directory._on_document(self.watched, text)
