"""Hessian2, the serialization of Dubbo's ``dubbo://`` protocol and of Triple without IDL.

Written for what Java's ``hessian-lite`` (the one Dubbo 3.3 uses) puts on the wire; the type
mapping is in docs/java-services.md.
"""

from .decoder import MAX_DEPTH, Hessian2Decoder, loads
from .encoder import Hessian2Encoder, dumps
from .errors import Hessian2DecodeError, Hessian2EncodeError, Hessian2Error
from .throwable import JavaException, from_throwable, is_throwable
from .types import (
    ClassDef,
    JavaBigInteger,
    JavaEnum,
    JavaInstant,
    JavaLocalDateTime,
    JavaLong,
    JavaObject,
    TypedList,
    TypedMap,
)

__all__ = [
    "MAX_DEPTH",
    "ClassDef",
    "Hessian2DecodeError",
    "Hessian2Decoder",
    "Hessian2EncodeError",
    "Hessian2Encoder",
    "Hessian2Error",
    "JavaBigInteger",
    "JavaEnum",
    "JavaException",
    "JavaInstant",
    "JavaLocalDateTime",
    "JavaLong",
    "JavaObject",
    "TypedList",
    "TypedMap",
    "dumps",
    "from_throwable",
    "is_throwable",
    "loads",
]
