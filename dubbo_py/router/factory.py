"""Which routers a consumer runs: the built-in ones, and the compiler of ``routers``-category
URLs (condition://, route://, script://).

Config-center documents of every kind are compiled through the rule-kind table
(:mod:`dubbo_py.registry.rule_kinds`); the directory, ``route test`` and the CLI's validation
all go through these two, so an operator's check runs exactly the code a live consumer runs.
"""

from __future__ import annotations

from dubbo_py.errors import RuleError
from dubbo_py.router.base import Router
from dubbo_py.router.rulebook import RuleBook, UrlCompiler
from dubbo_py.url import URL

__all__ = [
    "builtin_routers",
    "chain_routers",
    "compile_url",
    "new_rulebook",
    "url_compiler",
]


def builtin_routers() -> list[Router]:
    """Routers every consumer runs whatever the rules: the mock selector and the tag router
    (static ``dubbo.tag`` provider tags; a ``tag-router`` document replaces it)."""
    from dubbo_py.router.mock import MockRouter
    from dubbo_py.router.tag import TagRouter

    return [MockRouter(), TagRouter()]


def chain_routers(rule_routers: list[Router]) -> list[Router]:
    """The routers of a consumer's chain: the built-in ones plus those compiled from rules,
    where a rule-driven tag router takes the place of the static one."""
    from dubbo_py.router.tag import TagRouter

    has_tag_rule = any(isinstance(r, TagRouter) for r in rule_routers)
    builtins = [r for r in builtin_routers() if not (has_tag_rule and isinstance(r, TagRouter))]
    return [*builtins, *rule_routers]


def _compile_route_url(url: URL, source: str) -> Router:
    from dubbo_py.router import script
    from dubbo_py.router.condition import carriers as condition

    kind = url.get_str("router", url.protocol)
    if url.protocol == "condition" or kind == "condition":
        return condition.router_from_url(url, source)
    if url.protocol == "script" or kind == "script":
        return script.router_from_url(url, source)
    raise RuleError(
        f"unsupported router URL {url.protocol}:// (router={kind}); expected condition://, "
        "script:// or route://...&router=condition|script",
        source=source,
    )


def url_compiler() -> UrlCompiler | None:
    """Compiler for ``routers``-category URLs (condition://, route://, script://)."""
    return _compile_route_url


def compile_url(url: URL, source: str) -> Router:
    """Compile a routers-category URL exactly as consumers do; RuleError when it is invalid."""
    compiler = url_compiler()
    if compiler is None:
        raise RuleError("router URLs are not supported", source=source)
    return compiler(url, source)


def new_rulebook() -> RuleBook:
    """An empty rule book that compiles router URLs (documents come with their compiler)."""
    return RuleBook(url_compiler())
