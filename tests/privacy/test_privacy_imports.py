"""The task ledger and the DP active-learning group ledger (dpcl.active.group_ledger) share no code but
the LedgerError of dpcl.privacy.errors and the ledger fields' parsers: the group ledger reaches neither the
task ledger nor its verifier, and the task ledger's verifier no longer dispatches to it."""

import ast
import subprocess
import sys
from pathlib import Path

import dpcl
from dpcl.privacy import errors

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
    assert _reaches(graph, "dpcl.privacy.verify", "dpcl.active.group_ledger") is None
    assert _reaches(graph, "dpcl.active.group_ledger", "dpcl.privacy.ledger") is None
    assert _reaches(graph, "dpcl.active.group_ledger", "dpcl.privacy.verify") is None
    assert _reaches(graph, "dpcl.privacy.ledger", "dpcl.privacy.verify") is None
    assert graph["dpcl.privacy.errors"] == set()


def test_ledger_error_is_one_class_under_both_names():
    from dpcl.active import group_ledger
    from dpcl.privacy import errors, ledger

    assert ledger.LedgerError is errors.LedgerError is group_ledger.LedgerError
    code = "import sys, dpcl.active.group_ledger; print('dpcl.privacy.ledger' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_task_ledger_verifier_refuses_a_group_ledger():
    """A per-record group ledger verified as a task ledger would be checked against the wrong plan."""
    import pytest

    from dpcl.privacy.verify import verify_privacy

    with pytest.raises(errors.LedgerError, match="not a task ledger"):
        verify_privacy({"accounting": "per_record_groups", "target": {"epsilon": 1.0, "delta": 1e-5}})
