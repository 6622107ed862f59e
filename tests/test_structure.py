"""The shape of the source tree: no import circle, no oversized module, one reader of the environment.

The import graph is built with ``ast`` from every ``.py`` file under ``src/sleuth``. It counts
*every* import, also those inside functions: a deferred import still ties two modules together,
and "import it inside the function" is the usual way an import circle is hidden, not removed.
Only imports under ``if TYPE_CHECKING:`` are left out, as they never run. An edge goes to the
module that is named (``from sleuth.eval import runner`` is an edge to ``sleuth.eval.runner``,
``from sleuth.llm import get_llm`` to ``sleuth.llm``); the parent packages that Python also
initialises on the way are not edges, else every package would be in a circle with its
own submodules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "sleuth"
MAX_LINES = 450


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth, except under ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _targets(node: ast.Import | ast.ImportFrom, name: str, is_package: bool, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        found = set()
        for alias in node.names:
            mod = alias.name
            while mod and mod not in known:  # import a.b.c: the deepest module of ours it names
                mod = mod.rpartition(".")[0]
            if mod:
                found.add(mod)
        return found
    if node.level:
        base = name if is_package else name.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        frm = f"{base}.{node.module}" if node.module else base
    else:
        frm = node.module or ""
    found = set()
    for alias in node.names:
        sub = f"{frm}.{alias.name}"
        if sub in known:
            found.add(sub)
        elif frm in known:
            found.add(frm)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each module of ``sleuth`` -> the modules of ``sleuth`` it imports."""
    mods = _modules()
    known = set(mods)
    g: dict[str, set[str]] = {name: set() for name in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _imports(tree):
            g[name] |= _targets(node, name, path.name == "__init__.py", known) - {name}
    return g


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan): each is an import circle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_import_graph_is_built_from_real_edges() -> None:
    g = import_graph()
    assert len(g) > 50
    assert "sleuth.eval.store" in g["sleuth.eval.runner"]  # a top-level import
    assert "sleuth.eval.runner" in g["sleuth.cli.eval"]  # imported inside the command function
    assert "sleuth.config" in g["sleuth.llm.models"]
    # the circle finder finds a planted circle, and only that one
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle() -> None:
    found = circles(import_graph())
    assert found == [], "modules that import each other (directly or round a circle):\n" + "\n".join(
        ", ".join(c) for c in found
    )


@pytest.mark.parametrize("path", sorted(_modules().values()), ids=lambda p: str(p.relative_to(SRC)))
def test_no_module_is_over_the_size_limit(path: Path) -> None:
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_LINES, f"{path.relative_to(SRC)} has {n} lines (limit {MAX_LINES}): split it by job"


def test_only_the_settings_module_touches_the_environment() -> None:
    """Everything reads the environment through :mod:`sleuth.config`, so a ``.env`` file reaches it."""
    readers = []
    for name, path in _modules().items():
        if name == "sleuth.config":
            continue
        text = path.read_text(encoding="utf-8")
        if "os.environ" in text or "os.getenv" in text or "getenv(" in text:
            readers.append(name)
    assert readers == []


#: which packages each package may import (docs/architecture.md: "arrows point one way")
ALLOWED = {
    "lang": {"lang"},
    "llm": {"llm", "config", "kvcache"},
    "search": {"search", "llm", "config", "kvcache", "text_input", "extras"},
    "strategies": {"strategies", "llm", "search", "lang", "text_input"},
}


def test_the_arrows_point_one_way() -> None:
    """The lower layers never import the upper ones (imports inside functions count)."""
    wrong = []
    for mod, deps in import_graph().items():
        pkg = mod.split(".")[1] if mod.count(".") else ""
        for dep in deps:
            if pkg in ALLOWED and dep.split(".")[1] not in ALLOWED[pkg]:
                wrong.append(f"{mod} -> {dep}")
    assert wrong == [], "imports against the layering:\n" + "\n".join(sorted(wrong))
