"""Every error dubbo-py raises to its users, in one module.

The package raises these from many layers (a malformed rule from the directory, the CLI and
``route test``; "no provider" from the router chain and the cluster; store errors from both
registries), so they live below every layer: this module imports nothing from the other
layers.

* Input that cannot be used: :class:`URLError`, :class:`RuleError`, :class:`ConfigError`,
  :class:`TLSConfigError`, :class:`RegistryAddressError`, :class:`MockSpecError`,
  :class:`CallCredentialsError` -- all
  ``ValueError``s whose message names what and where.
* Routing: :class:`NoProviderError` (a ``LookupError`` naming the router that emptied the set).
* Calls: :class:`ClusterError` and :class:`ProviderUnavailable` are ``grpc.RpcError``s, so code
  written for plain gRPC stubs (``except grpc.RpcError as e: e.code()``) keeps working. They
  are defined in :mod:`dubbo_py.call_errors` and read here on first use: every other error is
  raised where no call is made (the CLI, rule checks), and importing gRPC for them would double
  the start-up time of ``dubbo-py`` (tests/core/test_startup_imports.py).
* Registries: :class:`StoreError` and its subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dubbo_py.call_errors import ClusterError, ProviderUnavailable

__all__ = [
    "BadVersionError",
    "CallCredentialsError",
    "ClusterError",
    "ConfigError",
    "MockSpecError",
    "NoNodeError",
    "NoProviderError",
    "NodeExistsError",
    "NotEmptyError",
    "NotInLayoutError",
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


class CallCredentialsError(ValueError):
    """Call credentials given to a call that would go out without them: gRPC sends call
    credentials only over TLS, and the provider picked is called in plaintext (the message names
    the method and the provider). Nothing was sent."""


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


# ----------------------------------------------------------------------------- registries


class StoreError(Exception):
    """A store operation failed (the message names the path)."""


class NoNodeError(StoreError):
    """The node does not exist."""


class NotInLayoutError(StoreError):
    """The path has no place in a store that holds only Dubbo's layout (Nacos: the message
    names the path and docs/registry.md's section)."""


class NodeExistsError(StoreError):
    """The node already exists."""


class BadVersionError(StoreError):
    """A conditional write lost a race: the node's version is not the one given."""


class NotEmptyError(StoreError):
    """A non-recursive delete of a node that has children."""


class RegistryUnreachableError(StoreError):
    """The registry did not answer when a provider registered (the message says what to do)."""


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name imported from here.

    def __getattr__(name: str) -> Any:
        """The gRPC-based errors, imported with gRPC when first read (PEP 562)."""
        if name in ("ClusterError", "ProviderUnavailable"):
            from dubbo_py import call_errors

            return getattr(call_errors, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
