"""Outlier ejection: a provider that keeps timing out is taken out of rotation.

A provider that is connected but never answers (a hung process, a stopped VM, a GC storm) does
not fail at the transport level: its calls run into their deadline (``DEADLINE_EXCEEDED``), and
such calls must not be retried for methods that are not idempotent. Without ejection it keeps
its share of the traffic until its registry session expires. As Envoy's outlier detection
(``consecutive_5xx`` / ``consecutive_gateway_failure``) and Finagle's failure accrual do, the
:class:`OutlierDetector` counts each provider's *consecutive* failures -- ``DEADLINE_EXCEEDED``
or ``UNAVAILABLE`` -- and after ``consecutive`` of them in a row puts the provider in the
reference's :class:`~dubbo_py.cluster.quarantine.Quarantine`, whose prober lets it back in once
it answers a health check again. Any answer from the provider (a response, or an application
error, which is an answer too) resets its count.

Never more than ``max_share`` of the service's providers are quarantined at once (Envoy's
``max_ejection_percent``): when every provider times out, the cause is more likely the consumer
or the network than the providers, and ejecting them all would only pile the load on the last
ones. At least one provider may always be ejected.

The call path pays for successes only while some provider has a failure on record::

    if detector.failing:                     # a dict: empty, hence falsy, nearly always
        detector.succeeded(provider.address)
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping
from typing import Protocol

import grpc

from dubbo_py.cluster.support.outcome import status_code
from dubbo_py.url import URL

__all__ = [
    "DEFAULT_CONSECUTIVE",
    "DEFAULT_MAX_SHARE",
    "OUTLIER_CODES",
    "Ejector",
    "OutlierDetector",
    "ejection_limit",
]

log = logging.getLogger(__name__)

#: Consecutive failures after which a provider is ejected (Envoy's ``consecutive_5xx`` is 5;
#: Finagle's failure accrual also 5; fewer here because each one is a caller's failed call).
DEFAULT_CONSECUTIVE = 3

#: The largest share of a service's providers that may be ejected at once.
DEFAULT_MAX_SHARE = 0.5

#: The statuses that count as a provider failing: it did not answer in time, or at all.
OUTLIER_CODES = frozenset({grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE})


class Ejector(Protocol):
    """The part of the quarantine the detector uses."""

    @property
    def addresses(self) -> Mapping[str, object]:
        """The quarantined providers by address."""
        ...

    def add(self, url: URL, reason: str) -> object:
        """Quarantine ``url``."""
        ...


def ejection_limit(providers: int, max_share: float) -> int:
    """How many of ``providers`` may be quarantined at once: ``floor(max_share * providers)``,
    but at least one (a lone provider that hangs is ejected: the strategies still call a
    quarantined provider when no other is left, so nothing is lost)."""
    return max(1, math.floor(max_share * providers + 1e-9))


class OutlierDetector:
    """Counts consecutive failures per provider address and ejects into ``quarantine``.

    ``providers()`` says how many providers the service has now (the directory's current
    snapshot); ``consecutive`` 0 turns ejection off (counting too)."""

    def __init__(
        self,
        quarantine: Ejector,
        providers: Callable[[], int],
        *,
        consecutive: int = DEFAULT_CONSECUTIVE,
        max_share: float = DEFAULT_MAX_SHARE,
        service: str = "",
    ) -> None:
        if consecutive < 0:
            raise ValueError(f"consecutive failures must be >= 0, got {consecutive}")
        if not 0.0 <= max_share <= 1.0:
            raise ValueError(f"max ejected share must be within [0, 1], got {max_share}")
        self._quarantine = quarantine
        self._providers = providers
        self.consecutive = consecutive
        self.max_share = max_share
        self.service = service
        #: Consecutive failures by provider address, for providers that have any (read on the
        #: call path: empty, hence falsy, while every provider answers).
        self.failing: dict[str, int] = {}
        #: Providers ejected so far (a counter for operators and tests).
        self.ejections = 0
        #: Ejections refused because ``max_share`` of the providers were out already.
        self.refused = 0
        self._lock = threading.Lock()
        self._refused_logged: set[str] = set()
        # Successes to skip per address: hedges that answered for it (see answered_for).
        self._stand_ins: dict[str, int] = {}

    @property
    def enabled(self) -> bool:
        """Whether the detector ejects at all."""
        return self.consecutive > 0

    def succeeded(self, address: str) -> None:
        """The provider at ``address`` answered: its count starts again from zero (unless the
        answer was a hedge's on its behalf: see :meth:`answered_for`)."""
        stand_ins = self._stand_ins
        if stand_ins and stand_ins.get(address):
            with self._lock:
                left = stand_ins.get(address, 0) - 1
                if left >= 0:
                    if left:
                        stand_ins[address] = left
                    else:
                        stand_ins.pop(address, None)
                    return
        self.failing.pop(address, None)

    def answered_for(self, address: str) -> None:
        """Another provider answered a hedged call first sent to ``address``, which has a
        failure on record for it: the success the cluster strategy reports next for that
        call's provider is not ``address``'s own, and does not reset its count
        (:mod:`dubbo_py.cluster.hedging`). Under concurrent calls the one success skipped may
        be another call's: a count reset once late, never a failure invented."""
        with self._lock:
            if address in self.failing:
                self._stand_ins[address] = self._stand_ins.get(address, 0) + 1

    def forget(self, address: str) -> None:
        """Drop ``address``'s count (it left quarantine or the registry: it starts clean)."""
        self.failing.pop(address, None)
        self._stand_ins.pop(address, None)
        self._refused_logged.discard(address)

    def failed(self, provider: URL, error: BaseException) -> bool:
        """Record a failed call on ``provider``; True when this failure ejected it. A status
        that is not a provider failure (an application error, a shed call) is an answer and
        resets the count instead."""
        code = status_code(error)
        if code not in OUTLIER_CODES:
            self.succeeded(provider.address)
            return False
        if not self.enabled:
            return False
        address = provider.address
        with self._lock:
            count = self.failing.get(address, 0) + 1
            self.failing[address] = count
            if count < self.consecutive:
                return False
            quarantined = self._quarantine.addresses
            if address in quarantined:
                del self.failing[address]
                return False
            limit = ejection_limit(self._providers(), self.max_share)
            if len(quarantined) >= limit:
                self.refused += 1
                first_refusal = address not in self._refused_logged
                self._refused_logged.add(address)
            else:
                del self.failing[address]
                self._refused_logged.discard(address)
                self.ejections += 1
                first_refusal = False
                reason = f"outlier: {count} consecutive failures, last {code.name if code else ''}"
                self._quarantine.add(provider, reason)
                log.warning(
                    "ejected provider %s of %s after %d consecutive failures (last: %s); "
                    "probing it for revival",
                    address,
                    self.service,
                    count,
                    code.name if code else "",
                )
                return True
        if first_refusal:
            log.warning(
                "not ejecting provider %s of %s after %d consecutive failures: %d provider(s) "
                "already quarantined, the most max_share=%.0f%% allows",
                address,
                self.service,
                count,
                len(quarantined),
                self.max_share * 100,
            )
        return False
