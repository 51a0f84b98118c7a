"""Python stand-ins for the Java values Hessian2 carries that have no exact Python type.

Plain Python values map to themselves (``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``, ``list``, ``dict``, ``set``, ``datetime``, ``Decimal``); what Java says on top of them
(a ``long`` rather than an ``int``, a ``java.util.LinkedList`` rather than a list, a bean's class)
is kept in the wrappers below, so that a decoded value encodes back to what Java sent.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_comparing = threading.local()


class JavaLong(int):
    """An ``int`` that Java holds as a ``long`` (``java.lang.Long``): encoded in a long form.

    A plain Python ``int`` is sent as a Java ``int`` when it fits 32 bits and as a ``long``
    otherwise; decoding a long form gives a ``JavaLong``, so the value goes back as a long.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"JavaLong({int(self)})"


class TypedList(list[Any]):
    """A Java list or array with its type on the wire (``java.util.LinkedList``, ``[int`` ...)."""

    def __init__(self, java_type: str, items: Iterable[Any] = ()) -> None:
        super().__init__(items)
        #: The type Hessian2 names: a class name, or ``[`` + element type for arrays.
        self.java_type = java_type

    def __repr__(self) -> str:
        return f"TypedList({self.java_type!r}, {list.__repr__(self)})"


class TypedMap(dict[Any, Any]):
    """A Java map with its type on the wire (``java.util.TreeMap`` ...)."""

    def __init__(self, java_type: str, items: Mapping[Any, Any] | None = None) -> None:
        super().__init__(items or {})
        #: The map's Java class name.
        self.java_type = java_type

    def __repr__(self) -> str:
        return f"TypedMap({self.java_type!r}, {dict.__repr__(self)})"


@dataclass(frozen=True)
class ClassDef:
    """A Hessian2 class definition: a Java class name and the names of its fields in order."""

    name: str
    fields: tuple[str, ...]


class JavaObject:
    """A Java object sent field by field (a bean, an exception, an enum constant ...).

    Equality compares the class name and the fields; objects that refer to themselves (a
    ``Throwable`` is its own ``cause``) compare without recursing forever. The hash is the
    class name's, so objects can be map keys (Java enums often are).
    """

    __slots__ = ("__weakref__", "fields", "java_class")

    def __init__(self, java_class: str, fields: Mapping[str, Any] | None = None) -> None:
        #: The Java class name.
        self.java_class = java_class
        #: The fields by name, in the order the class definition lists them.
        self.fields: dict[str, Any] = dict(fields or {})

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def get(self, name: str, default: Any = None) -> Any:
        """A field's value, or ``default`` when the object has no such field."""
        return self.fields.get(name, default)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, JavaObject):
            return NotImplemented
        if self.java_class != other.java_class:
            return False
        active: set[tuple[int, int]] | None = getattr(_comparing, "pairs", None)
        if active is None:
            active = _comparing.pairs = set()
        pair = (id(self), id(other))
        if pair in active:
            return True  # already being compared higher up: a cycle, equal so far
        active.add(pair)
        try:
            return self.fields == other.fields
        finally:
            active.discard(pair)

    def __hash__(self) -> int:
        return hash(self.java_class)

    def __repr__(self) -> str:
        active: set[int] | None = getattr(_comparing, "repr", None)
        if active is None:
            active = _comparing.repr = set()
        if id(self) in active:
            return f"<{self.java_class} ...>"
        active.add(id(self))
        try:
            return f"{type(self).__name__}({self.java_class!r}, {self.fields!r})"
        finally:
            active.discard(id(self))


class JavaEnum(JavaObject):
    """A Java enum constant: Hessian2 sends it as an object whose one field is ``name``.

    On the wire an enum cannot be told from a bean with a single ``name`` field, so the decoder
    gives a ``JavaEnum`` only for the class names it is told are enums, and a ``JavaObject``
    otherwise; the two compare equal.
    """

    __slots__ = ()

    def __init__(self, java_class: str, name: str) -> None:
        super().__init__(java_class, {"name": name})

    @property
    def name(self) -> str:
        """The constant's name."""
        return str(self.fields["name"])

    def __repr__(self) -> str:
        return f"JavaEnum({self.java_class!r}, {self.name!r})"


class JavaBigInteger(int):
    """An ``int`` that Java holds as a ``java.math.BigInteger``.

    A plain ``int`` beyond a Java ``long`` is sent as a ``BigInteger`` too; decoding one gives a
    ``JavaBigInteger``, so that a small value goes back as a ``BigInteger`` and not an ``int``.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"JavaBigInteger({int(self)})"


class JavaLocalDateTime(datetime):
    """A naive ``datetime`` that Java holds as a ``java.time.LocalDateTime`` (no zone).

    A plain ``datetime`` is sent as a ``java.util.Date``; this one as a ``LocalDateTime``, which
    is what decoding a ``LocalDateTime`` gives back (to the microsecond: Python has no nanos).
    """

    __slots__ = ()


class JavaInstant(datetime):
    """An aware UTC ``datetime`` that Java holds as a ``java.time.Instant``."""

    __slots__ = ()
