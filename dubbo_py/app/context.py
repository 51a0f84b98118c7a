"""What both halves of an application read: its name, configuration, registries and
observability. :class:`~dubbo_py.app.application.Application` makes one and hands it to its
provider half (:mod:`dubbo_py.app.serving`) and its consumer half
(:mod:`dubbo_py.app.referencing`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dubbo_py.app.observability import QOS_PORT_KEY, ApplicationQos
from dubbo_py.app.registries import RegistryBinding
from dubbo_py.config.model import ApplicationConfig
from dubbo_py.consumer.filters import ConsumerFilters
from dubbo_py.qos.metrics import Metrics
from dubbo_py.registry.store.address import RegistryAddress

__all__ = ["AppContext"]


@dataclass(eq=False)
class AppContext:
    """One application's shared facts; set once while the application is made."""

    #: The application's name (the ``application`` parameter of everything it registers).
    name: str
    #: The configuration file's contents, when the application came from one.
    config: ApplicationConfig | None
    #: The application's registries, in the order given (one for most applications).
    bindings: tuple[RegistryBinding, ...]
    #: The zone calls prefer when they carry no ``registry_zone`` attachment.
    zone: str | None
    #: Call metrics (None: off, and calls pay nothing for them).
    metrics: Metrics | None
    #: Wrappers around every reference's calls (the application's ``filters``).
    filters: ConsumerFilters
    #: The application's own URL parameters, carried by every URL it registers.
    parameters: Mapping[str, str]
    #: The QoS port's endpoints (None when the port is off); set once both halves exist.
    qos: ApplicationQos | None = None

    @property
    def address(self) -> RegistryAddress:
        """The first registry's address (the only one of most applications)."""
        return self.bindings[0].address

    def registry_name(self) -> str:
        """The registries as configured, for messages ("" for direct calls)."""
        if self.address.kind == "direct":
            return ""
        return ", ".join(b.label for b in self.bindings)

    def qos_parameters(self) -> dict[str, str] | None:
        """The URL parameters that tell where the QoS port is (None when it is off)."""
        return None if self.qos is None else {QOS_PORT_KEY: str(self.qos.port)}
