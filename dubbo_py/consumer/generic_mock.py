"""Mocks of generic calls (Dubbo's ``mock`` on a ``GenericService`` reference): the same specs as
a stub's (:func:`~dubbo_py.cluster.mock.parse_mock`), answered with Python values.

* ``force:return <value>``: no provider is called; ``<value>`` is the call's value.
* ``return <value>`` / ``fail:return <value>``: the call goes out; when it fails outside the
  service's code (no provider, connection lost, timeout, a Triple status) ``<value>`` is
  returned instead. A Java exception is the service's answer and is raised as it is.
* ``throw [message]``: a :class:`~dubbo_py.errors.ClusterError` (UNAVAILABLE) carrying the
  message instead of the value or the failure.
* ``module:Class``: the class's method of the call's name answers; it receives the call's
  :class:`~dubbo_py.invocation.GenericRequest`, as a stub's mock class receives the request.

``<value>`` is JSON (``{"id": -1}``, ``[1, 2]``, ``"busy"``, ``true``); ``null`` and
``empty`` are ``None`` (Dubbo's ``empty`` is the empty value of the method's return type,
which a generic call does not know); text that is no JSON is returned as that string, as
Dubbo's ``MockInvoker`` parses a bare word.
"""

from __future__ import annotations

import json
from typing import Any

from dubbo_py.cluster.mock import MockSpec
from dubbo_py.errors import NoProviderError
from dubbo_py.invocation import Invocation
from dubbo_py.protocol.dubbo.connection import DubboCallError

__all__ = ["mock_answer", "mock_value", "mocks_failure"]


def mock_value(text: str) -> Any:
    """The Python value of a ``return`` mock's text (see the module text)."""
    if text in ("", "empty", "null"):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def mock_answer(spec: MockSpec, invocation: Invocation) -> Any:
    """``spec``'s answer to ``invocation`` (raises for ``throw``)."""
    if spec.action == "return":
        return mock_value(spec.value)
    return spec.response(invocation, None)


def mocks_failure(error: BaseException) -> bool:
    """Whether a ``fail`` mock answers instead of ``error``: a failure outside the service's
    code (never the Java service's own exception)."""
    return isinstance(error, DubboCallError | NoProviderError)
