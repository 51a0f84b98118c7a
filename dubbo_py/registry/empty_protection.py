"""Empty protection: a consumer keeps providers the registry lost while they still answer.

ZooKeeper (and etcd, and the embedded registry) remove a provider's node when its session (or
lease) ends. A process that shuts down cleanly ends it on purpose; a network fault between the
providers and the registry ends it too, while the providers stay healthy and reachable. For
the consumer both look the same: the provider's node is gone. Apache Dubbo 3.3's
``enable-empty-protection`` keeps the last provider list whenever the registry reports an empty
one -- for a service really retired as much as for one cut off from the registry, for as long as
the registry stays empty.

dubbo-py asks the providers instead (:class:`EmptyProtection`):

* It engages only when the registry lost *most* of a service's providers at once: more of them
  left within :attr:`window` seconds, without a replacement, than remain listed (all of them
  is the empty list Dubbo reacts to). One provider leaving at a time -- a rolling restart, a
  crash -- goes through as always.
* The providers that left are kept only while they answer a health probe **for the service**
  (``grpc.health.v1`` with the service's name), the first one at once. A provider that
  unregisters on purpose (a graceful shutdown, QoS ``offline``) first marks the service
  NOT_SERVING in its health service, so it is dropped at the first probe, as is one that is
  gone (connection refused); one that stops answering is dropped after two silent probes. A
  provider whose session merely expired still serves the service, and is kept.
* It lets go of each kept provider as it registers again (a partition healed: the providers
  register again within a second of reconnecting), and of all of them once the registry lists
  as many providers as before the loss (replacements started elsewhere); then the registry's
  list is the list again.

The directory calls :meth:`apply` under its lock with what its provider list found changed
(:attr:`~dubbo_py.registry.provider_list.ProviderList.departed` and ``arrived``: no pass over
the fleet per notification); the prober runs on its own thread and tells the directory to
rebuild through ``on_change``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from dubbo_py.url import URL

__all__ = ["DEFAULT_ENABLED", "EmptyProtection", "KeptProvider", "SwitchedProviders"]

log = logging.getLogger(__name__)

#: dubbo-py's default for ``enable-empty-protection``: on (Dubbo's is off). Dubbo keeps a list
#: blindly, so a retired service keeps receiving calls; here every kept provider must keep
#: answering for the service, so keeping costs nothing when the providers are really gone.
DEFAULT_ENABLED = True

#: Probes in a row a kept provider may fail before it is dropped: one lost probe on a busy
#: machine must not drop a provider that serves calls.
FAILURES_TO_DROP = 2


class SwitchedProviders(list[URL]):
    """A provider list handed over on a deliberate change of where providers are read from (a
    migration rule moving a consumer to the other level): the providers not in it did not
    leave the registry, so empty protection keeps none of them (:meth:`EmptyProtection.reset`)
    -- a ``FORCE_*`` step with ``force: true`` to a level with no provider leaves the consumer
    with none, as in Dubbo."""


@dataclass(slots=True)
class KeptProvider:
    """A provider the registry no longer lists: since when it left and its probe results."""

    url: URL
    left_at: float
    failures: int = 0
    probes: int = 0


@dataclass(eq=False)
class EmptyProtection:
    """Keeps the providers a registry lost at once while they answer (see the module text).

    ``probe(url) -> bool | None``: whether the provider still serves the service -- True, False
    (it said it does not, or refused the connection: dropped at once) or None (no answer in
    time: dropped after :data:`FAILURES_TO_DROP` in a row; an exception counts as None);
    ``on_change()``: the kept set changed outside :meth:`apply` (a probe dropped a
    provider): rebuild the provider list.
    """

    service: str
    probe: Callable[[URL], bool | None]
    on_change: Callable[[], None]
    _: KW_ONLY
    #: Providers that left within this many seconds of each other count as lost at once.
    window: float = 30.0
    #: Seconds between probe rounds.
    interval: float = 1.0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        #: Providers that left recently, by address (candidates for keeping).
        self._left: dict[str, KeptProvider] = {}
        #: The addresses kept now (a subset of ``_left``); empty: not engaged.
        self._kept: set[str] = set()
        #: Providers listed (and lost) when protection engaged: it lets go of every kept one
        #: once the registry lists as many again.
        self._baseline = 0
        #: (lost, of) to report after the first probe round of an engagement.
        self._announce: tuple[int, int] | None = None
        #: Addresses dropped by a probe: not taken for lost again until they register again.
        self._dropped: set[str] = set()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        #: How many times protection engaged, and how many kept providers probes dropped.
        self.engaged_count = 0
        self.dropped_count = 0

    # ------------------------------------------------------------------ notifications

    def apply(
        self, departed: Sequence[URL], arrived: Sequence[URL], providers: Sequence[URL]
    ) -> list[URL]:
        """The registered URLs to keep, given what changed in the registry's list: the
        registered URLs of usable providers that ``departed`` and ``arrived`` in this
        notification, and the usable ``providers`` now (without any kept). O(changes) unless
        it engages (then once O(providers))."""
        if not departed and not self._kept and not (arrived and self._left):
            return []  # nothing left, nothing kept, nothing to take back: every notification
        now = self.clock()
        with self._lock:
            was_engaged = bool(self._kept)
            for url in departed:
                address = url.address
                if address not in self._left and address not in self._dropped:
                    self._left[address] = KeptProvider(url, now)
            came_back = False
            for url in arrived:  # registered again (or under a new URL): nothing to keep
                address = url.address
                self._dropped.discard(address)
                if self._left.pop(address, None) is not None:
                    came_back = True
                self._kept.discard(address)
            # Forget what left long ago, unless it is kept (a long partition keeps it).
            stale = [
                a
                for a, k in self._left.items()
                if a not in self._kept and now - k.left_at > self.window
            ]
            for address in stale:
                del self._left[address]
            if self._kept or len(self._left) > len(providers):
                # Registered again (the registry may hand back the very URL object it had, so
                # not every return is an arrival), or still registered under another URL:
                # not lost. Read over the list only here, engaged or about to be.
                listed = {p.address for p in providers}
                for address in [a for a in self._left if a in listed]:
                    del self._left[address]
                    if address in self._kept:
                        self._kept.discard(address)
                        came_back = True
            if was_engaged:
                # Each kept provider is let go as it registers again (above); all of them
                # once the registry lists as many providers as before the loss.
                engage = len(providers) < self._baseline or not (arrived or came_back)
            else:
                engage = len(self._left) > len(providers)
                self._baseline = len(providers) + len(self._left)
            released: list[str] = []
            if engage:
                self._kept = set(self._left)
            elif was_engaged:
                released = sorted(self._kept)
                self._kept = set()
                self._left.clear()
            kept = [self._left[a].url for a in sorted(self._kept)]
        if was_engaged and not kept:
            log.warning(
                "%s: empty protection ends: the registry lists %d provider(s) again%s",
                self.service,
                len(providers),
                f"; it lets go of {', '.join(released)}" if released else "",
            )
        if engage and not was_engaged:
            self.engaged_count += 1
            # Said at WARNING once the first probes tell whether any of them still serves:
            # a service retired on purpose is let go at once and is no news.
            self._announce = (len(kept), len(kept) + len(providers))
            log.info(
                "%s: the registry lost %d of %d provider(s) at once; empty protection probes %s",
                self.service,
                len(kept),
                len(kept) + len(providers),
                ", ".join(u.address for u in kept),
            )
        if kept:
            self._start()
        return kept

    def reset(self) -> None:
        """Forget what left and let go of what is kept: the provider list changed on purpose
        (see :class:`SwitchedProviders`), not by a loss in the registry."""
        with self._lock:
            released = sorted(self._kept)
            self._left.clear()
            self._kept = set()
            self._baseline = 0
            self._announce = None
        if released:
            log.warning(
                "%s: empty protection ends: providers are read from elsewhere now; it lets go "
                "of %s",
                self.service,
                ", ".join(released),
            )

    def kept(self) -> tuple[KeptProvider, ...]:
        """The providers kept now (none while protection is not engaged)."""
        with self._lock:
            return tuple(self._left[a] for a in sorted(self._kept))

    @property
    def engaged(self) -> bool:
        """Whether providers the registry lost are being kept."""
        return bool(self._kept)

    # ------------------------------------------------------------------ probing

    def probe_once(self) -> list[URL]:
        """Probe every kept provider once, on this thread; returns those dropped."""
        with self._lock:
            snapshot = [(a, self._left[a].url) for a in self._kept]
        dropped: list[tuple[URL, bool]] = []
        for address, url in snapshot:
            try:
                answer = self.probe(url)
            except Exception:
                answer = None
            with self._lock:
                entry = self._left.get(address)
                if entry is None or address not in self._kept:
                    continue
                entry.probes += 1
                entry.failures = 0 if answer else entry.failures + 1
                # A definite no (NOT_SERVING: unregistered on purpose; refused: gone) drops at
                # once; silence only in a row, so one slow answer keeps a busy provider.
                if answer is False or entry.failures >= FAILURES_TO_DROP:
                    self._kept.discard(address)
                    del self._left[address]
                    self._dropped.add(address)
                    dropped.append((url, entry.probes == 1))
        for url, first in dropped:
            self.dropped_count += 1
            log.log(
                logging.INFO if first else logging.WARNING,
                "%s: provider %s kept by empty protection does not answer for the service "
                "any more; dropped",
                self.service,
                url.address,
            )
        with self._lock:
            announce, self._announce = self._announce, None
            still = sorted(self._kept)
        if announce is not None and still:
            log.warning(
                "%s: the registry lost %d of %d provider(s) at once (sessions expired?); empty "
                "protection keeps %s while they answer health probes for the service",
                self.service,
                announce[0],
                announce[1],
                ", ".join(still),
            )
        if dropped:
            self.on_change()
        return [url for url, _ in dropped]

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="dubbo-py-empty-protection", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        # The first round at once: a cleanly retired service is let go within one probe.
        while True:
            if not self._kept:
                with self._lock:
                    if not self._kept:
                        self._thread = None
                        return
            try:
                self.probe_once()
            except Exception:  # never let the prober die silently
                log.exception("empty protection probe round failed")
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        """Stop probing (the directory is closing)."""
        self._stop.set()
