"""Methods an object hands to one of its parts, with the part's signature and documentation.

``Application`` is a front for two halves (:mod:`dubbo_py.app.serving`,
:mod:`dubbo_py.app.referencing`); writing each public method twice -- a signature and docstring
on the front and again on the half -- would let them drift apart. A :class:`Delegated`
attribute reads the half's bound method instead, typed with the half's parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["Delegated", "Forwarded", "delegated"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Delegated(Generic[P, R]):
    """A method of the object's part named ``part`` (an attribute of the object)."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self._part = part
        self._name = method.__name__
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Delegated[P, R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        method: Callable[P, R] = getattr(getattr(obj, self._part), self._name)
        return method


def delegated(part: str, method: Callable[Concatenate[Any, P], R]) -> Delegated[P, R]:
    """``start = delegated("_serving", Serving.start)``: ``app.start(...)`` calls
    ``app._serving.start(...)``, with its signature and documentation."""
    return Delegated(part, method)


class Forwarded(Generic[T]):
    """An attribute of the object's part ``part``, read and set through the object
    (``channels: Forwarded[SharedChannels] = Forwarded("_referencing", "channels", doc)``)."""

    def __init__(self, part: str, name: str, doc: str) -> None:
        self._part = part
        self._name = name
        self.__doc__ = doc

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> Forwarded[T]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        return getattr(getattr(obj, self._part), self._name)

    def __set__(self, obj: object, value: T) -> None:
        setattr(getattr(obj, self._part), self._name, value)
