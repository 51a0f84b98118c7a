"""Java exceptions (``java.lang.Throwable`` sent field by field) as Python exceptions."""

from __future__ import annotations

from typing import Any

from .types import JavaObject


class JavaException(Exception):
    """A Java exception a provider sent: its class name, message, cause and stack trace.

    ``str()`` reads as Java prints it (``java.lang.IllegalStateException: no such user``).
    """

    #: The Dubbo failure counter a consumer call raising this counts under (the service's own
    #: exception); read by dubbo_py/qos/consumer.py, which knows no protocol.
    metrics_failure_reason = "business"

    def __init__(
        self,
        java_class: str,
        message: str | None,
        *,
        cause: JavaException | None = None,
        stack_trace: list[str] | None = None,
        suppressed: list[JavaException] | None = None,
        raw: JavaObject | None = None,
    ) -> None:
        super().__init__(f"{java_class}: {message}" if message is not None else java_class)
        #: The Java class name of the exception.
        self.java_class = java_class
        #: Its ``getMessage()`` (``None`` when Java's was null).
        self.message = message
        #: The Java cause, when it had another one than itself.
        self.cause = cause
        #: ``class.method(File.java:line)`` lines, innermost first, as far as Java sent them.
        self.stack_trace = stack_trace or []
        #: Exceptions Java added with ``addSuppressed``.
        self.suppressed = suppressed or []
        #: The object as decoded, with any fields the exception's own class adds.
        self.raw = raw
        self.__cause__ = cause


def is_throwable(value: object) -> bool:
    """Whether a decoded value is a Java ``Throwable`` (it has Throwable's fields)."""
    return (
        isinstance(value, JavaObject)
        and "detailMessage" in value.fields
        and "stackTrace" in value.fields
    )


def _frame(element: Any) -> str:
    if not isinstance(element, JavaObject):
        return repr(element)
    where = element.get("fileName")
    line = element.get("lineNumber")
    if where is None:
        place = "Unknown Source"
    elif isinstance(line, int) and line >= 0:
        place = f"{where}:{line}"
    else:
        place = str(where)
    return f"{element.get('declaringClass')}.{element.get('methodName')}({place})"


def from_throwable(value: JavaObject, *, _seen: set[int] | None = None) -> JavaException:
    """The Python exception for a decoded Java ``Throwable``; causes that loop end the chain."""
    seen = _seen if _seen is not None else set()
    seen.add(id(value))
    message = value.get("detailMessage")
    cause_value = value.get("cause")
    cause = None
    if is_throwable(cause_value) and id(cause_value) not in seen:
        cause = from_throwable(cause_value, _seen=seen)
    frames = value.get("stackTrace")
    stack = [_frame(e) for e in frames] if isinstance(frames, list) else []
    suppressed_value = value.get("suppressedExceptions")
    suppressed = []
    if isinstance(suppressed_value, list):
        for item in suppressed_value:
            if is_throwable(item) and id(item) not in seen:
                suppressed.append(from_throwable(item, _seen=seen))
    return JavaException(
        value.java_class,
        message if isinstance(message, str) or message is None else str(message),
        cause=cause,
        stack_trace=stack,
        suppressed=suppressed,
        raw=value,
    )
