"""The shard rule: a YAML document at ``<interface>:<version>:<group>.shard-router``.

.. code-block:: yaml

    scheme: elasticsearch          # elasticsearch | elasticsearch-modulo | solr
    shards: 4
    routing_num_shards: 1024       # elasticsearch only; default: what Elasticsearch picks
    partition_size: 1              # elasticsearch schemes; > 1 spreads a routing value
    id: arguments[0]               # with partition_size > 1: where the document id comes from
    key: attachments[tenant]       # where the routing key comes from (or arguments[N])
    force: true                    # missing key: error (true, the default) or all providers
    split_from: 2                  # a split 2 -> 4 is in progress (see docs/sharding.md)
    initial_shards: 3              # solr: the shard count the collection was created with
    enabled: true

Every problem is a :class:`~dubbo_py.router.base.RuleError` naming the source, the field and,
where the YAML has it, the line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from dubbo_py.errors import RuleError
from dubbo_py.invocation import Invocation
from dubbo_py.router.shard.plan import SplitPlan, plan_split
from dubbo_py.router.shard.schemes import Layout, LayoutError, Scheme, make_layout
from dubbo_py.yaml_loader import YamlDocument, compile_yaml

__all__ = ["KeySource", "ShardRule", "parse_key_source", "parse_shard_rule"]

_ATTACHMENT = re.compile(r"attachments\[\s*([^\[\]]*?)\s*\]")
_ARGUMENT = re.compile(r"arguments\[\s*(\d+)\s*\]")

_FIELDS = (
    "scheme",
    "shards",
    "key",
    "id",
    "routing_num_shards",
    "partition_size",
    "initial_shards",
    "split_from",
    "force",
    "enabled",
    "configVersion",
)


@dataclass(frozen=True, slots=True)
class KeySource:
    """Where a value comes from in an invocation: ``attachments[name]`` or ``arguments[N]``."""

    kind: Literal["attachments", "arguments"]
    name: str = ""
    index: int = 0

    def __str__(self) -> str:
        if self.kind == "attachments":
            return f"attachments[{self.name}]"
        return f"arguments[{self.index}]"

    def read(self, invocation: Invocation) -> str | None:
        """The value as a string, or ``None`` when the invocation does not carry it.

        Values are converted with ``str()`` (bytes are decoded as UTF-8); an empty string counts
        as missing, because protobuf cannot tell an unset string field from an empty one.
        """
        value: Any
        if self.kind == "attachments":
            value = invocation.attachments.get(self.name)
        else:
            arguments = invocation.arguments
            value = arguments[self.index] if self.index < len(arguments) else None
        if value is None:
            return None
        if isinstance(value, bytes | bytearray):
            text = bytes(value).decode("utf-8", "surrogateescape")
        else:
            text = value if isinstance(value, str) else str(value)
        return text or None


def parse_key_source(text: str) -> KeySource:
    """Parse ``attachments[name]`` or ``arguments[N]``; raises ``ValueError`` otherwise."""
    text = text.strip()
    match = _ATTACHMENT.fullmatch(text)
    if match:
        if not match.group(1):
            raise ValueError("attachments[...] needs an attachment name")
        return KeySource("attachments", name=match.group(1))
    match = _ARGUMENT.fullmatch(text)
    if match:
        return KeySource("arguments", index=int(match.group(1)))
    raise ValueError(f"expected attachments[name] or arguments[N], got {text!r}")


@dataclass(frozen=True)
class ShardRule:
    """A parsed shard rule (see the module docstring for the fields).

    ``routing_num_shards`` and ``initial_shards`` are as written (``None``: the default);
    :attr:`layout` is the layout keys are located in, :attr:`old_layout` the one before the split
    when ``split_from`` is set.
    """

    scheme: Scheme
    shards: int
    key: KeySource
    id: KeySource | None = None
    routing_num_shards: int | None = None
    partition_size: int = 1
    initial_shards: int | None = None
    split_from: int | None = None
    force: bool = True
    enabled: bool = True

    @cached_property
    def layout(self) -> Layout:
        """The layout keys are located in (``shards`` shards)."""
        return make_layout(
            self.scheme,
            self.shards,
            routing_num_shards=self.routing_num_shards,
            partition_size=self.partition_size,
            initial_shards=self.initial_shards,
        )

    @cached_property
    def old_layout(self) -> Layout | None:
        """The layout before the split (``split_from`` shards), or ``None`` when not splitting.

        It shares ``routing_num_shards`` (Elasticsearch keeps it across a split) and
        ``initial_shards`` (Solr's halving starts from the same created layout).
        """
        if self.split_from is None:
            return None
        layout = self.layout
        return make_layout(
            self.scheme,
            self.split_from,
            routing_num_shards=layout.routing_num_shards
            if self.scheme is Scheme.ELASTICSEARCH
            else None,
            partition_size=self.partition_size,
            initial_shards=self.initial_shards,
        )

    @cached_property
    def split_plan(self) -> SplitPlan | None:
        """The plan of the split in progress (``split_from`` -> ``shards`` shards), or ``None``
        when not splitting; :class:`LayoutError` when the counts describe no layout."""
        if self.split_from is None:
            return None
        return plan_split(
            self.scheme,
            self.split_from,
            self.shards,
            self.routing_num_shards if self.split_from > 1 else None,
            self.initial_shards,
        )


class _Doc:
    """The parsed document plus the position of each top-level value, for error messages."""

    def __init__(self, doc: YamlDocument) -> None:
        self.source = doc.source
        data = doc.data
        if not isinstance(data, dict):
            raise RuleError(
                f"a shard rule must be a YAML mapping, got {type(data).__name__}",
                source=self.source,
            )
        self.data: dict[Any, Any] = data
        self.doc = doc

    def fail(self, path: str, message: str) -> RuleError:
        # A field that is missing is reported at the document itself.
        line, column = self.doc.position((path,))
        if line is None:
            line, column = self.doc.position(())
        return RuleError(f"{path}: {message}", source=self.source, line=line, column=column)

    def value(self, name: str, *, required: bool = False, takes: str = "") -> Any:
        """The field's value, ``None`` when absent: then an error if ``required`` (``takes``
        says what it takes)."""
        value = self.data.get(name)
        if value is None and required:
            raise self.fail(name, f"is required{takes}")
        return value

    def integer(self, name: str, *, required: bool = False) -> int | None:
        value = self.value(name, required=required)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.fail(name, f"must be an integer, got {value!r}")
        return value

    def boolean(self, name: str, default: bool) -> bool:
        value = self.data.get(name, default)
        if not isinstance(value, bool):
            raise self.fail(name, f"must be true or false, got {value!r}")
        return value

    def key_source(self, name: str, *, required: bool = False) -> KeySource | None:
        value = self.value(name, required=required, takes=" (attachments[name] or arguments[N])")
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(name, f"must be attachments[name] or arguments[N], got {value!r}")
        try:
            return parse_key_source(value)
        except ValueError as exc:
            raise self.fail(name, str(exc)) from None


def parse_shard_rule(text: str, source: str = "") -> ShardRule:
    """Parse and validate a shard rule; raises :class:`RuleError` naming ``source``, the field
    and the problem (with line and column when the YAML gives them)."""
    return compile_yaml(text, source, _shard_rule, error=RuleError, empty="empty shard rule")


def _shard_rule(yaml_doc: YamlDocument) -> ShardRule:
    doc = _Doc(yaml_doc)
    for name in doc.data:
        if name not in _FIELDS:
            raise doc.fail(str(name), f"unknown field (expected one of {', '.join(_FIELDS)})")
    scheme_text = doc.value(
        "scheme", required=True, takes=" (elasticsearch, elasticsearch-modulo or solr)"
    )
    try:
        scheme = Scheme(str(scheme_text))
    except ValueError:
        raise doc.fail(
            "scheme",
            f"unknown scheme {scheme_text!r} (elasticsearch, elasticsearch-modulo or solr)",
        ) from None
    shards = doc.integer("shards", required=True)
    assert shards is not None
    key = doc.key_source("key", required=True)
    assert key is not None
    doc_id = doc.key_source("id")
    routing_num_shards = doc.integer("routing_num_shards")
    partition_size = doc.integer("partition_size")
    initial_shards = doc.integer("initial_shards")
    split_from = doc.integer("split_from")
    rule = ShardRule(
        scheme=scheme,
        shards=shards,
        key=key,
        id=doc_id,
        routing_num_shards=routing_num_shards,
        partition_size=1 if partition_size is None else partition_size,
        initial_shards=initial_shards,
        split_from=split_from,
        force=doc.boolean("force", True),
        enabled=doc.boolean("enabled", True),
    )
    try:
        layout = rule.layout
    except LayoutError as exc:
        raise doc.fail(exc.field, exc.reason) from None
    if doc_id is not None and layout.partition_size == 1:
        raise doc.fail("id", "applies to partitioned routing only (partition_size > 1)")
    if split_from is not None:
        _check_split(doc, rule)
    return rule


def _check_split(doc: _Doc, rule: ShardRule) -> None:
    assert rule.split_from is not None
    if rule.scheme is Scheme.ELASTICSEARCH and rule.routing_num_shards is None:
        # The default depends on the shard count, so it could differ before and after the split
        # (512 -> 1024 shards: 1024 vs 2048 routing shards) and silently move keys.
        raise doc.fail(
            "routing_num_shards",
            "is required during a split: Elasticsearch fixes it when the index is created and "
            "keeps it across the split (dubbo-py shard plan prints the value to use)",
        )
    if (
        rule.scheme is Scheme.SOLR
        and rule.initial_shards is None
        and rule.shards & (rule.shards - 1)
    ):
        raise doc.fail(
            "initial_shards",
            "is required during a split to a shard count that is not a power of two: the "
            "ranges depend on the count the collection was created with",
        )
    try:
        plan = rule.split_plan
    except LayoutError as exc:
        field = (
            "split_from" if exc.field in ("shards", "to_shards", "initial_shards") else exc.field
        )
        raise doc.fail(field, exc.reason) from None
    assert plan is not None
    if not plan.ok:
        raise doc.fail(
            "split_from", f"cannot split {rule.split_from} -> {rule.shards}: {plan.refusal}"
        )
