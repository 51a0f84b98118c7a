"""A service's providers as an operator counts them: one per provider, with the levels it is
registered at.

Dubbo 3 registers a provider twice by default (``register-mode=all``, see
docs/registry.md): a provider URL under ``/dubbo/<interface>/providers`` (the *interface*
level) and an instance under ``/services/<application>`` whose metadata offers the interface
(the *application* level), from which consumers build the same provider URL. Listed apart,
two providers read as four; :func:`listed_providers` pairs the two registrations of a provider
into one :class:`ListedProvider`. ``providers SERVICE`` and the console's service page both
list these.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dubbo_py.registry import layout
from dubbo_py.registry.application import lookup as app_level
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = [
    "APPLICATION",
    "INTERFACE",
    "LEVELS",
    "ListedProvider",
    "levels_label",
    "listed_providers",
    "merge_levels",
    "own_parameters",
]

INTERFACE = "interface"
APPLICATION = "application"
#: Every level, in the order a provider's levels are named (``interface+application``).
LEVELS = (INTERFACE, APPLICATION)

#: What one provider is: where it listens, how, for which application, and which service
#: (the interface is the one listed). Registrations that agree on all of these are one
#: provider; a provider URL's other parameters (``pid``, ``interface``, ...) differ between
#: the levels by construction.
Identity = tuple[str, str, str, str, str]


def _identity(url: URL) -> Identity:
    return (
        url.address,
        url.protocol,
        url.get_str("application"),
        url.get_str("version"),
        url.get_str("group"),
    )


def levels_label(levels: Iterable[str]) -> str:
    """Levels as one cell: ``interface+application``."""
    return "+".join(levels)


@dataclass(frozen=True, slots=True)
class ListedProvider:
    """One provider of a service and the URL it is registered with at each level (None: not
    registered at that level; at least one is set)."""

    interface_url: URL | None
    application_url: URL | None

    def __post_init__(self) -> None:
        if self.interface_url is None and self.application_url is None:
            raise ValueError("a listed provider is registered at one level at least")

    @property
    def url(self) -> URL:
        """The URL whose values are shown (weight, warmup, application, methods...): the
        application-level one when there is one, since a consumer in the default migration step
        (``APPLICATION_FIRST``) reads that level as soon as it holds a provider it can call;
        else the interface-level one."""
        url = self.application_url or self.interface_url
        assert url is not None  # __post_init__
        return url

    @property
    def address(self) -> str:
        """``host:port``."""
        return self.url.address

    @property
    def by_level(self) -> tuple[tuple[str, URL], ...]:
        """``(level, url)`` for each level it is registered at, interface level first."""
        pairs = ((INTERFACE, self.interface_url), (APPLICATION, self.application_url))
        return tuple((level, url) for level, url in pairs if url is not None)

    @property
    def levels(self) -> tuple[str, ...]:
        """The levels it is registered at, interface level first."""
        return tuple(level for level, _ in self.by_level)

    @property
    def levels_label(self) -> str:
        """``interface+application``, ``interface`` or ``application``."""
        return levels_label(self.levels)


def merge_levels(
    interface_urls: Sequence[URL], application_urls: Sequence[URL]
) -> list[ListedProvider]:
    """Pair each interface-level URL with the application-level URL of the same provider
    (same address, protocol, application, version and group); what has no partner is listed
    at its one level. Sorted by the shown URL, so by protocol and address first."""
    unpaired: dict[Identity, list[URL]] = {}
    for url in sorted(application_urls, key=lambda u: u.to_string()):
        unpaired.setdefault(_identity(url), []).append(url)
    out = []
    for url in sorted(interface_urls, key=lambda u: u.to_string()):
        partners = unpaired.get(_identity(url))
        # Two registrations of one identity at the same level (a stale node beside a new
        # one) stay two rows: pairing hides the duplicate level, never a registration.
        out.append(ListedProvider(url, partners.pop(0) if partners else None))
    out.extend(ListedProvider(None, url) for urls in unpaired.values() for url in urls)
    return sorted(out, key=lambda p: p.url.to_string())


def listed_providers(registry: Registry, service: str) -> list[ListedProvider]:
    """The providers of ``service`` registered now, one per provider, at either level (the
    application level built as consumers build it, see
    :func:`dubbo_py.registry.application.lookup.providers`)."""
    return merge_levels(
        registry.lookup(service, layout.PROVIDERS),
        app_level.providers(registry.store, service),
    )


#: Parameters every dubbo-py (and Apache Dubbo) provider URL carries, or that the listing shows
#: in columns of their own (version, group, weight, warmup): not what a provider was given.
FRAMEWORK_PARAMETERS = frozenset(
    {
        "anyhost", "application", "interface", "methods", "side", "timestamp", "pid",
        "release", "dubbo", "version", "group", "weight", "warmup", "category", "protocol",
        "path", "deprecated", "dynamic", "generic", "register-mode", "service-name-mapping",
        "revision", "meta-v", "metadata-type", "dubbo.metadata.revision",
        "dubbo.metadata.storage-type", "dubbo.endpoints", "executor-management-mode",
        "background", "prefer.serialization", "serialization", "register", "qos.port",
        "tls", "ssl-enabled", "release-version", "token",
    }
)  # fmt: skip


def own_parameters(url: URL, everything: bool = False) -> dict[str, str]:
    """A provider URL's parameters its application gave it (the ones routing rules usually
    match, such as ``warehouse=north`` or ``dubbo.tag``), sorted; with ``everything``, all."""
    params = dict(url.parameters)
    if not everything:
        params = {k: v for k, v in params.items() if k not in FRAMEWORK_PARAMETERS}
    return dict(sorted(params.items()))
