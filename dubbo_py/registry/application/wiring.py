"""One application's application-level discovery, as the rest of dubbo-py uses it.

:class:`ApplicationLevel` holds, for one application on one registry, the provider-side
:class:`~.publisher.InstancePublisher` (used when the register mode includes the instance
level), the consumer-side :class:`~.discovery.ApplicationDiscovery` shared by all references,
the application's migration rule, and one :class:`~.migration.MigrationSubscriber` per
reference (what ``dubbo-py`` status reports read).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping

from dubbo_py.registry.application.discovery import ApplicationDiscovery, LocalMetadata
from dubbo_py.registry.application.lookup import STEP_PARAMETER
from dubbo_py.registry.application.metadata_service import fetch_metadata_v2
from dubbo_py.registry.application.migration import Choice, MigrationRules, MigrationSubscriber
from dubbo_py.registry.application.modes import (
    MigrationStep,
    ModeRegistry,
    RegisterMode,
    resolve_migration_step,
    resolve_register_mode,
)
from dubbo_py.registry.application.publisher import InstancePublisher
from dubbo_py.registry.registry import Registry
from dubbo_py.url import URL

__all__ = ["ApplicationLevel"]


class ApplicationLevel:
    """Application-level discovery for one application (see the module doc)."""

    def __init__(
        self,
        registry: Registry,
        application: str,
        *,
        register_mode: str | RegisterMode | None = None,
        migration_step: str | MigrationStep | None = None,
        environ: Mapping[str, str] | None = None,
        local_metadata: LocalMetadata | None = None,
    ) -> None:
        self.registry = registry
        self.application = application
        self.register_mode = resolve_register_mode(register_mode, environ)
        self.migration_step = resolve_migration_step(migration_step, environ)
        #: How ``local``-storage instances' metadata is read: from the instance's
        #: MetadataServiceV2 over Triple unless told otherwise.
        self._local_metadata = local_metadata or fetch_metadata_v2
        self._lock = threading.Lock()
        self._publisher: InstancePublisher | None = None
        self._discovery: ApplicationDiscovery | None = None
        self._rules: MigrationRules | None = None
        self._subscribers: list[MigrationSubscriber] = []

    # ----------------------------------------------------------------- provider side

    @property
    def publisher(self) -> InstancePublisher:
        """The instance publisher (made on first use)."""
        with self._lock:
            if self._publisher is None:
                self._publisher = InstancePublisher(
                    self.registry.store, self.application, protect=self.registry.protect
                )
            return self._publisher

    def provider_registry(self, base: Registry) -> Registry:
        """What providers register through: ``base`` alone in ``interface`` mode, else a
        registry that also (or only) publishes the instance."""
        if self.register_mode is RegisterMode.INTERFACE:
            return base
        return ModeRegistry(base, self.publisher, self.register_mode)

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Publish the instance once for every provider URL registered inside."""
        if self.register_mode is RegisterMode.INTERFACE:
            yield
            return
        with self.publisher.batch():
            yield

    # ----------------------------------------------------------------- consumer side

    def consumer_url(self, consumer: URL) -> URL:
        """The consumer URL with its migration step when that is not Dubbo's default (what
        ``dubbo-py registry status`` reads); a step the URL already names is kept."""
        if consumer.get_str(STEP_PARAMETER):
            resolve_migration_step(consumer.get_str(STEP_PARAMETER))  # a typo fails here
            return consumer
        if self.migration_step is MigrationStep.APPLICATION_FIRST:
            return consumer
        return consumer.with_parameters(**{STEP_PARAMETER: self.migration_step.value})

    def subscriber(self, consumer: URL) -> MigrationSubscriber:
        """The ``subscribe`` a reference's directory uses; its step is the consumer URL's
        ``migration-step``, else the application's."""
        step = consumer.get_str(STEP_PARAMETER)
        with self._lock:
            if self._discovery is None:
                self._discovery = ApplicationDiscovery(
                    self.registry.store, local_metadata=self._local_metadata
                )
            if self._rules is None:
                self._rules = MigrationRules(self.registry.store, self.application)
            subscriber = MigrationSubscriber(
                self.registry,
                self._discovery,
                self._rules,
                consumer,
                resolve_migration_step(step) if step else self.migration_step,
            )
            self._subscribers.append(subscriber)
            return subscriber

    def choices(self) -> list[tuple[URL, Choice]]:
        """Each reference's consumer URL with its step and level now."""
        with self._lock:
            subscribers = list(self._subscribers)
        return [(s.consumer, s.choice()) for s in subscribers]

    @property
    def discovery(self) -> ApplicationDiscovery | None:
        """The consumer-side discovery, once a reference has used it."""
        return self._discovery

    def close(self) -> None:
        """Remove published instances and stop every watch."""
        with self._lock:
            publisher, discovery, rules = self._publisher, self._discovery, self._rules
            self._discovery = self._rules = None
            self._subscribers = []
        if publisher is not None:
            publisher.close()
        if rules is not None:
            rules.close()
        if discovery is not None:
            discovery.close()
