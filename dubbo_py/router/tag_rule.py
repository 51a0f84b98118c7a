"""Dynamic tag rules: the YAML stored at ``<provider application>.tag-router``.

The model and its reading follow Apache Dubbo 3.3's ``TagRouterRule``, ``Tag`` and ``ParamMatch``
(dubbo-cluster, router/tag/model)::

    configVersion: v3.0          # `match` is honoured only for v3.0 rules, as in Dubbo
    key: shop-detail             # the provider application (required)
    enabled: true                # false: the rule is off, static dubbo.tag routing still applies
    force: false                 # a tag whose address set selects nobody returns nobody
    runtime: true                # accepted and kept; routing is always precomputed here
    tags:
      - name: gray
        match:                   # providers whose URL parameters all match ...
          - key: env
            value: {exact: gray}
      - name: canary
        addresses: ["10.0.0.5:20880", "10.1.0.0/16"]   # ... or these addresses

A tag with ``addresses`` uses them and ignores ``match`` (Dubbo does the same). Unlike Dubbo,
which silently drops what it cannot read, every problem is a :class:`RuleError` naming the
source, the place (``tags[1].match[0].value``) and its line/column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dubbo_py.errors import RuleError
from dubbo_py.router.address_pattern import AddressPattern, parse_address_pattern
from dubbo_py.router.string_match import MATCH_KINDS, ParamMatch, parse_string_match
from dubbo_py.rule_fields import Field, acted, document_fields, ignored
from dubbo_py.yaml_loader import YamlDocument, compile_yaml

__all__ = ["TagDefinition", "TagRule", "parse_tag_rule", "validate_tag_yaml"]

#: ``match`` needs a configVersion starting with this (Dubbo's ``RULE_VERSION_V30``).
MATCH_CONFIG_VERSION = "v3.0"


@dataclass(frozen=True)
class TagDefinition:
    """One entry of ``tags``: a name and how its providers are chosen.

    ``addresses`` is ``None`` when the entry gives none (or an empty list); ``match`` is ``None``
    unless the entry selects by parameters (and has no addresses)."""

    name: str
    addresses: tuple[AddressPattern, ...] | None = None
    match: tuple[ParamMatch, ...] | None = None


@dataclass(frozen=True)
class TagRule:
    """A parsed dynamic tag rule (see the module docstring for the YAML)."""

    key: str
    tags: tuple[TagDefinition, ...]
    enabled: bool = True
    force: bool = False
    runtime: bool = True
    priority: int = 0
    config_version: str = ""
    source: str = ""

    @property
    def tag_names(self) -> tuple[str, ...]:
        """The names of all tags of the rule, in rule order."""
        return tuple(t.name for t in self.tags)


def parse_tag_rule(text: str, source: str) -> TagRule:
    """Read and validate a tag rule; RuleError naming ``source``, the place and the problem."""
    return compile_yaml(text, source, _tag_rule, error=RuleError, empty="rule is empty")


#: Every field of a tag document and what dubbo-py does with it (the no-silent-drop table,
#: :mod:`dubbo_py.rule_fields`).
FIELDS: Mapping[str, Field] = document_fields(
    force=acted(),
    runtime=ignored(
        "tags are matched for every call (Dubbo 3.3's TagStateRouter does not read it either)"
    ),
    priority=ignored("the tag router runs at its fixed place in the chain, as Dubbo's"),
    dynamic=ignored("rule documents are always dynamic (Dubbo reads and drops it)"),
    valid=ignored("Dubbo reads and drops it"),
    tags=acted(
        name=acted(),
        addresses=acted(),
        match=acted(key=acted(), value=acted(**{kind: acted() for kind in MATCH_KINDS})),
    ),
)


def _tag_rule(doc: YamlDocument) -> TagRule:
    source = doc.source
    doc.mapping()
    config_version = doc.get_str(("configVersion",))
    key = doc.get_str(("key",), required=True)
    tags_raw = doc.get_list(("tags",))
    if not tags_raw:
        where = ("tags",) if tags_raw is not None else ()
        raise doc.error(where, "'tags' must be a non-empty list")
    tags: list[TagDefinition] = []
    seen: set[str] = set()
    for i in range(len(tags_raw)):
        tag = _parse_tag(doc, ("tags", i), config_version)
        if tag.name in seen:
            raise doc.error(("tags", i, "name"), f"duplicate tag name {tag.name!r}")
        seen.add(tag.name)
        tags.append(tag)
    return TagRule(
        key=key,
        tags=tuple(tags),
        enabled=doc.get_bool(("enabled",), True),
        force=doc.get_bool(("force",), False),
        runtime=doc.get_bool(("runtime",), True),
        priority=doc.get_int(("priority",), 0),
        config_version=config_version,
        source=source,
    )


def validate_tag_yaml(text: str, source: str) -> None:
    """Check a tag rule without keeping it (``dubbo-py rule validate``); raises RuleError."""
    parse_tag_rule(text, source)


def _parse_tag(doc: YamlDocument, path: tuple[str | int, ...], version: str) -> TagDefinition:
    doc.mapping(path)
    name = doc.get_str((*path, "name"), required=True).strip()
    addresses: tuple[AddressPattern, ...] | None = None
    raw_addresses = doc.get_list((*path, "addresses"))
    if raw_addresses:
        parsed: list[AddressPattern] = []
        for j, entry in enumerate(raw_addresses):
            where = (*path, "addresses", j)
            if not isinstance(entry, str | int):
                raise doc.error(where, f"expected an address string, got {entry!r}")
            try:
                parsed.append(parse_address_pattern(str(entry)))
            except ValueError as exc:
                raise doc.error(where, str(exc)) from None
        addresses = tuple(parsed)
    match: tuple[ParamMatch, ...] | None = None
    raw_match = doc.get_list((*path, "match"))
    if raw_match is not None:
        if not version.startswith(MATCH_CONFIG_VERSION):
            raise doc.error(
                (*path, "match"),
                f"'match' needs configVersion: {MATCH_CONFIG_VERSION} (Dubbo ignores it otherwise)",
            )
        if not raw_match:
            raise doc.error((*path, "match"), "must list at least one condition")
        conditions: list[ParamMatch] = []
        for j in range(len(raw_match)):
            where = (*path, "match", j)
            doc.mapping(where)
            param = doc.get_str((*where, "key"), required=True)
            if "value" not in doc.at(where):
                raise doc.error(where, "'value' is required")
            try:
                condition = parse_string_match(doc.mapping((*where, "value")))
            except ValueError as exc:
                raise doc.error((*where, "value"), str(exc)) from None
            conditions.append(ParamMatch(param, condition))
        if addresses is None:
            match = tuple(conditions)
    return TagDefinition(name=name, addresses=addresses, match=match)
