"""The tag router: keep tagged traffic on tagged providers and untagged traffic off them.

Providers are tagged statically (the ``dubbo.tag`` parameter of their URL) and dynamically (a
:class:`~dubbo_py.router.tag_rule.TagRule` naming addresses or parameter matches). A call's tag is
its ``dubbo.tag`` attachment, else the consumer URL's ``dubbo.tag`` parameter; ``dubbo.force.tag``
(attachment, else consumer URL) forbids falling back to untagged providers.

Semantics follow Apache Dubbo 3.3's ``TagStateRouter`` (dubbo-cluster, router/tag), including the
hierarchical ``a|b|c`` tag fallback of ``selectAddressByTagLevel``:

Without an enabled rule (static tags only):

- tagged call: providers with that static tag; if none and not force.tag, untagged providers;
- untagged call: providers without a static tag.

With an enabled rule:

- tagged call whose tag (or, for ``a|b|c`` without force.tag, its longest prefix) names a rule tag
  with an address set: providers in that set; if none, nobody when the rule has ``force: true``,
  else continue below with an empty result;
- tagged call whose tag is not such a rule tag: providers with that static tag;
- if still nobody and not force.tag: *failover* to providers that are in no rule tag's address set
  and carry no static tag (with force.tag: nobody);
- untagged call: providers in no rule tag's address set and without a static tag.

Everything that depends on providers is computed at bind; a call does dictionary look-ups and a
few mask operations, whatever the number of providers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dubbo_py.invocation import TAG_ATTACHMENT, Invocation
from dubbo_py.router.rule_budget import check_budget
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.router.tag_rule import TagDefinition, TagRule, parse_tag_rule, validate_tag_yaml
from dubbo_py.url import URL

__all__ = [
    "FORCE_TAG_KEY",
    "TAG_KEY",
    "TAG_ROUTER_PRIORITY",
    "TAG_SEPARATOR",
    "BoundTagRouter",
    "TagRouter",
    "TagRule",
    "parse_tag_rule",
    "validate_tag_yaml",
]

#: Provider URL parameter, consumer URL parameter and call attachment carrying a tag.
TAG_KEY = TAG_ATTACHMENT
#: ``true`` forbids the fallback from a tag with no providers to untagged providers.
FORCE_TAG_KEY = "dubbo.force.tag"
#: Separates the levels of a hierarchical tag (``gray|team1|partner1``).
TAG_SEPARATOR = "|"
TAG_ROUTER_PRIORITY = 100


@dataclass(frozen=True, eq=False)
class BoundTagRouter:
    """Tag masks of one snapshot. ``dynamic`` is ``None`` when no enabled rule applies."""

    static: Mapping[str, int]
    """static tag -> providers carrying it"""
    untagged: int
    """providers an untagged call (or a failover) may reach"""
    dynamic: Mapping[str, int] | None
    """rule tag with an address set -> providers in that set (possibly none)"""
    rule_force: bool
    consumer_tag: str
    consumer_force: bool

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Apply the tag semantics of the module docstring to ``candidates``."""
        attachments = invocation.attachments
        tag = attachments.get(TAG_KEY) or self.consumer_tag
        if not tag:
            return candidates & self.untagged
        force_text = attachments.get(FORCE_TAG_KEY)
        force_tag = force_text.strip().lower() == "true" if force_text else self.consumer_force
        if self.dynamic is not None:
            entry = self._dynamic_entry(tag, force_tag)
            if entry is not None:
                result = candidates & entry
                if result or self.rule_force:
                    return result
            else:
                result = candidates & self.static.get(tag, 0)
        else:
            result = candidates & self.static.get(tag, 0)
        if result or force_tag:
            return result
        return candidates & self.untagged

    def specialize(self, call: Invocation) -> tuple[BoundTagRouter, bool]:
        """A plain call carries no tag: only the consumer's own tag, fixed at bind time,
        decides."""
        return self, False

    def _dynamic_entry(self, tag: str, force_tag: bool) -> int | None:
        dynamic = self.dynamic
        assert dynamic is not None
        entry = dynamic.get(tag)
        if entry is not None or force_tag:
            return entry
        # Dubbo's selectAddressByTagLevel: "a|b|c" falls back to "a|b", then "a".
        probe = tag
        while (cut := probe.rfind(TAG_SEPARATOR)) > 0:
            probe = probe[:cut]
            entry = dynamic.get(probe)
            if entry is not None:
                return entry
        return None


class TagRouter:
    """The tag router (priority 100) with an optional dynamic rule; immutable, so a rule change
    builds a new router."""

    priority = TAG_ROUTER_PRIORITY

    def __init__(self, rule: TagRule | None = None) -> None:
        self.rule = rule

    @property
    def name(self) -> str:
        """``tag`` or ``tag:<application>`` when a dynamic rule is present."""
        return f"tag:{self.rule.key}" if self.rule is not None else "tag"

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundTagRouter:
        """Index static tags and evaluate the rule's address sets against ``snapshot``."""
        groups = snapshot.partition("tag.static", _static_tag)
        static = {str(tag): mask for tag, mask in groups.items() if tag}
        untagged_static = groups.get("", 0)
        rule = self.rule
        dynamic: dict[str, int] | None = None
        untagged = untagged_static
        if rule is not None and rule.enabled:
            dynamic = {}
            for definition in rule.tags:
                mask = _tag_mask(definition, snapshot)
                if mask is not None:
                    dynamic[definition.name] = mask
            in_any = 0
            for mask in dynamic.values():
                in_any |= mask
            untagged = untagged_static & ~in_any
        return BoundTagRouter(
            static=static,
            untagged=untagged,
            dynamic=dynamic,
            rule_force=rule.force if rule is not None else False,
            consumer_tag=consumer.get_str(TAG_KEY),
            consumer_force=consumer.get_bool(FORCE_TAG_KEY),
        )

    def __repr__(self) -> str:
        return f"TagRouter({self.rule.key if self.rule is not None else None!r})"


def _static_tag(url: URL) -> str:
    """A provider's static tag, ``""`` when it has none."""
    return url.parameters.get(TAG_KEY) or ""


def _tag_mask(definition: TagDefinition, snapshot: Snapshot) -> int | None:
    """The providers of a rule tag, or ``None`` when the tag has no address set (Dubbo leaves
    such tags out of ``tagnameToAddresses``, so their calls go by static tag)."""
    if definition.addresses is not None:
        patterns = definition.addresses
        return snapshot.mask_by(
            ("tag.addresses", patterns),
            lambda url: any(p.matches(url.host, url.port) for p in patterns),
        )
    if definition.match is not None:
        conditions = definition.match
        # Dubbo turns the matching providers into their addresses, then selects by address.
        addresses = set()
        for url in snapshot.providers:
            check_budget(f"tag {definition.name!r} matching providers")
            if all(c.matches(url.parameters) for c in conditions):
                addresses.add(url.address)
        if addresses:
            return snapshot.mask_where(lambda url: url.address in addresses)
    return None
