"""Override rules (configurators): change providers' parameters at runtime.

Two carriers, as in Apache Dubbo:

* Dubbo 2.6 ``override://`` URLs in a service's ``configurators`` category, e.g.
  ``override://10.0.0.5:50051/demo.Greeter?category=configurators&dynamic=false&weight=0``.
  The host is the provider's host (``0.0.0.0`` for all), the port optional (0: any port).
* Dubbo 3 YAML documents at ``<interface>:<version>:<group>.configurators`` (scope service) or
  ``<application>.configurators`` (scope application)::

      configVersion: v3.0
      scope: service
      key: demo.Greeter
      enabled: true
      configs:
        - addresses: ["10.0.0.5:50051"]     # or 0.0.0.0 / omitted: every provider
          side: provider
          match:                             # v3.0: narrow further (configurator_match.py)
            param: [{key: zone, value: {exact: a}}]
          parameters: {weight: 0}

Which items apply to a URL follows Dubbo 3.3's ``AbstractConfigurator`` and ``ConfigParser``:

* the document's ``enabled`` switches every item of type ``general`` (or no type) on or off; an
  item of another ``type`` (Dubbo Admin's ``weight``, ``balancing``, ``disabled``) is on only
  with its own ``enabled: true``;
* ``addresses``: hosts (``host`` or ``host:port``; ``0.0.0.0`` or none: every one) of the
  providers, or for a ``side: consumer`` item of the consumers;
* ``providerAddresses`` (provider side): ``host:port``, ``host``, ``0.0.0.0``, ``0.0.0.0:*`` or
  ``0.0.0.0:<port>`` entries, one of which must cover the provider;
* ``applications`` (service scope): the URL's application must be one of them;
  ``services`` (application scope): the URL's service key (``group/interface:version``) must be
  one of them, ``*`` for any;
* ``match`` when ``configVersion`` starts with ``v3.0`` (as Dubbo compares it), the v2.7
  ``~key`` conditions (``parameters: {"~zone": a}``: the URL's ``zone`` must be ``a``) when it
  does not -- override URLs included.

Matching overrides are applied in order (URLs first, then documents by key), each setting its
parameters on the provider URL. What providers carry is then what load balancers (``weight``),
the directory (``disabled``) and strategies read.

An override that says ``side: consumer`` (``&side=consumer`` on a URL) changes consumers
instead: its addresses are consumer hosts (``0.0.0.0`` or none: every consumer) and its
``match`` reads the consumer's own URL; :func:`consumer_parameters` gives what it sets
(``timeout`` in ms, ``retries``, ``loadbalance``, ``cluster``, ``mock``, ``actives``, or
``<method>.timeout`` and the like), which a reference merges over its own options. An override
without ``side`` is a provider override.

Whatever a document says that this module does not act on is named by :func:`unacted_fields`
(``rules validate`` warns, consumers and providers log it once per document version).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dubbo_py.cluster.override import (
    Override,
    parse_override_url,
)
from dubbo_py.errors import RuleError
from dubbo_py.rule_fields import Field, acted, document_fields
from dubbo_py.url import URL

__all__ = [
    "FIELDS",
    "Override",
    "apply",
    "consumer_parameters",
    "parse_configurators_yaml",
    "parse_override_url",
    "unacted_fields",
    "validate_document",
]

log = logging.getLogger(__name__)

#: Every field of a configurators document (the no-silent-drop table,
#: :mod:`dubbo_py.rule_fields`): all of them are read; what an item says that nothing acts on
#: is judged item by item by :func:`unacted_fields` (``rules validate`` warns about each).
FIELDS: Mapping[str, Field] = document_fields(
    configs=acted(
        side=acted(),
        addresses=acted(),
        providerAddresses=acted(),
        applications=acted(),
        services=acted(),
        parameters=acted(),
        enabled=acted(),
        type=acted(),
        match=acted(),
    ),
)


def parse_configurators_yaml(text: str, source: str = "") -> list[Override]:
    """Overrides from a Dubbo 3 ``configurators`` document; RuleError naming what is wrong,
    where (``configs[1].parameters``) and at which line and column
    (:mod:`dubbo_py.cluster.configurator_documents`)."""
    # Loaded with the first document: applying override URLs, or no override at all, is what
    # most consumers do, and needs no YAML parser in the process.
    from dubbo_py.cluster import configurator_documents

    return configurator_documents.parse_configurators_yaml(text, source)


def unacted_fields(text: str, source: str = "") -> list[str]:
    """What a valid configurators document says that neither Dubbo 3.3 nor dubbo-py acts on,
    each with its place and why (``rules validate`` warns about each)."""
    from dubbo_py.cluster import configurator_documents

    return configurator_documents.unacted_fields(text, source)


def validate_document(text: str, source: str = "") -> list[Override]:
    """What a consumer or provider runs on each document version it receives: the overrides
    (RuleError for an invalid document), and a warning naming each field not acted on, once
    per document version."""
    from dubbo_py.cluster import configurator_documents

    return configurator_documents.validate_document(text, source)


def _overrides(urls: list[URL], documents: Mapping[str, str]) -> list[Override]:
    """Every override in force, in application order (URLs, then documents by key). An invalid
    document is logged with its key and skipped; the others still apply."""
    # A URL Dubbo Admin writes next to a document for 2.6 clients (compatible_config) is read
    # as Dubbo 3's RegistryDirectory reads it: not at all (the document says the same).
    overrides = [
        o
        for u in urls
        if not u.get("compatible_config") and (o := parse_override_url(u)) is not None
    ]
    for key in sorted(documents):
        try:
            overrides.extend(parse_configurators_yaml(documents[key], key))
        except RuleError as exc:
            log.error("ignoring invalid override rule %s: %s", key, exc)
    return overrides


def consumer_parameters(
    consumer: URL, urls: list[URL], documents: Mapping[str, str]
) -> dict[str, str]:
    """What the consumer-side overrides matching ``consumer`` set, later ones winning (the
    directory's ``configure_consumer`` hook)."""
    params: dict[str, str] = {}
    for override in _overrides(urls, documents):
        if override.matches_consumer(consumer):
            override.set_on(consumer.parameters, params)
    return params


def apply(providers: list[URL], urls: list[URL], documents: Mapping[str, str]) -> list[URL]:
    """Providers with every matching provider-side override applied (the directory's
    ``configure`` hook)."""
    overrides = [o for o in _overrides(urls, documents) if o.side != "consumer"]
    if not overrides:
        return providers
    out = []
    for provider in providers:
        params: dict[str, str] = {}
        for override in overrides:
            if override.matches(provider):
                override.set_on(provider.parameters, params)
        out.append(provider.with_parameter_map(params) if params else provider)
    return out
