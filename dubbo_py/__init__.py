"""dubbo-py: Apache Dubbo-style service governance for Python gRPC services."""

from dubbo_py.invocation import Invocation
from dubbo_py.url import URL

__all__ = ["URL", "Invocation"]
__version__ = "0.1.0"
