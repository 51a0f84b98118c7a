"""A tiny stand-in rule language for unit tests of code that only *carries* rules (the CLI).

The real condition, tag, script and shard routers are tested on their own; the CLI must work
with whatever :mod:`dubbo_py.router.factory` compiles. These fakes are installed into the
factory with monkeypatch. A fake condition is ``[method = M] => host = H[,H...]``: calls of
method M (any call when there is no ``when`` side) keep only providers on those hosts.
A document is YAML with a non-empty ``conditions`` list; faults raise RuleError with the line
and column of the offending item, as the real compilers do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest
import yaml

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.registry import rule_kinds
from dubbo_py.router import factory
from dubbo_py.router.base import BoundRouter, Router
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL, decode_component


@dataclass(frozen=True)
class _Bound:
    method: str | None
    keep: int
    enabled: bool

    def route(self, candidates: int, invocation: Invocation) -> int:
        if not self.enabled or (self.method is not None and invocation.method != self.method):
            return candidates
        return candidates & self.keep


@dataclass(frozen=True)
class FakeRouter:
    """``[method = M] => host = H,...`` at a priority."""

    name: str
    priority: int
    method: str | None
    hosts: frozenset[str]
    enabled: bool = True

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        keep = snapshot.mask_where(lambda p: p.host in self.hosts)
        return _Bound(self.method, keep, self.enabled)


def parse_fake(text: str, source: str, *, name: str, priority: int, enabled: bool) -> FakeRouter:
    """One fake condition; RuleError with line 1 and the column of the fault."""
    when, arrow, then = text.partition("=>")
    if not arrow:
        raise RuleError("expected '=>'", source=source, line=1, column=len(text) + 1)
    method = None
    if when.strip():
        key, eq, value = when.partition("=")
        if key.strip() != "method" or not eq:
            raise RuleError("only 'method = M' may be on the left", source=source, line=1, column=1)
        method = value.strip()
    key, eq, value = then.partition("=")
    if key.strip() != "host" or not eq or not value.strip():
        column = text.index("=>") + 3
        raise RuleError("expected 'host = H'", source=source, line=1, column=column)
    hosts = frozenset(h.strip() for h in value.split(","))
    return FakeRouter(name, priority, method, hosts, enabled)


def compile_fake_document(text: str, source: str) -> list[Router]:
    """A fake condition document: ``conditions: [...]``, optional ``enabled``."""
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise RuleError(
            f"invalid YAML: {exc.problem}",
            source=source,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        raise RuleError("a rule document must be a mapping", source=source)
    conditions = data.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        raise RuleError("conditions must be a non-empty list", source=source)
    items = next(v for k, v in node.value if k.value == "conditions").value
    enabled = data.get("enabled", True) is not False
    out: list[Router] = []
    for i, (item, item_node) in enumerate(zip(conditions, items, strict=True)):
        try:
            out.append(
                parse_fake(
                    str(item), source, name=f"fake({source})#{i}", priority=140, enabled=enabled
                )
            )
        except RuleError as exc:
            mark = item_node.start_mark
            quote = 1 if item_node.style in ("'", '"') else 0
            raise RuleError(
                exc.reason,
                source=source,
                line=mark.line + 1,
                column=mark.column + quote + (exc.column or 1),
            ) from None
    return out


def compile_fake_url(url: URL, source: str) -> Router:
    """A fake condition router URL (``rule``, ``priority``, ``enabled`` parameters)."""
    rule = decode_component(url.parameters.get("rule", ""))
    return parse_fake(
        rule,
        source,
        name=f"fake({source})",
        priority=url.get_int("priority", 0),
        enabled=url.get_bool("enabled", True),
    )


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make condition, tag and shard documents and router URLs compile with the fakes, and leave
    the built-in routers out, so traces show exactly the scenario's rules."""
    faked = {"condition-router", "tag-router", "shard-router"}
    kinds = tuple(
        dataclasses.replace(k, compilers=dict.fromkeys(k.compilers, compile_fake_document))
        if k.name in faked
        else k
        for k in rule_kinds.RULE_KINDS
    )
    monkeypatch.setattr(rule_kinds, "RULE_KINDS", kinds)
    monkeypatch.setattr(factory, "url_compiler", lambda: compile_fake_url)
    monkeypatch.setattr(factory, "builtin_routers", lambda: [])
