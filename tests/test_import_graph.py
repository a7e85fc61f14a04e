"""The package's modules import one another without a cycle, read from their source.

The graph is built from every module's AST: each import that runs (at module level or in a
function, the lazy loads included; never one under ``if TYPE_CHECKING:``), and for each the
packages whose ``__init__`` it runs on the way. Any strongly connected part of the graph with
more than one module is a cycle: the test names its modules and the import lines that close it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import nb_durable

PACKAGE = Path(nb_durable.__file__).resolve().parent
ROOT = PACKAGE.parent


def modules() -> dict[str, Path]:
    """Every module of the package (folders without ``__init__.py``, such as data, left out)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        folders = path.relative_to(PACKAGE).parents
        if not all((PACKAGE / f / "__init__.py").is_file() for f in folders):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run: all of them but those under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _runtime_imports(ast.Module([child], [])))
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        yield from _runtime_imports(node)


def graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    """module -> the modules importing it runs; and (importer, imported) -> the line."""
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    lines: dict[tuple[str, str], int] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]
            else:
                targets = [a.name for a in node.names]
            for imported in targets:
                if imported not in known:
                    continue  # the standard library, a dependency
                # Importing a.b.c runs a and a.b first: those count, but not the importer's own parents.
                parts = imported.split(".")
                for i in range(1, len(parts) + 1):
                    step = ".".join(parts[:i])
                    if step in known and step != name and not name.startswith(step + "."):
                        edges[name].add(step)
                        lines.setdefault((name, step), node.lineno)
    return edges, lines


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    part.append(top)
                    if top == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_the_graph_sees_the_package_s_imports() -> None:
    edges, _ = graph()
    assert len(edges) > 100
    assert "nb_durable.core.log" in edges["nb_durable.agent.run.session"]
    assert "nb_durable.jupyter.cells" in edges["nb_durable.jupyter.magics"], "a function-level import counts"
    assert not any(m.startswith("nb_durable.jupyter") for m in edges["nb_durable.agent.run.loop"])


def test_a_cycle_would_be_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_imports_itself_back() -> None:
    edges, lines = graph()
    found = cycles(edges)
    said = []
    for part in found:
        members = set(part)
        said.append(
            ", ".join(f"{a} imports {b} (line {lines[a, b]})" for a in part for b in sorted(edges[a] & members))
        )
    assert found == [], "import cycles:\n" + "\n".join(said)
