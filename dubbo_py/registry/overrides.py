"""Override rules (configurators) as both sides of the registry read them: the consumer's
:class:`~dubbo_py.registry.directory.Directory` and the provider's
:class:`~dubbo_py.registry.provider_overrides.ProviderRegistry`. Both are handed the functions
that apply and check the rules (:mod:`dubbo_py.cluster.configurators`, a higher layer)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from dubbo_py.registry import layout
from dubbo_py.url import URL

__all__ = ["Configure", "Validate", "document_valid"]

#: Applies override rules: (providers, configurator URLs, configurator documents) -> providers,
#: one for each provider given, in the same order, each depending only on that provider and
#: the rules (the consumer's provider list applies it to the providers that arrived only).
Configure = Callable[[list[URL], list[URL], Mapping[str, str]], list[URL]]
#: Checks the override document ``(text, registry path)``: raises a ValueError
#: (:class:`~dubbo_py.errors.RuleError`) for one to refuse.
Validate = Callable[[str, str], object]


def document_valid(validate: Validate | None, key: str, text: str, log: logging.Logger) -> bool:
    """Whether the override document ``text`` of ``key`` may be used: ``validate`` (no check
    when None) accepts it. A refused one is logged as an error on ``log``; the caller keeps
    the previous overrides in force."""
    if validate is None:
        return True
    try:
        validate(text, layout.config_path(key))
    except ValueError as exc:
        log.error(
            "invalid override rule at %s: %s (previous overrides stay in force)",
            layout.config_path(key),
            exc,
        )
        return False
    return True
