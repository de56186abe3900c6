"""The engine's import graph: no circle, and few loose modules (docs/architecture.md).

Walks every module of ``memotest/`` and ``plugins/`` with ``ast``: every import, those
inside functions included (they run too, only later), those under ``if TYPE_CHECKING:``
left out (they never run). Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__``
first, so those are edges too, except for a module inside them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: memotest's stages, bottom to top (docs/architecture.md, "Layout"): a package or loose
#: module imports only from its own stage and those before it.
STAGES = (
    "__init__",
    "model",
    "errors",
    "lazy",
    "worker",
    "_executed",
    "world",
    "hookspecs",
    "load",
    "inputs",
    "store",
    "tracer",
    "run",
    "check",
    "recording",
    "reporting",
    "drive",
    "remote",
    "builtin",
    "loop",
    "memo",
    "commands",
    "cli",
    "__main__",
)
#: The most modules ``memotest/`` holds beside its packages (``__init__`` and
#: ``__main__`` aside): the entry points, the public plugin API and the plain data.
MAX_LOOSE = 8


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for base, top in ((REPO, REPO / "memotest"), (REPO / "plugins", REPO / "plugins")):
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            name = ".".join(parts)
            mods[name.removesuffix(".__init__")] = path
    return mods


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, package: str) -> list[tuple[str, int]]:
    """``(dotted name, line)`` of every import that can run: a ``from X import y`` gives
    ``X.y`` (a submodule, when there is one) and ``X``."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                for stmt in child.orelse:
                    visit_stmt(stmt)
                continue
            visit_stmt(child)

    def visit_stmt(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            out.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            out.append((source, node.lineno))
            out.extend((f"{source}.{alias.name}", node.lineno) for alias in node.names)
        else:
            visit(node)

    visit(tree)
    return out


@functools.cache  # two tests walk it: parse the files once
def import_graph() -> dict[str, dict[str, str]]:
    """Module -> {module it imports: ``file:line`` of the first such import}."""
    mods = _modules()
    graph: dict[str, dict[str, str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: dict[str, str] = {}
        for dotted, line in _imported(ast.parse(path.read_text(), str(path)), package):
            target = dotted
            while target and target not in mods:
                target = target.rpartition(".")[0]
            # importing a.b.c runs the packages above it that the importer is not inside
            while target:
                inside = (name + ".").startswith(target + ".")
                if target in mods and not inside:
                    edges.setdefault(target, f"{path.relative_to(REPO)}:{line}")
                target = target.rpartition(".")[0]
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_circle():
    graph = import_graph()
    report = []
    for component in circles(graph):
        members = set(component)
        report.append(" <-> ".join(component))
        for name in component:
            report.extend(
                f"    {name} -> {target}  ({where})"
                for target, where in sorted(graph[name].items())
                if target in members
            )
    assert not report, "import circles (imports only run downward):\n" + "\n".join(report)


def _stage(module: str) -> str | None:
    """The stage of a module of memotest (None for one of plugins/)."""
    parts = module.split(".")
    if parts[0] != "memotest":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_run_downward():
    """The stages' order: an import from a later stage (or a stage the table does not
    know: add it) is an import upward, even where it closes no circle yet."""
    rank = {stage: i for i, stage in enumerate(STAGES)}
    upward = []
    for name, edges in import_graph().items():
        here = _stage(name)
        if here is None:  # plugins/ stand above memotest
            continue
        for target, where in sorted(edges.items()):
            there = _stage(target)
            if there == here:
                continue
            if there is None or here not in rank or there not in rank or rank[here] < rank[there]:
                upward.append(f"{name} ({here}) -> {target} ({there})  ({where})")
    assert not upward, "imports upward (or from a stage STAGES does not name):\n" + "\n".join(
        upward
    )


def test_the_graph_sees_a_circle_inside_a_function(tmp_path):
    a = ast.parse("def f():\n    from memotest.b import x\n")
    b = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memotest.a\n")
    assert ("memotest.b.x", 2) in _imported(a, "memotest")
    assert all(not name.startswith("memotest.a") for name, _ in _imported(b, "memotest"))
    graph = {"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b": ""}, "b": {}}) == []


def test_few_loose_modules():
    loose = sorted(
        p.name
        for p in (REPO / "memotest").glob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )
    assert len(loose) <= MAX_LOOSE, (
        f"{len(loose)} loose modules in memotest/ (at most {MAX_LOOSE}: put a module in the "
        f"package of its stage, docs/architecture.md): {', '.join(loose)}"
    )
