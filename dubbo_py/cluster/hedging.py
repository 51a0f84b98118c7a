"""Hedged (backup) requests: when a call's provider has not answered after a delay, the same
call goes to another provider too, and the first answer wins (Finagle's
``BackupRequestFilter``, gRPC's hedging policy; Apache Dubbo has none).

Only for methods the user marks safe to run twice (``hedging=True`` on a reference, a method,
in ``dubbo.yaml`` or a consumer-side override): a hedged call may run on two providers.

Where it sits: a wrapper around one *attempt* (the provider call a cluster strategy makes,
:data:`~dubbo_py.cluster.support.context.ProviderCall`), outside the attempt filters, so every
attempt it makes is recorded as any attempt is. The strategy picks the first provider as usual;
:class:`HedgedCall` starts it, and if no answer came after the delay it asks the router chain and
the balancer for another provider (never one this attempt already tried) and starts that one
too, up to ``max_attempts`` at once. The first *answer* (a response, or an application error,
which is an answer too) wins and the others are cancelled; a failure (UNAVAILABLE, a shed call)
of one attempt while another still runs waits for that one. When every attempt failed, the
first one's error goes to the strategy, which fails over as usual: a failover call's retries
start after the hedged attempt (its hedges did not use them).

Three things keep it from costing what it saves:

* the delay: a number of seconds, or a percentile of the method's recent latencies
  (:class:`LatencyWindow`, a ring of the last 128 calls sorted every 32), by default ``p99``:
  about one call in a hundred is hedged when nothing is wrong, which leaves most of the budget
  for when something is;
* the budget (Finagle's): a :class:`~dubbo_py.cluster.budget.RetryBudget` where every call
  deposits ``max_extra_load`` of a hedge and every hedge withdraws one, with a reserve of
  :data:`BURST_PER_SECOND` hedges a second over a 10 s window, so hedging adds at most
  ``max_extra_load`` of the calls (plus that small burst) when everything is slow;
* outlier ejection: an attempt that lost because its provider did not answer (it started
  before the winner, and was still running) counts against that provider as a timeout would
  (:meth:`~dubbo_py.cluster.outlier.OutlierDetector.failed`), so a blackholed provider is
  ejected after a few calls instead of a few deadlines. At most one lost race per provider
  per :data:`LOSS_SPACING` counts: the calls in flight on a provider that pauses for a moment
  lose their races together, and must not eject it as if each had been a separate timeout
  (measured: under 8 threads on a busy 2-core machine with no fault, counting every lost race
  ejected a healthy provider within 10 s).

Hedging off costs nothing: a method without it keeps its plain provider call (and its call
plan); a method with it has no call plan (:mod:`dubbo_py.cluster.plan` needs a plain call).
The blocking flavour makes the first attempt on the caller's thread; one timer thread starts
each hedge on a shared pool when its delay has passed, and a loser is cancelled through the
gRPC call the method invoker hands to :data:`~dubbo_py.protocol.triple.CALL_SINK` (the caller's
own, when a hedge wins). The asyncio flavour runs attempts as tasks and cancels the task.
"""

from __future__ import annotations

import asyncio
import contextvars
import heapq
import itertools
import logging
import math
import threading
from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any

import grpc

from dubbo_py.cluster.budget import RetryBudget
from dubbo_py.cluster.hedging_policy import HedgingPolicy
from dubbo_py.cluster.support.context import ClusterContext, ProviderCall
from dubbo_py.cluster.support.outcome import is_call_failure
from dubbo_py.cluster.support.pool import LazyPool
from dubbo_py.errors import NoProviderError
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.triple import CALL_SINK
from dubbo_py.url import URL

__all__ = [
    "BURST_PER_SECOND",
    "LOSS_SPACING",
    "WARMUP_DELAY",
    "AsyncHedgedCall",
    "HedgeCounts",
    "HedgedCall",
    "Hedging",
    "LatencyWindow",
]

log = logging.getLogger(__name__)

#: Hedges a second the budget always allows (its reserve, over a 10 s window: a burst of 10).
BURST_PER_SECOND = 1.0
#: The window of the hedging budget, seconds.
BUDGET_TTL = 10.0
#: The delay of a percentile while the method has too few latencies to read it from.
WARMUP_DELAY = 0.1
#: The shortest delay: below it, a hedge would race its own first attempt's thread hand-off.
MIN_DELAY = 0.001
#: The largest share of a call's remaining deadline a hedge waits before it is sent.
MAX_DELAY_SHARE = 0.5
#: Lost races of one provider closer together than this count once against it (seconds).
LOSS_SPACING = 0.025


class LatencyWindow:
    """The latest :data:`SIZE` latencies of one method, and percentiles of them, cheaply: a
    record is one store into a ring; the sorted copy percentiles are read from is made again
    every :data:`RESORT` records. Not locked: two threads recording at once may overwrite one
    slot, which only loses a sample."""

    SIZE = 128
    RESORT = 32
    #: Samples needed before a percentile is read (else :data:`WARMUP_DELAY` is used).
    MIN_SAMPLES = 16

    def __init__(self) -> None:
        self._ring = [0.0] * self.SIZE
        self._count = 0
        self._sorted: list[float] = []

    def record(self, seconds: float) -> None:
        """Add one latency."""
        count = self._count
        self._ring[count % self.SIZE] = seconds
        self._count = count + 1
        if count % self.RESORT == 0 or count < self.MIN_SAMPLES:
            self._sorted = sorted(self._ring[: min(count + 1, self.SIZE)])

    def percentile(self, p: float) -> float | None:
        """The ``p``-th percentile (0-100) of the window, None with too few samples."""
        values = self._sorted
        if len(values) < self.MIN_SAMPLES:
            return None
        index = min(len(values) - 1, max(0, math.ceil(p / 100.0 * len(values)) - 1))
        return values[index]


class HedgeCounts:
    """What one method's hedging did (metrics): hedges sent, hedges that answered first, and
    hedges the budget refused. Kept across policy changes."""

    __slots__ = ("_lock", "refused", "sent", "won")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.won = 0
        self.refused = 0

    def add(self, field: str) -> None:
        """Count one event (``sent``, ``won`` or ``refused``)."""
        with self._lock:
            setattr(self, field, getattr(self, field) + 1)


class Hedging:
    """One method's hedging state: its policy, latencies, budget and counts."""

    def __init__(
        self,
        policy: HedgingPolicy,
        counts: HedgeCounts | None = None,
        *,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        self.policy = policy
        self.counts = counts if counts is not None else HedgeCounts()
        self.latencies = LatencyWindow()
        self.budget = RetryBudget(policy.max_extra_load, BURST_PER_SECOND, BUDGET_TTL, clock=clock)
        self._percentile = policy.percentile
        self._clock = clock
        # When a lost race last counted against each provider (see LOSS_SPACING).
        self._losses: dict[str, float] = {}

    def delay(self) -> float:
        """Seconds to wait for an answer before the next hedge."""
        if self._percentile is None:
            assert isinstance(self.policy.delay, float)
            return self.policy.delay
        observed = self.latencies.percentile(self._percentile)
        return WARMUP_DELAY if observed is None else max(MIN_DELAY, observed)

    def counts_loss(self, address: str) -> bool:
        """Whether a race ``address`` lost now counts against it (not within
        :data:`LOSS_SPACING` of the last one that did)."""
        now = self._clock()
        last = self._losses.get(address)
        if last is not None and now - last < LOSS_SPACING:
            return False
        if len(self._losses) > 1024:  # providers come and go: keep the map small
            self._losses.clear()
        self._losses[address] = now
        return True

    def allow(self) -> bool:
        """Take one hedge from the budget; False (and counted) when it is spent."""
        if self.budget.try_withdraw():
            return True
        self.counts.add("refused")
        return False


class _Calls(list[Any]):
    """The gRPC calls one attempt made (the invoker appends them to
    :data:`~dubbo_py.protocol.triple.CALL_SINK`); :meth:`cancel` cancels them, and any made
    after it (an attempt cancelled before its call started)."""

    cancelled = False
    #: Tells the method invoker to make a call it can cancel (see ``MethodInvoker._send``).
    cancellable = True

    def append(self, call: Any) -> None:
        super().append(call)
        if self.cancelled:
            call.cancel()

    def cancel(self) -> None:
        self.cancelled = True
        for call in list(self):
            call.cancel()


class _Attempt:
    __slots__ = ("calls", "ended", "provider", "started", "task")

    def __init__(self, provider: URL, started: float) -> None:
        self.provider = provider
        self.started = started
        self.calls = _Calls()
        self.task: Any = None
        self.ended = False


class _Race:
    """One hedged attempt's bookkeeping, shared by both flavours."""

    def __init__(
        self, ctx: ClusterContext, hedging: Hedging, invocation: Invocation, timeout: float | None
    ) -> None:
        self.ctx = ctx
        self.hedging = hedging
        self.invocation = invocation
        self.started = monotonic()
        self.deadline = None if timeout is None else self.started + timeout
        self.attempts: list[_Attempt] = []
        self.more = hedging.policy.max_attempts > 1
        self.next_hedge = self.started + self._delay(timeout)
        self.first_error: BaseException | None = None

    def _delay(self, left: float | None) -> float:
        """The method's hedge delay, at most half of what is ``left`` of the call's deadline:
        a hedge sent at the deadline is no hedge. (A percentile delay grows with the method's
        latencies; on a machine that slows everything down, p99 alone could reach the deadline
        and a blackholed provider's calls would fail unhedged.)"""
        delay = self.hedging.delay()
        return delay if left is None else min(delay, left * MAX_DELAY_SHARE)

    def wait(self) -> float | None:
        """Seconds to wait for an attempt now (None: until one ends)."""
        now = monotonic()
        if self.deadline is not None and now >= self.deadline:
            self.more = False
        if not self.more:
            return None
        return max(0.0, self.next_hedge - now)

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - monotonic())

    def next_provider(self) -> URL | None:
        """The provider of the next hedge, or None (and no more hedges): no other provider,
        past the deadline, or the budget refused."""
        ctx, invocation = self.ctx, self.invocation
        tried = [a.provider for a in self.attempts]
        try:
            candidates = ctx.candidates(invocation)
        except NoProviderError:
            candidates = ()
        other = ctx.pick(invocation, candidates, tried) if candidates else None
        if other is None or other in tried or not self.hedging.allow():
            self.more = False
            return None
        self.hedging.counts.add("sent")
        self.more = len(self.attempts) + 1 < self.hedging.policy.max_attempts
        self.next_hedge = monotonic() + self._delay(self.remaining())
        return other

    def ended(self, attempt: _Attempt, error: BaseException | None) -> bool:
        """Record how ``attempt`` ended; True when it wins (an answer)."""
        if error is not None and not isinstance(error, grpc.RpcError):
            raise error
        if error is None or not is_call_failure(error):
            return True
        if attempt is self.attempts[0]:
            self.first_error = error
        else:
            self.ctx.note_failure(attempt.provider, error)
        return False

    def won(self, winner: _Attempt, pending: Iterable[_Attempt]) -> None:
        """``winner`` answered first: cancel the others, count the providers that did not
        answer, and record the winner's latency and calls."""
        first = self.attempts[0]
        for attempt in pending:
            attempt.calls.cancel()
            if attempt.started < winner.started:
                self._unanswered(attempt)
        if winner is not first:
            self.hedging.counts.add("won")
            self.ctx.note_success(winner.provider)
            outliers = self.ctx.outliers
            if self.first_error is not None:  # the first attempt failed before: recorded now
                self.ctx.note_failure(first.provider, self.first_error)
            if outliers is not None:
                # The strategy reports its attempt (on the first provider) as answered: that
                # answer was the hedge's, not the first provider's own.
                outliers.answered_for(first.provider.address)
        self.hedging.latencies.record(monotonic() - self.started)

    def _unanswered(self, attempt: _Attempt) -> None:
        outliers = self.ctx.outliers
        if outliers is None or not self.hedging.counts_loss(attempt.provider.address):
            return
        waited = monotonic() - attempt.started
        outliers.failed(attempt.provider, _NotAnswered(self.invocation, attempt.provider, waited))

    def lost(self) -> BaseException:
        """Every attempt failed: the first one's error (the strategy records it on the first
        provider and fails over as usual)."""
        self.hedging.latencies.record(monotonic() - self.started)
        assert self.first_error is not None
        return self.first_error


class _NotAnswered(grpc.RpcError):
    """How a hedge race's loser that never answered is counted against its provider."""

    def __init__(self, invocation: Invocation, provider: URL, waited: float) -> None:
        super().__init__(
            f"{invocation.service}.{invocation.method} on {provider.address}: no answer "
            f"after {waited:.3f}s, another provider answered first"
        )

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return str(self)


#: Threads the blocking flavour's hedges run on (made as needed, up to this many; the first
#: attempt runs on the caller's thread): this bounds the hedges in flight at once.
_attempt_pool = LazyPool(256, "dubbo-hedge")


class _Timers:
    """One daemon thread that runs callbacks at their time (a heap of ``[when, seq, fn]``).
    Scheduling is a push under a lock, cancelling sets ``fn`` to None: a call that is answered
    before its delay (nearly every call) costs no thread switch. The thread wakes when the
    earliest entry is due and drops the cancelled ones then, so it wakes about once per delay
    under load, not once per call."""

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []
        self._ready = threading.Condition(threading.Lock())
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def schedule(self, when: float, fn: Callable[[], None]) -> list[Any]:
        """Run ``fn`` at ``when`` (monotonic); returns the entry for :meth:`cancel`."""
        entry = [when, next(self._order), fn]
        with self._ready:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="dubbo-hedge-timer")
                self._thread.daemon = True
                self._thread.start()
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:
                self._ready.notify()
        return entry

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        """The entry's callback will not run (if it has not started)."""
        entry[2] = None

    def _run(self) -> None:
        heap = self._heap
        while True:
            with self._ready:
                while True:
                    while heap and heap[0][2] is None:
                        heapq.heappop(heap)
                    if not heap:
                        self._ready.wait()
                        continue
                    wait = heap[0][0] - monotonic()
                    if wait <= 0:
                        fn = heapq.heappop(heap)[2]
                        break
                    self._ready.wait(wait)
            if fn is not None:
                try:
                    fn()
                except Exception:  # a hedge that could not start leaves the call as it is
                    log.exception("starting a hedged attempt failed")


_timers = _Timers()


class _BlockingRace:
    """A blocking hedged attempt: the first attempt on the caller's thread, hedges started by
    the timer thread on the attempt pool; the first answer wins, under a lock."""

    def __init__(self, call: HedgedCall, race: _Race) -> None:
        self.call = call
        self.race = race
        self.lock = threading.Lock()
        self.settled = threading.Event()
        self.winner: _Attempt | None = None
        self.answer: tuple[Any, BaseException | None] = (None, None)
        self.running = 1
        self.context = contextvars.copy_context()
        self.timer: list[Any] | None = None

    def arm(self) -> None:
        """Start the timer of the next hedge (the lock held, or before any hedge)."""
        self.timer = _timers.schedule(self.race.next_hedge, self.hedge)

    def hedge(self) -> None:
        """On the timer thread: send the next hedge if the race is still open."""
        race = self.race
        with self.lock:
            if self.winner is not None or self.settled.is_set():
                return
            other = None
            if race.more and (race.deadline is None or monotonic() < race.deadline):
                other = race.next_provider()
            if other is None:
                race.more = False
                if self.running == 0:  # the first attempt failed, no hedge runs: give up
                    self.settled.set()
                return
            attempt = _Attempt(other, monotonic())
            race.attempts.append(attempt)
            self.running += 1
            if race.more:
                self.arm()
        _attempt_pool.get().submit(self.context.run, self._run_hedge, attempt)

    def _run_hedge(self, attempt: _Attempt) -> None:
        self.run(attempt, self.race.remaining())

    def run(self, attempt: _Attempt, timeout: float | None) -> None:
        """Make ``attempt``'s provider call, its gRPC calls kept in its own sink, and record
        how it ended."""
        token = CALL_SINK.set(attempt.calls)
        try:
            response = self.call.inner(attempt.provider, self.race.invocation, timeout)
        except BaseException as error:
            self.ended(attempt, None, error)
        else:
            self.ended(attempt, response, None)
        finally:
            CALL_SINK.reset(token)

    def ended(self, attempt: _Attempt, response: Any, error: BaseException | None) -> None:
        """Record how ``attempt`` ended (any thread)."""
        race = self.race
        with self.lock:
            attempt.ended = True
            self.running -= 1
            if self.winner is not None:
                return  # a loser, cancelled or too late
            answered = error is None or (
                isinstance(error, grpc.RpcError) and not is_call_failure(error)
            )
            if not answered:
                if error is not None and not isinstance(error, grpc.RpcError):
                    # Not a call's outcome (a bug, an interrupt): the first attempt's error
                    # stands for the call; a hedge's is logged and dropped.
                    if attempt is race.attempts[0]:
                        race.first_error = error
                    else:
                        log.error("hedged attempt on %s: %r", attempt.provider.address, error)
                else:
                    race.ended(attempt, error)
                if self.running == 0 and (attempt is race.attempts[0] or not race.more):
                    self.settled.set()
                return
            self.winner = attempt
            self.answer = (response, error)
            pending = [a for a in race.attempts if not a.ended]
        if self.timer is not None:
            _timers.cancel(self.timer)
        race.won(attempt, pending)
        self.settled.set()


class HedgedCall:
    """A blocking provider call with hedging around it (see the module doc); ``ctx`` is set
    once the method's context exists. The first attempt runs on the caller's thread, as an
    unhedged call does; a timer starts each hedge on a shared pool when its delay has passed,
    and the attempt that answers first cancels the others' gRPC calls -- the caller's too,
    which then takes the winner's answer."""

    __slots__ = ("ctx", "hedging", "inner")

    def __init__(self, inner: ProviderCall, hedging: Hedging) -> None:
        #: The provider call inside (with the attempt filters).
        self.inner = inner
        self.hedging = hedging
        self.ctx: ClusterContext | None = None

    def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        assert self.ctx is not None, "HedgedCall used before its context was set"
        race = _Race(self.ctx, self.hedging, invocation, timeout)
        self.hedging.budget.deposit()
        first = _Attempt(provider, race.started)
        race.attempts.append(first)
        state = _BlockingRace(self, race)
        if race.more:
            state.arm()
        outer = CALL_SINK.get()
        state.run(first, timeout)
        with state.lock:
            # The first attempt failed: wait for the hedges in flight, if any (as an unhedged
            # call, a failure before any hedge goes to the strategy at once).
            if state.winner is None and state.running == 0:
                state.settled.set()
        # Also when a hedge won: its bookkeeping (the outlier stand-in above all) is done
        # before the strategy records this attempt.
        state.settled.wait()
        if state.timer is not None:
            _timers.cancel(state.timer)
        winner = state.winner
        if winner is None:
            raise race.lost()
        if outer is not None:
            outer.extend(winner.calls)
        answer, failure = state.answer
        if failure is not None:
            raise failure
        return answer


class AsyncHedgedCall:
    """:class:`HedgedCall` for the asyncio flavour: attempts are tasks on the loop."""

    __slots__ = ("ctx", "hedging", "inner")

    def __init__(self, inner: Callable[..., Any], hedging: Hedging) -> None:
        self.inner = inner
        self.hedging = hedging
        self.ctx: ClusterContext | None = None

    async def _run(self, attempt: _Attempt, invocation: Invocation, timeout: float | None) -> Any:
        CALL_SINK.set(attempt.calls)  # the task's own copy of the context
        return await self.inner(attempt.provider, invocation, timeout)

    def _start(self, race: _Race, provider: URL) -> _Attempt:
        attempt = _Attempt(provider, monotonic())
        attempt.task = asyncio.ensure_future(self._run(attempt, race.invocation, race.remaining()))
        race.attempts.append(attempt)
        return attempt

    async def __call__(self, provider: URL, invocation: Invocation, timeout: float | None) -> Any:
        assert self.ctx is not None, "AsyncHedgedCall used before its context was set"
        race = _Race(self.ctx, self.hedging, invocation, timeout)
        self.hedging.budget.deposit()
        running = {self._start(race, provider).task: race.attempts[0]}
        try:
            while running:
                done, _ = await asyncio.wait(
                    running, timeout=race.wait(), return_when=asyncio.FIRST_COMPLETED
                )
                for task in done:
                    attempt = running.pop(task)
                    if race.ended(attempt, task.exception()):
                        race.won(attempt, running.values())
                        return task.result()
                if race.more and monotonic() >= race.next_hedge:
                    other = race.next_provider()
                    if other is not None:
                        attempt = self._start(race, other)
                        running[attempt.task] = attempt
            raise race.lost()
        finally:
            for task in running:
                task.cancel()
                # Retrieved when it ends, so a cancelled loser is not reported as never
                # retrieved.
                task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
