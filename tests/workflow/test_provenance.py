"""A rule reruns when the library code its script reaches changes (and only
then), and outputs record what produced them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import dpcl.provenance as prov

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of src/dpcl and the workflow scripts that code_hash reads instead of the real ones."""
    pkg = tmp_path / "dpcl"
    shutil.copytree(REPO / "src" / "dpcl", pkg, ignore=shutil.ignore_patterns("__pycache__", "resources"))
    shutil.copytree(REPO / "workflow" / "scripts", tmp_path / "scripts")
    monkeypatch.setattr(prov, "PACKAGE_DIR", pkg)
    prov.code_hash.cache_clear()
    prov._imports.cache_clear()
    yield tmp_path
    prov.code_hash.cache_clear()
    prov._imports.cache_clear()


def _hashes(tree: Path) -> dict[str, str]:
    prov.code_hash.cache_clear()
    return {
        s: prov.code_hash(tree / "scripts" / f"{s}.py")
        for s in ("features", "heads", "paper_tables", "report")
    }


def _edit(path: Path) -> None:
    path.write_text(path.read_text() + "\n# an edit\n")


def test_a_library_edit_changes_exactly_the_steps_that_reach_it(tree):
    before = _hashes(tree)
    closure = {
        p.relative_to(tree / "dpcl").as_posix() for p in prov.module_closure(tree / "scripts" / "features.py")
    }
    assert {
        "features.py",
        "backbones.py",
        "stages/features.py",
        "stages/data.py",
        "data/manifest.py",
    } <= closure
    assert not closure & {
        "report/html.py",
        "privacy/ledger.py",
        "stages/common.py",
    }  # feature caching never reads them
    _edit(tree / "dpcl" / "report" / "paper_tables.py")  # the tables only
    after = _hashes(tree)
    assert [s for s in before if before[s] != after[s]] == ["paper_tables"]
    _edit(tree / "dpcl" / "features.py")  # read by every step that loads a feature cache
    again = _hashes(tree)
    assert {"features", "heads"} <= {s for s in after if after[s] != again[s]}
    _edit(tree / "scripts" / "heads.py")  # the script itself counts too
    assert _hashes(tree)["heads"] != again["heads"]


def test_every_rule_with_a_script_gets_the_hash_as_a_parameter():
    text = (REPO / "Snakefile").read_text()
    assert "_rule.set_params(dpcl_code=code_hash(" in text and "for _rule in workflow.rules:" in text


def test_provenance_names_the_code_and_the_packages():
    p = prov.provenance()
    assert p["dpcl"] and len(p["library_sha256"]) == 16
    assert set(p["packages"]) >= {"numpy", "torch", "timm", "opacus", "optuna"} and p["packages"]["numpy"]
