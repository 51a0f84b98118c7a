"""The same routing question asked of Apache Dubbo 3.3.6 (tests/peers/java/oracle), of dubbo-go
3.3.2 (tests/peers/go/oracle) and of dubbo-py.

A *case* is one JSON object::

    {"kind": "condition" | "tag" | "affinity" | "configurator" | "consumer-configurator",
     "rule": "<YAML document>" (tag: may be "" for static tags only),
     "scope": "service" | "application"      (condition only; default service),
     "consumer": "<consumer URL>", "providers": ["<provider URL>", ...],
     "invocation": {"method": ..., "arguments": [...], "attachments": {...}}}

and its *answer* is ``{"kept": [indexes of the providers kept]}``, ``{"error": "<why>"}`` when the
rule is refused, or for configurators ``{"urls": [parameters of each provider once configured]}``;
for consumer configurators ``{"consumer": {the consumer URL's parameters once configured},
"urls": [per provider, what the configurators set for the consumer's calls to it]}`` (the Go
oracle answers ``consumer`` only: a dubbo-go consumer configures no per-provider URL with a
consumer-side item, its merged provider URLs keep ``side=provider``);
the Go oracle also answers ``{"panic": "<where: what>"}`` when dubbo-go's own code panics.
:class:`JavaOracle` asks Dubbo's own classes and :class:`GoOracle` dubbo-go's (one process each,
cases pipelined over stdin/stdout); :func:`dubbo_py_answer` asks dubbo-py's routers and
configurators, built and bound exactly as a consumer builds them from a config-center document;
:func:`compare` says how two answers differ.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Self

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

Case = dict[str, Any]
Answer = dict[str, Any]

MAIN_CLASS = "oracle.RouterOracle"
#: The kinds of case the Go oracle answers.
GO_KINDS = ("condition", "tag", "affinity", "configurator")


class LineOracle:
    """One oracle process answering the line protocol; :meth:`ask` answers cases in order."""

    def __init__(self, command: list[str]) -> None:
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            bufsize=1 << 16,
        )
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()
        if ready.strip() != "READY":
            self.close()
            raise RuntimeError(f"the router oracle did not start (printed {ready!r})")

    def ask(self, cases: Iterable[Case]) -> Iterator[Answer]:
        """The oracle's answers, in order; the cases are written from a thread so that a long batch
        never fills both pipes."""
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        batch = [json.dumps(c, separators=(",", ":")) for c in cases]

        def write() -> None:
            assert process.stdin is not None
            for line in batch:
                process.stdin.write(line + "\n")
            process.stdin.flush()

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        for _ in batch:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"the router oracle ended (exit {process.poll()})")
            answer = json.loads(line)
            answer.pop("id", None)
            yield answer
        writer.join()

    def close(self) -> None:
        """Stop the process (closing stdin ends it)."""
        process = self._process
        if process.stdin is not None and not process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JavaOracle(LineOracle):
    """One JVM running Dubbo 3.3.6's routers and configurators."""

    @classmethod
    def start(cls) -> JavaOracle:
        """Build the peer if needed (tests/support/peers.py) and start it."""
        from tests.support.peers import ensure_built

        peer = ensure_built("java", "oracle")
        return cls(peer.java_command(MAIN_CLASS))


class GoOracle(LineOracle):
    """One process running dubbo-go 3.3.2's condition, tag and affinity routers and its
    configurators."""

    @classmethod
    def start(cls) -> GoOracle:
        """Build the peer if needed (tests/support/peers.py) and start it."""
        from tests.support.peers import ensure_built

        peer = ensure_built("go", "oracle")
        return cls([str(peer.binary("oracle"))])


# --------------------------------------------------------------------------- dubbo-py's side


def _invocation(case: Case, consumer: URL) -> Invocation:
    call = case.get("invocation") or {}
    return Invocation(
        consumer.path or "",
        call.get("method") or "",
        attachments={str(k): str(v) for k, v in (call.get("attachments") or {}).items()},
        explicit_arguments=tuple(call.get("arguments") or ()),
    )


def _route(routers: list[Any], case: Case) -> Answer:
    from dubbo_py.router.snapshot import Snapshot

    consumer = URL.parse(case["consumer"])
    providers = tuple(URL.parse(p) for p in case["providers"])
    snapshot = Snapshot(providers)
    call = _invocation(case, consumer)
    mask = snapshot.all
    for router in routers:
        mask = router.bind(snapshot, consumer).route(mask, call)
    return {"kept": [i for i in range(len(providers)) if mask >> i & 1]}


def dubbo_py_answer(case: Case) -> Answer:
    """dubbo-py's answer to a case, its routers built as a consumer builds them from the
    document (a RuleError is the refusal)."""
    kind = case["kind"]
    rule = case.get("rule") or ""
    try:
        if kind == "condition":
            from dubbo_py.router.condition import carriers

            return _route(
                carriers.routers_from_yaml(rule, "oracle", case.get("scope") or "service"), case
            )
        if kind == "tag":
            from dubbo_py.router.tag import TagRouter, parse_tag_rule

            return _route([TagRouter(parse_tag_rule(rule, "oracle") if rule else None)], case)
        if kind == "affinity":
            from dubbo_py.router import affinity

            return _route(list(affinity.service_routers(rule, "oracle")), case)
        if kind == "configurator":
            from dubbo_py.cluster import configurators

            configurators.parse_configurators_yaml(rule, "oracle")
            providers = [URL.parse(p) for p in case["providers"]]
            configured = configurators.apply(providers, [], {"oracle": rule})
            return {"urls": [dict(sorted(u.parameters.items())) for u in configured]}
        if kind == "consumer-configurator":
            from dubbo_py.cluster import configurators

            configurators.parse_configurators_yaml(rule, "oracle")
            consumer = URL.parse(case["consumer"])
            # What the directory's configure_consumer hook gives; a reference merges it over
            # its own options, the same for calls to every provider.
            params = configurators.consumer_parameters(consumer, [], {"oracle": rule})
            return {
                "consumer": dict(sorted({**consumer.parameters, **params}.items())),
                "urls": [dict(sorted(params.items())) for _ in case["providers"]],
            }
    except RuleError as exc:
        return {"error": str(exc)}
    raise ValueError(f"unknown kind {kind!r}")


# --------------------------------------------------------------------------- comparing


def compare(java: Answer, python: Answer, oracle: str = "java") -> str | None:
    """None when the answers agree, else the category of the difference (``oracle`` names
    the other side in it: ``java`` or ``dubbo-go``)."""
    if "panic" in java:
        return f"{oracle} panics"
    if "error" in java or "error" in python:
        if "error" in java and "error" in python:
            return None
        return (
            f"{oracle} refuses, dubbo-py accepts"
            if "error" in java
            else f"dubbo-py refuses, {oracle} accepts"
        )
    if "kept" in java:
        return None if java["kept"] == python.get("kept") else "different providers kept"
    if "consumer" in java:
        if _without_bookkeeping([java["consumer"]]) != [python.get("consumer")]:
            return "different consumer parameters"
        if "urls" in java and _without_bookkeeping(java["urls"]) != python.get("urls"):
            return "different per-provider parameters"
        return None
    if _without_bookkeeping(java.get("urls")) != python.get("urls"):
        return "different parameters"
    return None


#: What Dubbo's OverrideConfigurator copies onto a configured URL from its own override URL
#: (ConfigParser's ``providerAddresses`` condition is not among the keys it strips): no reader
#: of a provider URL acts on it, so answers are compared without it (docs/design.md §8).
BOOKKEEPING = frozenset({"providerAddresses"})


def _without_bookkeeping(urls: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if urls is None:
        return None
    return [{k: v for k, v in u.items() if k not in BOOKKEEPING} for u in urls]


def differing_parameters(java: Answer, python: Answer) -> Mapping[str, Any]:
    """For configurator answers: per URL, the keys whose values differ (java, dubbo-py)."""
    out: dict[str, Any] = {}
    java_urls = _without_bookkeeping(java.get("urls")) or []
    for i, (j, p) in enumerate(zip(java_urls, python.get("urls", []), strict=False)):
        keys = sorted(set(j) | set(p))
        diff = {k: (j.get(k), p.get(k)) for k in keys if j.get(k) != p.get(k)}
        if diff:
            out[str(i)] = diff
    return out


#: What Dubbo's ArgumentConditionMatcher reads for an argument the call does not have.
JAVA_MISSING_ARGUMENT = "dubbo_internal_not_found_argument_condition_value"
_V31_ITEM_FIELDS = re.compile(r"^    (ratio|force|priority|trafficDisable):.*\n", re.MULTILINE)
_WHEN_REFERENCE = re.compile(r"\$(\w+)")


def _when_literal(condition: str) -> str:
    when, arrow, then = condition.partition("=>")
    return _WHEN_REFERENCE.sub(r"literal-dollar-\1", when) + arrow + then


def _java_reading_of_when_references(case: Case) -> Case | None:
    """Dubbo compares ``$name`` on a when side as the text ``$name`` (no value has it)."""
    rule = case["rule"]
    if case["kind"] != "condition" or "$" not in rule:
        return None
    lines = []
    for line in rule.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("- '") and "=>" in stripped:  # a v3.0 condition
            line = _when_literal(line)
        elif stripped.startswith("match:") and lines and lines[-1].strip() == "- from:":
            line = _WHEN_REFERENCE.sub(r"literal-dollar-\1", line)
        lines.append(line)
    changed = "".join(lines)
    return None if changed == rule else {**case, "rule": changed}


def _java_reading_of_missing_arguments(case: Case) -> Case | None:
    """Dubbo reads an argument the call does not have as a placeholder text (``!=`` matches)."""
    if case["kind"] != "condition" or "arguments[" not in case["rule"]:
        return None
    call = dict(case.get("invocation") or {})
    arguments = list(call.get("arguments") or [])
    if len(arguments) >= 10:
        return None
    call["arguments"] = arguments + [JAVA_MISSING_ARGUMENT] * (10 - len(arguments))
    return {**case, "invocation": call}


def _java_reading_of_v31_item_fields(case: Case) -> Case | None:
    """Dubbo 3.3.6's MultiDestCondition has only ``from`` and ``to``: it does not read a v3.1
    condition's ``ratio``, ``force``, ``priority`` or ``trafficDisable``."""
    if case["kind"] != "condition" or "v3.1" not in case["rule"]:
        return None
    changed = _V31_ITEM_FIELDS.sub("", case["rule"])
    return None if changed == case["rule"] else {**case, "rule": changed}


def _java_reading_of_application_key(case: Case, python: Answer) -> Answer | None:
    """Dubbo applies an application-scope document only to URLs whose ``application`` is the
    document's ``key``; dubbo-py applies the document read from an application's key to that
    application's providers and does not compare the field (docs/cluster.md)."""
    if case["kind"] != "configurator" or "urls" not in python:
        return None
    match = re.search(r"^scope: application$", case["rule"], re.MULTILINE)
    key = re.search(r"^key: (.*)$", case["rule"], re.MULTILINE)
    if match is None or key is None:
        return None
    urls = []
    changed = False
    for text, configured in zip(case["providers"], python["urls"], strict=True):
        provider = URL.parse(text)
        if provider.parameters.get("application") != key.group(1).strip():
            urls.append(dict(sorted(provider.parameters.items())))
            changed = True
        else:
            urls.append(configured)
    return {"urls": urls} if changed else None


def _java_reading_of_per_provider_overrides(
    case: Case, *, on_override_url: bool, provider_addresses: bool
) -> Answer | None:
    """Dubbo's per-provider answer to a consumer-configurator case, read with dubbo-py's own
    overrides: RegistryDirectory configures, besides the consumer URL, one override URL per
    provider that carries only ``application`` and ``side`` (the consumer's) and ``group`` and
    ``version`` (the provider's). With ``on_override_url`` an item's ``match`` is read there (so
    ``match.param`` on the consumer's own parameters never holds, and ``empty`` always does)
    instead of on the consumer URL; with ``provider_addresses`` an item narrowed by
    ``providerAddresses`` applies to calls to the providers it lists instead of to none."""
    if case["kind"] != "consumer-configurator":
        return None
    from dubbo_py.cluster import configurators

    try:
        overrides = configurators.parse_configurators_yaml(case["rule"], "oracle")
    except RuleError:
        return None
    consumer = URL.parse(case["consumer"])
    urls = []
    for text in case["providers"]:
        provider = URL.parse(text)
        seed = {
            k: v
            for k, v in (
                ("application", consumer.get_str("application")),
                ("side", "consumer"),
                ("group", provider.get_str("group")),
                ("version", provider.get_str("version")),
            )
            if v
        }
        at_consumer = URL(
            protocol="consumer", host=consumer.host, path=provider.path, parameters=seed
        )
        read = at_consumer if on_override_url else consumer
        params: dict[str, str] = {}
        for override in overrides:
            if override.side != "consumer" or not override._addressed(at_consumer, by_port=False):
                continue
            if override.provider_addresses and not (
                provider_addresses and override._provider_addressed(provider)
            ):
                continue
            if override.v3 and override.match is not None:
                if not override.match.matches(
                    consumer.host,
                    provider.address if on_override_url else consumer.address,
                    read.service_key,
                    read.get("application"),
                    read.parameters,
                ):
                    continue
            elif not override.v3 and not override._conditions_hold(read, consumer.host):
                continue
            override.set_on(read.parameters, params)
        urls.append(dict(sorted(params.items())))
    return {"urls": urls}


#: Readings of a consumer-configurator case's per-provider answer: (reason, keyword arguments
#: of _java_reading_of_per_provider_overrides), tried in order.
_PER_PROVIDER_READINGS = (
    (
        "consumer configurator: match read on the consumer URL only"
        " (Dubbo: also on each provider's override URL, application/side/group/version only)",
        {"on_override_url": True, "provider_addresses": False},
    ),
    (
        "consumer configurator: an item narrowed by providerAddresses not applied"
        " (Dubbo: to calls to those providers)",
        {"on_override_url": False, "provider_addresses": True},
    ),
    (
        "consumer configurator: match read on the consumer URL only"
        " + an item narrowed by providerAddresses not applied",
        {"on_override_url": True, "provider_addresses": True},
    ),
)


def _affinity_consumer_without_key(case: Case, java: Answer) -> bool:
    """Dubbo's affinity matcher reads the consumer's value as a null pattern: a candidate with
    the key throws (logged, every candidate kept), so only when no candidate has the key does
    the empty result stand (ratio 0) and the call get no provider."""
    if case["kind"] != "affinity" or java.get("kept") != []:
        return False
    key = re.search(r"^  key: (.*)$", case["rule"], re.MULTILINE)
    if key is None:
        return False
    name = key.group(1).strip()
    consumer = URL.parse(case["consumer"])
    return name not in consumer.parameters and not any(
        name in URL.parse(p).parameters for p in case["providers"]
    )


#: Documented differences that a rewrite of the case into Java's reading removes: (reason,
#: rewrite). The reasons are the rows of docs/design.md §8 / docs/routing.md.
_READINGS = (
    (
        "condition: $name on a when side resolved (Dubbo: literal text)",
        _java_reading_of_when_references,
    ),
    (
        "condition: a missing argument never matches (Dubbo: != matches)",
        _java_reading_of_missing_arguments,
    ),
    (
        "condition v3.1: per-condition ratio/force/priority/trafficDisable read"
        " (Dubbo 3.3.6: ignored)",
        _java_reading_of_v31_item_fields,
    ),
)

#: Documented refusals: (kind, which side refuses, text in its error, reason).
_REFUSALS = (
    (
        "condition",
        "dubbo_py",
        ": expected ",
        "condition: a syntax error refused (Dubbo: accepted and misread)",
    ),
    (
        "tag",
        "dubbo_py",
        "bad port '*'",
        "tag: address host:* refused (Dubbo: accepted, never matches)",
    ),
    (
        "tag",
        "java",
        'paramMatchers" is null',
        "tag: a tag with an empty address list and no match"
        " (Dubbo: NullPointerException, rule dropped)",
    ),
)


def documented(case: Case, java: Answer, python: Answer) -> str | None:
    """The reason, when two answers differ where dubbo-py differs on purpose (docs/design.md
    §8), else None: the difference is a documented refusal, or it disappears when the case is
    rewritten into Java's reading of a documented difference (each alone, then all together)."""
    for kind, side, text, reason in _REFUSALS:
        answer = python if side == "dubbo_py" else java
        if case["kind"] == kind and text in str(answer.get("error", "")):
            return reason
    rewritten: list[tuple[str, Case]] = []
    current = case
    for reason, reading in _READINGS:
        alone = reading(case)
        if alone is None:
            continue
        if compare(java, dubbo_py_answer(alone)) is None:
            return reason
        combined = reading(current)
        if combined is not None:
            current = combined
            rewritten.append((reason, combined))
    if len(rewritten) > 1 and compare(java, dubbo_py_answer(current)) is None:
        return " + ".join(reason for reason, _ in rewritten)
    if _affinity_consumer_without_key(case, java):
        return (
            "affinity: a consumer without the key is not routed"
            " (Dubbo: no provider when no candidate has it)"
        )
    if case["kind"] == "consumer-configurator" and "consumer" in java:
        if _without_bookkeeping([java["consumer"]]) != [python.get("consumer")]:
            return None  # the consumer's own parameters: no documented difference
        for reason, how in _PER_PROVIDER_READINGS:
            per_provider = _java_reading_of_per_provider_overrides(case, **how)
            if (
                per_provider is not None
                and _without_bookkeeping(java.get("urls")) == (per_provider["urls"])
            ):
                return reason
        return None
    reading = _java_reading_of_application_key(case, python)
    if reading is not None and compare(java, reading) is None:
        return "configurator: application scope's key not compared with the URL's application"
    return None
