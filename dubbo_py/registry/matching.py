"""Which registered providers a consumer takes, decided as Apache Dubbo 3.3 decides it.

Two steps, as in Dubbo: :func:`is_match` is ``UrlUtils.isMatch`` (interface, category,
``enabled``, group, version, classifier), applied by Dubbo's registry before it notifies; then
:class:`ProviderFilter` drops what ``RegistryDirectory.toInvokers`` drops: ``empty://`` markers,
protocols the consumer did not ask for (its ``protocol`` option) and protocols this process
cannot speak (Java's ``dubbo://`` Hessian2 endpoint of the same interface, for one). A provider
written by apache-dubbo (Python) 3.0.0b1 -- ``tri://host:port?service=<iface>``, no path and no
``interface`` -- is read with the interface of the registry folder it sits in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping

from dubbo_py.url import URL

__all__ = [
    "ANY",
    "GENERIC_PROTOCOLS",
    "SPOKEN_PROTOCOLS",
    "ProviderFilter",
    "group_matches",
    "is_match",
    "is_match_category",
    "is_usable",
    "normalise_provider",
    "split_list",
]

log = logging.getLogger(__name__)

#: Dubbo's ``ANY_VALUE``.
ANY = "*"
#: Protocols a dubbo-py consumer can call: Triple and plain gRPC (the same wire).
SPOKEN_PROTOCOLS = frozenset({"tri", "grpc"})
#: The protocols a generic reference (``generic=true`` consumer) calls.
GENERIC_PROTOCOLS = frozenset({"dubbo", "tri"})
#: The categories a consumer's directory subscribes to (the ``category`` of its subscribe URL).
SUBSCRIBED_CATEGORIES = "providers,configurators,routers"

# Dubbo's COMMA_SPLIT_PATTERN: runs of commas with the blanks around them.
_COMMA_SPLIT = re.compile(r"\s*,+\s*")


def split_list(value: str) -> list[str]:
    """Split a comma list as Dubbo's ``COMMA_SPLIT_PATTERN`` does (blanks around commas go,
    runs of commas count as one)."""
    return _COMMA_SPLIT.split(value) if value else []


def is_match_category(category: str, categories: str) -> bool:
    """Dubbo's ``UrlUtils.isMatchCategory``: ``categories`` empty means ``providers``; ``*``
    anywhere means all; ``-name`` excludes ``name``; else a (substring) containment test."""
    if not categories:
        return category == "providers"
    if ANY in categories:
        return True
    if "-" in categories:
        return f"-{category}" not in categories
    return category in categories


def group_matches(consumer_group: str, provider_group: str) -> bool:
    """``*``, equal, or the provider's (non-empty) group in the consumer's comma list. An empty
    provider group never matches a non-empty consumer list; an empty consumer group matches
    only providers without a group."""
    if consumer_group in (ANY, provider_group):
        return True
    return bool(provider_group) and provider_group in split_list(consumer_group)


def is_match(consumer: URL, provider: URL, categories: str = SUBSCRIBED_CATEGORIES) -> bool:
    """Dubbo 3.3's ``UrlUtils.isMatch(consumer, provider)``.

    ``categories`` stands for the consumer's subscribe URL ``category`` (a dubbo-py consumer's
    registered URL says ``consumers``, its directory subscribes to the default three).
    """
    wanted, offered = consumer.service_interface, provider.service_interface
    if ANY not in (wanted, offered) and wanted != offered:
        return False
    if not is_match_category(provider.category, categories):
        return False
    if not provider.get_bool("enabled", True) and consumer.get_str("enabled") != ANY:
        return False
    if not group_matches(consumer.get_str("group"), provider.get_str("group")):
        return False
    version = consumer.get_str("version")
    if version != ANY and version != provider.get_str("version"):
        return False
    classifier = consumer.get_str("classifier", ANY)
    return classifier == ANY or classifier == provider.get_str("classifier", ANY)


def is_usable(provider: URL) -> bool:
    """Whether a matched provider (after override rules) is called at all, as Dubbo's
    ``toInvokers``: ``disabled`` decides when present, else ``enabled`` (default true)."""
    params = provider.parameters
    if "disabled" in params:
        return not provider.get_bool("disabled", False)
    # Most providers say neither: `in` on the parameters is what a fleet's notification pays.
    return "enabled" not in params or provider.get_bool("enabled", True)


def normalise_provider(provider: URL, folder_interface: str) -> URL:
    """A provider URL with no path and no ``interface`` but a ``service`` parameter (as
    apache-dubbo 3.0.0b1 registers) gets the interface of the folder it was read from."""
    if provider.service_interface or not provider.get_str("service"):
        return provider
    return provider.replace(path=folder_interface)


class ProviderFilter:
    """One consumer's provider selection, with each skipped URL reported once.

    Not thread-safe on its own: the directory calls it under its lock.
    """

    def __init__(self, consumer: URL, folder_interface: str) -> None:
        self.consumer = consumer
        self.folder = folder_interface
        asked = consumer.get_str("protocol")
        #: The consumer's ``protocol`` option (comma list), empty when it named none.
        self.asked = frozenset(split_list(asked)) - {""}
        #: A generic reference's consumer (``generic=true``): it calls ``dubbo://`` and
        #: ``tri://`` providers (:mod:`dubbo_py.consumer.generic`), not gRPC ones.
        self.generic = consumer.get_str("generic") == "true"
        self._reported: set[tuple[URL, str]] = set()
        #: The verdict on each URL of the last notification (the provider to use, or None):
        #: a fleet where one provider changed is judged once per new URL, not per provider.
        self._verdicts: dict[URL, URL | None] = {}

    def select(self, raw: Iterable[URL]) -> list[URL]:
        """The providers this consumer may call, in the order given."""
        return [provider for _, provider in self.select_pairs(raw)]

    def select_pairs(self, raw: Iterable[URL]) -> list[tuple[URL, URL]]:
        """``(registered URL, provider to use)`` for each URL of ``raw`` this consumer may
        call, in the order given (what :meth:`select` returns, with where each came from)."""
        verdicts: dict[URL, URL | None] = {}
        out = self._judge_all(raw, self._verdicts, verdicts)
        self._verdicts = verdicts
        self._forget_reports()
        return out

    def update(self, left: Iterable[URL], arrived: Iterable[URL]) -> list[tuple[URL, URL]]:
        """What :meth:`select_pairs` does for a list that lost ``left`` and gained ``arrived``
        since the last call, judging only those: the pairs of ``arrived``, in that order."""
        verdicts = self._verdicts
        for url in left:
            verdicts.pop(url, None)
        out = self._judge_all(arrived, verdicts, verdicts)
        self._forget_reports()
        return out

    def _judge_all(
        self,
        urls: Iterable[URL],
        known: Mapping[URL, URL | None],
        verdicts: dict[URL, URL | None],
    ) -> list[tuple[URL, URL]]:
        """The ``(URL, provider to use)`` pairs of ``urls``, each verdict taken from ``known``
        or judged, and recorded in ``verdicts``."""
        out: list[tuple[URL, URL]] = []
        for url in urls:
            verdict = known[url] if url in known else self._judge(url)
            verdicts[url] = verdict
            if verdict is not None:
                out.append((url, verdict))
        return out

    def _forget_reports(self) -> None:
        # Forget URLs that left, so the record stays as small as the provider list (a URL that
        # comes back is reported again).
        if self._reported:
            verdicts = self._verdicts
            self._reported = {entry for entry in self._reported if entry[0] in verdicts}

    def judge(self, url: URL) -> URL | None:
        """The provider to use for ``url`` (normalised: ``url`` itself unless it lacks its
        interface), or None when this consumer skips it; each skip is logged once. Not
        remembered (the caller that keeps its own index of the URLs judged, the provider list,
        calls this for the new ones only)."""
        return self._judge(url)

    def retain_reports(self, registered: Iterable[URL]) -> None:
        """Forget the skips reported for URLs not in ``registered`` (what :meth:`select_pairs`
        does with its own verdicts): a URL that comes back is reported again."""
        if self._reported:
            reported = {entry[0] for entry in self._reported}
            present = {url for url in registered if url in reported}
            self._reported = {entry for entry in self._reported if entry[0] in present}

    def forget_reports(self, left: Iterable[URL]) -> None:
        """Forget the skips reported for the URLs that ``left`` (see :meth:`retain_reports`)."""
        if self._reported:
            gone = set(left)
            self._reported = {entry for entry in self._reported if entry[0] not in gone}

    def _judge(self, url: URL) -> URL | None:
        """The provider to use for ``url`` (normalised), or None when this consumer skips it."""
        provider = normalise_provider(url, self.folder)
        if provider is not url:
            self._once(
                url,
                "service",
                logging.DEBUG,
                "%s: provider %s has no path or interface; read as %s (the folder it is "
                "registered in, as apache-dubbo 3.0 registers)",
                self.folder,
                url,
                self.folder,
            )
        if provider.protocol == "empty" or not is_match(self.consumer, provider):
            return None
        if self.asked and provider.protocol not in self.asked:
            self._once(
                url,
                "asked",
                logging.DEBUG,
                "%s: skipping provider %s: the consumer asks for protocol %s",
                self.folder,
                url,
                ",".join(sorted(self.asked)),
            )
            return None
        if self.generic:
            return provider if provider.protocol in GENERIC_PROTOCOLS else None
        if provider.protocol == "dubbo":
            # Java's dubbo:// (Hessian2) endpoint: generic references call it, stubs cannot.
            self._once(
                url,
                "spoken",
                logging.WARNING,
                "%s: skipping provider %s: a gRPC stub cannot call dubbo:// (Hessian2); "
                "app.generic_reference(%r) calls it",
                self.folder,
                url,
                provider.service_interface or self.folder,
            )
            return None
        if provider.protocol not in SPOKEN_PROTOCOLS:
            self._once(
                url,
                "spoken",
                logging.WARNING,
                "%s: skipping provider %s: protocol %r is not one dubbo-py speaks (%s)",
                self.folder,
                url,
                provider.protocol,
                ", ".join(sorted(SPOKEN_PROTOCOLS)),
            )
            return None
        return provider

    def _once(self, url: URL, reason: str, level: int, message: str, *args: object) -> None:
        if (url, reason) in self._reported:
            return
        self._reported.add((url, reason))
        log.log(level, message, *args)
