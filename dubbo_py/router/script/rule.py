"""Script rules: reading and checking the YAML document and the ``script://`` registry URL.

YAML, stored at ``<provider application>.script-router`` (Dubbo's ``ScriptRule`` model plus our
``type: starlark``)::

    key: shop-detail
    type: starlark
    enabled: true
    force: false        # route() returning no invoker: false = ignore the answer, true = none
    priority: 200
    script: |
      def route(invokers, invocation, context):
          return [i for i in invokers if i.parameters.get("env") == "prod"]

Registry URL (Dubbo 2.6 style, ``routers`` category)::

    script://0.0.0.0/demo.Greeter?category=routers&type=starlark&rule=<URL-encoded script>
        &priority=200&force=false&enabled=true

Checking happens partly in the router process, before any Starlark runs there, so it must
itself be safe on hostile text: the script is limited in size (64 KiB), bracket nesting (64),
indentation depth (32) and tokens per statement (500), because starlark-rust's parser and
compiler recurse and crash the process on nesting a few thousand levels deep (measured: about
2000-4000 levels). Then the script is *parsed* here (syntax errors with line/column); the top
level may only define functions and constants (so building a program never runs real work
outside the time budget); ``route`` must take three positional arguments. Finally the script is
*compiled* in the sandbox, which resolves every name - compiling is not done here because
starlark-rust folds constant expressions while compiling (``"a" * 2147483647`` in a ``def``
allocates 2 GiB at compile time).
"""

from __future__ import annotations

import ast
import hashlib
import io
import logging
import re
import tokenize
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import starlark

from dubbo_py.errors import RuleError, URLError
from dubbo_py.router.script import engine
from dubbo_py.router.script.checker import CHECKING
from dubbo_py.router.script.sandbox import SCRIPT, UNAVAILABLE, Sandbox, default_sandbox
from dubbo_py.rule_fields import Field, acted, document_fields, ignored
from dubbo_py.url import URL, decode_component
from dubbo_py.yaml_loader import YamlDocument, compile_yaml

__all__ = [
    "DEFAULT_SCRIPT_PRIORITY",
    "MAX_SCRIPT_CHARS",
    "SCRIPT_TYPE",
    "ScriptRule",
    "check_script",
    "parse_script_rule",
    "parse_script_url",
    "validate_script_yaml",
]

SCRIPT_TYPE = "starlark"
DEFAULT_SCRIPT_PRIORITY = 200
MAX_SCRIPT_CHARS = 64 * 1024
MAX_BRACKET_DEPTH = 64
MAX_INDENT_DEPTH = 32
#: Indentation plus the elif levels of every if-statement open around a line.
MAX_BLOCK_DEPTH = 64
MAX_STATEMENT_TOKENS = 500

#: The file name Python's parser gives a script in the top-level check. What it warns about --
#: string escapes Python does not know (``"\_"``), literals it finds suspicious -- is Python's
#: reading of the text, meaningless for a Starlark script (Starlark's own parser has accepted
#: it by then), so those warnings are ignored rather than printed on every process that
#: compiles the rule (on Python 3.12+ a SyntaxWarning, shown by default, naming ``<unknown>``).
#: A filter by this name, not ``warnings.catch_warnings``, which is not thread-safe.
_PYTHON_READING = "<starlark script, read as Python>"
warnings.filterwarnings("ignore", module=re.escape(_PYTHON_READING))

logger = logging.getLogger("dubbo_py.router.script")

_SPAN = re.compile(r"-->\s*[^\n]*?:(\d+):(\d+)")


@dataclass(frozen=True)
class ScriptRule:
    """A checked script rule. ``digest`` identifies the rule version (script and settings)."""

    script: str
    key: str = ""
    enabled: bool = True
    force: bool = False
    priority: int = DEFAULT_SCRIPT_PRIORITY
    runtime: bool = True
    source: str = ""
    digest: str = field(default="", compare=False)
    #: Who the rule is, across its versions: its source (the registry path it is stored at)
    #: for a document, ``script://<service>`` for a registry URL (whose source is its text).
    #: The rule's worker and its count of runs over budget belong to this, not to its text.
    identity: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.identity:
            object.__setattr__(self, "identity", self.source or f"script:{self.key}")
        if not self.digest:
            settings = (self.script, self.key, self.enabled, self.force, self.priority)
            text = "\0".join(map(str, settings))
            object.__setattr__(self, "digest", hashlib.sha256(text.encode()).hexdigest())


#: Every field of a script document and what dubbo-py does with it (the no-silent-drop table,
#: :mod:`dubbo_py.rule_fields`).
FIELDS: Mapping[str, Field] = document_fields(
    type=acted(),
    script=acted(),
    force=acted(),
    priority=acted(),
    runtime=ignored("the script runs for every call that reaches the router"),
    dynamic=ignored("rule documents are always dynamic (Dubbo reads and drops it)"),
    valid=ignored("Dubbo reads and drops it"),
)


def parse_script_rule(text: str, source: str, *, sandbox: Sandbox | None = None) -> ScriptRule:
    """Read and check a ``.script-router`` YAML document; RuleError naming the problem, with
    line/column (script errors point into the YAML when the script is a ``|`` block)."""
    return compile_yaml(
        text,
        source,
        lambda doc: _script_rule(doc, sandbox),
        error=RuleError,
        empty="rule is empty",
    )


def _unsupported(kind: str) -> str:
    if kind.lower() in ("javascript", "js"):
        # Named as out of scope, not as a typo: Dubbo runs these on a JavaScript engine.
        return (
            f"JavaScript script rules (type: {kind}) are out of dubbo-py's scope: it runs "
            "type: starlark scripts (docs/routing.md, Script rules)"
        )
    return f"unsupported script type {kind!r}: only 'starlark' scripts run here"


def _script_rule(doc: YamlDocument, sandbox: Sandbox | None) -> ScriptRule:
    text, source = doc.text, doc.source
    doc.mapping()
    kind = doc.get_str(("type",), required=True).strip()
    if kind.lower() != SCRIPT_TYPE:
        raise doc.error(("type",), _unsupported(kind))
    script = doc.get_str(("script",), required=True)
    found_line, found_column = doc.position(("script",))
    line, column = found_line or 1, found_column or 1
    try:
        check_script(script, source, sandbox=sandbox)
    except RuleError as exc:
        if exc.line is None:
            raise RuleError(exc.reason, source=source, line=line, column=column) from None
        # Report where the problem is in the document: exact for a `script: |` block, the
        # start of the script value otherwise; the message keeps the script's own position.
        offset = _block_offset(text, line, column)
        if offset is not None:
            line, column = exc.line + offset[0], (exc.column or 1) + offset[1]
        raise RuleError(
            f"script line {exc.line}, column {exc.column}: {exc.reason}",
            source=source,
            line=line,
            column=column,
        ) from None
    return ScriptRule(
        script=script,
        key=doc.get_str(("key",)),
        enabled=doc.get_bool(("enabled",), True),
        force=doc.get_bool(("force",), False),
        priority=doc.get_int(("priority",), DEFAULT_SCRIPT_PRIORITY),
        runtime=doc.get_bool(("runtime",), True),
        source=source,
    )


def validate_script_yaml(text: str, source: str, *, sandbox: Sandbox | None = None) -> None:
    """Check a script rule without keeping it (``dubbo-py rule validate``); raises RuleError."""
    parse_script_rule(text, source, sandbox=sandbox)


def parse_script_url(url: URL | str, source: str, *, sandbox: Sandbox | None = None) -> ScriptRule:
    """Read a ``script://`` router URL (``rule`` URL-encoded, ``type=starlark`` required)."""
    try:
        parsed = URL.parse(url) if isinstance(url, str) else url
    except URLError as exc:
        raise RuleError(str(exc), source=source) from None
    if parsed.protocol != "script":
        raise RuleError(f"not a script router URL (protocol {parsed.protocol!r})", source=source)
    kind = parsed.get_str("type")
    if kind.lower() != SCRIPT_TYPE:
        raise RuleError(
            f"unsupported script type {kind or '(none; Dubbo defaults to javascript)'!r}: "
            "only type=starlark scripts run here",
            source=source,
        )
    raw = parsed.get_str("rule")
    if not raw.strip():
        raise RuleError("the 'rule' parameter (the URL-encoded script) is empty", source=source)
    script = decode_component(raw)
    check_script(script, source, sandbox=sandbox)
    priority_text = parsed.get_str("priority")
    try:
        priority = int(priority_text) if priority_text else DEFAULT_SCRIPT_PRIORITY
    except ValueError:
        raise RuleError(f"priority {priority_text!r} is not an integer", source=source) from None
    return ScriptRule(
        script=script,
        key=parsed.service_interface,
        enabled=parsed.get_bool("enabled", True),
        force=parsed.get_bool("force", False),
        priority=priority,
        runtime=parsed.get_bool("runtime", True),
        source=source,
        identity=f"script://{parsed.service_key}",
    )


def check_script(script: str, source: str, *, sandbox: Sandbox | None = None) -> None:
    """All checks on a script's text (see the module docstring); RuleError with the script's
    own line/column on the first problem. The last check compiles the script in ``sandbox``
    (default: the process-wide :class:`ProcessSandbox`). The checks fail closed: a script
    whose compile check could not run (no worker could be started in time) is refused, with
    that reason, never accepted unchecked."""
    if len(script) > MAX_SCRIPT_CHARS:
        raise RuleError(
            f"script is {len(script)} characters, more than the {MAX_SCRIPT_CHARS} allowed",
            source=source,
        )
    CHECKING.call(lambda: _check_text(script, source))
    # Compile (resolves names: "Variable `x` not found" with its span). Not in this process:
    # starlark-rust folds constants while compiling, so `"a" * 2147483647` inside a def
    # allocates 2 GiB right here. The sandbox compiles it under its memory cap instead.
    outcome = (sandbox if sandbox is not None else default_sandbox()).check(script)
    if outcome.kind == UNAVAILABLE:
        raise RuleError(
            f"the script could not be checked: {outcome.message}; refused (retry when the "
            "script sandbox can start)",
            source=source,
        )
    if not outcome.ok:
        if outcome.kind == SCRIPT:
            raise _message_error(outcome.message, source)
        raise RuleError(
            f"compiling the script failed in the sandbox ({outcome.kind}): {outcome.message}",
            source=source,
        )


def _check_text(script: str, source: str) -> None:
    """The checks made in this process, in order: shape, Starlark's parse, the top level."""
    _check_shape(script, source)
    try:
        starlark.parse(engine.SCRIPT_FILE, script, engine.dialect())  # parsing folds nothing
    except starlark.StarlarkError as exc:
        raise _starlark_error(exc, source) from None
    _check_top_level(script, source)


def _check_shape(script: str, source: str) -> None:
    """Bracket nesting, block nesting and statement length, from Python's tokenizer
    (Starlark's lexical syntax is Python's). Each ``elif`` is one more level of nesting, as the
    parsers read it (``if a: .. elif b: ..`` is ``if a: .. else: (if b: ..)``): a chain of
    5000 ``elif`` at one indentation drove starlark-rust's parser 5000 levels deep."""
    depth = indent = statement = 0
    # The elif count of the if-statement open at each indentation level (index 0: the top).
    chains = [0]
    starting = True  # the next token starts a statement
    try:
        for token in tokenize.generate_tokens(io.StringIO(script).readline):
            if token.type == tokenize.INDENT:
                indent += 1
                chains.append(0)
                if indent > MAX_INDENT_DEPTH:
                    raise _token_error(
                        f"blocks nested deeper than {MAX_INDENT_DEPTH} levels", source, token
                    )
            elif token.type == tokenize.DEDENT:
                indent -= 1
                chains.pop()
            elif token.type == tokenize.NEWLINE:
                statement = 0
                starting = True
            elif token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER):
                if starting:
                    starting = False
                    if token.type == tokenize.NAME and token.string == "elif":
                        chains[-1] += 1
                        if indent + sum(chains) > MAX_BLOCK_DEPTH:
                            raise _token_error(
                                f"blocks nested deeper than {MAX_BLOCK_DEPTH} levels "
                                "(each elif counts as one level)",
                                source,
                                token,
                            )
                    elif not (token.type == tokenize.NAME and token.string == "else"):
                        chains[-1] = 0
                statement += 1
                if statement > MAX_STATEMENT_TOKENS:
                    raise _token_error(
                        f"statement longer than {MAX_STATEMENT_TOKENS} tokens", source, token
                    )
                if token.string in ("(", "[", "{"):
                    depth += 1
                    if depth > MAX_BRACKET_DEPTH:
                        raise _token_error(
                            f"brackets nested deeper than {MAX_BRACKET_DEPTH} levels",
                            source,
                            token,
                        )
                elif token.string in (")", "]", "}"):
                    depth = max(depth - 1, 0)
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        where = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], tuple) else None
        at_line: int | None = getattr(exc, "lineno", None)
        at_column: int | None = getattr(exc, "offset", None)
        if where and isinstance(exc, tokenize.TokenError):
            at_line, at_column = int(where[0]), int(where[1]) + 1
        raise RuleError(
            f"cannot read script: {exc.args[0]}", source=source, line=at_line, column=at_column
        ) from None


def _token_error(reason: str, source: str, token: tokenize.TokenInfo) -> RuleError:
    """A RuleError at ``token``'s line and (1-based) column."""
    return RuleError(reason, source=source, line=token.start[0], column=token.start[1] + 1)


def _check_top_level(script: str, source: str) -> None:
    """Top level: ``def`` (with constant defaults), constant assignments, docstrings; a
    ``route`` taking three positional arguments; no names in the engine's reserved space."""
    try:
        module = ast.parse(script, filename=_PYTHON_READING, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "offset", None)
        raise RuleError(
            f"unsupported syntax: {getattr(exc, 'msg', exc)}",
            source=source,
            line=line,
            column=column,
        ) from None
    for node in ast.walk(module):
        # Not even read: the engine's own names include the builtins' unguarded originals.
        if isinstance(node, ast.Name):
            _check_name(node.id, node, source)
        elif isinstance(node, ast.arg):
            _check_name(node.arg, node, source)
    route: ast.FunctionDef | None = None
    for node in module.body:
        if isinstance(node, ast.FunctionDef):
            _check_name(node.name, node, source)
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None and not _is_constant(default):
                    raise _node_error(
                        node, f"default values of {node.name}() must be constants", source
                    )
            if node.name == "route":
                route = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        _check_name(name.id, name, source)
            if node.value is None or not _is_constant(node.value):
                raise _node_error(
                    node,
                    "only constants may be assigned at the top level; compute inside a def",
                    source,
                )
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # docstring
        elif isinstance(node, ast.Pass):
            continue
        else:
            raise _node_error(
                node, "only def statements and constants are allowed at the top level", source
            )
    if route is None:
        raise RuleError(
            "the script must define route(invokers, invocation, context)", source=source
        )
    args = route.args
    positional = len(args.posonlyargs) + len(args.args)
    required = positional - len(args.defaults)
    kw_required = sum(1 for d in args.kw_defaults if d is None)
    if (positional < 3 and args.vararg is None) or required > 3 or kw_required:
        raise _node_error(
            route, "route must accept exactly (invokers, invocation, context)", source
        )


def _check_name(name: str, node: ast.AST, source: str) -> None:
    if name.startswith(engine.RESERVED_PREFIX):
        raise _node_error(
            node, f"names starting with {engine.RESERVED_PREFIX!r} are reserved", source
        )


def _is_constant(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant) and isinstance(
            node.operand.value, int | float
        )
    if isinstance(node, ast.List | ast.Tuple):
        return all(_is_constant(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_constant(k) for k in node.keys) and all(
            _is_constant(v) for v in node.values
        )
    return False


def _node_error(node: ast.AST, message: str, source: str) -> RuleError:
    line = getattr(node, "lineno", None)
    column = getattr(node, "col_offset", None)
    return RuleError(
        message, source=source, line=line, column=column + 1 if column is not None else None
    )


def _starlark_error(exc: starlark.StarlarkError, source: str) -> RuleError:
    text = str(exc)
    match = _SPAN.search(text)
    message = _strip_span(engine.first_line(text))
    if match:
        return RuleError(message, source=source, line=int(match[1]), column=int(match[2]))
    return RuleError(message, source=source)


def _message_error(message: str, source: str) -> RuleError:
    """A RuleError from the sandbox's one-line message ``... (route.star:L:C-...)``."""
    match = re.search(r"\(route\.star:(\d+):(\d+)[^)]*\)$", message)
    if match:
        return RuleError(
            _strip_span(message), source=source, line=int(match[1]), column=int(match[2])
        )
    return RuleError(message, source=source)


def _strip_span(message: str) -> str:
    return re.sub(r"\s*\(route\.star:\d+:\d+[^)]*\)$", "", message)


def _block_offset(text: str, line: int, column: int) -> tuple[int, int] | None:
    """For ``script: |`` blocks: (lines before the script, its indentation), so script
    positions can be reported as document positions."""
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return None
    if not lines[line - 1][column - 1 :].lstrip().startswith("|"):
        return None
    for content in lines[line:]:
        if content.strip():
            return line, len(content) - len(content.lstrip(" "))
    return None
