"""The condition router: ``when => then`` rules, precomputed against a provider snapshot.

Read a rule with :func:`parse_rule`; get routers from a registry URL with
:func:`router_from_url` or from a config-center document with :func:`routers_from_yaml`;
check what an operator is about to push with :func:`validate_rule` / :func:`validate_yaml`.
"""

from dubbo_py.router.condition.carriers import (
    APPLICATION_SCOPE_PRIORITY,
    SERVICE_SCOPE_PRIORITY,
    router_from_url,
    routers_from_yaml,
    validate_rule,
    validate_yaml,
)
from dubbo_py.router.condition.parser import parse_rule
from dubbo_py.router.condition.router import (
    ConditionRouter,
    ConditionRuleSet,
    Destination,
    MultiDestinationRouter,
)
from dubbo_py.router.condition.rule import ConditionRule

__all__ = [
    "APPLICATION_SCOPE_PRIORITY",
    "SERVICE_SCOPE_PRIORITY",
    "ConditionRouter",
    "ConditionRule",
    "ConditionRuleSet",
    "Destination",
    "MultiDestinationRouter",
    "parse_rule",
    "router_from_url",
    "routers_from_yaml",
    "validate_rule",
    "validate_yaml",
]
