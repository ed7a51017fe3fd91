"""The package's modules import each other without a cycle.

Every ``import`` statement of src/dpcl counts, those inside functions too (a deferred import hides
a cycle from the interpreter, not from the reader: two modules that need each other are one
concept split in two). A cycle is reported as the chain of modules that closes it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "dpcl"


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(src: Path = SRC, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (an ``from pkg import name`` naming a sub-module
    imports that sub-module; otherwise the package itself)."""
    files = {_module_name(p, src): p for p in sorted((src / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for t in targets:
                while t and t not in files:  # ``import dpcl.data.x.y`` of an attribute: its module
                    t = t.rpartition(".")[0]
                if t and t != module and t.split(".")[0] == package:
                    graph[module].add(t)
    return graph


def _is_ancestor(a: str, b: str) -> bool:
    """Importing a sub-module runs its package's ``__init__`` first: not a cycle of the code's own."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The non-trivial strongly connected components (Tarjan), each as a sorted module list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if _is_ancestor(v, w):
                continue
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
                out.append(sorted(comp))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return out


def test_the_checker_finds_a_cycle_through_a_deferred_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a\n")  # a package importing its child: fine
    (pkg / "sub" / "a.py").write_text("from .b import f\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from .sub.a import f\nimport pkg.sub.b\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.c"] == {"pkg.sub.a", "pkg.sub.b"}
    assert find_cycles(graph) == [["pkg.sub.a", "pkg.sub.b"]]


def test_dpcl_has_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles in src/dpcl (merge the modules or move the shared part): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )
