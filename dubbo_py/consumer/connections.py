"""One blocking gRPC channel per provider address and security settings per application,
shared by every reference of the application (Dubbo's shared connection).

A reference's :class:`~dubbo_py.consumer.invoker.ChannelPool` asks :meth:`SharedChannels.acquire`
for the channel to a provider and becomes one of its *holders*. The channel is:

- opened on first use (by the first reference that calls the provider);
- kept while any reference holds it: a reference whose directory no longer lists the address
  :meth:`releases <SharedChannels.release>` it, and when the last holder did, the channel is
  closed ``linger`` seconds later (calls in flight finish); a reference that picks the address
  up again meanwhile gets a new channel (the provider was registered again, perhaps restarted:
  the old channel may be in gRPC's reconnect backoff);
- replaced for every holder when one of them :meth:`resets <SharedChannels.reset>` it (a
  quarantined provider coming back: its old channel may sit in gRPC's reconnect backoff); the
  other holders are told, so they drop their cached callables on the old one;
- the home of what references make on it: a method's multicallable, with the Triple headers
  bound, is made once and shared (:meth:`SharedChannels.made_on`);
- idle-closed by gRPC itself: shared channels carry ``grpc.client_idle_timeout_ms``
  (:data:`IDLE_TIMEOUT_S`), so a channel that carried no call for that long closes its
  connection and reconnects on the next call.

Five references to one service of 2 000 providers thus hold 2 000 connections, not 10 000.

The asyncio flavour shares ``grpc.aio`` channels per (event loop, provider address, security
settings): a ``grpc.aio`` channel belongs to the event loop that made it, so
:class:`AsyncSharedChannels` keeps one :class:`LoopChannels` per loop. A reference's
:class:`~dubbo_py.consumer.invoker.AsyncChannelPool` *joins* its loop's channels at its first
call and asks them for the channel to a provider (:meth:`LoopChannels.acquire`), becoming one of
its *holders*. A channel is:

- opened on first use, by the first reference on the loop that calls the provider;
- kept while any reference on the loop holds it: a reference whose directory no longer lists
  the address releases it, and when the last holder did, it is closed ``linger`` seconds later
  (calls in flight finish); a reference that picks the address up again meanwhile gets a new
  channel (the provider was registered again, perhaps restarted), as in the blocking flavour;
- replaced for every holder on the loop when one of them resets it (a quarantined provider
  coming back);
- idle-closed by gRPC after :data:`~dubbo_py.consumer.connections.IDLE_TIMEOUT_S` without a call;
- closed with every other channel of the loop when the loop's last reference closes.

Everything of one loop runs on that loop's thread (the pools call in from their channel look-ups
and their sweeps, which run on the loop), so a :class:`LoopChannels` needs no lock; only the
map from loop to channels is shared between threads.

Both flavours run one state machine, :class:`ChannelTable`: it does no I/O, holds no lock and
starts no timer, and says what to close and when to schedule an expiry. Each flavour is a
driver around it: :class:`SharedChannels` serialises it with a lock and closes with
``threading.Timer``; :class:`LoopChannels` runs it on its loop and closes with ``call_later``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import grpc

__all__ = [
    "IDLE_TIMEOUT_S",
    "AsyncSharedChannels",
    "ChannelHolder",
    "ChannelTable",
    "LoopChannels",
    "SharedChannels",
]


#: Seconds without a call after which gRPC closes a shared channel's connection (it reconnects
#: at the next call).
IDLE_TIMEOUT_S = 300.0

#: A channel of either flavour (``grpc.Channel`` or ``grpc.aio.Channel``).
C = TypeVar("C")

#: What a table entry is keyed by: the provider address and the security settings.
Key = tuple[str, Hashable]


class ChannelHolder(Protocol):
    """A reference's pool (of either flavour), told when the shared channel to an address was
    replaced."""

    def dropped(self, address: str) -> None:
        """The channel to ``address`` this holder had is being closed: forget it."""
        ...


class Cancellable(Protocol):
    """A scheduled expiry (``threading.Timer`` or ``asyncio.TimerHandle``)."""

    def cancel(self) -> None: ...


@dataclass(eq=False)
class Entry(Generic[C]):
    """One shared channel and who holds it."""

    channel: C
    holders: set[ChannelHolder] = field(default_factory=set)
    #: What references made on the channel and share (see :meth:`ChannelTable.made`).
    made: dict[Hashable, Any] = field(default_factory=dict)
    #: Closes the channel once nobody held it for the linger period (None: held).
    timer: Cancellable | None = None


class ChannelTable(Generic[C]):
    """The shared-channel state machine of both flavours: no I/O, no lock, no timer.

    The driver serialises the calls (a lock, or its event loop) and does what they return:
    closes a replaced channel after the linger period, schedules the expiry of a channel its
    last holder let go, tells the holders of a reset channel.
    """

    def __init__(self) -> None:
        self.entries: dict[Key, Entry[C]] = {}

    def acquire(
        self, key: Key, holder: ChannelHolder, open_channel: Callable[[], C]
    ) -> tuple[C, C | None]:
        """The channel for ``key`` (opened with ``open_channel`` if none is), now held by
        ``holder``; and a stale channel to retire, if any."""
        entry = self.entries.get(key)
        stale: C | None = None
        if entry is not None and entry.timer is not None:
            # Every directory had dropped the address: the provider went away (a crash, a
            # restart) and has been registered again. Its old channel may sit in gRPC's
            # reconnect backoff, failing calls fast for seconds, so the new registration gets a
            # new channel as Dubbo gives it a new invoker; the old one still finishes its calls
            # in flight and is retired (closed after the linger period).
            entry.timer.cancel()
            stale = entry.channel
            entry = None
        if entry is None:
            entry = self.entries[key] = Entry(open_channel())
        entry.holders.add(holder)
        return entry.channel, stale

    def release(self, key: Key, holder: ChannelHolder) -> Entry[C] | None:
        """``holder`` lets the channel go; the entry whose last holder this was (the driver
        schedules its :meth:`expire`), else None."""
        entry = self.entries.get(key)
        if entry is None or holder not in entry.holders:
            return None
        entry.holders.discard(holder)
        return None if entry.holders else entry

    def made(self, key: Key, channel: C, made_key: Hashable) -> tuple[Entry[C] | None, Any]:
        """The entry of ``channel`` if it still is the shared one (None: made things are not
        kept), and what was made on it for ``made_key`` (None: not yet)."""
        entry = self.entries.get(key)
        if entry is None or entry.channel is not channel:
            return None, None
        return entry, entry.made.get(made_key)

    def expire(self, key: Key, entry: Entry[C]) -> bool:
        """The linger period of ``entry`` ended: True when the driver should close its channel
        (nobody took it up again meanwhile)."""
        if self.entries.get(key) is not entry or entry.holders:
            return False
        del self.entries[key]
        return True

    def reset(self, key: Key, channel: C) -> list[ChannelHolder] | None:
        """Take ``channel`` out if it still is the one for ``key``: its holders (to tell, then
        retire the channel), or None when it was replaced already."""
        entry = self.entries.get(key)
        if entry is None or entry.channel is not channel:
            return None
        del self.entries[key]
        if entry.timer is not None:
            entry.timer.cancel()
        return list(entry.holders)

    def clear(self) -> list[Entry[C]]:
        """Every entry, taken out, their expiries cancelled (the driver closes the channels)."""
        entries, self.entries = list(self.entries.values()), {}
        for entry in entries:
            if entry.timer is not None:
                entry.timer.cancel()
        return entries


class _Driver(Generic[C]):
    """What both flavours' drivers of a :class:`ChannelTable` share: ``_lock`` serialises the
    table's calls (a lock; a no-op for a loop's channels, used on their loop only);
    ``_retire`` closes a replaced channel ``linger`` seconds later."""

    _table: ChannelTable[C]
    _lock: contextlib.AbstractContextManager[Any]

    def acquire(
        self, address: str, security: Hashable, holder: ChannelHolder, open_channel: Callable[[], C]
    ) -> C:
        """The channel to ``address`` with these security settings, opened with
        ``open_channel`` if none is; ``holder`` holds it until it :meth:`release` s it."""
        with self._lock:
            channel, stale = self._table.acquire((address, security), holder, open_channel)
        if stale is not None:
            self._retire(stale)
        return channel

    def reset(self, address: str, security: Hashable, channel: C) -> bool:
        """Replace the channel to ``address`` if it still is ``channel``: every holder is told
        to drop it (:meth:`ChannelHolder.dropped`), the next :meth:`acquire` opens a new one,
        and the old one closes ``linger`` seconds later. False when it was replaced already."""
        with self._lock:
            holders = self._table.reset((address, security), channel)
        if holders is None:
            return False
        for holder in holders:
            holder.dropped(address)
        self._retire(channel)
        return True

    def open_count(self) -> int:
        """Channels open now (held or lingering; replaced ones not counted)."""
        with self._lock:
            return len(self._table.entries)

    def _retire(self, channel: C) -> None:
        raise NotImplementedError


class SharedChannels(_Driver[grpc.Channel]):
    """The application's blocking channels by ``(address, security key)``; thread-safe."""

    def __init__(self, *, linger: float = 30.0) -> None:
        self._linger = linger
        self._lock = threading.Lock()
        self._table = ChannelTable()
        self._retiring: list[threading.Timer] = []
        self._closed = False

    def release(self, address: str, security: Hashable, holder: ChannelHolder) -> None:
        """``holder`` no longer uses the channel to ``address``; the last holder's release
        closes it ``linger`` seconds later."""
        key = (address, security)
        with self._lock:
            entry = self._table.release(key, holder)
            if entry is None or self._closed:
                return
            if self._linger <= 0:
                self._table.expire(key, entry)
                entry.channel.close()
                return
            timer = threading.Timer(self._linger, self._expire, args=(key, entry))
            timer.daemon = True
            entry.timer = timer
        timer.start()

    def made_on(
        self,
        address: str,
        security: Hashable,
        channel: grpc.Channel,
        key: Hashable,
        make: Callable[[], Any],
    ) -> Any:
        """What ``make`` makes on ``channel`` -- a method's multicallable with its headers --
        made once per ``key`` and shared by every reference holding the channel (a reference
        per balancer over 2 000 providers would otherwise keep 2 000 copies each). Made afresh,
        and not kept, when ``channel`` is no longer the shared one."""
        with self._lock:
            entry, found = self._table.made((address, security), channel, key)
        if found is not None:
            return found
        made = make()  # outside the lock: making a multicallable may take a while
        if entry is None:
            return made
        with self._lock:
            return entry.made.setdefault(key, made)

    def _expire(self, key: Key, entry: Entry[grpc.Channel]) -> None:
        with self._lock:
            if not self._table.expire(key, entry):
                return
        entry.channel.close()

    def _retire(self, channel: grpc.Channel) -> None:
        if self._linger <= 0:
            channel.close()
            return
        timer = threading.Timer(self._linger, channel.close)
        timer.daemon = True
        with self._lock:
            self._retiring = [t for t in self._retiring if t.is_alive()]
            self._retiring.append(timer)
        timer.start()

    def close(self) -> None:
        """Close every channel now, held or not (the application is closing)."""
        with self._lock:
            self._closed = True
            entries = self._table.clear()
            retiring, self._retiring = self._retiring, []
        for entry in entries:
            entry.channel.close()
        for timer in retiring:
            ran = timer.finished.is_set()
            timer.cancel()
            if not ran:
                timer.function(*timer.args, **timer.kwargs)


# ----------------------------- the asyncio flavour -----------------------------


class LoopChannels(_Driver[grpc.aio.Channel]):
    """The channels of one event loop by ``(address, security key)``; used on that loop only."""

    def __init__(self, owner: AsyncSharedChannels, loop: asyncio.AbstractEventLoop) -> None:
        self._owner = owner
        self.loop = loop
        self._linger = owner.linger
        self._lock = contextlib.nullcontext()
        self._table = ChannelTable()
        self._retiring: dict[grpc.aio.Channel, asyncio.TimerHandle] = {}
        self._closing: set[asyncio.Task[None]] = set()
        #: The pools on this loop that joined and have not left.
        self.members: set[ChannelHolder] = set()
        self.closed = False

    def release(self, address: str, security: Hashable, holder: ChannelHolder) -> None:
        """``holder`` no longer uses the channel to ``address``; the last holder's release
        closes it ``linger`` seconds later."""
        key = (address, security)
        entry = self._table.release(key, holder)
        if entry is None or self.closed:
            return
        entry.timer = self.loop.call_later(self._linger, self._expire, key, entry)

    def made_on(
        self,
        address: str,
        security: Hashable,
        channel: grpc.aio.Channel,
        key: Hashable,
        make: Callable[[], Any],
    ) -> Any:
        """What ``make`` makes on ``channel`` (a method's multicallable and headers), made
        once per ``key`` and shared by the references holding the channel; made afresh, and
        not kept, when ``channel`` is no longer the shared one."""
        entry, found = self._table.made((address, security), channel, key)
        if entry is None:
            return make()
        if found is None:
            found = entry.made[key] = make()
        return found

    def _expire(self, key: Key, entry: Entry[grpc.aio.Channel]) -> None:
        if self._table.expire(key, entry):
            self._close_soon(entry.channel)

    def _retire(self, channel: grpc.aio.Channel) -> None:
        def close() -> None:
            if self._retiring.pop(channel, None) is not None:
                self._close_soon(channel)

        self._retiring[channel] = self.loop.call_later(self._linger, close)

    def _close_soon(self, channel: grpc.aio.Channel) -> None:
        task = self.loop.create_task(channel.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def leave(self, holder: ChannelHolder) -> None:
        """``holder`` (which released its channels) closed: when it was the loop's last
        reference, close every channel of the loop now, lingering ones included."""
        self.members.discard(holder)
        if self.members or not self._owner._forget(self):
            return
        self.closed = True
        entries = self._table.clear()
        retiring, self._retiring = self._retiring, {}
        for timer in retiring.values():
            timer.cancel()
        for channel in [*(e.channel for e in entries), *retiring]:
            await channel.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class AsyncSharedChannels:
    """The application's asyncio channels: one :class:`LoopChannels` per event loop, made when
    the loop's first reference calls and dropped when its last reference closes."""

    def __init__(self, *, linger: float = 30.0) -> None:
        #: Seconds a channel nobody holds (or a replaced one) stays open for calls in flight.
        self.linger = linger
        self._lock = threading.Lock()
        # Weak: a loop that ended without closing its references takes its channels with it.
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopChannels] = (
            weakref.WeakKeyDictionary()
        )

    def join(self, holder: ChannelHolder) -> LoopChannels:
        """The running loop's channels, with ``holder`` one of its references (on the loop)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            channels = self._loops.get(loop)
            if channels is None:
                channels = self._loops[loop] = LoopChannels(self, loop)
            channels.members.add(holder)
        return channels

    def _forget(self, channels: LoopChannels) -> bool:
        """Drop ``channels`` from the map if no reference joined it meanwhile."""
        with self._lock:
            if channels.members:
                return False
            if self._loops.get(channels.loop) is channels:
                del self._loops[channels.loop]
            return True

    def open_count(self, loop: asyncio.AbstractEventLoop | None = None) -> int:
        """Channels open on ``loop`` (default: the running one)."""
        loop = loop if loop is not None else asyncio.get_running_loop()
        with self._lock:
            channels = self._loops.get(loop)
        return 0 if channels is None else channels.open_count()

    def loops(self) -> int:
        """Event loops with channels now."""
        with self._lock:
            return len(self._loops)
