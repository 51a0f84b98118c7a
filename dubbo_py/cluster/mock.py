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
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from dubbo_py.cluster.support.context import AsyncStrategy, ClusterContext, Strategy
from dubbo_py.cluster.support.outcome import is_call_failure
from dubbo_py.errors import ClusterError, MockSpecError
from dubbo_py.invocation import Invocation

__all__ = [
    "Mock",
    "MockSpec",
    "answer_failure",
    "parse_mock",
    "stream_of",
]

log = logging.getLogger(__name__)


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
            answer = getattr(self._mock_class()(), invocation.method)(invocation.request)
            if isinstance(answer, Mapping) and response_type is not None:
                # A mock class may answer with a plain dict: convert it like a JSON value.
                try:
                    return json_format.ParseDict(dict(answer), response_type())
                except json_format.ParseError as exc:
                    raise MockSpecError(
                        f"mock class {self.value!r} answered {answer!r}, not a "
                        f"{response_type.DESCRIPTOR.full_name}: {exc}"
                    ) from None
            return answer
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

    def _mock_class(self) -> Any:
        module_name, _, class_name = self.value.rpartition(":")
        try:
            return getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError, ValueError) as exc:
            raise MockSpecError(f"mock class {self.value!r}: {exc}") from None

    def check(self, method: str, response_type: type[Message] | None) -> None:
        """Raise :class:`MockSpecError` now if this spec cannot answer ``method``: a ``return``
        value that is not the response type, a mock class that cannot be imported or has no
        such method. A reference checks its mocks when it is built, so a typo shows up then
        rather than in the middle of an outage."""
        if self.action == "class":
            if not callable(getattr(self._mock_class(), method, None)):
                raise MockSpecError(f"mock class {self.value!r} has no method {method}")
        elif self.action == "return":
            self.response(Invocation("", method), response_type)


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


@dataclass(frozen=True, slots=True)
class Mock:
    """A method's mock, ready to answer: its ``spec``, the method's ``response_type`` and
    whether the method is server-``streaming`` (then the answer is a stream of that one
    response). :meth:`wrap` and :meth:`wrap_async` put it around either form of a strategy;
    both answer through :meth:`answer`."""

    spec: MockSpec
    response_type: type[Message] | None
    streaming: bool = False

    def answer(self, invocation: Invocation, error: grpc.RpcError | None = None) -> Any:
        """The mock's answer for a ``force:`` mock (``error`` None) or for a call that failed
        with ``error`` (an application error is raised as it is)."""
        if error is None:
            response = self.spec.response(invocation, self.response_type)
        else:
            response = answer_failure(self.spec, invocation, self.response_type, error)
        return iter((response,)) if self.streaming else response

    def wrap(self, strategy: Strategy) -> Strategy:
        """``strategy`` behind this mock (see the module doc)."""
        forced = self.spec.mode == "force"

        def mocked(ctx: ClusterContext, invocation: Invocation) -> Any:
            if forced:
                return self.answer(invocation)
            try:
                return strategy(ctx, invocation)
            except grpc.RpcError as error:
                return self.answer(invocation, error)

        return mocked

    def wrap_async(self, strategy: AsyncStrategy) -> AsyncStrategy:
        """:meth:`wrap` for an awaited strategy; a stream answer is an async stream."""
        forced = self.spec.mode == "force"
        answer = self.answer if not self.streaming else self._answer_stream

        async def mocked(ctx: ClusterContext, invocation: Invocation) -> Any:
            if forced:
                return answer(invocation)
            try:
                return await strategy(ctx, invocation)
            except grpc.RpcError as error:
                return answer(invocation, error)

        return mocked

    def _answer_stream(self, invocation: Invocation, error: grpc.RpcError | None = None) -> Any:
        return stream_of(list(self.answer(invocation, error)))


async def stream_of(items: list[Any]) -> AsyncIterator[Any]:
    """An async stream of ``items``: what an asyncio caller of a server-streaming method
    iterates over when no provider answered (a mock's reply, failsafe's nothing)."""
    for item in items:
        yield item


def answer_failure(
    spec: MockSpec,
    invocation: Invocation,
    response_type: type[Message] | None,
    error: grpc.RpcError,
) -> Any:
    """What a ``fail:`` mock makes of a failed call: the mock's answer for a call failure;
    an application error (a provider's answer) is raised as it is."""
    if not is_call_failure(error):
        raise error
    log.warning(
        "%s.%s failed (%s); answering with mock", invocation.service, invocation.method, error
    )
    return spec.response(invocation, response_type)
