"""The transcribed published numbers (config/paper_reference) against cells copied verbatim
from the papers, plus structural checks of the tidy tables and the loader's validation."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from dpcl.report.reference import (
    KEY,
    REFERENCE_DIR,
    TABLES,
    ReferenceFormatError,
    load_reference,
    lookup,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ref() -> pd.DataFrame:
    return load_reference()


# (keys, cell string copied verbatim from the paper text). [LabelSpace] Tables A3-A7 print
# "(2nd worst), median, (2nd best)"; A8-A10 "mean $\pm$ std" (or a bare mean); [Tobaben2024]'s
# F.1/F.2 lost the ± sign in the text extraction: "mean std".
# fmt: off
VERBATIM = [
    # [LabelSpace] Table A3 (line 1172 ff.)
    (dict(table="A3", dataset="cifar100", epsilon="1", learner="cosine", label_method="oracle"), "(78.3), 78.4, (78.5)"),
    (dict(table="A3", dataset="imagenet_r", epsilon="8", learner="peft_film", label_method="release-tuned"), "(61.5), 64.0, (65.4)"),
    (dict(table="A3", dataset="cifar100", epsilon="8", learner="peft_film", label_method="public-x1000"), "(84.9), 85.7, (85.7)"),
    # Table A4
    (dict(table="A4", dataset="cifar100", epsilon="1", learner="cosine", label_method="release-f0.025"), "(69.5), 71.9, (73.1)"),
    (dict(table="A4", dataset="imagenet_r", epsilon="8", learner="peft_film", label_method="release-f0.5"), "(57.0), 59.8, (60.1)"),
    (dict(table="A4", dataset="imagenet_r", epsilon="8", learner="cosine", label_method="release-f0.0599"), "(55.8), 55.8, (55.8)"),
    # Table A5 (number of released labels)
    (dict(table="A5", dataset="cifar100", epsilon="1", label_method="release-f0.025"), "(87), 90, (93)"),
    (dict(table="A5", dataset="imagenet_r", epsilon="8", label_method="release-f0.0359"), "(194), 194, (194)"),
    # Table A6
    (dict(table="A6", dataset="imagenet_r", epsilon="1", learner="peft_film", label_method="public-x1000"), "(27.4), 27.8, (35.4)"),
    (dict(table="A6", dataset="cifar100", epsilon="8", learner="peft_film", label_method="public-x10"), "(85.3), 85.4, (85.6)"),
    # Table A7 (i-Blurry, blurry sample ratio M)
    (dict(table="A7", epsilon="1", learner="cosine", label_method="release-tuned", setting="iblurry-m75"), "(49.2), 49.9, (50.3)"),
    (dict(table="A7", epsilon="8", learner="peft_film", label_method="base", setting="iblurry-m100"), "(86.0), 86.9, (87.1)"),
    (dict(table="A7", epsilon="1", learner="peft_film", label_method="public-x1000", setting="iblurry-m50"), "(48.9), 75.4, (77.1)"),
    # Table A8 (Split-CIFAR-100, AA / AF)
    (dict(table="A8", epsilon="8", learner="peft_film", metric="aa"), "85.26 $\\pm$ 0.633"),
    (dict(table="A8", epsilon="inf", learner="noncl_head", metric="aa"), "88.4"),
    (dict(table="A8", epsilon="1", learner="naive", metric="af"), "94.10 $\\pm$ 0.00"),
    # Table A9 (Split-ImageNet-R)
    (dict(table="A9", epsilon="inf", learner="peft_head", metric="aa"), "$48.16 \\pm 12.80$"),
    (dict(table="A9", epsilon="8", learner="noncl_film", metric="aa"), "73.77"),
    (dict(table="A9", epsilon="8", learner="naive", metric="af"), "$66.92 \\pm 1.94$"),
    # Table A10 (5-datasets)
    (dict(table="A10", epsilon="inf", learner="peft_film", metric="af"), "14.00 $\\pm$ 11.00"),
    (dict(table="A10", epsilon="1", learner="cosine", metric="aa"), "58.54 $\\pm$ 0.35"),
    # [Tobaben2024] App. F.1 (label space) and F.2 (blurry tasks)
    (dict(table="F1", dataset="imagenet_r", epsilon="1", learner="cosine", label_method="public-x100"), "11.66 0.88"),
    (dict(table="F1", dataset="cifar100", epsilon="1", learner="peft_film", label_method="oracle"), "77.92 3.32"),
    (dict(table="F2", epsilon="inf", learner="peft_film", setting="siblurry"), "52.74 26.11"),
    (dict(table="F2", epsilon="1", learner="cosine", setting="disjoint"), "76.16 0.33"),
]
# fmt: on

_TRIPLE = re.compile(r"^\(([\d.]+)\), ([\d.]+), \(([\d.]+)\)$")
_PM = re.compile(r"^\$?([\d.]+) (?:\$\\pm\$ |\\pm |)([\d.]+)\$?$")


def _expected(cell: str) -> dict[str, float]:
    if m := _TRIPLE.match(cell):
        return dict(zip(["fourth_best", "median", "second_best"], map(float, m.groups()), strict=True))
    if m := _PM.match(cell):
        return {"mean": float(m.group(1)), "std": float(m.group(2))}
    return {"mean": float(cell)}


@pytest.mark.parametrize(
    ("keys", "cell"), VERBATIM, ids=[f"{k['table']}-{i}" for i, (k, _) in enumerate(VERBATIM)]
)
def test_cells_match_paper(ref, keys, cell):
    expected = _expected(cell)
    for stat, value in expected.items():
        assert lookup(ref, statistic=stat, **keys) == value, (keys, stat)
    # nothing beyond what the paper prints (e.g. no std for a bare mean)
    mask = pd.Series(True, index=ref.index)
    for col, val in keys.items():
        mask &= ref[col] == val
    assert sorted(ref.loc[mask, "statistic"]) == sorted(expected), keys


def test_every_table_spot_checked():
    assert {k["table"] for k, _ in VERBATIM} == set(TABLES)


ROW_COUNTS = {
    "A3": 6 * 4 * 3,  # (dataset, ε, learner) rows x 4 label methods x 3 statistics
    "A4": 4 * 7 * 3 - 3,  # one cell printed "-" (ImageNet-R, PEFT, 2.5 %)
    "A5": 2 * 7 * 3,
    "A6": 8 * 4 * 3,
    "A7": 12 * 5 * 3,
    "A8": 46,  # 6 methods x 3 ε x (AA, AF) x (mean, std), less "-" cells and bare means
    "A9": 57,
    "A10": 3 * 3 * 2 * 2,
    "F1": 8 * 5 * 2,
    "F2": 6 * 3 * 2,
}


def test_tables_and_row_counts(ref):
    assert list(ref["table"].unique()) == list(TABLES)
    assert ref.groupby("table", sort=False).size().to_dict() == ROW_COUNTS
    assert len(ref) == sum(ROW_COUNTS.values()) == 726
    assert set(ref.groupby("table")["source"].unique().map(tuple)) == {("000",), ("003",)}
    assert (ref.loc[ref["source"] == "003", "table"].unique() == ["F1", "F2"]).all()


def test_keys_unique_and_columns(ref):
    assert list(ref.columns) == KEY + ["value"]
    assert not ref.duplicated(KEY).any()
    assert ref["value"].dtype == float and (ref["value"] >= 0).all()


def test_median_between_second_worst_and_second_best(ref):
    tri = ref[ref["statistic"].isin(["fourth_best", "median", "second_best"])]
    keys = [c for c in KEY if c != "statistic"]
    wide = tri.pivot_table(index=keys, columns="statistic", values="value")
    assert not wide.isna().any().any()  # every cell has all three numbers
    assert (wide["fourth_best"] <= wide["median"]).all()
    assert (wide["median"] <= wide["second_best"]).all()
    assert set(tri["table"]) == {"A3", "A4", "A5", "A6", "A7"}


def test_std_has_a_mean(ref):
    keys = [c for c in KEY if c != "statistic"]
    means = set(map(tuple, ref.loc[ref["statistic"] == "mean", keys].to_numpy()))
    stds = set(map(tuple, ref.loc[ref["statistic"] == "std", keys].to_numpy()))
    assert stds <= means
    bare = {k for k in means - stds}  # published without ± : the Non CL baselines
    assert {k[4] for k in bare} == {"noncl_film", "noncl_head"}


def test_missing_cells_omitted(ref):
    with pytest.raises(KeyError, match="no published number"):
        lookup(
            ref,
            table="A4",
            dataset="imagenet_r",
            learner="peft_film",
            label_method="release-f0.025",
            statistic="median",
        )
    with pytest.raises(KeyError, match="no published number"):
        lookup(ref, table="A8", learner="naive", epsilon=8, metric="af", statistic="mean")
    assert lookup(ref, table="A8", learner="naive", epsilon=8, metric="aa", statistic="mean") == 9.55


def test_a3_public_and_baselines_agree_with_a6(ref):
    """Table A3's 'Public Labels (Ours)' is Table A6's 1000x column (paper Fig. 4 caption)."""
    keys = ["dataset", "epsilon", "learner", "label_method", "statistic"]
    a3 = ref[ref["table"] == "A3"].set_index(keys)["value"]
    a6 = ref[ref["table"] == "A6"].set_index(keys)["value"]
    shared = a3.index.intersection(a6.index)
    assert len(shared) == 6 * 3 * 3  # 6 rows x (oracle, base, public-x1000) x 3 statistics
    pd.testing.assert_series_equal(a3.loc[shared], a6.loc[shared])


def test_a5_counts_are_integers_and_bounded(ref):
    a5 = ref[ref["table"] == "A5"]
    assert (a5["value"] == a5["value"].round()).all()
    assert a5.loc[a5["dataset"] == "cifar100", "value"].max() == 100
    assert a5.loc[a5["dataset"] == "imagenet_r", "value"].max() == 200
    assert set(a5["learner"]) == {"both"} and set(a5["metric"]) == {"n_labels"}


def test_lookup_normalises_epsilon_and_rejects_ambiguity(ref):
    keys = dict(table="A10", learner="cosine", metric="aa", statistic="mean")
    assert lookup(ref, epsilon=float("inf"), **keys) == lookup(ref, epsilon="inf", **keys) == 59.87
    assert lookup(ref, epsilon=8.0, **keys) == 59.78
    with pytest.raises(KeyError, match="narrow down"):
        lookup(ref, table="A3", learner="cosine")
    with pytest.raises(KeyError, match="unknown column"):
        lookup(ref, classifier="cosine")


def test_config_link_points_at_package_data():
    link = REPO / "config" / "paper_reference"
    if not link.exists():
        pytest.skip("no repository checkout around the package")
    assert link.resolve() == REFERENCE_DIR.resolve()
    assert len(load_reference(link)) == 726


def _write(tmp_path: Path, text: str, name: str = "table_A3.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


HEADER = "source,table,dataset,epsilon,learner,label_method,setting,metric,statistic,value\n"
GOOD = "000,A3,cifar100,1,cosine,oracle,disjoint,aa,median,78.4\n"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (HEADER.replace("learner", "classifier") + GOOD, "columns are"),
        (
            HEADER + GOOD.replace("cosine", "cosine_classifier"),
            "'learner' has invalid value 'cosine_classifier'",
        ),
        (HEADER + GOOD.replace("oracle", "release-f10"), "'label_method'"),
        (HEADER + GOOD.replace("78.4", "78.4x"), "'value'"),
        (HEADER + GOOD.replace(",1,", ",1.0,"), "'epsilon'"),
        (HEADER + GOOD.replace(",disjoint,", ",,"), "empty cell in column 'setting'"),
        (HEADER + GOOD.replace("000,", "003,"), "comes from paper"),
        (HEADER + GOOD + GOOD, "duplicate key"),
        (HEADER + GOOD.replace(",A3,", ",A6,"), "expected only 'A3'"),
    ],
)
def test_malformed_files_rejected(tmp_path, text, match):
    path = _write(tmp_path, text)
    with pytest.raises(ReferenceFormatError, match=match):
        load_reference(path)
    with pytest.raises(ReferenceFormatError, match=match):
        load_reference(tmp_path)  # the directory form reports the same problem


def test_minimal_file_loads(tmp_path):
    df = load_reference(_write(tmp_path, HEADER + GOOD))
    assert lookup(df, learner="cosine") == 78.4
    with pytest.raises(FileNotFoundError):
        load_reference(tmp_path / "missing")
