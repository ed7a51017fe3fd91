"""Calling convention of the library: no public function takes more than MAX_POSITIONAL positional
parameters (self/cls not counted); the rest are keyword-only, so that a caller cannot swap two
arguments of the same type (two output paths, two noise multipliers) without it showing."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dpcl"
MAX_POSITIONAL = 6

# Offenders not converted yet: (file under src/dpcl, function) -> reason. This list may only shrink:
# an entry that is no longer an offender fails the test too, so it is removed with the fix.
ALLOWED: dict[tuple[str, str], str] = {}


def _positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = node.args.posonlyargs + node.args.args
    return len(args) - (1 if args and args[0].arg in ("self", "cls") else 0)


def offenders() -> set[tuple[str, str]]:
    found = set()
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
                if _positional(node) > MAX_POSITIONAL:
                    found.add((path.relative_to(SRC).as_posix(), node.name))
    return found


def test_public_functions_take_at_most_six_positional_parameters():
    new = sorted(offenders() - set(ALLOWED))
    assert not new, (
        f"public functions with more than {MAX_POSITIONAL} positional parameters (make the rest "
        "keyword-only with '*', outputs and options first): "
        + ", ".join(f"src/dpcl/{f}:{name}" for f, name in new)
    )


def test_allow_list_only_shrinks():
    stale = sorted(set(ALLOWED) - offenders())
    assert not stale, "no longer offenders, remove them from ALLOWED: " + ", ".join(
        f"src/dpcl/{f}:{name}" for f, name in stale
    )


def test_the_check_counts_positional_parameters():
    """The counting itself: self is not counted, keyword-only parameters are not counted."""
    tree = ast.parse(
        "def f(a, b, c, d, e, f, g): pass\n"
        "def g(a, b, c, d, e, f, *, g): pass\n"
        "class C:\n    def m(self, a, b, c, d, e, f): pass\n"
    )
    counts = {n.name: _positional(n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert counts == {"f": 7, "g": 6, "m": 6}
