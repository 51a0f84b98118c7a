"""Consistent hashing (ketama on MD5), as Dubbo's ``ConsistentHashLoadBalance``.

The ring: for every provider address and ``i`` in ``0 .. hash.nodes/4 - 1`` (``hash.nodes``,
default 160, read from the first candidate's URL, per method), ``MD5(address + i)`` yields four
points -- bytes ``4h .. 4h+3`` of the digest read little-endian as an unsigned 32-bit number.
A call's key is the concatenation of the arguments named by ``hash.arguments`` (default
``"0"``: the first argument; indices into ``invocation.arguments``, out-of-range ones skipped),
hashed the same way (``h = 0``); the first point at or after it, wrapping around, names the
provider. Strings and integers render as Java's ``String.valueOf`` does (``true``/``false``
for booleans, ``null`` for ``None``), so a Java consumer with the same providers sends the same
key to the same provider.

Cost: selecting is one MD5 of the key plus an O(log(n * hash.nodes)) bisection. Building the
ring is O(n * hash.nodes) MD5s; it happens when the candidate set changes, not per call -- the
ring is cached by tuple identity and, behind that, by content (a router that filters per call
produces fresh but equal tuples, which find the ring by content for an O(n) hash instead of a
rebuild).

Like every balancer here, weight-0 providers are left off the ring while any provider has a
positive weight; other weights do not matter (as in Dubbo). Dubbo 2.7.x briefly added a
"bounded load" walk to this balancer, which breaks key affinity; it is not reproduced.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
import threading
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dubbo_py.cluster.loadbalance.base import (
    IdentityCache,
    LoadBalance,
    check_candidates,
    weight_table,
)
from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["DEFAULT_HASH_NODES", "ConsistentHashLoadBalance", "HashRing", "java_string"]

#: Virtual nodes per provider (Dubbo's ``hash.nodes`` default).
DEFAULT_HASH_NODES = 160
_COMMA = re.compile(r"\s*,+\s*")
_log = logging.getLogger(__name__)


def java_string(value: Any) -> str:
    """``String.valueOf(value)`` for the values a request field can hold."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _points(text: str) -> bytes:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest()


def _point(digest: bytes, number: int) -> int:
    return int.from_bytes(digest[number * 4 : number * 4 + 4], "little")


def _parse_arguments(spec: str, where: str) -> tuple[int, ...]:
    parts = [p for p in _COMMA.split(spec.strip()) if p]
    try:
        return tuple(int(p) for p in parts) or (0,)
    except ValueError:
        _log.warning("ignoring bad hash.arguments %r on %s; hashing argument 0", spec, where)
        return (0,)


def _parse_nodes(spec: str | None, where: str) -> int:
    if not spec:
        return DEFAULT_HASH_NODES
    try:
        nodes = int(spec.strip())
    except ValueError:
        _log.warning("ignoring bad hash.nodes %r on %s; using %d", spec, where, DEFAULT_HASH_NODES)
        return DEFAULT_HASH_NODES
    return max(nodes, 4)  # Dubbo builds an empty ring below 4 and then fails every call


@dataclass(frozen=True, slots=True, eq=False)
class HashRing:
    """A built ring: sorted points, the provider of each point (an index into ``providers``),
    and the argument indices.

    Points and owners are packed arrays of 32-bit integers: a ring of 2 000 providers holds
    320 000 points, 2.6 MB packed against about 15 MB as tuples of Python ints and URLs.
    """

    points: Sequence[int]
    owner_indices: Sequence[int]
    providers: tuple[URL, ...]
    argument_indices: tuple[int, ...]

    @property
    def owners(self) -> tuple[URL, ...]:
        """The provider of each point, in point order."""
        providers = self.providers
        return tuple(providers[i] for i in self.owner_indices)

    @classmethod
    def build(
        cls, providers: Sequence[URL], nodes: int, argument_indices: tuple[int, ...]
    ) -> HashRing:
        """Place every provider on the ring -- O(n * nodes).

        Each point is packed with its provider's index as one integer, ``point << 32 |
        index``, and sorted in place: equal points end up in index order, so the last of them
        is the later provider, which wins a collision as in Dubbo. That is one list of ints
        at its peak (about 15 MB at 2 000 providers), where a dict from point to provider
        took three times as much, freed right after but leaving the process that much
        bigger."""
        per_provider = nodes // 4
        digests = b"".join(
            hashlib.md5(f"{url.address}{i}".encode(), usedforsecurity=False).digest()
            for url in providers
            for i in range(per_provider)
        )
        raw = array("I")
        raw.frombytes(digests)
        if sys.byteorder == "big":  # the points are little-endian
            raw.byteswap()
        del digests
        span = 4 * per_provider
        packed = [(point << 32) | (k // span) for k, point in enumerate(raw)]
        del raw
        packed.sort()
        points = array("I")
        owners = array("I")
        previous = -1
        for value in packed:
            point = value >> 32
            if point == previous:  # a later provider has this point too: it wins
                owners[-1] = value & 0xFFFFFFFF
                continue
            previous = point
            points.append(point)
            owners.append(value & 0xFFFFFFFF)
        del packed
        return cls(points, owners, tuple(providers), argument_indices)

    def key_of(self, arguments: Sequence[Any]) -> str:
        """The hashed key of a call with these arguments."""
        n = len(arguments)
        return "".join(java_string(arguments[i]) for i in self.argument_indices if 0 <= i < n)

    def locate(self, key: str) -> URL:
        """The provider owning ``key``."""
        position = bisect_left(self.points, _point(_points(key), 0))
        if position == len(self.points):
            position = 0
        return self.providers[self.owner_indices[position]]


class ConsistentHashLoadBalance(LoadBalance):
    """Dubbo's ``consistenthash`` balancer. ``max_rings`` bounds the by-content ring cache."""

    name = "consistenthash"

    def __init__(self, *, max_rings: int = 4) -> None:
        self._by_identity: IdentityCache[HashRing] = IdentityCache()
        self._by_content: OrderedDict[tuple[str, tuple[URL, ...]], HashRing] = OrderedDict()
        self._max_rings = max_rings
        self._lock = threading.Lock()
        #: A lock per ring being built, held by the thread building it.
        self._building: dict[tuple[str, tuple[URL, ...]], threading.Lock] = {}

    def select(
        self, candidates: tuple[URL, ...], invocation: Invocation, *, now_ms: int | None = None
    ) -> URL:
        """The provider owning this call's key."""
        check_candidates(candidates)
        if len(candidates) == 1:
            return candidates[0]
        method = invocation.method
        # The ring depends only on the candidate set (never on time), so the identity entry
        # never expires; 0 is before every instant a caller can pass.
        ring = self._by_identity.lookup(candidates, method, 0)
        if ring is None:
            ring = self._ring(candidates, method)
            self._by_identity.store(candidates, method, ring, 0, float("inf"))
        return ring.locate(ring.key_of(invocation.arguments))

    def ring(self, candidates: tuple[URL, ...], method: str) -> HashRing:
        """The ring ``select`` uses for ``candidates`` and ``method`` (for inspection)."""
        found = self._by_identity.lookup(candidates, method, 0)
        return found if found is not None else self._ring(candidates, method)

    def _ring(self, candidates: tuple[URL, ...], method: str) -> HashRing:
        content = (method, candidates)
        with self._lock:
            found = self._by_content.get(content)
            if found is not None:
                self._by_content.move_to_end(content)
                return found
            building = self._building.get(content)
            if building is None:
                building = self._building[content] = threading.Lock()
        # One thread builds a given ring; the others calling meanwhile wait for it rather than
        # each building a copy (at 2 000 providers, every copy is tens of MB at its peak).
        with building:
            with self._lock:
                found = self._by_content.get(content)
            if found is None:
                found = self._build(candidates, method)
                with self._lock:
                    self._by_content[content] = found
                    while len(self._by_content) > self._max_rings:
                        self._by_content.popitem(last=False)
            with self._lock:
                if self._building.get(content) is building:
                    del self._building[content]
        return found

    def _build(self, candidates: tuple[URL, ...], method: str) -> HashRing:
        first = candidates[0]
        where = f"{first.address} ({first.service_key})"
        nodes = _parse_nodes(first.get_method_parameter(method, "hash.nodes"), where)
        indices = _parse_arguments(
            first.get_method_parameter(method, "hash.arguments", "0") or "0", where
        )
        # Zero-ness of a weight does not depend on time, so any instant gives the same set.
        table = weight_table(candidates, method, 0)
        return HashRing.build([candidates[i] for i in table.eligible], nodes, indices)
