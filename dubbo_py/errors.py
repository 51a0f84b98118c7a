"""Every error dubbo-py raises to its users, in one module.

The package raises these from many layers (a malformed rule from the directory, the CLI and
``route test``; "no provider" from the router chain and the cluster; store errors from both
registries), so they live below every layer: this module imports nothing from dubbo-py.

* Input that cannot be used: :class:`URLError`, :class:`RuleError`, :class:`ConfigError`,
  :class:`TLSConfigError`, :class:`RegistryAddressError`, :class:`MockSpecError` -- all
  ``ValueError``s whose message names what and where.
* Routing: :class:`NoProviderError` (a ``LookupError`` naming the router that emptied the set).
* Calls: :class:`ClusterError` and :class:`ProviderUnavailable` are ``grpc.RpcError``s, so code
  written for plain gRPC stubs (``except grpc.RpcError as e: e.code()``) keeps working.
* Registries: :class:`StoreError` and its subclasses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

__all__ = [
    "BadVersionError",
    "ClusterError",
    "ConfigError",
    "MockSpecError",
    "NoNodeError",
    "NoProviderError",
    "NodeExistsError",
    "NotEmptyError",
    "OptionError",
    "PositionedError",
    "ProviderUnavailable",
    "RegistryAddressError",
    "RegistryUnreachableError",
    "RuleError",
    "StoreError",
    "TLSConfigError",
    "URLError",
]


# ----------------------------------------------------------------------------- bad input


class URLError(ValueError):
    """A string that cannot be read as a Dubbo URL (the message names the string and why)."""


class PositionedError(ValueError):
    """Bad text with a position: ``reason``, ``source`` (a registry path, a file) and, when
    known, ``line``/``column`` (1-based); the message reads ``source:line:column: reason``."""

    def __init__(
        self, message: str, *, source: str = "", line: int | None = None, column: int | None = None
    ) -> None:
        self.reason = message
        self.source = source
        self.line = line
        self.column = column
        where = source
        if line is not None:
            where = f"{where}:{line}:{column}" if where else f"line {line}, column {column}"
        super().__init__(f"{where}: {message}" if where else message)


class RuleError(PositionedError):
    """A rule that cannot be used. ``source`` names where it came from (a registry path, a file),
    ``line``/``column`` locate the problem in rule text when known (1-based)."""


class ConfigError(ValueError):
    """A configuration value that cannot be used; ``path`` is the key path (``references.
    demo.Greeter.timeout``) and ``source`` the file, when there is one."""

    def __init__(self, path: str, problem: str, source: str = "") -> None:
        self.path = path
        self.problem = problem
        self.source = source
        where = f"{source}: " if source else ""
        super().__init__(f"{where}{path}: {problem}" if path else f"{where}{problem}")


class OptionError(ValueError):
    """An option value that cannot be used; ``key`` names it (``methods.SayHello.retries``)."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class TLSConfigError(ValueError):
    """A TLS setting that cannot be used (the message names the file or field)."""


class RegistryAddressError(ValueError):
    """An address that names no registry we can use (the message quotes it and says why)."""


class MockSpecError(ValueError):
    """A mock spec that cannot be understood (the message quotes it and says why)."""


# ----------------------------------------------------------------------------- routing


class NoProviderError(LookupError):
    """No provider is left for a call; names the service, method and the router that emptied it,
    and, when that router can tell, ``reason`` (e.g. "missing routing key attachments[tenant]")."""

    def __init__(
        self, service: str, method: str, router: str | None, reason: str | None = None
    ) -> None:
        self.service = service
        self.method = method
        self.router = router
        self.reason = reason
        if router:
            cause = f" after routing by {router}"
        else:  # the reason, when given, says why there is none (registry down, other versions)
            cause = "" if reason else " (no provider registered)"
        detail = f": {reason}" if reason else ""
        super().__init__(f"no provider available for {service}.{method}{cause}{detail}")


# ----------------------------------------------------------------------------- calls


class ClusterError(grpc.RpcError):
    """A call that failed after the cluster strategy gave up: names the service, method and every
    provider tried, and carries the status code of the last failure."""

    def __init__(
        self,
        service: str,
        method: str,
        tried: Sequence[str],
        reason: str,
        *,
        code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
        last: BaseException | None = None,
    ) -> None:
        self.service = service
        self.method = method
        self.tried = tuple(tried)
        self.last = last
        self._code = code
        tried_text = ", ".join(self.tried) if self.tried else "none"
        last_text = ""
        if isinstance(last, grpc.RpcError) and hasattr(last, "details"):
            last_text = f"; last error: {last.details()}"
        elif last is not None:
            last_text = f"; last error: {last}"
        self._details = f"{service}.{method}: {reason} (providers tried: {tried_text}){last_text}"
        super().__init__(self._details)

    def code(self) -> grpc.StatusCode:
        """The status code of the last failure (UNAVAILABLE when no provider was reachable)."""
        return self._code

    def details(self) -> str:
        """What failed, where, and after trying which providers."""
        return self._details

    def trailing_metadata(self) -> tuple[Any, ...]:
        """Trailing metadata of the last failure, when there was one."""
        last = self.last
        if isinstance(last, grpc.Call):
            return tuple(last.trailing_metadata() or ())
        return ()

    def initial_metadata(self) -> tuple[Any, ...]:
        """Initial metadata of the last failure, when there was one."""
        last = self.last
        if isinstance(last, grpc.Call):
            return tuple(last.initial_metadata() or ())
        return ()

    def __str__(self) -> str:
        return f"<ClusterError {self._code.name}: {self._details}>"


class ProviderUnavailable(grpc.RpcError):
    """UNAVAILABLE raised on the consumer side, before anything was sent: the provider's channel
    was closed under the call (it left the registry, or was replaced after a revival). A
    transport failure like any other, so strategies retry it elsewhere."""

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self._details = f"{address}: {reason}"
        super().__init__(self._details)

    def code(self) -> grpc.StatusCode:
        """Always UNAVAILABLE."""
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        """Which provider, and why."""
        return self._details

    def __str__(self) -> str:
        return f"<ProviderUnavailable: {self._details}>"


# ----------------------------------------------------------------------------- registries


class StoreError(Exception):
    """A store operation failed (the message names the path)."""


class NoNodeError(StoreError):
    """The node does not exist."""


class NodeExistsError(StoreError):
    """The node already exists."""


class BadVersionError(StoreError):
    """A conditional write lost a race: the node's version is not the one given."""


class NotEmptyError(StoreError):
    """A non-recursive delete of a node that has children."""


class RegistryUnreachableError(StoreError):
    """The registry did not answer when a provider registered (the message says what to do)."""
