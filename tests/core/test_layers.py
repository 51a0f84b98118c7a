"""The packages show the layers: no module imports a higher layer, and packages form no cycle.

The layer order is the table under "## Layers" in docs/architecture.md (top row = highest
layer); this test reads it from there, so the page and the code cannot drift apart. Every
import in dubbo_py counts, including those inside functions and under ``TYPE_CHECKING``: a
lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dubbo_py"
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Imports that break the layering today, as (importing module, imported unit), with who is
#: removing them. Empty is the goal; a new violation fails the test.
KNOWN: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    """One import of a dubbo_py module by another."""

    module: str  # dotted name of the importing module
    unit: str  # the imported package (``router``) or top-level module (``url``)
    line: int


def layers() -> list[tuple[str, frozenset[str]]]:
    """(layer, units) from the table in docs/architecture.md, lowest layer first."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[str, frozenset[str]]] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[1].startswith("`"):
            continue
        units = set()
        for path in re.findall(r"`dubbo_py/([^`]*)`", cells[1]):
            units.add(_unit_of_path(path))
        rows.append((cells[0].strip("*` "), frozenset(units)))
    assert rows, "docs/architecture.md has no layer table under '## Layers'"
    return rows[::-1]


def _unit_of_path(path: str) -> str:
    if path == "__init__.py":
        return "dubbo_py"
    return path.rstrip("/").removesuffix(".py")


def modules() -> Iterator[tuple[str, Path]]:
    """Every module of dubbo_py as (dotted name, file)."""
    for file in sorted(PACKAGE.rglob("*.py")):
        parts = file.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), file


def unit_of(module: str) -> str:
    """The package (``router``) or top-level module (``url``) a dotted name belongs to;
    ``dubbo_py`` for the package's own ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "dubbo_py"


def imports(module: str, file: Path) -> Iterator[Import]:
    """The dubbo_py imports of one module (relative ones resolved)."""
    package = module if file.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dubbo_py":
                    yield Import(module, unit_of(alias.name), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "dubbo_py":
                continue
            if target == "dubbo_py":
                # ``from dubbo_py import url`` imports a module; ``import URL`` the public API
                for alias in node.names:
                    sub = PACKAGE / alias.name
                    is_module = sub.is_dir() or sub.with_suffix(".py").exists()
                    yield Import(module, alias.name if is_module else "dubbo_py", node.lineno)
            else:
                yield Import(module, unit_of(target), node.lineno)


def all_imports() -> list[Import]:
    return [i for module, file in modules() for i in imports(module, file)]


def rank() -> dict[str, int]:
    return {unit: level for level, (_, units) in enumerate(layers()) for unit in units}


def test_every_package_and_top_level_module_has_a_layer() -> None:
    ranks = rank()
    missing = sorted({unit_of(m) for m, _ in modules()} - set(ranks))
    assert not missing, (
        f"{missing} appear in no layer: add them to the table under '## Layers' in "
        "docs/architecture.md"
    )


def test_no_module_imports_a_higher_layer() -> None:
    ranks = rank()
    names = {unit: name for name, units in layers() for unit in units}
    upward = [
        i
        for i in all_imports()
        if i.unit in ranks
        and ranks.get(i.unit, -1) > ranks.get(unit_of(i.module), len(ranks))
        and (i.module, i.unit) not in KNOWN
    ]
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(
        f"  {i.module}:{i.line} ({names[unit_of(i.module)]}) imports {i.unit} ({names[i.unit]})"
        for i in upward
    )


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return out


def test_packages_import_each_other_without_cycles() -> None:
    edges: dict[str, set[str]] = {}
    for i in all_imports():
        if (i.module, i.unit) in KNOWN:
            continue
        source = unit_of(i.module)
        if source != i.unit:
            edges.setdefault(source, set()).add(i.unit)
    assert not _cycles(edges), f"package import cycles: {_cycles(edges)}"


def _module_of(name: str, known: set[str]) -> str | None:
    """The longest dotted prefix of *name* that is a module of dubbo_py (``None``: not ours)."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def module_imports() -> dict[str, set[str]]:
    """Module -> the dubbo_py modules it imports, ``TYPE_CHECKING`` and lazy imports included.

    ``from package import name`` depends on the submodule when *name* is one, else on the
    package; a package's ``__init__`` run on the way to a submodule is not counted (it is the
    package's business, not the importer's).
    """
    files = dict(modules())
    known = set(files)
    edges: dict[str, set[str]] = {name: set() for name in files}
    for module, file in files.items():
        package = module if file.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(
                        [*parts[: len(parts) - node.level + 1], *([base] if base else [])]
                    )
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in known else base)
            for target in targets:
                found = _module_of(target, known)
                if found is not None and found != module:
                    edges[module].add(found)
    return edges


def test_modules_import_each_other_without_cycles() -> None:
    cycles = _cycles(module_imports())
    assert not cycles, "module import cycles (TYPE_CHECKING imports count):\n" + "\n".join(
        "  " + " <-> ".join(cycle) for cycle in cycles
    )


def test_no_folder_holds_more_than_twenty_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
        if (count := len([f for f in folder.glob("*.py") if f.name != "__init__.py"])) > 20
    }
    assert not crowded, f"folders with more than 20 modules: {crowded}"


def test_no_asyncio_twin_module_beside_its_blocking_module() -> None:
    """The asyncio flavour of a part lives in the same module as the blocking one."""
    twins = sorted(
        str(f.relative_to(ROOT))
        for f in PACKAGE.rglob("aio_*.py")
        if f.with_name(f.name.removeprefix("aio_")).exists()
    )
    assert not twins, f"asyncio twins beside their blocking module: {twins}"


def test_known_violations_are_still_real() -> None:
    # An exemption that no longer matches an import should be deleted, so the list only shrinks.
    found = {(i.module, i.unit) for i in all_imports()}
    stale = sorted(set(KNOWN) - found)
    assert not stale, f"remove these from KNOWN in tests/core/test_layers.py: {stale}"


@pytest.mark.parametrize(
    ("edges", "cyclic"),
    [
        ({"a": {"b"}, "b": {"c"}}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(edges: dict[str, set[str]], cyclic: list[list[str]]) -> None:
    assert _cycles(edges) == cyclic
