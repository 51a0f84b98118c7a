"""A consumer's registry directory with the governance every reference of it obeys.

Stub references and generic references both read providers through a
:class:`~dubbo_py.registry.directory.RegistryDirectory` that routes with the application's rule
book and router chain and applies override rules; building it in one place keeps the two kinds
of reference under the same rules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dubbo_py.cluster import configurators
from dubbo_py.registry.cache import NotifyCache
from dubbo_py.registry.directory import RegistryDirectory, Subscribe
from dubbo_py.registry.registry import Registry
from dubbo_py.router import factory
from dubbo_py.url import URL


def governed_directory(
    consumer: URL,
    registry: Registry | None,
    *,
    cache: NotifyCache | None = None,
    static_providers: Iterable[URL] = (),
    subscribe: Subscribe | None = None,
    empty_protection: Callable[[URL], bool | None] | None = None,
) -> RegistryDirectory:
    """A directory for ``consumer`` on ``registry`` with a fresh rule book, the router chain
    (condition, tag, script, shard rules and router URLs) and override rules applied to
    providers and to the consumer's own parameters."""
    return RegistryDirectory(
        consumer,
        registry,
        factory.new_rulebook(),
        assemble=factory.chain_routers,
        configure=configurators.apply,
        configure_consumer=configurators.consumer_parameters,
        validate_configurators=configurators.validate_document,
        cache=cache,
        static_providers=static_providers,
        subscribe=subscribe,
        empty_protection=empty_protection,
    )
