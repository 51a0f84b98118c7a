"""The script router: hand the candidates to a rule's Starlark ``route`` and keep its choice.

The contract a script implements::

    def route(invokers, invocation, context):
        return [i for i in invokers if ...]    # a list (or tuple) of items of `invokers`

``invokers`` - the candidates left by earlier routers, a list of read-only records with
``index, url, address, host, port, protocol, path, service, parameters`` (``parameters`` is a
frozen dict of the provider URL's parameters); ``invocation`` - a record with ``service``,
``method``, ``arguments`` (a tuple of str/int/float/bool/None; any other argument as its ``str``)
and ``attachments`` (dict of str); ``context`` - a read-only record of the consumer URL with the
same fields as an invoker (without ``index``).

What the router does with the answer: the returned invokers survive (order and duplicates do not
matter). An empty answer means "no provider" when the rule has ``force: true`` and is ignored
(all candidates pass) otherwise. A script error, a blown time budget, a sandbox crash or an
answer that is not a list of offered invokers passes the candidates through, and is logged once
per rule version and kind, not once per call.

Cost: a snapshot change builds the invoker records and (in the sandbox) one frozen Starlark
module; a call whose (candidates, service, method, arguments, attachments) were seen before on
this snapshot is a dictionary hit - Starlark is deterministic and hermetic, so that is sound. A
new combination runs the script: about 50 us inline plus about 80 us for the round trip to the
sandbox worker, plus whatever the script does (bounded by the budget, 50 ms by default), and
building the candidate list is linear in the number of candidates.

A rule that exhausts its time budget (or crashes its worker) on :data:`DEFAULT_SWITCH_OFF_AFTER`
calls in a row (the consumer URL parameter ``script.switch-off-after`` changes that; 0 never
switches off) is switched off: from then on it passes every candidate through at no cost, one
error is logged, and the rule book treats it as invalid (the previous rules of its source come
back) until the rule's text changes. The count belongs to the rule's identity (its source), not
to its text: a new text starts where the old one left off, so a rule that was switched off is
switched off again at its first overrun, and only a call that runs the script to an answer
resets the count.

Each rule runs in a worker of its own (the sandbox lane is the rule's identity): another rule's
cost, crash or restart never delays this rule's calls or lets them through unrouted.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from dubbo_py.invocation import Invocation
from dubbo_py.router.offloop import WouldBlock, runs_forbidden
from dubbo_py.router.script.rule import ScriptRule, parse_script_url
from dubbo_py.router.script.sandbox import (
    CRASH,
    TIMEOUT,
    UNAVAILABLE,
    Outcome,
    ProgramSpec,
    Sandbox,
    default_sandbox,
)
from dubbo_py.router.snapshot import Snapshot, mask_of
from dubbo_py.url import URL

__all__ = [
    "DEFAULT_SWITCH_OFF_AFTER",
    "STRIKES",
    "SWITCH_OFF_KEY",
    "BoundScriptRouter",
    "ScriptRouter",
    "Strikes",
    "invocation_view",
    "router_from_url",
    "url_record",
]

logger = logging.getLogger("dubbo_py.router.script")

DEFAULT_BUDGET = 0.05
DEFAULT_CACHE_SIZE = 1024
#: Runs in a row over the time budget after which a rule is switched off.
DEFAULT_SWITCH_OFF_AFTER = 3
#: Consumer URL parameter overriding :data:`DEFAULT_SWITCH_OFF_AFTER` (0: never).
SWITCH_OFF_KEY = "script.switch-off-after"
#: Failures that mean the script used up its time (the worker's hard deadline is a crash).
_OVER_BUDGET = frozenset({TIMEOUT, CRASH})

_bind_ids = itertools.count(1)


class Strikes:
    """Runs over budget in a row, per rule identity, kept across the rule's versions (so a
    rule cannot escape its switch-off by changing its text). Thread-safe; the
    ``capacity`` identities seen most recently are kept."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._lock = threading.Lock()
        self._counts: OrderedDict[str, int] = OrderedDict()

    def add(self, identity: str) -> int:
        """One more run over budget; the count in a row now."""
        with self._lock:
            count = self._counts.pop(identity, 0) + 1
            self._counts[identity] = count
            while len(self._counts) > self.capacity:
                self._counts.popitem(last=False)
            return count

    def clear(self, identity: str) -> None:
        """The rule answered: its count starts again."""
        if identity in self._counts:
            with self._lock:
                self._counts.pop(identity, None)

    def count(self, identity: str) -> int:
        """The count in a row for ``identity`` (0 when none)."""
        with self._lock:
            return self._counts.get(identity, 0)


#: The process-wide count (every consumer of a rule shares it: the rule misbehaves for all).
STRIKES = Strikes()


class ScriptRouter:
    """A router for one script rule version. Thread-safe; bind it to each new snapshot."""

    def __init__(
        self,
        rule: ScriptRule,
        *,
        sandbox: Sandbox | None = None,
        budget: float = DEFAULT_BUDGET,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_callstack: int = 64,
        switch_off_after: int = DEFAULT_SWITCH_OFF_AFTER,
        strikes: Strikes | None = None,
    ) -> None:
        self.rule = rule
        self.switch_off_after = switch_off_after
        #: Set once the rule is switched off (see the module docstring); it then passes
        #: everything through.
        self.switched_off = False
        self.strikes = strikes if strikes is not None else STRIKES
        self._switch_off_callbacks: list[Callable[[str], None]] = []
        self.sandbox: Sandbox = sandbox if sandbox is not None else default_sandbox()
        self.budget = budget
        self.cache_size = cache_size
        self.max_callstack = max_callstack
        self._reported: set[str] = set()
        self._report_lock = threading.Lock()

    @property
    def name(self) -> str:
        """``script`` or ``script:<key>`` (the application or interface of the rule)."""
        return f"script:{self.rule.key}" if self.rule.key else "script"

    @property
    def priority(self) -> int:
        """The rule's ``priority`` (default 200)."""
        return self.rule.priority

    def bind(self, snapshot: Snapshot, consumer: URL) -> BoundScriptRouter:
        """Build the invoker records of ``snapshot``; the sandbox builds its program lazily."""
        program = ProgramSpec(
            key=f"{self.rule.digest[:32]}:{next(_bind_ids)}",
            source=self.rule.script,
            # The records of the providers that stayed are the previous snapshot's.
            invokers=snapshot.column("script.record", url_record),
            context=url_record(consumer),
            max_callstack=self.max_callstack,
            lane=self.rule.identity,
        )
        limit = consumer.get_int(SWITCH_OFF_KEY, self.switch_off_after)
        return BoundScriptRouter(self, program, limit)

    def on_switch_off(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(reason)`` once, when this rule is switched off."""
        self._switch_off_callbacks.append(callback)

    def record(self, outcome: Outcome, limit: int) -> None:
        """Count runs over budget in a row; switch the rule off at ``limit`` (0: never)."""
        if outcome.kind == UNAVAILABLE:
            return  # the script did not run (its worker is restarting): says nothing about it
        identity = self.rule.identity
        if outcome.kind not in _OVER_BUDGET:
            self.strikes.clear(identity)
            return
        in_a_row = self.strikes.add(identity)
        with self._report_lock:
            if self.switched_off or limit <= 0 or in_a_row < limit:
                return
            self.switched_off = True
            callbacks = list(self._switch_off_callbacks)
        reason = (
            f"script rule {self.name} exhausted its time budget of {self.budget * 1000:g} ms "
            f"(or crashed its worker) on {in_a_row} calls in a row; switched off until the "
            "rule changes (a new text is switched off again at its first overrun)"
        )
        if not callbacks:  # nobody to refuse it (route test, a bare router): say it here
            # A warning: the rule's first timeout was already logged as an error.
            logger.warning("%s (%s)", reason, self.rule.source or "unknown source")
        for callback in callbacks:
            callback(reason)

    def report(self, outcome: Outcome) -> None:
        """Log a failed run, once per failure kind for this rule version."""
        with self._report_lock:
            if outcome.kind in self._reported:
                return
            self._reported.add(outcome.kind)
        logger.error(
            "script rule %s (%s): %s: %s; passing providers through (logged once per rule version)",
            self.name,
            self.rule.source or "unknown source",
            outcome.kind,
            outcome.message,
        )

    def __repr__(self) -> str:
        return f"ScriptRouter({self.name!r}, priority={self.priority})"


@dataclass(eq=False)
class BoundScriptRouter:
    """A script router bound to one snapshot, with its per-invocation result cache."""

    router: ScriptRouter
    program: ProgramSpec
    switch_off_after: int = DEFAULT_SWITCH_OFF_AFTER
    #: Its ``route`` may run a script (see :mod:`dubbo_py.router.offloop`).
    runs_scripts: ClassVar[bool] = True
    _cache: dict[tuple[Any, ...], int] = field(default_factory=dict, repr=False)

    def route(self, candidates: int, invocation: Invocation) -> int:
        """The candidates the script keeps (see the module docstring for every fallback)."""
        rule = self.router.rule
        if not rule.enabled or not candidates or self.router.switched_off:
            return candidates
        view, key = invocation_view(invocation)
        cache_key = (candidates, key)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        if runs_forbidden():
            raise WouldBlock(self.router.name)  # an event loop's probe: run it off the loop
        outcome = self.router.sandbox.run(
            self.program, _indices(candidates), view, self.router.budget
        )
        if outcome.indices is not None:
            result = mask_of(outcome.indices) & candidates
            if not result and not rule.force:
                result = candidates
        else:
            self.router.report(outcome)
            result = candidates
        self.router.record(outcome, self.switch_off_after)
        if outcome.kind != UNAVAILABLE:
            cache = self._cache
            if len(cache) >= self.router.cache_size:
                # FIFO eviction; another thread may race us to the same entry.
                with contextlib.suppress(StopIteration, KeyError, RuntimeError):
                    del cache[next(iter(cache))]
            cache[cache_key] = result
        return result


def router_from_url(url: URL | str, source: str, *, sandbox: Sandbox | None = None) -> ScriptRouter:
    """A script router from a ``script://`` registry URL (``routers`` category)."""
    return ScriptRouter(parse_script_url(url, source, sandbox=sandbox), sandbox=sandbox)


def url_record(url: URL) -> dict[str, Any]:
    """The fields a script sees of a provider or of the consumer (the sandbox adds a provider's
    ``index``, its position in the snapshot)."""
    return {
        "url": _text(url.to_string()),
        "address": _text(url.address),
        "host": _text(url.host),
        "port": url.port,
        "protocol": _text(url.protocol),
        "path": _text(url.path),
        "service": _text(url.service_interface),
        "parameters": {_text(k): _text(v) for k, v in url.parameters.items()},
    }


def invocation_view(invocation: Invocation) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """What a script may see of a call, and the cache key made of exactly those values."""
    arguments = tuple(_scalar(a) for a in invocation.arguments)
    attachments = {_text(str(k)): _text(str(v)) for k, v in invocation.attachments.items()}
    view = {
        "service": invocation.service,
        "method": invocation.method,
        "arguments": list(arguments),
        "attachments": attachments,
    }
    key = (invocation.service, invocation.method, arguments, tuple(sorted(attachments.items())))
    return view, key


def _indices(mask: int) -> list[int]:
    """The set bits of ``mask``, lowest first; linear time (``iter_bits`` is quadratic in the
    mask's width, which shows at thousands of providers)."""
    return [i for i, bit in enumerate(bin(mask)[:1:-1]) if bit == "1"]


def _scalar(value: object) -> str | int | float | bool | None:
    if value is None or isinstance(value, bool | int | float):
        return value
    return _text(value if isinstance(value, str) else str(value))


def _text(value: str) -> str:
    """``value`` as valid UTF-8 text: a lone surrogate (possible in a Python str, impossible in
    a Starlark string) becomes "?" instead of failing the conversion."""
    if value.isascii():
        return value
    return value.encode("utf-8", "replace").decode("utf-8", "replace")
