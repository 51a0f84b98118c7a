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
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

__all__ = ["IDLE_TIMEOUT_S", "ChannelHolder", "SharedChannels"]

#: Seconds without a call after which gRPC closes a shared channel's connection (it reconnects
#: at the next call).
IDLE_TIMEOUT_S = 300.0


class ChannelHolder(Protocol):
    """A reference's pool, told when the shared channel to an address was replaced."""

    def dropped(self, address: str) -> None:
        """The channel to ``address`` this holder had is being closed: forget it."""
        ...


@dataclass(eq=False)
class _Entry:
    channel: grpc.Channel
    holders: set[ChannelHolder] = field(default_factory=set)
    #: What references made on the channel and share (see :meth:`SharedChannels.made_on`).
    made: dict[Hashable, Any] = field(default_factory=dict)
    #: Closes the channel once nobody held it for the linger period (None: held).
    timer: threading.Timer | None = None


class SharedChannels:
    """The application's blocking channels by ``(address, security key)``; thread-safe."""

    def __init__(self, *, linger: float = 30.0) -> None:
        self._linger = linger
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, Hashable], _Entry] = {}
        self._retiring: list[threading.Timer] = []
        self._closed = False

    def acquire(
        self,
        address: str,
        security: Hashable,
        holder: ChannelHolder,
        open_channel: Callable[[], grpc.Channel],
    ) -> grpc.Channel:
        """The channel to ``address`` with these security settings, opened with
        ``open_channel`` if none is; ``holder`` holds it until it :meth:`release` s it."""
        key = (address, security)
        with self._lock:
            entry = self._entries.get(key)
            stale: grpc.Channel | None = None
            if entry is not None and entry.timer is not None:
                # Every directory had dropped the address: the provider went away (a crash, a
                # restart) and has been registered again. Its old channel may sit in gRPC's
                # reconnect backoff, failing calls fast for seconds, so the new registration
                # gets a new channel as Dubbo gives it a new invoker; the old one still
                # finishes its calls in flight and closes after the linger period.
                entry.timer.cancel()
                stale = entry.channel
                entry = None
            if entry is None:
                entry = self._entries[key] = _Entry(open_channel())
            entry.holders.add(holder)
            channel = entry.channel
        if stale is not None:
            self._close_later(stale)
        return channel

    def release(self, address: str, security: Hashable, holder: ChannelHolder) -> None:
        """``holder`` no longer uses the channel to ``address``; the last holder's release
        closes it ``linger`` seconds later."""
        key = (address, security)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or holder not in entry.holders:
                return
            entry.holders.discard(holder)
            if entry.holders or self._closed:
                return
            if self._linger <= 0:
                del self._entries[key]
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
        entry_key = (address, security)
        with self._lock:
            entry = self._entries.get(entry_key)
            if entry is None or entry.channel is not channel:
                entry = None
            else:
                found = entry.made.get(key)
                if found is not None:
                    return found
        made = make()
        if entry is None:
            return made
        with self._lock:
            return entry.made.setdefault(key, made)

    def _expire(self, key: tuple[str, Hashable], entry: _Entry) -> None:
        with self._lock:
            if self._entries.get(key) is not entry or entry.holders:
                return
            del self._entries[key]
        entry.channel.close()

    def reset(self, address: str, security: Hashable, channel: grpc.Channel) -> bool:
        """Replace the channel to ``address`` if it still is ``channel``: every holder is told
        to drop it (:meth:`ChannelHolder.dropped`), the next :meth:`acquire` opens a new one,
        and the old one closes ``linger`` seconds later. False when it was replaced already."""
        key = (address, security)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.channel is not channel:
                return False
            del self._entries[key]
            holders = list(entry.holders)
            if entry.timer is not None:
                entry.timer.cancel()
        for holder in holders:
            holder.dropped(address)
        self._close_later(channel)
        return True

    def _close_later(self, channel: grpc.Channel) -> None:
        if self._linger <= 0:
            channel.close()
            return
        timer = threading.Timer(self._linger, channel.close)
        timer.daemon = True
        with self._lock:
            self._retiring = [t for t in self._retiring if t.is_alive()]
            self._retiring.append(timer)
        timer.start()

    def open_count(self) -> int:
        """Channels open now (held or lingering; replaced ones not counted)."""
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        """Close every channel now, held or not (the application is closing)."""
        with self._lock:
            self._closed = True
            entries, self._entries = list(self._entries.values()), {}
            retiring, self._retiring = self._retiring, []
        for entry in entries:
            if entry.timer is not None:
                entry.timer.cancel()
            entry.channel.close()
        for timer in retiring:
            ran = timer.finished.is_set()
            timer.cancel()
            if not ran:
                timer.function(*timer.args, **timer.kwargs)
