"""Which level a consumer reads providers from, switched live by Dubbo's migration rule.

A consumer starts in its configured :class:`~.modes.MigrationStep`; the YAML document
``<application>.migration`` in the config center's ``DUBBO_SERVICEDISCOVERY_MIGRATION`` group
(Dubbo's ``MigrationRule``) overrides it, globally (``step``, ``threshold``, ``force``) or per
interface (``interfaces: [{serviceKey: "<interface>[:<version>]", step: ...}]``) or per provider
application (``applications: [{serviceKey: <app>, step: ...}]``)::

    key: shop
    step: FORCE_APPLICATION
    interfaces:
      - serviceKey: demo.Greeter:1.0.0
        step: FORCE_INTERFACE

``APPLICATION_FIRST`` uses the application level as soon as it has a provider for the consumer
and its share of the interface level's count reaches ``threshold`` (default 0), else the
interface level (Dubbo's ``DefaultMigrationAddressComparator``). A rule moving to a ``FORCE_*``
step whose level has no provider is not applied unless it says ``force: true`` (the consumer
stays where it is, with a warning). A document that does not parse is logged with its path and
the previous rule stays in force.

:class:`MigrationSubscriber` has the registry's ``subscribe`` signature: it hands the directory
the chosen level's providers as the ``providers`` category, so routers, balancers, override
rules and the notify cache work the same at both levels.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dubbo_py.callbacks import add_callback
from dubbo_py.registry import layout
from dubbo_py.registry.application.discovery import AppLevelProviders, ApplicationDiscovery
from dubbo_py.registry.application.modes import MigrationStep
from dubbo_py.registry.application.paths import migration_path
from dubbo_py.registry.empty_protection import SwitchedProviders
from dubbo_py.registry.matching import ProviderFilter
from dubbo_py.registry.registry import ChangedURLs, Registry, empty_url, is_empty
from dubbo_py.registry.store.base import Cancel, Store
from dubbo_py.rule_fields import Field, acted, ignored
from dubbo_py.url import URL

__all__ = [
    "Choice",
    "CountingFilter",
    "MigrationRule",
    "MigrationRuleError",
    "MigrationRules",
    "MigrationSubscriber",
    "SubRule",
    "choose",
    "display_service_key",
    "validate_document",
]

log = logging.getLogger(__name__)

#: Seconds a consumer waits for its application's migration rule before its first provider
#: list (the rule's absence is read at once; this bounds a slow registry).
RULE_WAIT = 2.0


class CountingFilter(ProviderFilter):
    """The directory's provider selection, without its log lines: used to *count* what a
    consumer could call at each level (the directory reports skipped providers itself)."""

    def _once(self, url: URL, reason: str, level: int, message: str, *args: object) -> None:
        return


class MigrationRuleError(ValueError):
    """A migration document that cannot be applied (the message says where and why)."""


@dataclass(frozen=True, slots=True)
class SubRule:
    """Settings for one interface or one provider application."""

    step: MigrationStep | None = None
    threshold: float | None = None
    force: bool | None = None


@dataclass(frozen=True, slots=True)
class MigrationRule:
    """Dubbo's migration rule (``MigrationRule``); an empty rule changes nothing."""

    key: str = ""
    step: MigrationStep | None = None
    threshold: float | None = None
    force: bool | None = None
    interfaces: Mapping[str, SubRule] = field(default_factory=dict)
    applications: Mapping[str, SubRule] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "interfaces", MappingProxyType(dict(self.interfaces)))
        object.__setattr__(self, "applications", MappingProxyType(dict(self.applications)))

    @classmethod
    def parse(cls, text: str, where: str = "migration rule") -> MigrationRule:
        """Read the YAML document; :class:`MigrationRuleError` naming ``where`` and the field."""
        # The one loader every rule kind uses: positions in errors, no anchors or aliases
        # (a billion-laughs document in the config center cannot stall a consumer). Imported
        # here: most applications never receive a migration rule, and need no YAML parser.
        from dubbo_py.yaml_loader import YamlError, load_yaml

        try:
            doc = load_yaml(text, where, empty=None).data
        except YamlError as exc:
            raise MigrationRuleError(str(exc)) from None
        if doc is None:
            return cls()
        if not isinstance(doc, dict):
            raise MigrationRuleError(f"{where}: expected a mapping of rule fields")
        top = _sub(doc, where)
        return cls(
            key=str(doc.get("key") or ""),
            step=top.step,
            threshold=top.threshold,
            force=top.force,
            interfaces=_subs(doc.get("interfaces"), f"{where}: interfaces"),
            applications=_subs(doc.get("applications"), f"{where}: applications"),
        )

    def _value(self, consumer: URL, apps: Iterable[str], name: str) -> Any:
        sub = self.interfaces.get(display_service_key(consumer))
        if sub is not None and getattr(sub, name) is not None:
            return getattr(sub, name)
        for app in sorted(apps):
            sub = self.applications.get(app)
            if sub is not None and getattr(sub, name) is not None:
                return getattr(sub, name)
        return getattr(self, name)

    def step_for(self, consumer: URL, apps: Iterable[str], default: MigrationStep) -> MigrationStep:
        """The step for one consumer (interface rules first, then application rules)."""
        step = self._value(consumer, apps, "step")
        return step if step is not None else default

    def threshold_for(self, consumer: URL, apps: Iterable[str]) -> float:
        """The threshold (the rule's, else 0: any application-level provider will do)."""
        value = self._value(consumer, apps, "threshold")
        return value if value is not None and value >= 0 else 0.0

    def force_for(self, consumer: URL, apps: Iterable[str]) -> bool:
        """Whether to switch even when the target level has no provider."""
        return bool(self._value(consumer, apps, "force"))


def _sub(doc: Mapping[str, Any], where: str) -> SubRule:
    step = doc.get("step")
    threshold = doc.get("threshold")
    force = doc.get("force")
    try:
        parsed_step = MigrationStep.parse(str(step), f"{where}: step") if step is not None else None
    except ValueError as exc:
        raise MigrationRuleError(str(exc)) from None
    if threshold is not None:
        try:
            threshold = float(threshold)
        except (TypeError, ValueError):
            raise MigrationRuleError(f"{where}: threshold {threshold!r} is not a number") from None
    if force is not None and not isinstance(force, bool):
        text = str(force).strip().lower()
        if text not in ("true", "false"):
            raise MigrationRuleError(f"{where}: force {force!r} is not true or false")
        force = text == "true"
    return SubRule(parsed_step, threshold, force)


def _subs(raw: object, where: str) -> dict[str, SubRule]:
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise MigrationRuleError(f"{where}: expected a list")
    out: dict[str, SubRule] = {}
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        if not isinstance(item, dict) or not item.get("serviceKey"):
            raise MigrationRuleError(f"{here}: needs a serviceKey")
        out[str(item["serviceKey"])] = _sub(item, here)
    return out


#: Dubbo's ``MigrationRule`` fields and what dubbo-py does with each (``rules validate`` names
#: the ones not acted on, docs/registry.md "Where dubbo-py differs").
_PROPORTION = ignored(
    "dubbo-py does not split one consumer's calls between the levels: APPLICATION_FIRST "
    "moves all of them (threshold decides when)"
)
_DELAY = ignored("dubbo-py applies a migration rule at once, not after a delay")
_SUB_FIELDS: Mapping[str, Field] = {
    "serviceKey": acted(),
    "step": acted(),
    "threshold": acted(),
    "force": acted(),
    "proportion": _PROPORTION,
    "delay": _DELAY,
}
FIELDS: Mapping[str, Field] = {
    "key": acted(),
    "step": acted(),
    "threshold": acted(),
    "force": acted(),
    "proportion": _PROPORTION,
    "delay": _DELAY,
    "interfaces": acted(**_SUB_FIELDS),
    "applications": acted(**_SUB_FIELDS),
}


def validate_document(text: str, source: str) -> None:
    """Check a migration document as consumers read it (:meth:`MigrationRule.parse`), with the
    line and column of what is wrong: RuleError naming ``source``, the field and the fix."""
    from dubbo_py.errors import RuleError
    from dubbo_py.yaml_loader import kind_of, load_yaml

    doc = load_yaml(text, source, error=RuleError, empty="the migration rule is empty")
    if not isinstance(doc.data, dict):
        raise doc.fail(
            f"a migration rule is a mapping of fields (key, step, ...), not {kind_of(doc.data)}",
            (),
        )
    steps = ", ".join(s.value for s in MigrationStep)

    def check(path: tuple[str | int, ...], item: Mapping[str, Any]) -> None:
        step = item.get("step")
        if step is not None:
            try:
                MigrationStep.parse(str(step))
            except ValueError:
                message = f"{step!r} is not a migration step ({steps})"
                raise doc.error((*path, "step"), message) from None
        threshold = item.get("threshold")
        if threshold is not None:
            try:
                if isinstance(threshold, bool):
                    raise ValueError
                float(threshold)
            except (TypeError, ValueError):
                raise doc.error(
                    (*path, "threshold"), f"{threshold!r} is not a number (e.g. 0.5)"
                ) from None
        force = item.get("force")
        if force is not None and str(force).strip().lower() not in ("true", "false"):
            raise doc.error((*path, "force"), f"{force!r} is not true or false")

    check((), doc.data)
    for name in ("interfaces", "applications"):
        raw = doc.data.get(name)
        if raw is None:
            continue
        if not isinstance(raw, list):
            raise doc.error(
                (name,), f"expected a list of {{serviceKey, step}} entries, got {kind_of(raw)}"
            )
        what = "interface[:version]" if name == "interfaces" else "provider application"
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                found = kind_of(item)
                raise doc.error((name, i), f"expected a mapping with serviceKey, got {found}")
            if not item.get("serviceKey"):
                raise doc.error((name, i), f"needs a serviceKey (the {what} it is for)")
            check((name, i), item)
    # What the error messages above do not cover is what consumers check: run it too.
    try:
        MigrationRule.parse(text, source)
    except MigrationRuleError as exc:
        raise RuleError(str(exc), source=source) from None


def display_service_key(consumer: URL) -> str:
    """``interface[:version]``: what a rule's ``interfaces`` entries name (Dubbo's
    ``getDisplayServiceKey``)."""
    version = consumer.get_str("version")
    return f"{consumer.service_interface}:{version}" if version else consumer.service_interface


class MigrationRules:
    """The migration rule of one consumer application, followed live in the config center."""

    def __init__(self, store: Store, application: str) -> None:
        self.path = migration_path(application)
        self.rule = MigrationRule()
        self.error: str | None = None
        self.read = threading.Event()
        self._listeners: list[Callable[[MigrationRule], None]] = []
        self._lock = threading.Lock()
        self._cancel = store.watch_data(self.path, self._on_data)

    def add_listener(self, listener: Callable[[MigrationRule], None]) -> Callable[[], None]:
        """Be called with each new rule; returns a function that removes the listener."""
        return add_callback(self._lock, self._listeners, listener)

    def _on_data(self, data: bytes | None, _version: int) -> None:
        text = "" if data is None else data.decode("utf-8", errors="replace")
        try:
            rule = MigrationRule.parse(text, self.path)
        except MigrationRuleError as exc:
            self.error = str(exc)
            log.error("invalid migration rule: %s (the previous rule stays in force)", exc)
            self.read.set()
            return
        self.error = None
        with self._lock:
            self.rule = rule
            listeners = list(self._listeners)
        self.read.set()
        for listener in listeners:
            listener(rule)

    def close(self) -> None:
        """Stop following the rule."""
        self._cancel()


@dataclass(frozen=True, slots=True)
class Choice:
    """The level a consumer uses now and why."""

    step: MigrationStep
    #: ``interface`` or ``application``.
    level: str
    urls: tuple[URL, ...]
    #: Providers this consumer could call at each level (-1: that level not read yet).
    interface_providers: int = -1
    application_providers: int = -1


def choose(
    step: MigrationStep,
    interface_urls: list[URL],
    app_urls: list[URL],
    usable: Callable[[list[URL]], int],
    threshold: float,
) -> str:
    """The level a consumer in ``step`` reads, given each level's providers; ``usable`` counts
    the providers the consumer could call (its version, group and protocol)."""
    if step is MigrationStep.FORCE_INTERFACE:
        return "interface"
    if step is MigrationStep.FORCE_APPLICATION:
        return "application"
    new, old = usable(app_urls), usable(interface_urls)
    if new == 0:
        return "interface"
    if old == 0:
        return "application"
    return "application" if new / old >= threshold else "interface"


@dataclass(eq=False)
class MigrationSubscriber:
    """Subscribes one consumer to both levels and passes on the chosen one's providers.

    Call it as :meth:`Registry.subscribe`; the ``providers`` category is replaced by the
    chosen level's (see the module doc), the other categories come from the registry."""

    registry: Registry
    discovery: ApplicationDiscovery
    rules: MigrationRules | None
    consumer: URL
    #: The step in force: the configured one until the migration rule says otherwise.
    step: MigrationStep

    def __post_init__(self) -> None:
        #: The step the consumer was configured with (in force while the rule names none for it).
        self.configured = self.step
        self.level = "interface" if self.step is MigrationStep.FORCE_INTERFACE else "application"
        # One filter per level: each keeps the verdicts of its own level's last list, so a
        # change of one level judges only its new URLs (one shared filter re-judged both lists
        # on every change: its verdicts were always the other level's).
        self._filter = CountingFilter(self.consumer, self.consumer.service_interface)
        self._app_filter = CountingFilter(self.consumer, self.consumer.service_interface)
        #: (the application-level state handed over last, the serial of the list handed for
        #: it): the next state patched from it is handed as a change of that list.
        self._handed_app: tuple[AppLevelProviders, int] | None = None
        self._lock = threading.RLock()
        self._interface: list[URL] | None = None
        self._app: AppLevelProviders | None = None
        self._listener: Callable[[str, list[URL]], None] | None = None
        self._last: tuple[URL, ...] | None = None
        #: The level of the list handed over last (None: none yet).
        self._last_level: str | None = None
        #: The rule changed the step since the list handed over last.
        self._rule_moved = False

    def _usable(self, urls: list[URL]) -> int:
        return len(self._filter.select(urls))

    def _app_usable(self) -> int:
        return len(self._app_filter.select(self._app.urls)) if self._app is not None else 0

    def __call__(
        self,
        interface: str,
        listener: Callable[[str, list[URL]], None],
        categories: Iterable[str] = (layout.PROVIDERS, layout.ROUTERS, layout.CONFIGURATORS),
    ) -> Cancel:
        """Subscribe (the registry's signature)."""
        categories = list(categories)
        self._listener = listener
        cancels: list[Cancel] = []
        others = [c for c in categories if c != layout.PROVIDERS]
        if layout.PROVIDERS in categories:
            if self.rules is not None:
                # Applied before the first provider list when the registry answers; when it
                # does not, the directory's own bounded wait is all a reference waits.
                if self.registry.connected:
                    self.rules.read.wait(RULE_WAIT)
                self.step = self._rule_step(self.rules.rule, initial=True)
                cancels.append(self.rules.add_listener(self._on_rule))

            def on_interface(_category: str, urls: list[URL]) -> None:
                with self._lock:
                    self._interface = [] if is_empty(urls) else list(urls)
                    self._update()

            cancels.append(self.registry.subscribe(interface, on_interface, (layout.PROVIDERS,)))
            cancels.append(self.discovery.subscribe(interface, self._on_app))
        if others:
            cancels.append(self.registry.subscribe(interface, listener, others))

        def cancel() -> None:
            for c in cancels:
                c()

        return cancel

    def _on_app(self, state: AppLevelProviders) -> None:
        with self._lock:
            self._app = state
            self._update()

    def _apps(self) -> frozenset[str]:
        return self._app.applications if self._app is not None else frozenset()

    def _rule_step(self, rule: MigrationRule, *, initial: bool = False) -> MigrationStep:
        wanted = rule.step_for(self.consumer, self._apps(), self.configured)
        if initial or wanted is self.step or wanted is MigrationStep.APPLICATION_FIRST:
            return wanted
        if rule.force_for(self.consumer, self._apps()):
            return wanted
        if wanted is MigrationStep.FORCE_INTERFACE:
            usable = self._usable(list(self._interface or ()))
        else:
            usable = self._app_usable()
        if usable == 0:
            log.warning(
                "%s: migration rule asks for %s, but that level has no provider for this "
                "consumer; staying in %s (add force: true to switch anyway)",
                self.consumer.service_interface,
                wanted.value,
                self.step.value,
            )
            return self.step
        return wanted

    def _on_rule(self, rule: MigrationRule) -> None:
        with self._lock:
            step = self._rule_step(rule)
            if step is not self.step:
                log.info(
                    "%s: migration step %s -> %s",
                    self.consumer.service_interface,
                    self.step.value,
                    step.value,
                )
                self.step = step
                self._rule_moved = True
            self._update()

    def _update(self) -> None:
        """Pass on the chosen level's providers once the levels it needs have been read."""
        app_read = self._app is not None and self._app.read
        interface_read = self._interface is not None
        if self.step is MigrationStep.FORCE_INTERFACE:
            ready = interface_read
        elif self.step is MigrationStep.FORCE_APPLICATION:
            ready = app_read
        else:
            ready = interface_read and app_read
        if not ready or self._listener is None:
            return
        app_urls = list(self._app.urls) if self._app is not None else []
        interface_urls = list(self._interface or [])
        threshold = (
            self.rules.rule.threshold_for(self.consumer, self._apps()) if self.rules else 0.0
        )

        def usable(urls: list[URL]) -> int:
            return self._app_usable() if urls is app_urls else self._usable(urls)

        level = choose(self.step, interface_urls, app_urls, usable, threshold)
        if level != self.level:
            log.info(
                "%s: reading providers at the %s level (%s)",
                self.consumer.service_interface,
                level,
                self.step.value,
            )
        self.level = level
        urls = tuple(app_urls if level == "application" else interface_urls)
        if urls == self._last:
            return
        # Another level than the list handed over last: what is not in this list did not leave
        # the registry, and the directory's empty protection must not keep it (a rule's
        # FORCE_* step with force: true to an empty level leaves no provider, as in Dubbo).
        # A step the rule changed always counts. APPLICATION_FIRST changing level by itself
        # counts when the level it leaves still lists every provider handed last (the
        # application level gained providers again while the interface level kept its own:
        # Dubbo's MigrationInvoker then calls the application level's alone); falling back
        # because the level lost providers (a partition) is the loss empty protection is for.
        left = interface_urls if self._last_level == "interface" else app_urls
        changed_level = self._last_level is not None and level != self._last_level
        switched = changed_level and (
            self._rule_moved or (self._last is not None and set(self._last) <= set(left))
        )
        self._rule_moved = False
        self._last, self._last_level = urls, level
        handed: list[URL]
        if switched or not urls:
            handed = list(urls) or [empty_url(self.consumer.service_interface, layout.PROVIDERS)]
            handed = SwitchedProviders(handed) if switched else handed
            self._handed_app = None
        elif level == "application" and self._app is not None:
            # Handed with what changed when this state was patched from the one handed last:
            # the directory then patches its providers without a pass over the list.
            state, before = self._app, self._handed_app
            if state.patched and before is not None and state.base == before[0].serial:
                handed = ChangedURLs(urls, before[1], list(state.arrived), list(state.departed))
            else:
                handed = ChangedURLs(urls, None, [], [])
            self._handed_app = (state, handed.serial)
        else:
            handed = list(urls)
            self._handed_app = None
        self._listener(layout.PROVIDERS, handed)

    def choice(self) -> Choice:
        """The consumer's step and level now (for status reports)."""
        with self._lock:
            return Choice(
                self.step,
                self.level,
                self._last or (),
                -1 if self._interface is None else self._usable(self._interface),
                -1 if self._app is None else self._app_usable(),
            )
