"""The reports' names of label methods, ε tags and learners (dpcl.report.names) and the one table
model's renderers (dpcl.report.table)."""

from __future__ import annotations

import re
from importlib import resources

import pytest
import yaml

from dpcl.report.names import (
    canonical_method,
    eps_key,
    eps_name,
    label_method_name,
    learner_name,
    public_multiplier,
    release_fraction,
)
from dpcl.report.table import Cell, Table, blank_repeats, fmt_order, to_latex, to_markdown

#: every form the config schema allows, with its display name
FORMS = {
    "oracle": "Label Oracle (Baseline)",
    "base": "Base Dataset (Baseline)",
    "public-x10": "Public Labels (10x)",
    "public-x1000": "Public Labels (1000x)",
    "public-x1000-grow": "Public Labels (1000x, growing)",
    "public-x10-c50": "Public Labels (10x, 50 % public)",  # drop with coverage < 100
    "public-x10-c50-grow": "Public Labels (10x, 50 % public, growing)",
    "public-x10-c50-unknown": "Public Labels (10x, 50 % public, others → unknown)",
    "public-x1-c0-parent": "Public Labels (1x, 0 % public, others → parent)",
    "public-x2-c5-grow-unknown": "Public Labels (2x, 5 % public, growing, others → unknown)",
    "release-f0.1": "Release Labels (10 %)",
    "release-f.25": "Release Labels (25 %)",
    "release-laplace-f0.05": "Release Labels, Laplace (5 %)",
}


def _schema_pattern() -> re.Pattern:
    text = resources.files("dpcl.resources").joinpath("config.schema.yaml").read_text()
    schema = yaml.safe_load(text)
    return re.compile(schema["properties"]["label_methods"]["items"]["pattern"])


@pytest.mark.parametrize("tag", sorted(FORMS))
def test_every_schema_valid_label_method_has_a_display_name(tag):
    assert _schema_pattern().match(tag), f"{tag} is not schema-valid"
    assert label_method_name(tag) == FORMS[tag]


def test_suffixes_are_not_glued_to_the_multiplier():
    """The old display sliced the tag: public-x1000-grow read "Public Labels (1000-growx)"."""
    assert "growx" not in label_method_name("public-x1000-grow")
    assert label_method_name("not-a-method") == "not-a-method"


def test_fraction_multiplier_canonical():
    assert release_fraction("release-f0.10") == pytest.approx(0.1)
    assert release_fraction("release-laplace-f0.1") is None
    assert release_fraction("release-laplace-f0.1", mechanism=None) == pytest.approx(0.1)
    assert public_multiplier("public-x100") == 100
    assert public_multiplier("public-x100-grow") is None
    assert public_multiplier("public-x100-grow", plain=False) == 100
    assert canonical_method("release-f0.10") == "release-f0.1"
    assert canonical_method("public-x010") == "public-x10"
    assert canonical_method("release-laplace-f0.10") == "release-laplace-f0.10"
    assert canonical_method("public-x10-grow") == "public-x10-grow"


def test_eps_tags():
    assert sorted(["inf", "8", "0.5", "1"], key=eps_key) == ["0.5", "1", "8", "inf"]
    assert eps_name("inf") == "non-DP" and eps_name("8") == "8"


def test_learner_names_come_from_the_registry():
    from dpcl.learners import registry

    for name in registry.names():
        assert learner_name(name) == registry.get(name).display
    assert learner_name("naive") == "naive"  # a reference-only name stays as it is


def test_table_renderers():
    t = Table(
        "T: x",
        ["a", "b", "v"],
        [["1", "p", Cell({"lo": 1, "median": 2, "hi": 3}, lambda s: fmt_order(s, 1))], ["1", "q", Cell()]],
        ["n1", "n2"],
        align=["l", "l", "r"],
        n_labels=2,
    )
    t.rows = [[*lab, r[2]] for r, lab in zip(t.rows, blank_repeats([r[:2] for r in t.rows]), strict=True)]
    md = to_markdown(t)
    assert md == (
        "### T: x\n\n| a | b | v |\n|---|---|--:|\n| 1 | p | (1.0), 2.0, (3.0) |\n|  | q | – |\n\n- n1\n\n- n2\n"
    )
    tex = to_latex(t)
    assert r"\begin{tabular}{llr}" in tex and r"(1.0), 2.0, (3.0) \\" in tex and r"n1\par" in tex
    assert to_markdown(Table("E", ["a"], empty="(no rows)")) == "### E\n\n(no rows)\n"
