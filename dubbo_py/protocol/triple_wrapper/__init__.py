"""Triple without IDL: a plain Java interface's methods over Triple, the arguments and result
Hessian2 inside Triple's wrapper messages (Dubbo 3's default for an interface with no .proto)."""

from .client import (
    EXCEPTION_CODE,
    TripleWrapperChannels,
    TripleWrapperError,
    TripleWrapperResult,
    TripleWrapperTimeoutError,
    invoke,
)
from .wrapper import (
    HESSIAN2,
    HESSIAN4,
    TripleRequestWrapper,
    TripleResponseWrapper,
    WrapperDecodeError,
)

__all__ = [
    "EXCEPTION_CODE",
    "HESSIAN2",
    "HESSIAN4",
    "TripleRequestWrapper",
    "TripleResponseWrapper",
    "TripleWrapperChannels",
    "TripleWrapperError",
    "TripleWrapperResult",
    "TripleWrapperTimeoutError",
    "WrapperDecodeError",
    "invoke",
]
