"""Every kind of config-center rule document, in one table: adding a kind touches only this file.

A rule document lives at a config-center key ``<target>.<kind>`` (docs/design.md §5).
:data:`RULE_KINDS` says, for each kind, where consumers read it (its :class:`Target`\\ s) and
with which compiler, which document fields tell the kind, and whether it yields routers or
override rules. Everything that needs to know the kinds reads it:

* the directory (:class:`~dubbo_py.registry.directory.RegistryDirectory`) watches
  :func:`service_keys` and :func:`provider_application_keys` and compiles each document with
  :meth:`WatchedKey.compile`;
* the CLI (``dubbo-py rules ...``, :mod:`dubbo_py.admin.rules.documents`) parses keys, infers
  kinds from fields and validates with the same compilers;
* ``route test`` (:mod:`dubbo_py.admin.rules.scenario`) compiles the rules of a scenario.

So an operator's check runs exactly the code a live consumer runs. Override rules
(``configurators``) compile to no routers: the directory applies them to provider and consumer
URLs (:mod:`dubbo_py.cluster.configurators`), and compiling one only validates it.

Each compiler imports its rule language when it first compiles a document: the table is read
by every consumer and by the CLI, and a process that never receives a condition rule need not
load YAML and the condition grammar (tests/core/test_startup_imports.py).
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dubbo_py.router.base import Router
from dubbo_py.rule_fields import Field, FieldNote, note_unread, unread_fields

__all__ = [
    "RULE_KINDS",
    "UNREAD_DOCUMENTS",
    "DocumentCompiler",
    "RuleKind",
    "Target",
    "UnreadDocument",
    "WatchedKey",
    "infer_kind",
    "kind_named",
    "kind_names",
    "provider_application_keys",
    "service_keys",
    "target_for_document",
    "unread_document",
]

#: Compiles a document (text, source) into routers; raises RuleError when it is invalid.
DocumentCompiler = Callable[[str, str], list[Router]]


class Target(enum.Enum):
    """What the part of a key before ``.<kind>`` names, and so which consumers read it."""

    #: ``<interface>:<version>:<group>``: the consumers of that service.
    SERVICE = "service"
    #: ``<application>``: the consumers of that application (a consumer's own application).
    APPLICATION = "application"
    #: ``<application>``: consumers of any service that application provides (tag and script
    #: rules are written by the provider side, as in Dubbo).
    PROVIDER_APPLICATION = "provider application"

    @property
    def application_scoped(self) -> bool:
        """True when the key's target is an application name."""
        return self is not Target.SERVICE


@dataclass(frozen=True)
class RuleKind:
    """One kind of rule document."""

    #: The key suffix (``condition-router`` for ``demo.Greeter::.condition-router``).
    name: str
    #: Where consumers read it and the compiler for each place (a condition rule read from an
    #: application key runs at another priority than one read from a service key).
    compilers: Mapping[Target, DocumentCompiler]
    #: Document fields that tell this kind (``rules push`` infers the kind from them).
    fields: tuple[str, ...] = ()
    #: True for override rules: applied to URLs by the directory, compiled only to validate.
    overrides: bool = False
    #: False when the document's ``scope``/``key`` fields do not name its key (a shard rule):
    #: pushing one needs ``--key``.
    names_its_key: bool = True
    #: False when a consumer does not read the provider-application key of its own
    #: application (Dubbo's ProviderAppStateRouter and AffinityProviderAppStateRouter skip it:
    #: a consumer's own application's condition rule is read once, as an application rule).
    own_application_as_provider: bool = True
    #: The table of the kind's document fields (:mod:`dubbo_py.rule_fields`), kept next to
    #: its compiler and imported with it; None for a kind of dubbo-py's own that refuses any
    #: field it does not act on (a shard rule).
    field_table: Callable[[], Mapping[str, Field]] | None = None
    #: For a kind that judges what it does not act on item by item, beyond its table (a
    #: configurators item's ``match`` under the wrong ``configVersion``, a consumer key with no
    #: meaning here): the fields it names. Its own reader logs and counts them where consumers
    #: and providers read the document, so :meth:`note_unread` leaves it alone.
    judged: Callable[[str, str], list[FieldNote]] | None = None
    #: False for a kind the directory does not watch: an application's migration rule is
    #: read by the consumer's migration subscriber
    #: (:class:`~dubbo_py.registry.application.migration.MigrationRules`), not as a router.
    directory: bool = True
    #: False for a kind whose documents have no ``enabled`` flag (Dubbo's MigrationRule reads
    #: none): ``rules enable``/``disable`` refuse it.
    has_enabled: bool = True

    def unread(self, text: str, source: str = "") -> list[FieldNote]:
        """The fields of the document ``text`` this kind does not act on (none for a document
        that is not a mapping: its compiler reports that)."""
        if self.judged is not None:
            return self.judged(text, source)
        if self.field_table is None:
            return []
        from dubbo_py.yaml_loader import peek_yaml

        return unread_fields(peek_yaml(text, source), self.field_table())

    def note_unread(self, key: str, text: str) -> None:
        """A consumer read ``text`` at ``key``: log the fields not acted on (once per document
        version) and count them (:func:`dubbo_py.rule_fields.note_unread`)."""
        if self.field_table is not None and self.judged is None:
            note_unread(self.name, key, text, self.field_table())

    @property
    def targets(self) -> frozenset[Target]:
        """Where consumers read documents of this kind."""
        return frozenset(self.compilers)

    @property
    def application_target(self) -> Target | None:
        """How an application key of this kind is read (None: only service keys)."""
        for target in (Target.APPLICATION, Target.PROVIDER_APPLICATION):
            if target in self.compilers:
                return target
        return None

    def key(self, target: str) -> str:
        """The config key of this kind for ``target`` (a rule key or an application name)."""
        return f"{target}.{self.name}"

    def compile(self, target: Target, text: str, source: str) -> list[Router]:
        """Compile a document read at a ``target`` key exactly as consumers do (override
        rules: validate, no routers); RuleError when it is invalid, ValueError when this kind
        is never read there."""
        compiler = self.compilers.get(target)
        if compiler is None:
            raise ValueError(f"{self.name} rules are not read at {target.value} keys")
        return compiler(text, source)


@dataclass(frozen=True)
class WatchedKey:
    """A config key a consumer watches, with the kind and target it is read as."""

    kind: RuleKind
    target: Target
    key: str

    def compile(self, text: str, source: str) -> list[Router]:
        """Compile the document at this key as consumers do (see :meth:`RuleKind.compile`)."""
        return self.kind.compile(self.target, text, source)


def _condition_service(text: str, source: str) -> list[Router]:
    from dubbo_py.router.condition import carriers

    return carriers.service_routers_from_yaml(text, source)


def _condition_application(text: str, source: str) -> list[Router]:
    from dubbo_py.router.condition import carriers

    return carriers.application_routers_from_yaml(text, source)


def _condition_provider_application(text: str, source: str) -> list[Router]:
    from dubbo_py.router.condition import carriers

    return carriers.provider_application_routers_from_yaml(text, source)


def _affinity_service(text: str, source: str) -> list[Router]:
    from dubbo_py.router import affinity

    return list(affinity.service_routers(text, source))


def _affinity_provider_application(text: str, source: str) -> list[Router]:
    from dubbo_py.router import affinity

    return list(affinity.provider_application_routers(text, source))


def _tag_router(text: str, source: str) -> list[Router]:
    from dubbo_py.router.tag import TagRouter, parse_tag_rule

    return [TagRouter(parse_tag_rule(text, source))]


def _script_router(text: str, source: str) -> list[Router]:
    from dubbo_py.router.script import ScriptRouter, parse_script_rule

    return [ScriptRouter(parse_script_rule(text, source))]


def _shard_router(text: str, source: str) -> list[Router]:
    from dubbo_py.router.shard.router import compile_shard_document

    return compile_shard_document(text, source)


def _condition_fields() -> Mapping[str, Field]:
    from dubbo_py.router.condition import carriers

    return carriers.FIELDS


def _tag_fields() -> Mapping[str, Field]:
    from dubbo_py.router import tag_rule

    return tag_rule.FIELDS


def _script_fields() -> Mapping[str, Field]:
    from dubbo_py.router.script import rule

    return rule.FIELDS


def _affinity_fields() -> Mapping[str, Field]:
    from dubbo_py.router import affinity

    return affinity.FIELDS


def _override_fields() -> Mapping[str, Field]:
    from dubbo_py.cluster import configurators

    return configurators.FIELDS


def _override_judged(text: str, source: str) -> list[FieldNote]:
    from dubbo_py.cluster import configurators

    notes = []
    for line in configurators.unacted_fields(text, source):
        path, _, why = line.partition(": ")
        notes.append(FieldNote(path, True, why))
    return notes


def _validate_overrides(text: str, source: str) -> list[Router]:
    from dubbo_py.cluster import configurators

    configurators.parse_configurators_yaml(text, source)
    return []


def _validate_migration(text: str, source: str) -> list[Router]:
    from dubbo_py.registry.application import migration

    migration.validate_document(text, source)
    return []


def _migration_fields() -> Mapping[str, Field]:
    from dubbo_py.registry.application import migration

    return migration.FIELDS


#: Every rule kind, in the order the CLI lists them.
RULE_KINDS: tuple[RuleKind, ...] = (
    RuleKind(
        "condition-router",
        {
            # Where a condition document is stored sets its priority (Dubbo's
            # ServiceStateRouter 140, AppStateRouter 150, ProviderAppStateRouter 145),
            # whatever its scope field says.
            Target.SERVICE: _condition_service,
            Target.APPLICATION: _condition_application,
            Target.PROVIDER_APPLICATION: _condition_provider_application,
        },
        fields=("conditions",),
        own_application_as_provider=False,
        field_table=_condition_fields,
    ),
    RuleKind(
        "affinity-router",
        {
            # Dubbo 3.3's AffinityServiceStateRouter (130), AffinityProviderAppStateRouter (135).
            Target.SERVICE: _affinity_service,
            Target.PROVIDER_APPLICATION: _affinity_provider_application,
        },
        fields=("affinityAware",),
        own_application_as_provider=False,
        field_table=_affinity_fields,
    ),
    RuleKind(
        "tag-router",
        {Target.PROVIDER_APPLICATION: _tag_router},
        fields=("tags",),
        field_table=_tag_fields,
    ),
    RuleKind(
        "script-router",
        {Target.PROVIDER_APPLICATION: _script_router},
        fields=("script",),
        field_table=_script_fields,
    ),
    RuleKind(
        "shard-router",
        {Target.SERVICE: _shard_router},
        fields=("scheme", "shards"),
        names_its_key=False,
    ),
    RuleKind(
        "configurators",
        {Target.SERVICE: _validate_overrides, Target.APPLICATION: _validate_overrides},
        fields=("configs",),
        overrides=True,
        field_table=_override_fields,
        # Judged item by item (cluster.configurators.unacted_fields); consumers and providers
        # log and count them in configurators.validate_document.
        judged=_override_judged,
    ),
    RuleKind(
        # <application>.migration, in the DUBBO_SERVICEDISCOVERY_MIGRATION group
        # (layout.config_path): which level the application's consumers read providers from.
        "migration",
        {Target.APPLICATION: _validate_migration},
        fields=("step", "interfaces", "applications"),
        field_table=_migration_fields,
        directory=False,
        has_enabled=False,
    ),
)


@dataclass(frozen=True)
class UnreadDocument:
    """A kind of document Dubbo reads that dubbo-py does not: the CLI names it, by name."""

    #: What it is, with its article (``a mesh VirtualService rule``).
    name: str
    #: Whether a document is one: its top-level mapping.
    test: Callable[[Mapping[str, object]], bool]
    #: Why dubbo-py does not read it.
    why: str


#: Documents out of dubbo-py's scope, named by the CLI instead of "cannot tell the kind".
UNREAD_DOCUMENTS: tuple[UnreadDocument, ...] = (
    UnreadDocument(
        "a mesh VirtualService rule",
        lambda d: d.get("kind") == "VirtualService",
        "Dubbo's mesh routing (service.dubbo.apache.org/v1alpha1) is out of dubbo-py's scope; "
        "condition and tag rules cover its routing",
    ),
    UnreadDocument(
        "a mesh DestinationRule",
        lambda d: d.get("kind") == "DestinationRule",
        "Dubbo's mesh routing (service.dubbo.apache.org/v1alpha1) is out of dubbo-py's scope; "
        "condition and tag rules cover its routing",
    ),
)


def unread_document(data: object) -> UnreadDocument | None:
    """The out-of-scope kind a document is, None when it is none of them."""
    if not isinstance(data, Mapping):
        return None
    return next((u for u in UNREAD_DOCUMENTS if u.test(data)), None)


def _kinds() -> tuple[RuleKind, ...]:
    # Read at call time, so a test can put its own table in place.
    return RULE_KINDS


def kind_names() -> tuple[str, ...]:
    """Every kind's name (key suffix)."""
    return tuple(k.name for k in _kinds())


def kind_named(name: str) -> RuleKind | None:
    """The kind with this name, None when there is none."""
    return next((k for k in _kinds() if k.name == name), None)


def infer_kind(data: object) -> RuleKind | None:
    """The kind a document's fields tell, None when none or several do."""
    if not isinstance(data, Mapping):
        return None
    found = {k.name: k for k in _kinds() for f in k.fields if f in data}
    return next(iter(found.values())) if len(found) == 1 else None


def service_keys(rule_prefix: str, application: str) -> list[WatchedKey]:
    """The keys a consumer of one service watches before it knows any provider: its service's
    (``rule_prefix`` = ``<interface>:<version>:<group>``) and its own application's."""
    keys = [
        WatchedKey(k, Target.SERVICE, k.key(rule_prefix))
        for k in _kinds()
        if Target.SERVICE in k.compilers and k.directory
    ]
    if application:
        keys += [
            WatchedKey(k, Target.APPLICATION, k.key(application))
            for k in _kinds()
            if Target.APPLICATION in k.compilers and k.directory
        ]
    return keys


def provider_application_keys(application: str, consumer_application: str = "") -> list[WatchedKey]:
    """The keys a consumer of ``consumer_application`` watches for each provider application it
    sees: every provider-application kind, but not those that skip the consumer's own
    application (:attr:`RuleKind.own_application_as_provider`) when it is that one."""
    own = application == consumer_application
    kinds = _kinds()
    # Every directory of a consumer watches the same keys for the same provider application
    # (1 000 services x 10 applications: 80 000 watches of 80 keys): one set of key objects
    # and strings per application, not one per directory (issue 42).
    cache_key = (application, own)
    found = _PROVIDER_APP_KEYS.get(cache_key)
    if found is None or found[0] is not kinds:
        keys = tuple(
            WatchedKey(k, Target.PROVIDER_APPLICATION, sys.intern(k.key(application)))
            for k in kinds
            if Target.PROVIDER_APPLICATION in k.compilers
            and k.directory
            and not (own and not k.own_application_as_provider)
        )
        if len(_PROVIDER_APP_KEYS) >= _PROVIDER_APP_KEYS_MAX:
            _PROVIDER_APP_KEYS.clear()  # an estate of that many applications: start again
        found = _PROVIDER_APP_KEYS[cache_key] = (kinds, keys)
    return list(found[1])


#: (application, whether it is the consumer's own) -> (the kinds table, the keys watched).
_PROVIDER_APP_KEYS: dict[tuple[str, bool], tuple[tuple[RuleKind, ...], tuple[WatchedKey, ...]]] = {}
_PROVIDER_APP_KEYS_MAX = 4096


def target_for_document(kind: RuleKind, data: object, consumer_application: str = "") -> Target:
    """How to read a document of ``kind`` that is not stored at a key (a ``route test``
    scenario, a file checked without ``--key``): at an application key when the kind is read
    only there or the document says ``scope: application``, else at a service key. Given the
    consumer's application, an application document whose ``key`` names another application
    is read as that provider application's (a condition rule at priority 145, not 150)."""
    application = kind.application_target
    if application is None:
        return Target.SERVICE
    if Target.SERVICE not in kind.targets:
        return application
    if isinstance(data, Mapping) and data.get("scope") == "application":
        key = data.get("key")
        if (
            application is Target.APPLICATION
            and Target.PROVIDER_APPLICATION in kind.targets
            and consumer_application
            and isinstance(key, str)
            and key.strip()
            and key.strip() != consumer_application
        ):
            return Target.PROVIDER_APPLICATION
        return application
    return Target.SERVICE
