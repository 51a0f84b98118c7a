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
    from dubbo_py.app.application import Application, Reference
    from dubbo_py.call_errors import ClusterError, ProviderUnavailable
    from dubbo_py.cluster.budget import RetryBudget
    from dubbo_py.cluster.health_probe import grpc_health_probe
    from dubbo_py.cluster.hedging_policy import HedgingPolicy
    from dubbo_py.cluster.loadbalance import effective_weight, get_loadbalance
    from dubbo_py.cluster.plan import AttemptHook, CallHook
    from dubbo_py.cluster.quarantine import Quarantine
    from dubbo_py.cluster.stats import CallStats, default_stats, method_key
    from dubbo_py.cluster.strategies.failback import FailbackQueue
    from dubbo_py.config.loader import load_config, parse_config
    from dubbo_py.config.model import (
        ApplicationConfig,
        ProtocolConfig,
        QosConfig,
        ReferenceConfig,
        RegistryConfig,
    )
    from dubbo_py.consumer.filters import (
        AsyncAttemptFilter,
        AsyncCallFilter,
        AsyncMockFilter,
        AsyncRecordStats,
        AttemptFilter,
        CallFilter,
        ConsumerFilters,
        MockFilter,
        RecordStats,
    )
    from dubbo_py.consumer.generic import (
        GenericReference,
        GenericResult,
        GenericSignatureError,
    )
    from dubbo_py.errors import (
        BadVersionError,
        CallCredentialsError,
        ConfigError,
        MockSpecError,
        NodeExistsError,
        NoNodeError,
        NoProviderError,
        NotEmptyError,
        OptionError,
        PositionedError,
        RegistryAddressError,
        RegistryUnreachableError,
        RuleError,
        StoreError,
        TLSConfigError,
        URLError,
    )
    from dubbo_py.invocation import Invocation
    from dubbo_py.protocol.dubbo.connection import (
        DubboCallError,
        DubboConnectionError,
        DubboRemoteError,
        DubboTimeoutError,
    )
    from dubbo_py.protocol.serialization.hessian2 import (
        Hessian2DecodeError,
        Hessian2Decoder,
        Hessian2EncodeError,
        Hessian2Encoder,
        Hessian2Error,
        JavaBigInteger,
        JavaEnum,
        JavaException,
        JavaInstant,
        JavaLocalDateTime,
        JavaLong,
        JavaObject,
        TypedList,
        TypedMap,
        from_throwable,
    )
    from dubbo_py.protocol.serialization.hessian2 import dumps as hessian2_dumps
    from dubbo_py.protocol.serialization.hessian2 import loads as hessian2_loads
    from dubbo_py.protocol.triple_wrapper import (
        TripleWrapperChannels,
        TripleWrapperError,
        TripleWrapperResult,
        TripleWrapperTimeoutError,
    )
    from dubbo_py.protocol.triple_wrapper import invoke as triple_invoke
    from dubbo_py.provider.dispatch import TripleContext
    from dubbo_py.provider.service import service
    from dubbo_py.registry.layout import config_path, rule_key
    from dubbo_py.registry.store.base import Store
    from dubbo_py.registry.store.embedded import EmbeddedStore
    from dubbo_py.registry.store.etcd.store import EtcdStore
    from dubbo_py.registry.store.zookeeper import ZooKeeperStore
    from dubbo_py.router.chain import RouterChain
    from dubbo_py.router.condition import router_from_url as condition_router_from_url
    from dubbo_py.router.condition import routers_from_yaml as condition_routers_from_yaml
    from dubbo_py.router.script import router_from_url as script_router_from_url
    from dubbo_py.router.shard import (
        BoundShardRouter,
        ShardRouter,
        locate,
        make_layout,
        parse_shard_rule,
        plan_split,
    )
    from dubbo_py.router.snapshot import Snapshot
    from dubbo_py.url import URL

__all__ = [
    "URL",
    "Application",
    "ApplicationConfig",
    "AsyncAttemptFilter",
    "AsyncCallFilter",
    "AsyncMockFilter",
    "AsyncRecordStats",
    "AttemptFilter",
    "AttemptHook",
    "BadVersionError",
    "BoundShardRouter",
    "CallCredentialsError",
    "CallFilter",
    "CallHook",
    "CallStats",
    "ClusterError",
    "ConfigError",
    "ConsumerFilters",
    "DubboCallError",
    "DubboConnectionError",
    "DubboRemoteError",
    "DubboTimeoutError",
    "EmbeddedStore",
    "EtcdStore",
    "FailbackQueue",
    "GenericReference",
    "GenericResult",
    "GenericSignatureError",
    "HedgingPolicy",
    "Hessian2DecodeError",
    "Hessian2Decoder",
    "Hessian2EncodeError",
    "Hessian2Encoder",
    "Hessian2Error",
    "Invocation",
    "JavaBigInteger",
    "JavaEnum",
    "JavaException",
    "JavaInstant",
    "JavaLocalDateTime",
    "JavaLong",
    "JavaObject",
    "MockFilter",
    "MockSpecError",
    "NoNodeError",
    "NoProviderError",
    "NodeExistsError",
    "NotEmptyError",
    "OptionError",
    "PositionedError",
    "ProtocolConfig",
    "ProviderUnavailable",
    "QosConfig",
    "Quarantine",
    "RecordStats",
    "Reference",
    "ReferenceConfig",
    "RegistryAddressError",
    "RegistryConfig",
    "RegistryUnreachableError",
    "RetryBudget",
    "RouterChain",
    "RuleError",
    "ShardRouter",
    "Snapshot",
    "Store",
    "StoreError",
    "TLSConfigError",
    "TripleContext",
    "TripleWrapperChannels",
    "TripleWrapperError",
    "TripleWrapperResult",
    "TripleWrapperTimeoutError",
    "TypedList",
    "TypedMap",
    "URLError",
    "ZooKeeperStore",
    "__version__",
    "condition_router_from_url",
    "condition_routers_from_yaml",
    "config_path",
    "default_stats",
    "effective_weight",
    "from_throwable",
    "get_loadbalance",
    "grpc_health_probe",
    "hessian2_dumps",
    "hessian2_loads",
    "load_config",
    "locate",
    "make_layout",
    "method_key",
    "parse_config",
    "parse_shard_rule",
    "plan_split",
    "rule_key",
    "script_router_from_url",
    "service",
    "triple_invoke",
]

# The public names are imported on first use (PEP 562), not with the package: every
# ``dubbo_py.*`` import runs this file first, and the ``dubbo-py`` CLI, the console and the
# rule tools must not pay for gRPC and the consumer stack just to start
# (tests/core/test_startup_imports.py, the "Start-up" section of docs/benchmarks.md).
# Each value is the module that defines the name, or "module:attribute" where the public name
# differs from the one in its module.
_LAZY: dict[str, str] = {
    "Application": "dubbo_py.app.application",
    "Reference": "dubbo_py.app.application",
    "service": "dubbo_py.provider.service",
    "TripleContext": "dubbo_py.provider.dispatch",
    "URL": "dubbo_py.url",
    "Invocation": "dubbo_py.invocation",
    "AsyncAttemptFilter": "dubbo_py.consumer.filters",
    "AsyncCallFilter": "dubbo_py.consumer.filters",
    "AsyncMockFilter": "dubbo_py.consumer.filters",
    "AsyncRecordStats": "dubbo_py.consumer.filters",
    "AttemptFilter": "dubbo_py.consumer.filters",
    "CallFilter": "dubbo_py.consumer.filters",
    "ConsumerFilters": "dubbo_py.consumer.filters",
    "MockFilter": "dubbo_py.consumer.filters",
    "RecordStats": "dubbo_py.consumer.filters",
    "AttemptHook": "dubbo_py.cluster.plan",
    "CallHook": "dubbo_py.cluster.plan",
    "ApplicationConfig": "dubbo_py.config.model",
    "ProtocolConfig": "dubbo_py.config.model",
    "QosConfig": "dubbo_py.config.model",
    "ReferenceConfig": "dubbo_py.config.model",
    "RegistryConfig": "dubbo_py.config.model",
    "load_config": "dubbo_py.config.loader",
    "parse_config": "dubbo_py.config.loader",
    "BadVersionError": "dubbo_py.errors",
    "CallCredentialsError": "dubbo_py.errors",
    "ConfigError": "dubbo_py.errors",
    "MockSpecError": "dubbo_py.errors",
    "NoNodeError": "dubbo_py.errors",
    "NoProviderError": "dubbo_py.errors",
    "NodeExistsError": "dubbo_py.errors",
    "NotEmptyError": "dubbo_py.errors",
    "OptionError": "dubbo_py.errors",
    "PositionedError": "dubbo_py.errors",
    "RegistryAddressError": "dubbo_py.errors",
    "RegistryUnreachableError": "dubbo_py.errors",
    "RuleError": "dubbo_py.errors",
    "StoreError": "dubbo_py.errors",
    "TLSConfigError": "dubbo_py.errors",
    "URLError": "dubbo_py.errors",
    "Store": "dubbo_py.registry.store.base",
    "EmbeddedStore": "dubbo_py.registry.store.embedded",
    "ZooKeeperStore": "dubbo_py.registry.store.zookeeper",
    "EtcdStore": "dubbo_py.registry.store.etcd.store",
    "FailbackQueue": "dubbo_py.cluster.strategies.failback",
    "Quarantine": "dubbo_py.cluster.quarantine",
    "RetryBudget": "dubbo_py.cluster.budget",
    "HedgingPolicy": "dubbo_py.cluster.hedging_policy",
    "grpc_health_probe": "dubbo_py.cluster.health_probe",
    "CallStats": "dubbo_py.cluster.stats",
    "default_stats": "dubbo_py.cluster.stats",
    "method_key": "dubbo_py.cluster.stats",
    "get_loadbalance": "dubbo_py.cluster.loadbalance",
    "effective_weight": "dubbo_py.cluster.loadbalance",
    "RouterChain": "dubbo_py.router.chain",
    "Snapshot": "dubbo_py.router.snapshot",
    "BoundShardRouter": "dubbo_py.router.shard",
    "ShardRouter": "dubbo_py.router.shard",
    "locate": "dubbo_py.router.shard",
    "make_layout": "dubbo_py.router.shard",
    "parse_shard_rule": "dubbo_py.router.shard",
    "plan_split": "dubbo_py.router.shard",
    "config_path": "dubbo_py.registry.layout",
    "rule_key": "dubbo_py.registry.layout",
    "condition_router_from_url": "dubbo_py.router.condition:router_from_url",
    "condition_routers_from_yaml": "dubbo_py.router.condition:routers_from_yaml",
    "script_router_from_url": "dubbo_py.router.script:router_from_url",
    "JavaObject": "dubbo_py.protocol.serialization.hessian2",
    "JavaEnum": "dubbo_py.protocol.serialization.hessian2",
    "JavaException": "dubbo_py.protocol.serialization.hessian2",
    "JavaLong": "dubbo_py.protocol.serialization.hessian2",
    "JavaBigInteger": "dubbo_py.protocol.serialization.hessian2",
    "JavaInstant": "dubbo_py.protocol.serialization.hessian2",
    "JavaLocalDateTime": "dubbo_py.protocol.serialization.hessian2",
    "TypedList": "dubbo_py.protocol.serialization.hessian2",
    "TypedMap": "dubbo_py.protocol.serialization.hessian2",
    "Hessian2Encoder": "dubbo_py.protocol.serialization.hessian2",
    "Hessian2Decoder": "dubbo_py.protocol.serialization.hessian2",
    "Hessian2Error": "dubbo_py.protocol.serialization.hessian2",
    "Hessian2DecodeError": "dubbo_py.protocol.serialization.hessian2",
    "Hessian2EncodeError": "dubbo_py.protocol.serialization.hessian2",
    "from_throwable": "dubbo_py.protocol.serialization.hessian2",
    "hessian2_dumps": "dubbo_py.protocol.serialization.hessian2:dumps",
    "hessian2_loads": "dubbo_py.protocol.serialization.hessian2:loads",
    "ClusterError": "dubbo_py.call_errors",
    "ProviderUnavailable": "dubbo_py.call_errors",
    "GenericReference": "dubbo_py.consumer.generic",
    "GenericResult": "dubbo_py.consumer.generic",
    "GenericSignatureError": "dubbo_py.consumer.generic",
    "DubboCallError": "dubbo_py.protocol.dubbo.connection",
    "DubboConnectionError": "dubbo_py.protocol.dubbo.connection",
    "DubboRemoteError": "dubbo_py.protocol.dubbo.connection",
    "DubboTimeoutError": "dubbo_py.protocol.dubbo.connection",
    "TripleWrapperChannels": "dubbo_py.protocol.triple_wrapper",
    "TripleWrapperError": "dubbo_py.protocol.triple_wrapper",
    "TripleWrapperResult": "dubbo_py.protocol.triple_wrapper",
    "TripleWrapperTimeoutError": "dubbo_py.protocol.triple_wrapper",
    "triple_invoke": "dubbo_py.protocol.triple_wrapper:invoke",
}


if not TYPE_CHECKING:
    # Hidden from type checkers, which would otherwise accept any name read from the package.

    def __getattr__(name: str) -> Any:
        """Import a public name's module when the name is first read, and keep it here."""
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module, _, attribute = module.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        globals()[name] = value  # later reads find it directly, without this function
        return value


def __dir__() -> list[str]:
    """The package's names, the public ones included before they are first read."""
    return sorted({*globals(), *__all__})
