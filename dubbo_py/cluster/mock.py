"""Service degradation (Dubbo's ``mock``): answer without — or instead of failing on — providers.

A reference (or one method) takes a mock spec:

* ``force:return <value>`` — never call a provider; return ``<value>``.
* ``fail:return <value>`` or ``return <value>`` — call normally; on a non-application failure
  (no provider, transport failure, deadline) return ``<value>`` instead of raising.
* ``force:throw [message]`` / ``fail:throw [message]`` / ``throw [message]`` — raise an
  ``UNAVAILABLE`` error carrying the message instead.
* ``fail:module.path:ClassName`` / ``force:module.path:ClassName`` — a mock class whose method of
  the same name takes the request and returns the response.

``<value>`` is JSON converted to the method's protobuf response type (``{"message": "busy"}``),
or ``empty`` / ``null`` for the empty response. Application errors (a provider's own status, such
as INVALID_ARGUMENT) are never mocked under ``fail``: they are answers, not failures.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from dubbo_py.cluster.errors import ClusterError
from dubbo_py.cluster.strategy import ClusterContext, Strategy
from dubbo_py.invocation import Invocation

__all__ = ["MockSpec", "MockSpecError", "parse_mock", "with_mock"]

log = logging.getLogger(__name__)

#: Status codes that are failures of the call rather than answers from the application.
NON_APPLICATION_CODES = frozenset(
    {
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.CANCELLED,
    }
)


class MockSpecError(ValueError):
    """A mock spec that cannot be understood (the message quotes it and says why)."""


@dataclass(frozen=True, slots=True)
class MockSpec:
    """A parsed mock option."""

    mode: Literal["force", "fail"]
    action: Literal["return", "throw", "class"]
    value: str = ""

    def response(self, invocation: Invocation, response_type: type[Message] | None) -> Any:
        """The mocked response (or raise, for ``throw``)."""
        if self.action == "throw":
            raise ClusterError(
                invocation.service,
                invocation.method,
                [],
                self.value or "mocked failure",
                code=grpc.StatusCode.UNAVAILABLE,
            )
        if self.action == "class":
            module_name, _, class_name = self.value.rpartition(":")
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
                method = getattr(cls(), invocation.method)
            except (ImportError, AttributeError) as exc:
                raise MockSpecError(f"mock class {self.value!r}: {exc}") from None
            return method(invocation.request)
        if response_type is None:
            return None
        if self.value in ("", "empty", "null"):
            return response_type()
        try:
            return json_format.Parse(self.value, response_type())
        except json_format.ParseError as exc:
            raise MockSpecError(
                f"mock value {self.value!r} is not a {response_type.DESCRIPTOR.full_name}: {exc}"
            ) from None


def parse_mock(text: str | None) -> MockSpec | None:
    """Parse a mock option; None/``false``/empty means no mock."""
    if text is None:
        return None
    spec = text.strip()
    if spec in ("", "false"):
        return None
    mode: Literal["force", "fail"] = "fail"
    for prefix in ("force:", "fail:"):
        if spec.startswith(prefix):
            mode = "force" if prefix == "force:" else "fail"
            spec = spec[len(prefix) :].strip()
            break
    if spec == "return" or spec.startswith("return "):
        return MockSpec(mode, "return", spec[len("return") :].strip())
    if spec == "throw" or spec.startswith("throw "):
        return MockSpec(mode, "throw", spec[len("throw") :].strip())
    if ":" in spec and " " not in spec:
        return MockSpec(mode, "class", spec)
    raise MockSpecError(
        f"mock {text!r}: expected [force:|fail:]return <json>, [force:|fail:]throw [message] "
        "or [force:|fail:]module:Class"
    )


def _is_call_failure(error: BaseException) -> bool:
    if isinstance(error, ClusterError):
        return True
    code = error.code() if isinstance(error, grpc.RpcError) and hasattr(error, "code") else None
    return code in NON_APPLICATION_CODES


def with_mock(
    strategy: Strategy,
    spec: MockSpec,
    response_type: Callable[[], type[Message] | None],
) -> Strategy:
    """Wrap a strategy with a mock spec (see the module doc)."""

    def mocked(ctx: ClusterContext, invocation: Invocation) -> Any:
        if spec.mode == "force":
            return spec.response(invocation, response_type())
        try:
            return strategy(ctx, invocation)
        except grpc.RpcError as error:
            if not _is_call_failure(error):
                raise
            log.warning(
                "%s.%s failed (%s); answering with mock",
                invocation.service,
                invocation.method,
                error,
            )
            return spec.response(invocation, response_type())

    return mocked
