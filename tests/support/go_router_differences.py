"""Where dubbo-go 3.3.2's routers answer differently from dubbo-py, and why.

dubbo-py follows Dubbo Java (tests/support/router_oracle.py holds the differences from Java);
dubbo-go 3.3.2 differs from both in ways read from its source (cluster/router/condition,
cluster/router/tag, cluster/router/affinity, and for configurators config_center/parser and
config_center/configurator). :func:`documented` names the reason when a
difference between the Go oracle's answer and dubbo-py's is one of them: a refusal or a panic
of a known shape, or a difference that disappears when the case is rewritten into dubbo-go's
reading (the rewritten case is asked of dubbo-py again, so a reason is given only when it
explains the answer). A configurator difference is explained by the configurator rows alone
(:data:`CONFIGURATOR_READINGS`, what dubbo-go copies onto a URL, and the application-scope key
that dubbo-go compares as Dubbo Java does). Each reason is a row of docs/compatibility.md
("dubbo-go 3.3.2's routers as an oracle").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.support.router_oracle import (
    Answer,
    Case,
    _java_reading_of_application_key,
    _java_reading_of_v31_item_fields,
    _java_reading_of_when_references,
    compare,
    dubbo_py_answer,
)

_TOP = r"^{key}: (.*)$"


def _top(rule: str, key: str) -> str | None:
    match = re.search(_TOP.format(key=key), rule, re.MULTILINE)
    return match.group(1).strip() if match else None


def _version(rule: str) -> str | None:
    return _top(rule, "configVersion")


def _is_v31(rule: str) -> bool:
    version = _version(rule)
    return version is not None and version.lower().lstrip("v") >= "3.1"


def _with_top(rule: str, key: str, value: str) -> str:
    """The document with the top-level ``key`` set to ``value`` (added after the first line
    when absent)."""
    pattern = re.compile(_TOP.format(key=key), re.MULTILINE)
    if pattern.search(rule):
        return pattern.sub(f"{key}: {value}", rule, count=1)
    first, _, rest = rule.partition("\n")
    return f"{first}\n{key}: {value}\n{rest}"


# --------------------------------------------------------------------------- condition


def _v30_without_force_or_enabled(case: Case, go: Answer) -> bool:
    """generateConditionsRoute dereferences RouterConfig's ``*bool`` Enabled and Force, which
    yaml.v3 leaves nil when the document omits them (the ``default:`` tags are not applied):
    reading the document panics."""
    rule = case["rule"]
    return (
        case["kind"] == "condition"
        and "nil pointer dereference" in str(go.get("panic", ""))
        and _version(rule) is not None
        and not _is_v31(rule)
        and (_top(rule, "force") is None or _top(rule, "enabled") is None)
    )


def _go_reading_of_v30_force_enabled(case: Case) -> Case | None:
    """generateConditionsRoute returns ``*Enabled, *Force`` where its caller reads
    ``force, enable``: a v3.0 document's force is read as enabled and its enabled as force."""
    rule = case["rule"]
    if case["kind"] != "condition" or _is_v31(rule):
        return None
    force, enabled = _top(rule, "force"), _top(rule, "enabled")
    if force is None or enabled is None or force == enabled:
        return None
    swapped = _with_top(_with_top(rule, "force", enabled), "enabled", force)
    return {**case, "rule": swapped}


def _go_reading_of_missing_enabled(case: Case) -> Case | None:
    """A v3.1 condition or an affinity document is decoded into a plain ``bool`` Enabled
    whose ``default:"true"`` tag yaml.v3 does not apply: without ``enabled`` it is off."""
    rule = case["rule"]
    if case["kind"] == "condition" and not _is_v31(rule):
        return None
    if case["kind"] not in ("condition", "affinity") or _top(rule, "enabled") is not None:
        return None
    return {**case, "rule": _with_top(rule, "enabled", "false")}


def _argument_past_the_end(case: Case, go: Answer) -> bool:
    """ArgumentConditionMatcher checks ``index > len(arguments)`` before reading
    ``arguments[index]``: ``arguments[n]`` on a call with exactly n arguments panics."""
    found = re.search(r"index out of range \[(\d+)\] with length (\d+)", str(go.get("panic", "")))
    return (
        case["kind"] == "condition"
        and found is not None
        and found.group(1) == found.group(2)
        and f"arguments[{found.group(1)}]" in case["rule"]
    )


def _go_reading_of_valid(case: Case) -> Case | None:
    """dubbo-go's condition router does not read ``valid``: ``valid: false`` leaves the rule on
    (Dubbo Java and dubbo-py ignore such a rule)."""
    if case["kind"] != "condition" or _top(case["rule"], "valid") is None:
        return None
    return {**case, "rule": re.sub(r"^valid: .*\n", "", case["rule"], flags=re.MULTILINE)}


_NO_PORT = re.compile(r"^(consumer://[^/:?]+)(/)")


def _go_reading_of_consumer_port(case: Case) -> Case | None:
    """dubbo-go's URL.ToMap gives a URL without a port the port ``0``, so ``port != 20880``
    on a when side matches a consumer (Dubbo Java and dubbo-py: no port, no match). A port
    no rule names stands for it."""
    if case["kind"] != "condition" or "port" not in case["rule"]:
        return None
    consumer = _NO_PORT.sub(r"\1:1\2", case["consumer"])
    return None if consumer == case["consumer"] else {**case, "consumer": consumer}


# --------------------------------------------------------------------------- tag

_ADDRESSES = re.compile(r"^(    addresses: \[)(.*)(\])$", re.MULTILINE)
#: An address no generated provider has: what a host-only address is to dubbo-go.
_NOWHERE = "'203.0.113.9:1'"


def _go_reading_of_host_only_addresses(case: Case) -> Case | None:
    """dubbo-go's tag address predicate compares an address with the provider's
    ``host:port`` or with ``0.0.0.0:<port>`` only: ``10.0.0.1`` or ``0.0.0.0`` alone never
    matches (Dubbo Java and dubbo-py match the host, and any host for ``0.0.0.0``)."""
    if case["kind"] != "tag" or "addresses:" not in case["rule"]:
        return None

    def rewrite(match: re.Match[str]) -> str:
        items = [item.strip() for item in match.group(2).split(",") if item.strip()]
        items = [_NOWHERE if ":" not in item.strip("'") else item for item in items]
        return match.group(1) + ", ".join(items) + match.group(3)

    changed = _ADDRESSES.sub(rewrite, case["rule"])
    return None if changed == case["rule"] else {**case, "rule": changed}


_MATCH_BLOCK = re.compile(r"^    match:\n(?:      .*\n)+", re.MULTILINE)
_NEVER = "    match:\n      - key: oracle.never\n        value: {exact: 'never'}\n"


def _request_tag(case: Case) -> str:
    attachments = (case.get("invocation") or {}).get("attachments") or {}
    if "dubbo.tag" in attachments:
        return str(attachments["dubbo.tag"])
    found = re.search(r"[?&]dubbo\.tag=([^&]*)", case["consumer"])
    return found.group(1) if found else ""


def _go_reading_of_empty_tag_attachment(case: Case) -> Case | None:
    """An empty ``dubbo.tag`` attachment is the call's tag in dubbo-go (``GetAttachment``
    found it); Dubbo Java and dubbo-py then read the consumer URL's ``dubbo.tag``."""
    attachments = (case.get("invocation") or {}).get("attachments") or {}
    if case["kind"] != "tag" or attachments.get("dubbo.tag") != "":
        return None
    consumer = re.sub(r"&dubbo\.tag=[^&]*", "", case["consumer"])
    return None if consumer == case["consumer"] else {**case, "consumer": consumer}


def _go_reading_of_untagged_calls(case: Case) -> Case | None:
    """dubbo-go's requestEmptyTag removes from an untagged call only the addresses a tag
    lists; Dubbo Java and dubbo-py also remove the providers a tag's ``match`` selects."""
    if case["kind"] != "tag" or "    match:" not in case["rule"] or _request_tag(case):
        return None
    return {**case, "rule": _MATCH_BLOCK.sub(_NEVER, case["rule"])}


_TAG = re.compile(r"^  - name: (.*)\n((?:    .*\n)*)", re.MULTILINE)
_PARAM = re.compile(r"      - key: (.*)\n        value: \{(\w+): '(.*)'\}\n")


def _string_match(how: str, pattern: str, value: str) -> bool:
    """dubbo-go's StringMatch.IsMatch (common/match.go) for the forms the cases use."""
    if how == "exact":
        return value == pattern
    if how == "prefix":
        return value.startswith(pattern)
    if how == "regex":
        return re.search(pattern, value) is not None
    if how == "wildcard":
        return value == pattern or pattern == "*"
    if how == "empty":
        return value == ""
    if how == "noempty":
        return value != ""
    return False


def _parameters(url: str) -> dict[str, str]:
    query = url.partition("?")[2]
    return dict(pair.partition("=")[::2] for pair in query.split("&") if pair)


def _go_reading_of_tag_match(case: Case) -> Case | None:
    """dubbo-go matches a tag's ``match`` against each provider URL; Dubbo Java and dubbo-py
    turn it into the addresses of the matching providers (so another provider at one of those
    addresses is selected too, and a match that selects none leaves a tag without addresses:
    static tags). Read as dubbo-go reads it: every provider at its own address, and a match
    that selects none an address no provider has (the providers' ports are made unique only
    when no tag lists an address of its own)."""
    rule = case["rule"]
    if case["kind"] != "tag" or "    match:" not in rule:
        return None
    own_addresses = any(
        item.strip() != _NOWHERE
        for found in _ADDRESSES.finditer(rule)
        for item in found.group(2).split(",")
    )
    providers = [_parameters(p) for p in case["providers"]]

    def rewrite(tag: re.Match[str]) -> str:
        params = _PARAM.findall(tag.group(2))
        selects = any(
            all(_string_match(how, value, p.get(key, "")) for key, how, value in params)
            for p in providers
        )
        body = tag.group(2) if selects else f"    addresses: [{_NOWHERE}]\n"
        return f"  - name: {tag.group(1)}\n{body}"

    rewritten = _TAG.sub(rewrite, rule)
    if own_addresses:
        return None if rewritten == rule else {**case, "rule": rewritten}
    unique = [
        re.sub(r"^(\w+://[^/:]+):\d+/", rf"\g<1>:{30001 + i}/", p)
        for i, p in enumerate(case["providers"])
    ]
    return {**case, "rule": rewritten, "providers": unique}


_REGEX = re.compile(r"\{regex: '(.*)'\}")


def _go_reading_of_regex(case: Case) -> Case | None:
    """dubbo-go's ``regex`` match is ``regexp.MatchString``, a search (``han.*`` matches
    ``shanghai``); Dubbo Java and dubbo-py match the whole value."""
    if case["kind"] != "tag" or "{regex: " not in case["rule"]:
        return None
    return {**case, "rule": _REGEX.sub(r"{regex: '.*(?:\1).*'}", case["rule"])}


def _go_reading_of_tag_force(case: Case) -> Case | None:
    """dubbo-go applies a document's ``force`` to every tagged call; Dubbo Java only when the
    call's tag has addresses (a tag selected by name alone falls back unless the call forces):
    read as a call that forces its tag."""
    tag = _request_tag(case)
    rule = case["rule"]
    if case["kind"] != "tag" or not tag or _top(rule, "force") != "true":
        return None
    for block in _TAG.finditer(rule):
        if block.group(1).strip() == tag and re.search(r"addresses: \[.+\]|match:", block.group(2)):
            return None
    call = dict(case.get("invocation") or {})
    call["attachments"] = {**(call.get("attachments") or {}), "dubbo.force.tag": "true"}
    return {**case, "invocation": call}


def _go_reading_of_other_tags(case: Case) -> Case | None:
    """A tagged call in dubbo-go reads only the tag of its name: when it falls back to the
    untagged providers it removes that tag's addresses alone (Dubbo Java and dubbo-py remove
    every tag's addresses, and those its ``match`` selects)."""
    tag = _request_tag(case)
    if case["kind"] != "tag" or not tag or not case["rule"]:
        return None

    def rewrite(block: re.Match[str]) -> str:
        if block.group(1).strip() == tag:
            return block.group(0)
        return f"  - name: {block.group(1)}\n    addresses: [{_NOWHERE}]\n"

    changed = _TAG.sub(rewrite, case["rule"])
    return None if changed == case["rule"] else {**case, "rule": changed}


def _v31_document_fallback(case: Case, go: Answer) -> bool:
    """multiplyConditionRoute stops at the first matched condition that leaves no provider and
    answers none, and DynamicRouter then (``force`` false) falls back to *every* provider;
    Dubbo Java and dubbo-py fall back per condition, to what the conditions before it kept.
    dubbo-go's answer is dubbo-py's with ``force: true`` (and, as Dubbo Java 3.3.6, without the
    per-condition fields), or every provider when that is empty."""
    rule = case["rule"]
    if case["kind"] != "condition" or not _is_v31(rule) or _top(rule, "force") == "true":
        return False
    if _top(rule, "enabled") is None:
        return False
    plain = _java_reading_of_v31_item_fields(case) or case
    forced = dubbo_py_answer({**plain, "rule": _with_top(plain["rule"], "force", "true")})
    if "kept" not in forced:
        return False
    expected = forced["kept"] or list(range(len(case["providers"])))
    return go.get("kept") == expected


# --------------------------------------------------------------------------- affinity


def _affinity_consumer_without_key(case: Case, go: Answer) -> bool:
    """dubbo-go's affinity matcher is ``key=$key``: a consumer without the key matches no
    provider, and at ratio 0 (``0 >= 0``) that empty set is the answer."""
    rule = case["rule"]
    key = re.search(r"^  key: (.*)$", rule, re.MULTILINE)
    ratio = re.search(r"^  ratio: (\d+)$", rule, re.MULTILINE)
    return (
        case["kind"] == "affinity"
        and go.get("kept") == []
        and key is not None
        and key.group(1).strip() not in _parameters(case["consumer"])
        and (ratio is None or ratio.group(1) == "0")
    )


# --------------------------------------------------------------------------- configurators

#: One item of a generated configurators document: ``  - side: ...`` and its indented lines.
_ITEM = re.compile(r"^  - side: .*\n(?:    .*\n)*", re.MULTILINE)
_ITEM_ADDRESSES = re.compile(r"^    addresses: \[(.*)\]\n", re.MULTILINE)
_ITEM_PROVIDER_ADDRESSES = re.compile(r"^    providerAddresses: \[(.*)\]\n", re.MULTILINE)
_ITEM_MATCH = re.compile(r"^    match:\n(?:      .*\n)*", re.MULTILINE)
#: An address with a port no generated provider has.
_NO_PROVIDER = "'203.0.113.9:1'"


def _configurator_items(case: Case, rewrite: Callable[[str], str]) -> Case | None:
    if case["kind"] != "configurator":
        return None
    changed = _ITEM.sub(lambda item: rewrite(item.group(0)), case["rule"])
    return None if changed == case["rule"] else {**case, "rule": changed}


def _go_reading_of_configurator_enabled(case: Case) -> Case | None:
    """ConfiguratorConfig's ``Enabled`` is a plain ``bool`` (config_center/parser/
    configuration_parser.go) that yaml.v3 leaves false when the document omits it, and
    getEnabledString writes that ``enabled=false`` into every general item's override URL,
    which Configure then skips: a document without ``enabled`` is off (Dubbo Java and dubbo-py:
    on). (A typed item without its own ``enabled`` is off in all three.)"""
    if case["kind"] != "configurator" or _top(case["rule"], "enabled") is not None:
        return None
    return {**case, "rule": case["rule"].replace("configs:\n", "enabled: false\nconfigs:\n", 1)}


def _go_reading_of_configurator_version(case: Case) -> Case | None:
    """overrideConfigurator.Configure (config_center/configurator/override.go) reads the
    version from ``config-center.configVersion`` (constant.ConfigVersionKey), a key the parser
    never writes (it writes ``configVersion``): every document is read as Dubbo 2.6 override
    URLs (configureDeprecated). An item then applies only at an address with a port, the
    provider's (``host:port``; ``0.0.0.0:<port>``): an address without one, and an item without
    addresses (0.0.0.0), never apply, also where ``providerAddresses`` lists the provider
    (Dubbo Java and dubbo-py then read the address's host only), and ``match`` is not read.
    Read as a v2.7 document whose items keep only their addresses with a port (one no provider
    has when none is left), ``providerAddresses`` only those of them, and no ``match``."""

    def item(text: str) -> str:
        found = _ITEM_ADDRESSES.search(text)
        kept = (
            []
            if found is None
            else [a.strip() for a in found.group(1).split(",") if ":" in a.strip().strip("'")]
        )
        addresses = f"    addresses: [{', '.join(kept) or _NO_PROVIDER}]\n"
        text = _ITEM_MATCH.sub("", text)
        listed = _ITEM_PROVIDER_ADDRESSES.search(text)
        if listed is not None:
            both = [a.strip() for a in listed.group(1).split(",") if a.strip() in kept]
            text = _ITEM_PROVIDER_ADDRESSES.sub(
                f"    providerAddresses: [{', '.join(both) or _NO_PROVIDER}]\n", text
            )
        if found is None:
            return text.replace("\n", "\n" + addresses, 1)
        return _ITEM_ADDRESSES.sub(addresses, text)

    rewritten = _configurator_items(case, item)
    if rewritten is None:
        return None
    rewritten["rule"] = _with_top(rewritten["rule"], "configVersion", "v2.7")
    return rewritten


def _go_reading_of_configurator_applications(case: Case) -> Case | None:
    """serviceItemToUrls writes a service item's ``applications`` as ``&application<name>``
    (no ``=``): the override URL has no application condition (so the item applies to every
    application) and carries an empty ``application<name>`` parameter instead, which is copied
    onto the URLs it configures (Dubbo Java and dubbo-py: only those applications' URLs)."""
    return _configurator_items(
        case, lambda text: re.sub(r"^    applications: .*\n", "", text, flags=re.MULTILINE)
    )


def _go_reading_of_configurator_services(case: Case) -> Case | None:
    """An application item's ``services`` become the override URL's path, group and version,
    which configureDeprecated / configureIfMatchInternal never compare with the URL's (group
    and version are among the keys it strips): the item applies to every service (Dubbo Java
    and dubbo-py: only the listed service keys)."""
    return _configurator_items(
        case, lambda text: re.sub(r"^    services: .*\n", "", text, flags=re.MULTILINE)
    )


def _without_go_bookkeeping(case: Case, go: Answer) -> Answer:
    """dubbo-go's answer without what its configurator copies from its own override URL and
    no reader acts on: ``configVersion`` (getConditionKeys strips ``config-center.configVersion``
    instead) and the empty ``application<name>`` of a service item's ``applications``."""
    urls = go.get("urls")
    if case["kind"] != "configurator" or urls is None:
        return go
    names = {
        f"application{name.strip()}"
        for listed in re.findall(r"^    applications: \[(.*)\]$", case["rule"], re.MULTILINE)
        for name in listed.split(",")
    }
    originals = [_parameters(p) for p in case["providers"]]
    stripped = [
        {
            k: v
            for k, v in u.items()
            if not (k == "configVersion" and k not in original)
            and not (k in names and v == "" and k not in original)
        }
        for u, original in zip(urls, originals, strict=False)
    ]
    return {**go, "urls": stripped}


CONFIGURATOR_COPIED = (
    "configurator: the override URL's configVersion (and a service item's empty"
    " application<name>) copied onto the URL"
)
CONFIGURATOR_APPLICATION_KEY = (
    "configurator: application scope's key compared with the URL's application (as Dubbo Java)"
)

#: (reason, rewrite into dubbo-go's reading) for configurator cases, tried alone and together.
CONFIGURATOR_READINGS: tuple[tuple[str, Callable[[Case], Case | None]], ...] = (
    (
        "configurator: a document without `enabled` is off",
        _go_reading_of_configurator_enabled,
    ),
    (
        "configurator: configVersion not read, every document read as 2.6 override URLs"
        " (an item applies only at the provider's host:port; `match` not read)",
        _go_reading_of_configurator_version,
    ),
    (
        "configurator: a service item's `applications` not read",
        _go_reading_of_configurator_applications,
    ),
    (
        "configurator: an application item's `services` not read",
        _go_reading_of_configurator_services,
    ),
)


def _dubbo_py_in_go_terms(case: Case) -> Answer:
    """dubbo-py's answer with the application-scope key compared as dubbo-go compares it
    (configureIfMatchInternal: the override URL's ``application``, the key, must be the URL's)."""
    python = dubbo_py_answer(case)
    return _java_reading_of_application_key(case, python) or python


def _configurator_documented(case: Case, go: Answer) -> str | None:
    theirs = _without_go_bookkeeping(case, go)
    copied = [CONFIGURATOR_COPIED] if theirs != go else []
    python = dubbo_py_answer(case)
    keyed = _java_reading_of_application_key(case, python)
    shared = [CONFIGURATOR_APPLICATION_KEY] if keyed is not None else []
    if compare(theirs, keyed or python, "dubbo-go") is None:
        return " + ".join(copied + shared) or None
    rewritten: list[str] = []
    current = case
    for reason, reading in CONFIGURATOR_READINGS:
        alone = reading(case)
        if alone is not None and compare(theirs, _dubbo_py_in_go_terms(alone), "dubbo-go") is None:
            return " + ".join([*copied, reason, *shared])
        combined = reading(current)
        if combined is not None:
            current = combined
            rewritten.append(reason)
    if compare(theirs, _dubbo_py_in_go_terms(current), "dubbo-go") is None:
        return " + ".join(copied + rewritten + shared)
    return None


Reading = Callable[[Case], Case | None]

#: (reason, rewrite into dubbo-go's reading), tried alone and then together.
READINGS: tuple[tuple[str, Reading], ...] = (
    (
        "condition v3.0: force read as enabled and enabled as force",
        _go_reading_of_v30_force_enabled,
    ),
    (
        "condition v3.1 / affinity: a document without `enabled` is off",
        _go_reading_of_missing_enabled,
    ),
    (
        "condition: $name on a when side is the literal text (as Dubbo Java)",
        _java_reading_of_when_references,
    ),
    (
        "condition v3.1: per-condition ratio/force/priority/trafficDisable not read"
        " (as Dubbo Java 3.3.6)",
        _java_reading_of_v31_item_fields,
    ),
    (
        "condition: `valid` not read",
        _go_reading_of_valid,
    ),
    (
        "condition: a consumer without a port has port 0",
        _go_reading_of_consumer_port,
    ),
    (
        "tag: an address without a port never matches",
        _go_reading_of_host_only_addresses,
    ),
    (
        "tag: an empty dubbo.tag attachment is the call's tag",
        _go_reading_of_empty_tag_attachment,
    ),
    (
        "tag: a tagged call's fallback ignores the other tags",
        _go_reading_of_other_tags,
    ),
    (
        "tag: `match` is matched per provider URL, not turned into addresses",
        _go_reading_of_tag_match,
    ),
    (
        "tag: a `regex` match searches the value",
        _go_reading_of_regex,
    ),
    (
        "tag: the document's force applies to a tag without addresses",
        _go_reading_of_tag_force,
    ),
    (
        "tag: an untagged call keeps the providers a tag's `match` selects",
        _go_reading_of_untagged_calls,
    ),
)

#: (kind, which side refuses, text in its error, reason).
REFUSALS: tuple[tuple[str, str, str, str], ...] = (
    (
        "condition",
        "go",
        "miss `ConfigVersion`",
        "condition: a document without configVersion refused (Dubbo Java: read as v3.0)",
    ),
    (
        "condition",
        "dubbo_py",
        ": expected ",
        "condition: a syntax error refused by dubbo-py (dubbo-go, as Dubbo Java: misread)",
    ),
    (
        "tag",
        "dubbo_py",
        "bad port '*'",
        "tag: address host:* refused by dubbo-py (dubbo-go, as Dubbo Java: never matches)",
    ),
)

PANICS: tuple[tuple[str, Callable[[Case, Answer], bool]], ...] = (
    (
        "condition v3.0: a document without both `force` and `enabled` panics",
        _v30_without_force_or_enabled,
    ),
    (
        "condition: arguments[n] on a call with n arguments panics (bounds check off by one)",
        _argument_past_the_end,
    ),
)

#: (reason, test on the case and dubbo-go's answer): dubbo-go's own answers that no rewrite
#: gives dubbo-py.
OWN_ANSWERS: tuple[tuple[str, Callable[[Case, Answer], bool]], ...] = (
    (
        "condition v3.1: a condition that keeps no provider ends the document;"
        " without force every provider is kept",
        _v31_document_fallback,
    ),
    (
        "affinity: a consumer without the key gets no provider at ratio 0",
        _affinity_consumer_without_key,
    ),
)


def documented(case: Case, go: Answer, python: Answer) -> str | None:
    """The reason when dubbo-go's answer differs from dubbo-py's in a way written down in
    docs/compatibility.md, else None."""
    if case["kind"] == "configurator":
        return _configurator_documented(case, go)
    for reason, applies in PANICS:
        if applies(case, go):
            return reason
    for kind, side, text, reason in REFUSALS:
        answer = python if side == "dubbo_py" else go
        if case["kind"] == kind and text in str(answer.get("error", "")):
            return reason
    rewritten: list[str] = []
    current = case
    for reason, reading in READINGS:
        alone = reading(case)
        if alone is not None and compare(go, dubbo_py_answer(alone), "dubbo-go") is None:
            return reason
        combined = reading(current)
        if combined is not None:
            current = combined
            rewritten.append(reason)
    if len(rewritten) > 1 and compare(go, dubbo_py_answer(current), "dubbo-go") is None:
        return " + ".join(rewritten)
    for reason, applies in OWN_ANSWERS:
        if applies(case, go):
            return reason
        if rewritten and applies(current, go):
            return " + ".join((*rewritten, reason))
    return None
