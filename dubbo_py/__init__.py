"""dubbo-py: Apache Dubbo-style service governance for Python gRPC services.

Providers: decorate a generated servicer with :func:`service` and serve it with
:meth:`Application.serve`. Consumers: ``Application(...).reference(GeneratedStub, ...)`` returns
the stub, unchanged, whose calls are routed, balanced and retried across providers.
"""

from dubbo_py.invocation import Invocation
from dubbo_py.rpc.application import Application, Reference
from dubbo_py.rpc.service import service
from dubbo_py.url import URL
from dubbo_py.version import __version__

__all__ = ["URL", "Application", "Invocation", "Reference", "__version__", "service"]
