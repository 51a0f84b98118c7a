"""What a router is: a rule-level object that binds to a provider snapshot.

Two steps keep the per-call path cheap. ``Router.bind(snapshot, consumer)`` runs when the
providers or the rules change and does the heavy work (evaluate ``then`` conditions against
every provider, split mock from normal, index tags). The resulting :class:`BoundRouter` maps a
candidate mask and an invocation to a mask, evaluating only what reads the invocation.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, runtime_checkable

from dubbo_py.invocation import Invocation
from dubbo_py.router.snapshot import Snapshot
from dubbo_py.url import URL

__all__ = [
    "PASS_THROUGH",
    "BoundRouter",
    "Decision",
    "ExplainingRouter",
    "Lookup",
    "LookupRouter",
    "Router",
    "SpecializingRouter",
    "lookups",
    "specialize",
]


@runtime_checkable
class BoundRouter(Protocol):
    """A router bound to one snapshot: maps candidates to survivors for one invocation."""

    def route(self, candidates: int, invocation: Invocation) -> int:
        """The survivors among ``candidates`` (a mask) for ``invocation``; never raises for a
        valid invocation (a rule that cannot decide passes ``candidates`` through or returns 0
        when forced)."""
        ...


@runtime_checkable
class SpecializingRouter(Protocol):
    """Optional: a bound router that can say what it does to plain calls of one method.

    A *plain* call carries no attachments (most calls); ``call`` is one such call of the method
    (its request is not meant to be read). The answer is ``(router, reads_call)``: an equivalent
    router for plain calls of that method (``self``, a cheaper one, or
    :data:`PASS_THROUGH`), and whether its result still depends on anything in such a call
    beyond the method -- the request, say. The chain folds routers that depend on nothing into
    one precomputed mask (see :class:`~dubbo_py.router.chain.BoundChain`)."""

    def specialize(self, call: Invocation) -> tuple[BoundRouter, bool]:
        """``(equivalent router, reads_call)`` for plain calls of ``call.method``."""
        ...


def specialize(router: BoundRouter, call: Invocation) -> tuple[BoundRouter, bool]:
    """What ``router`` does to plain calls like ``call``: its own answer if it is a
    :class:`SpecializingRouter`, else ``(router, True)`` (it may read anything)."""
    if isinstance(router, SpecializingRouter):
        return router.specialize(call)
    return router, True


#: What a condition-style router decides for one call: ``None`` keeps every candidate;
#: ``(mask, final)`` keeps ``candidates & mask``, or -- when that is empty and ``final`` is
#: False -- the candidates it was given (Dubbo's non-forced rule).
Decision = tuple[int, bool] | None
#: ``(read, decide)``: ``decide(read(request))`` is a router's :data:`Decision` for a plain call
#: whose request is of one message type. Both are meant to be C-level callables (an
#: ``attrgetter``, an ``lru_cache`` hit) so that a call plan runs them without a Python frame.
Lookup = tuple[Callable[[Any], Hashable], Callable[[Any], Decision]]


@runtime_checkable
class LookupRouter(Protocol):
    """Optional: a specialized router (see :class:`SpecializingRouter`) whose decision for a
    plain call is a lookup keyed by what it reads from the request."""

    def lookups(self, request_type: type) -> tuple[Lookup, ...] | None:
        """Lookups applied in order, each to the survivors of the one before, equivalent to
        ``route`` for plain calls whose request is a ``request_type``; ``None`` when this
        router cannot say so for that type."""
        ...


def lookups(router: BoundRouter, request_type: type) -> tuple[Lookup, ...] | None:
    """``router``'s lookups for plain calls with a ``request_type`` request, or ``None``."""
    if isinstance(router, LookupRouter):
        return router.lookups(request_type)
    return None


class _PassThrough:
    """A bound router that keeps every candidate (a disabled rule, or one that cannot apply to
    this consumer). The chain leaves it out of the per-call walk."""

    def route(self, candidates: int, invocation: Invocation) -> int:
        """Every candidate survives."""
        return candidates

    def specialize(self, call: Invocation) -> tuple[BoundRouter, bool]:
        """Reads nothing, for any call."""
        return self, False

    def __repr__(self) -> str:
        return "PASS_THROUGH"


#: The shared pass-through bound router.
PASS_THROUGH: BoundRouter = _PassThrough()


@runtime_checkable
class Router(Protocol):
    """A routing stage at a priority (lower runs first); ``name`` appears in traces and errors."""

    @property
    def name(self) -> str:
        """Human-readable name (kind and rule key), shown in traces and errors."""
        ...

    @property
    def priority(self) -> int:
        """Order in the chain: lower runs first (mock -100, tag 100, condition 140/150, ...)."""
        ...

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundRouter:
        """Do this router's heavy work for ``snapshot`` and the consumer's URL."""
        ...


@runtime_checkable
class ExplainingRouter(Protocol):
    """Optional: a bound router that can say why it left no provider for a call. The chain asks
    it only when it returned 0, and puts the answer in :class:`NoProviderError` and traces."""

    def explain(self, candidates: int, invocation: Invocation) -> str | None:
        """Why ``route(candidates, invocation)`` is empty, or ``None`` if it is not (or unknown)."""
        ...
