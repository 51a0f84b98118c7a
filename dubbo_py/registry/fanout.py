"""Providers registered in several registries at once (Dubbo's ``MultipleRegistry``, provider
side).

:class:`FanOutRegistry` is what an application with several registries exports through: a
provider URL is registered in each member registry its service may use, and unregistered from
each. A member that cannot be reached does not stop the others: the URL is registered where
it can be, the failure is logged, and the registration is made again once that member's store
connects (its session listener, on a thread of its own since a provider registration waits for
the member's override rules, which the store's own thread delivers). Only when every member
fails does ``register`` raise, as a single registry would.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Sequence
from functools import partial

from dubbo_py.errors import StoreError
from dubbo_py.registry.registry import Registry
from dubbo_py.registry.store.base import SessionState
from dubbo_py.url import URL

__all__ = ["FanOutRegistry", "Member"]

log = logging.getLogger(__name__)

#: A member registry: its id and the registry providers register through there.
Member = tuple[str, Registry]
#: Which member ids a URL goes to (None: every member).
Scope = Callable[[URL], Collection[str] | None]


def _everywhere(_url: URL) -> None:
    return None


class FanOutRegistry(Registry):
    """Registers and unregisters in every member (see the module doc). ``scope`` narrows a URL
    to some members (a service that names its registries). Reads (lookups, subscriptions,
    rules) are the first member's, as for the single registry it stands in for."""

    def __init__(self, members: Sequence[Member], scope: Scope = _everywhere) -> None:
        if not members:
            raise ValueError("a fan-out registry needs at least one member")
        first = members[0][1]
        super().__init__(first.store, protect=first.protect)
        self.members = tuple(members)
        self._scope = scope
        self._pending_lock = threading.Lock()
        #: URLs a member could not take yet, registered again when it connects.
        self._pending: dict[str, set[URL]] = {name: set() for name, _ in self.members}
        for name, member in self.members:
            member.store.add_session_listener(partial(self._on_member_session, name, member))

    def _targets(self, url: URL) -> list[Member]:
        wanted = self._scope(url)
        return [m for m in self.members if wanted is None or m[0] in wanted]

    def register(self, url: URL) -> None:
        """Register ``url`` in each member it belongs to; raises only when none took it."""
        targets = self._targets(url)
        errors: list[StoreError] = []
        for name, member in targets:
            try:
                member.register(url)
            except StoreError as exc:
                errors.append(exc)
                with self._pending_lock:
                    self._pending[name].add(url)
                log.warning(
                    "registry %s: could not register %s (%s); registering again when it connects",
                    name,
                    url,
                    exc,
                )
        if errors and len(errors) == len(targets):
            with self._pending_lock:
                for name, _ in targets:
                    self._pending[name].discard(url)
            raise errors[0]

    def unregister(self, url: URL) -> None:
        """Unregister ``url`` from each member; raises only when every member failed."""
        targets = self._targets(url)
        errors: list[StoreError] = []
        for name, member in targets:
            with self._pending_lock:
                self._pending[name].discard(url)
            try:
                member.unregister(url)
            except StoreError as exc:
                errors.append(exc)
                log.warning("registry %s: could not unregister %s (%s)", name, url, exc)
        if errors and len(errors) == len(targets):
            raise errors[0]

    def _on_member_session(self, name: str, member: Registry, state: SessionState) -> None:
        if state is SessionState.SUSPENDED:
            return
        with self._pending_lock:
            if not self._pending[name]:
                return
        threading.Thread(
            target=self._register_pending,
            args=(name, member),
            name=f"dubbo-register-{name}",
            daemon=True,
        ).start()

    def _register_pending(self, name: str, member: Registry) -> None:
        with self._pending_lock:
            urls = list(self._pending[name])
        for url in urls:
            with self._pending_lock:
                if url not in self._pending[name]:
                    continue  # unregistered meanwhile
            try:
                member.register(url)
            except StoreError as exc:
                log.warning("registry %s: could not register %s yet (%s)", name, url, exc)
                continue
            with self._pending_lock:
                self._pending[name].discard(url)
            log.info("registry %s: registered %s", name, url)
