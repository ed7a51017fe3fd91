"""A learner lives in one place: among the library and workflow files, a registered learner's name occurs
in code (an identifier, or a whole word inside a string literal) only in its own module and in the
registry's import list. Comments and docstrings may name learners; code dispatches through the registry
(:mod:`dpcl.learners.registry`): a learner's spec names the stage function that runs it, its audit, its
config blocks and its notes.

The check tokenizes each file (Python's tokenizer reads Snakemake files too), so it sees identifiers,
string literals and f-string parts, and skips comments and docstrings."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

from dpcl.learners import registry

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "dpcl"

# Files that still name a learner in code: (learner, file relative to the repository) -> reason. This
# list may only shrink: an entry that no longer names its learner fails the test too.
ALLOWED: dict[tuple[str, str], str] = {
    ("cosine", "src/dpcl/audits/cosine_whitebox.py"): "the learner's audit imports its module",
    ("fm_agem", "src/dpcl/audits/fm_agem_audits.py"): "the learner's audits import its module",
    ("l2dpml", "src/dpcl/audits/l2dpml_canary.py"): "the learner's audit imports its module",
}


def _files() -> list[Path]:
    files = sorted(SRC.rglob("*.py")) + sorted((ROOT / "workflow").rglob("*.py"))
    return files + sorted((ROOT / "workflow").rglob("*.smk")) + [ROOT / "Snakefile"]


def _code_text(path: Path) -> list[str]:
    """The identifiers and string-literal parts of ``path`` that are code, not comments or docstrings."""
    out, prev = [], None
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    kinds = {tokenize.NAME, tokenize.STRING}
    kinds |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for i, tok in enumerate(tokens):
        if tok.type in (tokenize.NL, tokenize.COMMENT):
            continue
        if tok.type == tokenize.STRING:
            nxt = next((t for t in tokens[i + 1 :] if t.type not in (tokenize.NL, tokenize.COMMENT)), None)
            lone = prev is None or prev.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
            if lone and (nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER)):
                prev = tok
                continue  # a docstring (or another lone string statement)
        if tok.type in kinds:
            out.append(tok.string)
        prev = tok
    return out


def occurrences() -> set[tuple[str, str]]:
    names = registry.names()
    found = set()
    for path in _files():
        text = "\n".join(_code_text(path))
        for name in names:
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text):
                found.add((name, path.relative_to(ROOT).as_posix()))
    return found


def _own(name: str) -> set[str]:
    return {f"src/dpcl/learners/{registry.get(name).module}.py", "src/dpcl/learners/registry.py"}


def test_a_learner_is_named_only_in_its_own_module():
    stray = sorted((n, f) for n, f in occurrences() if f not in _own(n) and (n, f) not in ALLOWED)
    assert not stray, "learner names in code outside their own module (dispatch through the registry): " + (
        ", ".join(f"{n!r} in {f}" for n, f in stray)
    )


def test_allow_list_only_shrinks():
    stale = sorted(set(ALLOWED) - occurrences())
    assert not stale, f"no longer named there, remove from ALLOWED: {stale}"


def test_the_check_sees_code_and_skips_prose(tmp_path):
    f = tmp_path / "m.py"
    f.write_text(
        '"""Module docstring naming cosine."""\n'
        "# a comment naming cosine\n"
        "def g():\n"
        '    """naming cosine"""\n'
        '    return f"runs/{x}/cosine_sums", "eps/cosine/x", cosine\n'
    )
    parts = _code_text(f)
    assert "cosine" in parts and not any("naming" in p for p in parts)
    joined = "\n".join(parts)
    assert (
        len(re.findall(r"(?<![A-Za-z0-9_])cosine(?![A-Za-z0-9_])", joined)) == 2
    )  # "eps/cosine/x" and the name
