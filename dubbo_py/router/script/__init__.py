"""Script routing: a rule's Starlark ``route(invokers, invocation, context)`` picks providers.

See :mod:`dubbo_py.router.script.router` for the script contract,
:mod:`dubbo_py.router.script.sandbox` for what the sandbox guarantees and
:mod:`dubbo_py.router.script.rule` for the rule formats and the checks made before any script
runs.
"""

from dubbo_py.router.script.router import (
    BoundScriptRouter,
    ScriptRouter,
    invocation_view,
    router_from_url,
)
from dubbo_py.router.script.rule import (
    ScriptRule,
    check_script,
    parse_script_rule,
    parse_script_url,
    validate_script_yaml,
)
from dubbo_py.router.script.sandbox import (
    InlineSandbox,
    Outcome,
    ProcessSandbox,
    ProgramSpec,
    Sandbox,
    default_sandbox,
)

__all__ = [
    "BoundScriptRouter",
    "InlineSandbox",
    "Outcome",
    "ProcessSandbox",
    "ProgramSpec",
    "Sandbox",
    "ScriptRouter",
    "ScriptRule",
    "check_script",
    "default_sandbox",
    "invocation_view",
    "parse_script_rule",
    "parse_script_url",
    "router_from_url",
    "validate_script_yaml",
]
