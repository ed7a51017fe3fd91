"""The task ledger and the DP active-learning group ledger do not import each other in a circle:
the shared LedgerError lives in dpcl.privacy.errors, and only verify.verify_privacy reaches
group_ledger (one way)."""

import ast
import subprocess
import sys
from pathlib import Path

import dpcl

SRC = Path(dpcl.__file__).resolve().parent


def _module(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every dpcl module ``path`` imports, at import time or inside a function."""
    here = _module(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("dpcl")}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if mod.startswith("dpcl"):
                out.add(mod)
                out |= {f"{mod}.{a.name}" for a in node.names}  # from . import x: a module x
    return out


def _graph() -> dict[str, set[str]]:
    mods = {_module(p): p for p in SRC.rglob("*.py")}
    return {m: {i for i in _imports(p) if i in mods and i != m} for m, p in mods.items()}


def _reaches(graph, start: str, goal: str) -> list[str] | None:
    """An import path from ``start`` to ``goal`` (None: there is none)."""
    stack, seen = [[start]], {start}
    while stack:
        path = stack.pop()
        for nxt in sorted(graph[path[-1]]):
            if nxt == goal:
                return path + [nxt]
            if nxt not in seen:
                seen.add(nxt)
                stack.append(path + [nxt])
    return None


def test_group_ledger_does_not_reach_the_task_ledger():
    graph = _graph()
    assert _reaches(graph, "dpcl.privacy.verify", "dpcl.privacy.group_ledger")  # the one-way dispatch
    assert _reaches(graph, "dpcl.privacy.group_ledger", "dpcl.privacy.ledger") is None
    assert _reaches(graph, "dpcl.privacy.group_ledger", "dpcl.privacy.verify") is None
    assert _reaches(graph, "dpcl.privacy.ledger", "dpcl.privacy.verify") is None
    assert graph["dpcl.privacy.errors"] == set()


def test_ledger_error_is_one_class_under_both_names():
    from dpcl.privacy import errors, group_ledger, ledger

    assert ledger.LedgerError is errors.LedgerError is group_ledger.LedgerError
    code = "import sys, dpcl.privacy.group_ledger; print('dpcl.privacy.ledger' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
