"""``Reference``: what ``Application.reference_handle`` built -- the stub and its stack."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.outlier import OutlierDetector
from dubbo_py.cluster.quarantine import Quarantine
from dubbo_py.cluster.strategies.failback import FailbackQueue
from dubbo_py.cluster.strategy_settings import StrategySettings
from dubbo_py.cluster.support.context import ClusterContext
from dubbo_py.config.model import ReferenceConfig
from dubbo_py.consumer.assembly import AsyncAssembly, BlockingAssembly
from dubbo_py.consumer.channel import AsyncClusterChannel
from dubbo_py.registry.directory import RegistryDirectory
from dubbo_py.url import URL

if TYPE_CHECKING:
    from dubbo_py.consumer.zone_channel import RegistryStack

__all__ = ["Reference"]

S = TypeVar("S")


@dataclass(eq=False)
class Reference(Generic[S]):
    """A built reference: the stub, and the machinery behind it for inspection and tests."""

    #: The generated stub, bound to :attr:`channel`.
    stub: S
    #: The proto service's full name.
    service: str
    #: The URL the consumer registered (and subscribes with).
    consumer: URL
    #: Providers and rules, watched in the registry.
    directory: RegistryDirectory
    #: What the stub calls through (blocking or asyncio; zone-aware with several
    #: registries).
    channel: Any
    #: The stack behind the channel (the first registry's, with several).
    assembly: BlockingAssembly | AsyncAssembly
    #: With several registries, one stack per registry, in the application's order (the
    #: first is :attr:`assembly`); empty with one.
    stacks: tuple[RegistryStack, ...] = ()

    @property
    def config(self) -> ReferenceConfig:
        """The options the reference was built with (the configuration file's, then the
        code's)."""
        return self.assembly.config

    @property
    def quarantine(self) -> Quarantine:
        """Providers that failed at the transport level, probed until they answer."""
        return self.assembly.quarantine

    @property
    def outliers(self) -> OutlierDetector:
        """Ejects providers that keep timing out into :attr:`quarantine`."""
        return self.assembly.outliers

    @property
    def budget(self) -> RetryBudget:
        """The retry budget shared by every reference to this service in the application."""
        return self.assembly.budget

    @property
    def failback(self) -> FailbackQueue:
        """Background retries of the ``failback`` strategy."""
        return self.assembly.failback

    @property
    def policies(self) -> Mapping[str, StrategySettings]:
        """Each method's cluster strategy and mock."""
        return self.assembly.policies

    @property
    def contexts(self) -> Mapping[str, ClusterContext]:
        """The cluster context of each method the stub bound, by method name."""
        return self.assembly.contexts

    @property
    def assemblies(self) -> tuple[BlockingAssembly | AsyncAssembly, ...]:
        """Every stack of the reference: one per registry it reads."""
        if not self.stacks:
            return (self.assembly,)
        return tuple(s.assembly for s in self.stacks)  # type: ignore[misc]

    def refuse_calls(self) -> None:
        """Fail every call of the stub from now on (UNAVAILABLE, "the application is
        closed"); calls already running go on."""
        for assembly in self.assemblies:
            assembly.in_flight.refuse()

    def calls_in_flight(self) -> int:
        """Calls of the stub running now (see :mod:`dubbo_py.consumer.in_flight`)."""
        return sum(len(assembly.in_flight) for assembly in self.assemblies)

    def wait_for_calls(self, deadline: float) -> bool:
        """Block until the stub has no call running, or until ``time.monotonic()`` reaches
        ``deadline``; True when none is running."""
        return all([assembly.in_flight.wait(deadline) for assembly in self.assemblies])

    async def wait_for_calls_async(self, deadline: float) -> bool:
        """:meth:`wait_for_calls` on the event loop an asyncio reference calls on."""
        return all([await assembly.in_flight.wait_async(deadline) for assembly in self.assemblies])

    def close(self) -> None:
        """Stop watching the registry, stop background work and close the blocking provider
        channels (an asyncio reference's channels close with :meth:`aclose`)."""
        for assembly in self.assemblies:
            assembly.close()

    async def close_channels(self) -> None:
        """Close an asyncio reference's provider channels on the loop (nothing for a blocking
        one: :meth:`close` does)."""
        if isinstance(self.channel, AsyncClusterChannel) or (
            self.stacks and isinstance(self.assembly, AsyncAssembly)
        ):
            await self.channel.close()

    async def aclose(self) -> None:
        """Close an asyncio reference's provider channels on the loop, then :meth:`close`."""
        await self.close_channels()
        await asyncio.to_thread(self.close)
