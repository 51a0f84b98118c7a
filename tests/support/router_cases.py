"""Generated routing cases for the Java router oracle (tests/support/router_oracle.py).

Every case is built from one :class:`random.Random`, so the long run
(scripts/differential_routers.py) is a plain seeded loop at thousands of cases a second, and the
same builders are hypothesis strategies (:func:`cases`) through ``st.randoms``. Values come from
small pools so that rules, provider URLs, consumer URLs and invocations meet often: a condition
on ``region`` must sometimes be about a region the providers have.

What is drawn:

* condition documents (v3.0 lists, v3.1 single-destination items): ``=``/``!=``, value lists,
  globs (``10.0.*``, ``*``, ``get*``), ``$param`` references, ``method``, ``arguments[i]``,
  ``attachments[k]``, ``host``/``port``/``application``/``version``/``group``/custom keys, an
  empty then side, ``force``, ``enabled``, ``runtime``, ``valid``, scope service/application,
  and now and then a malformed condition;
* tag documents (static tags only, or dynamic tags by address and by ``match``), with the
  consumer's ``dubbo.tag`` attachment and ``dubbo.force.tag``;
* affinity documents (key, ratio);
* configurator documents (addresses, providerAddresses, applications, services, match,
  enabled, type, parameters) applied to provider URLs, and (kind ``consumer-configurator``)
  documents mixing ``side: consumer`` items with provider items, asked what the consumer gets.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import strategies as st

SERVICE = "com.foo.BarService"
HOSTS = ("10.0.0.1", "10.0.0.2", "10.0.1.3", "192.168.1.4", "127.0.0.1")
REMOTE_HOSTS = HOSTS[:-1]
PORTS = (20880, 20881, 50051)
APPLICATIONS = ("shop", "cart", "pay")
VERSIONS = ("1.0.0", "2.0.0")
GROUPS = ("g1", "g2")
REGIONS = ("hangzhou", "beijing", "shanghai")
ENVS = ("gray", "normal")
METHODS = ("getFoo", "getBar", "setFoo", "sayHello")
ARGUMENTS = ("a", "b", "foo", 1, 2, 10, True)
ATTACHMENT_KEYS = ("k", "trace", "user")
ATTACHMENT_VALUES = ("v1", "v2", "x")
TAGS = ("gray", "blue", "red")
KINDS = ("condition", "tag", "affinity", "configurator")
#: Kinds drawn only when asked for (``--kinds``): the default runs keep their figures.
EXTRA_KINDS = ("consumer-configurator",)
#: What consumer-side items set: the consumer settings, and one no consumer reads.
CONSUMER_SETTINGS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("timeout", (300, 3000)),
    ("retries", (0, 5)),
    ("loadbalance", ("roundrobin", "leastactive")),
    ("cluster", ("failfast", "failover")),
    ("mock", ("force:return null", "fail:return null")),
    ("getFoo.timeout", (100,)),
    ("weight", (50,)),
)


def _some(rng: random.Random, pool: tuple[Any, ...], at_least: int = 0) -> list[Any]:
    return rng.sample(pool, rng.randint(at_least, len(pool)))


# --------------------------------------------------------------------------- URLs


def provider_url(
    rng: random.Random,
    *,
    group: str | None = None,
    version: str | None = None,
    application: str | None = None,
    hosts: tuple[str, ...] = HOSTS,
) -> str:
    """A provider URL from the pools (each parameter present or not; ``group``, ``version``
    and ``application`` fixed when given, ``""`` for none)."""
    host, port = rng.choice(hosts), rng.choice(PORTS)
    if application is None:
        application = rng.choice(APPLICATIONS) if rng.random() < 0.9 else ""
    params: dict[str, str] = {"side": "provider"}
    if application:
        params["application"] = application
        params["remote.application"] = application
    for key, pool, fixed in (
        ("version", VERSIONS, version),
        ("group", GROUPS, group),
        ("region", REGIONS, None),
        ("env", ENVS, None),
    ):
        if fixed is not None:
            if fixed:
                params[key] = fixed
        elif rng.random() < 0.6:
            params[key] = rng.choice(pool)
    if rng.random() < 0.3:
        params["dubbo.tag"] = rng.choice(TAGS)
    if rng.random() < 0.3:
        params["weight"] = str(rng.choice((100, 200)))
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"dubbo://{host}:{port}/{SERVICE}?{query}"


def consumer_url(rng: random.Random) -> str:
    """A consumer URL from the pools."""
    params: dict[str, str] = {"side": "consumer", "interface": SERVICE}
    for key, pool in (
        ("application", APPLICATIONS),
        ("version", VERSIONS),
        ("group", GROUPS),
        ("region", REGIONS),
        ("env", ENVS),
    ):
        if rng.random() < 0.7:
            params[key] = rng.choice(pool)
    if rng.random() < 0.15:
        params["dubbo.tag"] = rng.choice(TAGS)
    if rng.random() < 0.1:
        params["dubbo.force.tag"] = rng.choice(("true", "false"))
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"consumer://{rng.choice(HOSTS)}/{SERVICE}?{query}"


def invocation(rng: random.Random, *, tag: bool = False) -> dict[str, Any]:
    """A call: method, a few arguments, a few attachments (a tag when ``tag``)."""
    attachments = {k: rng.choice(ATTACHMENT_VALUES) for k in _some(rng, ATTACHMENT_KEYS)}
    if tag and rng.random() < 0.6:
        attachments["dubbo.tag"] = rng.choice((*TAGS, ""))
        if rng.random() < 0.3:
            attachments["dubbo.force.tag"] = rng.choice(("true", "false"))
    return {
        "method": rng.choice(METHODS),
        "arguments": [rng.choice(ARGUMENTS) for _ in range(rng.randint(0, 3))],
        "attachments": attachments,
    }


# --------------------------------------------------------------------------- condition rules

_KEYS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    ("host", (*HOSTS, "10.0.*", "10.0.0.*", "*")),
    ("port", PORTS),
    ("application", (*APPLICATIONS, "sh*")),
    ("version", (*VERSIONS, "1.*")),
    ("group", GROUPS),
    ("region", (*REGIONS, "$region", "bei*")),
    ("env", (*ENVS, "$env")),
)
_WHEN_KEYS: tuple[tuple[str, tuple[Any, ...]], ...] = (
    *_KEYS,
    ("method", (*METHODS, "get*")),
    ("arguments[0]", (*tuple(str(a) for a in ARGUMENTS), "fo*")),
    ("arguments[1]", tuple(str(a) for a in ARGUMENTS)),
    ("attachments[k]", ATTACHMENT_VALUES),
    ("attachments[trace]", (*ATTACHMENT_VALUES, "v*")),
)


def _match(rng: random.Random, keys: tuple[tuple[str, tuple[Any, ...]], ...], most: int) -> str:
    parts = []
    for _ in range(rng.randint(0, most)):
        key, pool = rng.choice(keys)
        op = "=" if rng.random() < 0.7 else "!="
        values = ",".join(str(v) for v in rng.sample(pool, rng.randint(1, min(3, len(pool)))))
        parts.append(f"{key} {op} {values}")
    return " & ".join(parts)


def _malformed(rng: random.Random) -> str:
    return rng.choice(
        (
            "method = => host = 10.0.0.1",
            "host = 10.0.0.1 => region",
            "=> = x",
            "host == 10.0.0.1 => region = beijing",
            "method = getFoo => => host = 10.0.0.1",
            "arguments[x] = 1 => host = 10.0.0.1",
            "host = 10.0.0.1 & => region = beijing",
        )
    )


def condition_text(rng: random.Random) -> str:
    """One condition (``when => then``), occasionally malformed."""
    if rng.random() < 0.03:
        return _malformed(rng)
    when = _match(rng, _WHEN_KEYS, 2)
    then = _match(rng, _KEYS, 2)
    if not then and rng.random() < 0.5:
        then = _match(rng, _KEYS, 1) or "host = 10.0.0.1"
    if not when and rng.random() < 0.3:
        return f"=> {then}"
    return f"{when} => {then}"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _booleans(rng: random.Random, lines: list[str], keys: tuple[str, ...]) -> None:
    for key in keys:
        if rng.random() < 0.5:
            lines.append(f"{key}: {rng.choice(('true', 'false', 'true'))}")


def condition_case(rng: random.Random) -> dict[str, Any]:
    """A condition-rule document, providers, consumer and call."""
    scope = rng.choice(("service", "application"))
    lines = []
    v31 = rng.random() < 0.25
    if v31:
        lines.append("configVersion: v3.1")
    elif rng.random() < 0.8:
        lines.append("configVersion: v3.0")
    lines.append(f"scope: {scope}")
    lines.append(f"key: {SERVICE if scope == 'service' else rng.choice(APPLICATIONS)}")
    _booleans(rng, lines, ("force", "enabled", "runtime"))
    if rng.random() < 0.05:
        lines.append("valid: false")
    lines.append("conditions:")
    for _ in range(rng.randint(1, 3)):
        if v31:
            lines.append("  - from:")
            lines.append(f"      match: {_quote(_match(rng, _WHEN_KEYS, 2))}")
            lines.append("    to:")
            lines.append(f"      - match: {_quote(_match(rng, _KEYS, 2))}")
            if rng.random() < 0.3:
                lines.append(f"    ratio: {rng.choice((0, 20, 50, 100))}")
            if rng.random() < 0.2:
                lines.append(f"    force: {rng.choice(('true', 'false'))}")
        else:
            lines.append(f"  - {_quote(condition_text(rng))}")
    providers = [provider_url(rng) for _ in range(rng.randint(1, 6))]
    return {
        "kind": "condition",
        "scope": scope,
        "rule": "\n".join(lines) + "\n",
        "consumer": consumer_url(rng),
        "providers": providers,
        "invocation": invocation(rng),
    }


# --------------------------------------------------------------------------- tag rules


def _string_match(rng: random.Random, pool: tuple[str, ...]) -> str:
    value = rng.choice(pool)
    how = rng.choice(("exact", "exact", "prefix", "regex", "wildcard", "noempty", "empty"))
    if how == "prefix":
        value = value[:2]
    elif how == "regex":
        value = value[:3] + ".*"
    elif how == "wildcard":
        value = value[:2] + "*"
    elif how in ("noempty", "empty"):
        value = "x"
    return f"{{{how}: {_quote(value)}}}"


def tag_case(rng: random.Random) -> dict[str, Any]:
    """A tag-router document (or none: static tags only), providers, consumer and call."""
    application = rng.choice(APPLICATIONS)
    # The tag router reads its document from the providers' application. Dubbo never matches a
    # loopback provider against a tag address (tests/router/test_java_router_oracle.py keeps
    # that case), so the generated tag cases use other hosts.
    providers = [
        provider_url(rng, application=application if rng.random() < 0.9 else "", hosts=REMOTE_HOSTS)
        for _ in range(rng.randint(1, 6))
    ]
    rule = ""
    if rng.random() < 0.75:
        lines = ["configVersion: v3.0", f"key: {application}"]
        _booleans(rng, lines, ("force", "enabled", "runtime"))
        lines.append("tags:")
        for name in rng.sample(TAGS, rng.randint(1, len(TAGS))):
            lines.append(f"  - name: {name}")
            if rng.random() < 0.6:
                addresses = []
                for _ in range(rng.randint(0 if rng.random() < 0.05 else 1, 3)):
                    host = rng.choice(REMOTE_HOSTS)
                    port = rng.choice(PORTS)
                    forms = (f"{host}:{port}", f"{host}:{port}", host, "0.0.0.0", f"0.0.0.0:{port}")
                    addresses.append(f"{host}:*" if rng.random() < 0.02 else rng.choice(forms))
                lines.append(f"    addresses: [{', '.join(_quote(a) for a in addresses)}]")
            else:
                lines.append("    match:")
                for key, pool in rng.sample(
                    (("region", REGIONS), ("env", ENVS)), rng.randint(1, 2)
                ):
                    lines.append(f"      - key: {key}")
                    lines.append(f"        value: {_string_match(rng, pool)}")
        rule = "\n".join(lines) + "\n"
    return {
        "kind": "tag",
        "rule": rule,
        "consumer": consumer_url(rng),
        "providers": providers,
        "invocation": invocation(rng, tag=True),
    }


# --------------------------------------------------------------------------- affinity rules


def affinity_case(rng: random.Random) -> dict[str, Any]:
    """An affinity-router document, providers, consumer and call."""
    lines = ["configVersion: v3.1", "scope: service", f"key: {SERVICE}"]
    _booleans(rng, lines, ("force", "enabled", "runtime"))
    lines.append("affinityAware:")
    lines.append(f"  key: {rng.choice(('region', 'env', 'application', 'version', 'group'))}")
    if rng.random() < 0.9:
        lines.append(f"  ratio: {rng.choice((0, 0, 10, 20, 34, 50, 67, 80, 100))}")
    return {
        "kind": "affinity",
        "rule": "\n".join(lines) + "\n",
        "consumer": consumer_url(rng),
        "providers": [provider_url(rng) for _ in range(rng.randint(1, 6))],
        "invocation": invocation(rng),
    }


# --------------------------------------------------------------------------- configurators


def configurator_case(rng: random.Random) -> dict[str, Any]:
    """A configurators document and the provider URLs it is applied to."""
    scope = rng.choice(("service", "application"))
    # Dubbo applies a document only to providers of its key (a service key, or the providers'
    # application): the consumer reads it from that key, so the cases keep the two consistent.
    group = rng.choice((*GROUPS, "", ""))
    version = rng.choice((*VERSIONS, "", ""))
    application = rng.choice(APPLICATIONS)
    service_key = (f"{group}/" if group else "") + SERVICE + (f":{version}" if version else "")
    lines = [
        f"configVersion: {rng.choice(('v3.0', 'v3.0', 'v2.7'))}",
        f"scope: {scope}",
        f"key: {_quote(service_key) if scope == 'service' else application}",
    ]
    if rng.random() < 0.3:
        lines.append(f"enabled: {rng.choice(('true', 'false'))}")
    lines.append("configs:")
    for _ in range(rng.randint(1, 3)):
        lines.append("  - side: provider")
        _configs_item_common(rng, lines, scope, hosts=HOSTS)
        lines.append("    parameters:")
        for key, value in rng.sample(
            (
                ("weight", rng.choice((0, 50, 300))),
                ("timeout", rng.choice((100, 3000))),
                ("disabled", "true"),
                ("loadbalance", "roundrobin"),
            ),
            rng.randint(1, 2),
        ):
            lines.append(f"      {key}: {_quote(str(value))}")
    return {
        "kind": "configurator",
        "rule": "\n".join(lines) + "\n",
        "consumer": consumer_url(rng),
        "providers": [
            provider_url(rng, group=group, version=version, application=application)
            if scope == "service" or rng.random() < 0.8
            else provider_url(rng)
            for _ in range(rng.randint(1, 4))
        ],
    }


def _configs_item_common(
    rng: random.Random, lines: list[str], scope: str, *, hosts: tuple[str, ...]
) -> None:
    """The narrowing fields of an item (after its ``side``): addresses among ``hosts``,
    providerAddresses, applications / services, enabled, type, match."""
    if rng.random() < 0.6:
        addresses = [
            rng.choice((h, f"{h}:{rng.choice(PORTS)}", "0.0.0.0"))
            for h in rng.sample(hosts, rng.randint(1, min(2, len(hosts))))
        ]
        lines.append(f"    addresses: [{', '.join(_quote(a) for a in addresses)}]")
    if rng.random() < 0.2:
        lines.append(
            f"    providerAddresses: [{_quote(rng.choice(HOSTS) + ':' + str(rng.choice(PORTS)))}]"
        )
    if scope == "service" and rng.random() < 0.3:
        lines.append(f"    applications: [{', '.join(_some(rng, APPLICATIONS, 1))}]")
    if scope == "application" and rng.random() < 0.6:
        services = rng.sample(
            (SERVICE, f"{SERVICE}:1.0.0", "*", "other.Service"), rng.randint(1, 2)
        )
        lines.append(f"    services: [{', '.join(_quote(s) for s in services)}]")
    if rng.random() < 0.2:
        lines.append(f"    enabled: {rng.choice(('true', 'false'))}")
    if rng.random() < 0.1:
        lines.append(f"    type: {rng.choice(('general', 'weight'))}")
    if rng.random() < 0.3:
        lines.append("    match:")
        lines.append("      param:")
        key, pool = rng.choice((("region", REGIONS), ("env", ENVS)))
        lines.append(f"        - key: {key}")
        lines.append(f"          value: {_string_match(rng, pool)}")


def consumer_configurator_case(rng: random.Random) -> dict[str, Any]:
    """A configurators document mixing ``side: consumer`` items with provider items, the
    consumer that reads it and the providers it holds: the question is what the consumer gets
    (its own URL's parameters, and per provider what the items set for calls to it)."""
    scope = rng.choice(("service", "application"))
    # A consumer reads <its application>.configurators (scope application) and
    # <interface>:<version>:<group>.configurators of its own reference (scope service), and holds
    # providers of its group and version: the case keeps the four consistent.
    group = rng.choice((*GROUPS, "", ""))
    version = rng.choice((*VERSIONS, "", ""))
    application = rng.choice(APPLICATIONS)
    service_key = (f"{group}/" if group else "") + SERVICE + (f":{version}" if version else "")
    host = rng.choice(HOSTS)
    params = {"side": "consumer", "interface": SERVICE, "application": application}
    if group:
        params["group"] = group
    if version:
        params["version"] = version
    for key, pool in (("region", REGIONS), ("env", ENVS)):
        if rng.random() < 0.7:
            params[key] = rng.choice(pool)
    consumer = f"consumer://{host}/{SERVICE}?" + "&".join(f"{k}={v}" for k, v in params.items())
    lines = [
        f"configVersion: {rng.choice(('v3.0', 'v3.0', 'v2.7'))}",
        f"scope: {scope}",
        f"key: {_quote(service_key) if scope == 'service' else application}",
    ]
    if rng.random() < 0.3:
        lines.append(f"enabled: {rng.choice(('true', 'false'))}")
    lines.append("configs:")
    # The consumer's own host often, another consumer's sometimes.
    consumer_hosts = (host, host, rng.choice(HOSTS))
    for _ in range(rng.randint(1, 3)):
        side = "consumer" if rng.random() < 0.75 else "provider"
        lines.append(f"  - side: {side}")
        _configs_item_common(
            rng,
            lines,
            scope,
            hosts=tuple(dict.fromkeys(consumer_hosts)) if side == "consumer" else HOSTS,
        )
        lines.append("    parameters:")
        if side == "consumer":
            chosen = [
                (k, rng.choice(pool))
                for k, pool in rng.sample(CONSUMER_SETTINGS, rng.randint(1, 2))
            ]
        else:
            chosen = [("weight", rng.choice((0, 300))), ("timeout", 100), ("disabled", "true")]
            chosen = rng.sample(chosen, rng.randint(1, 2))
        for key, value in chosen:
            lines.append(f"      {key}: {_quote(str(value))}")
    return {
        "kind": "consumer-configurator",
        "rule": "\n".join(lines) + "\n",
        "consumer": consumer,
        "providers": [
            provider_url(rng, group=group, version=version) for _ in range(rng.randint(1, 4))
        ],
    }


def with_explicit_flags(case: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """The case with every top-level ``configVersion``, ``force`` and ``enabled`` of a
    condition or affinity document written out (drawn when missing). dubbo-go 3.3.2 refuses,
    panics on or switches off documents that leave them out (docs/compatibility.md), so a run
    against it with this variant reaches its matchers far more often."""
    if case["kind"] not in ("condition", "affinity"):
        return case
    lines = case["rule"].splitlines(keepends=True)
    keys = {line.partition(":")[0] for line in lines if not line.startswith(" ")}
    added = [] if "configVersion" in keys else ["configVersion: v3.0\n"]
    for key in ("force", "enabled"):
        if key not in keys:
            added.append(f"{key}: {rng.choice(('true', 'false', 'true'))}\n")
    return {**case, "rule": "".join(added + lines)}


BUILDERS = {
    "condition": condition_case,
    "tag": tag_case,
    "affinity": affinity_case,
    "configurator": configurator_case,
    "consumer-configurator": consumer_configurator_case,
}


def case(rng: random.Random, kind: str) -> dict[str, Any]:
    """One case of ``kind`` drawn from ``rng``."""
    return BUILDERS[kind](rng)


def cases(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    """The hypothesis strategy of ``kind`` cases (``st.randoms`` drives the same builders)."""
    return st.randoms(use_true_random=False).map(lambda rng: case(rng, kind))
