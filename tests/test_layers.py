"""Each package imports only what its ``__init__`` allows (``MAY_IMPORT``), every ``import`` statement
counted, those inside functions too (:func:`test_import_graph.import_graph`).

A package's ``MAY_IMPORT`` names the rest of dpcl its modules may import: a package (``"privacy"``), a
top-level module (``"seeding"``) or one module of a package (``"learners.registry"``: report/ may read the
registry and nothing else of learners/). The few imports that break a rule today are listed in
:data:`EXCEPTIONS`, each with the reason it stands; an import that breaks a rule and is not listed fails
the test, and so does a listed exception that no longer occurs (the list only shrinks).
"""

from __future__ import annotations

import ast

from test_import_graph import PACKAGE, SRC, import_graph

#: (importing module, imported package or module): why it stands for now
EXCEPTIONS: dict[tuple[str, str], str] = {}


def _rules() -> dict[str, tuple[str, ...]]:
    """Package -> its ``MAY_IMPORT``, read from its ``__init__`` without importing it."""
    rules = {}
    for init in sorted((SRC / PACKAGE).glob("*/__init__.py")):
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MAY_IMPORT" for t in node.targets
            ):
                rules[init.parent.name] = tuple(ast.literal_eval(node.value))
    return rules


def _unit(module: str) -> str:
    """A module's package or top-level module under dpcl ("dpcl.privacy.ledger" -> "privacy")."""
    return module.split(".")[1] if "." in module else module


def _allowed(target: str, allowed: tuple[str, ...]) -> bool:
    rest = target[len(PACKAGE) + 1 :] if "." in target else ""
    return any(rest == a or rest.startswith(a + ".") for a in allowed)


def violations() -> tuple[list[str], set[tuple[str, str]]]:
    """(each import that breaks its package's rule and is not an exception, the exceptions that occur)."""
    rules = _rules()
    bad, used = [], set()
    for module, targets in sorted(import_graph().items()):
        package = _unit(module)
        if package not in rules or module == PACKAGE:
            continue
        for target in sorted(targets):
            if target == PACKAGE or _unit(target) == package or _allowed(target, rules[package]):
                continue
            key = next(
                (k for k in EXCEPTIONS if k[0] == module and (target + ".").startswith(k[1] + ".")), None
            )
            if key is None:
                bad.append(f"{module} imports {target}: {package}/ may import only {rules[package]}")
            else:
                used.add(key)
    return bad, used


def test_every_package_states_its_rule():
    rules = _rules()
    packages = {p.parent.name for p in (SRC / PACKAGE).glob("*/__init__.py")}
    assert set(rules) == packages, f"packages without MAY_IMPORT: {sorted(packages - set(rules))}"
    units = {p.stem for p in (SRC / PACKAGE).glob("*.py")} | packages
    for package, allowed in rules.items():
        unknown = [a for a in allowed if a.split(".")[0] not in units]
        assert not unknown, f"{package}: MAY_IMPORT names {unknown}, which are not part of dpcl"


def test_every_import_follows_its_packages_rule():
    bad, used = violations()
    assert not bad, "\n".join(bad)
    stale = sorted(set(EXCEPTIONS) - used)
    assert not stale, f"exceptions that no longer occur (remove them): {stale}"


def test_the_check_sees_a_function_level_import(tmp_path, monkeypatch):
    """An import inside a function breaks a rule like a module-level one (the rule is the package's, not
    the interpreter's load order)."""
    import test_layers

    pkg = tmp_path / PACKAGE
    for sub in ("privacy", "learners"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text(f'"""{sub}."""\n\nMAY_IMPORT = ("seeding",)\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "seeding.py").write_text("")
    (pkg / "learners" / "x.py").write_text("")
    (pkg / "privacy" / "ok.py").write_text("from ..seeding import *\n")
    (pkg / "privacy" / "bad.py").write_text("def f():\n    from ..learners import x\n    return x\n")
    monkeypatch.setattr(test_layers, "SRC", tmp_path)
    monkeypatch.setattr(test_layers, "EXCEPTIONS", {})
    graph = import_graph(tmp_path)
    monkeypatch.setattr(test_layers, "import_graph", lambda: graph)
    bad, _ = violations()
    assert bad == ["dpcl.privacy.bad imports dpcl.learners.x: privacy/ may import only ('seeding',)"]
