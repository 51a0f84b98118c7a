"""Which routers a consumer runs: the built-in ones and the compilers for each rule kind.

This is the one place that knows every router kind; the directory and ``route test`` both build
their chains from here, so an operator's test runs exactly the code a live consumer runs.
"""

from __future__ import annotations

from dubbo_py.router.base import Router
from dubbo_py.router.rulebook import DocumentCompiler, RuleBook, UrlCompiler

__all__ = ["builtin_routers", "document_compilers", "new_rulebook", "url_compiler"]


def builtin_routers() -> list[Router]:
    """Routers every consumer runs whatever the rules: none yet."""
    return []


def document_compilers() -> dict[str, DocumentCompiler]:
    """Compilers for config-center documents by kind."""
    return {}


def url_compiler() -> UrlCompiler | None:
    """Compiler for ``routers``-category URLs."""
    return None


def new_rulebook() -> RuleBook:
    """An empty rule book with every compiler."""
    return RuleBook(document_compilers(), url_compiler())
