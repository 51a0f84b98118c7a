"""Which routers a consumer runs: the built-in ones and the compilers for each rule kind.

This is the one place that knows every router kind; the directory, ``route test`` and the CLI's
validation all go through it, so an operator's check runs exactly the code a live consumer runs.
"""

from __future__ import annotations

from dubbo_py.errors import RuleError
from dubbo_py.router.base import Router
from dubbo_py.router.rulebook import DocumentCompiler, RuleBook, UrlCompiler
from dubbo_py.url import URL

__all__ = [
    "DOCUMENT_KINDS",
    "builtin_routers",
    "chain_routers",
    "compile_document",
    "compile_url",
    "document_compilers",
    "new_rulebook",
    "url_compiler",
]

#: Config-center document kinds, as the suffix of their key (``<key>.<kind>``).
DOCUMENT_KINDS = ("condition-router", "tag-router", "script-router", "shard-router")


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


def document_compilers() -> dict[str, DocumentCompiler]:
    """Compilers for config-center documents by kind (``condition-router-app`` is the
    condition document read from ``<application>.condition-router``: the key it is stored at,
    not its ``scope`` field, makes it an application rule, as in Dubbo)."""
    from dubbo_py.router.condition import carriers as condition
    from dubbo_py.router.script import ScriptRouter, parse_script_rule
    from dubbo_py.router.shard.router import compile_shard_document
    from dubbo_py.router.tag import TagRouter, parse_tag_rule

    def tag_router(text: str, source: str) -> list[Router]:
        return [TagRouter(parse_tag_rule(text, source))]

    def script_router(text: str, source: str) -> list[Router]:
        return [ScriptRouter(parse_script_rule(text, source))]

    return {
        # Where a condition document is stored sets its priority (Dubbo's ServiceStateRouter
        # and AppStateRouter), whatever its scope field says.
        "condition-router": condition.service_routers_from_yaml,
        "condition-router-app": condition.application_routers_from_yaml,
        "shard-router": compile_shard_document,
        "tag-router": tag_router,
        "script-router": script_router,
    }


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


def compile_document(kind: str, text: str, source: str) -> list[Router]:
    """Compile a rule document exactly as consumers do; RuleError when it is invalid."""
    compiler = document_compilers().get(kind)
    if compiler is None:
        known = ", ".join(sorted(document_compilers())) or "none"
        raise RuleError(f"unknown rule kind {kind!r} (known: {known})", source=source)
    return compiler(text, source)


def compile_url(url: URL, source: str) -> Router:
    """Compile a routers-category URL exactly as consumers do; RuleError when it is invalid."""
    compiler = url_compiler()
    if compiler is None:
        raise RuleError("router URLs are not supported", source=source)
    return compiler(url, source)


def new_rulebook() -> RuleBook:
    """An empty rule book with every compiler."""
    return RuleBook(document_compilers(), url_compiler())
