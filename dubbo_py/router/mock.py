"""The mock selector: ``mock://`` providers serve only calls that ask for them.

Follows Apache Dubbo's ``MockInvokersSelector`` (dubbo-cluster, router/mock): at notify time the
providers are split into *mocked* (protocol ``mock``) and *normal*; a call carrying the attachment
``invocation.need.mock=true`` (any case) gets the mocked ones, any other call gets the normal ones.

One deliberate difference: Dubbo passes *all* providers through when the attachment is present
but not ``true`` (e.g. ``false``); here such a call gets the normal providers, so a ``mock://``
provider never receives a call that did not ask for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from dubbo_py.invocation import Invocation
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

__all__ = ["MOCK_PROTOCOL", "MOCK_ROUTER_PRIORITY", "BoundMockRouter", "MockRouter"]

#: Providers registered with this protocol are mock providers (Dubbo's ``MOCK_PROTOCOL``).
MOCK_PROTOCOL = "mock"
#: Runs first in the chain, as docs/design.md §1 says.
MOCK_ROUTER_PRIORITY = -100


@dataclass(frozen=True, slots=True)
class BoundMockRouter:
    """The mock split of one snapshot: two precomputed masks, one attachment lookup per call."""

    mocked: int
    normal: int

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Mock providers for calls that want them, the others for every other call."""
        # Calls without attachments never get here: the chain's per-method plan folds this
        # router into its precomputed mask (see ``specialize``).
        return candidates & (self.mocked if invocation.wants_mock else self.normal)

    def specialize(self, call: Invocation) -> tuple[BoundMockRouter, bool]:
        """A plain call never asks for mocks: its result is fixed."""
        return self, False


def _is_mock(url: URL) -> bool:
    return url.protocol == MOCK_PROTOCOL


class MockRouter:
    """Router that keeps ``mock://`` providers away from ordinary calls (priority -100)."""

    name = "mock"
    priority = MOCK_ROUTER_PRIORITY

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundMockRouter:
        """Split the snapshot into mocked and normal providers."""
        mocked = snapshot.mask_by("mock.protocol", _is_mock)
        return BoundMockRouter(mocked=mocked, normal=snapshot.all & ~mocked)

    def __repr__(self) -> str:
        return "MockRouter()"
