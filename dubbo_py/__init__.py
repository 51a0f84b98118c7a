"""dubbo-py: Apache Dubbo-style service governance for Python gRPC services.

Providers: decorate a generated servicer with :func:`service` and serve it with
:meth:`Application.serve`. Consumers: ``Application(...).reference(GeneratedStub, ...)`` returns
the stub, unchanged, whose calls are routed, balanced and retried across providers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dubbo_py.version import __version__

if TYPE_CHECKING:
    from dubbo_py.invocation import Invocation
    from dubbo_py.rpc.application import Application, Reference
    from dubbo_py.rpc.service import service
    from dubbo_py.url import URL

__all__ = ["URL", "Application", "Invocation", "Reference", "__version__", "service"]

# The public names are imported on first use (PEP 562), not with the package: every
# ``dubbo_py.*`` import runs this file first, and the ``dubbo-py`` CLI, the console and the
# rule tools must not pay for gRPC and the consumer stack just to start
# (tests/core/test_startup_imports.py, the "Start-up" section of docs/benchmarks.md).
_LAZY: dict[str, str] = {
    "Application": "dubbo_py.rpc.application",
    "Reference": "dubbo_py.rpc.application",
    "service": "dubbo_py.rpc.service",
    "URL": "dubbo_py.url",
    "Invocation": "dubbo_py.invocation",
}


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name read from the package.

    def __getattr__(name: str) -> Any:
        """Import a public name's module when the name is first read, and keep it here."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later reads find it directly, without this function
        return value


def __dir__() -> list[str]:
    """The package's names, the public ones included before they are first read."""
    return sorted({*globals(), *__all__})
