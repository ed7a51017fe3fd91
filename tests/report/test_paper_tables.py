"""Tables A3-A10 in the paper's layout beside the published numbers (dpcl.report.paper_tables)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from dpcl.io import write_json
from dpcl.report.paper_tables import (
    TABLE_IDS,
    TIDY_COLUMNS,
    build_paper_tables,
    canonical_method,
    cell_texts,
    to_latex,
    to_markdown,
    to_tidy,
)
from dpcl.stages.paper_tables import build_paper_tables as stage_build

SEEDS = range(5)
ACC = [0.70, 0.72, 0.74, 0.76, 0.78]  # per seed: (2nd worst, median, 2nd best) = (72, 74, 76) %, mean 74
STD = math.sqrt(
    np.sum((np.array(ACC) * 100 - 74) ** 2) / (len(ACC) - 1)
)  # sample std (ddof = 1): √10, as published

BENCHMARKS = {
    "split_cifar100": {"dataset": "cifar100", "backbone": "vit_b16", "scenario": "disjoint", "n_tasks": 10},
    "split_fmnist": {
        "dataset": "fashion_mnist",
        "backbone": "effnet_lite0",
        "scenario": "disjoint",
        "n_tasks": 5,
    },
}


def _record(learner, eps, method, seed, acc, forgetting=0.05, released=(10,) * 10):
    return {
        "learner": learner,
        "epsilon": eps,
        "label_method": method,
        "delta": 1e-5,
        "seed": seed,
        "final_accuracy": acc,
        "final_forgetting": forgetting,
        "released_labels": list(released),
    }


def _records(n_tasks=10, offset=0.0):
    """5 seeds of cosine, peft_head, naive_head, noncl_head at ε 1, 8 over five label methods."""
    recs = []
    for s in SEEDS:
        for eps in ("1", "8"):
            for method, shift in (
                ("oracle", 0),
                ("base", 0),
                ("public-x1000", 0),
                ("release-f0.1", 0.01),
                ("release-f0.5", -0.02),
            ):
                released = [8 + s] + [10] * (n_tasks - 1) if method.startswith("release") else [10] * n_tasks
                for learner in ("cosine", "peft_head", "naive_head"):
                    recs.append(_record(learner, eps, method, s, ACC[s] + shift + offset, released=released))
                recs.append(_record("noncl_head", eps, method, s, ACC[s] + offset, math.nan, [10 * n_tasks]))
    return recs


@pytest.fixture(scope="module")
def tables():
    recs = {"split_cifar100": _records(), "split_fmnist": _records(5, offset=0.1)}
    return {t.table: t for t in build_paper_tables(recs, BENCHMARKS)}


def _tidy(t, **keys):
    df = to_tidy(t)
    for k, v in keys.items():
        df = df[df[k] == v]
    return df.set_index("statistic")


def test_every_table_is_built_in_order(tables):
    assert list(tables) == list(TABLE_IDS)
    for t in tables.values():
        assert len(t.cells) == len(t.rows)
        assert all(len(row) == len(t.cols) for row in t.cells)
        assert list(to_tidy(t).columns) == TIDY_COLUMNS
        assert len(to_tidy(t)) == len(t.rows) * len(t.cols) * len(t.stats)


def test_a3_layout_rows_columns_and_known_cells(tables):
    t = tables["A3"]
    assert [c[0] for c in t.cols] == [
        "Label Oracle (Baseline)",
        "Base Dataset (Baseline)",
        "Public Labels (Ours)",
        "Release Labels (Ours)",
    ]
    # CIFAR-100: ours (cosine, head-only) + the paper's FiLM rows; Fashion-MNIST: ours only
    assert t.rows == [
        ("CIFAR-100 (split_cifar100)", "1", "Cosine Classifier"),
        ("CIFAR-100 (split_cifar100)", "1", "PEFT Ensemble (FiLM)"),
        ("CIFAR-100 (split_cifar100)", "1", "PEFT Ensemble (head-only)"),
        ("CIFAR-100 (split_cifar100)", "8", "Cosine Classifier"),
        ("CIFAR-100 (split_cifar100)", "8", "PEFT Ensemble (FiLM)"),
        ("CIFAR-100 (split_cifar100)", "8", "PEFT Ensemble (head-only)"),
        ("Fashion-MNIST (split_fmnist)", "1", "Cosine Classifier"),
        ("Fashion-MNIST (split_fmnist)", "1", "PEFT Ensemble (head-only)"),
        ("Fashion-MNIST (split_fmnist)", "8", "Cosine Classifier"),
        ("Fashion-MNIST (split_fmnist)", "8", "PEFT Ensemble (head-only)"),
    ]
    cell = _tidy(t, benchmark="split_cifar100", epsilon="1", learner="cosine", label_method="oracle")
    assert cell.loc[["fourth_best", "median", "second_best"], "ours"].tolist() == pytest.approx([72, 74, 76])
    assert cell.loc[["fourth_best", "median", "second_best"], "published"].tolist() == [78.3, 78.4, 78.5]
    assert cell.loc["median", "diff"] == pytest.approx(74 - 78.4)
    assert cell_texts(t, t.cells[0][0]) == ("(72.0), 74.0, (76.0)", "(78.3), 78.4, (78.5)", "-4.4")
    # Base Dataset at ε = 8: published (78.8), 78.9, (78.9)
    assert (
        _tidy(t, benchmark="split_cifar100", epsilon="8", learner="cosine", label_method="base").loc[
            "median", "published"
        ]
        == 78.9
    )
    # the paper's FiLM row without our run: published number, ours and Δ "–"
    assert cell_texts(t, t.cells[1][0]) == ("–", "(78.5), 79.0, (80.0)", "–")
    # head-only has no published counterpart, nor has Fashion-MNIST
    assert cell_texts(t, t.cells[2][0])[1:] == ("–", "–")
    assert cell_texts(t, t.cells[6][1]) == ("(82.0), 84.0, (86.0)", "–", "–")
    fm = _tidy(t, benchmark="split_fmnist")
    assert fm["published"].isna().all() and fm["diff"].isna().all() and fm["ours"].notna().all()


def test_a3_release_labels_take_the_best_fraction(tables):
    t = tables["A3"]
    cell = t.cells[0][3]  # CIFAR-100, ε = 1, Cosine, Release Labels (Ours)
    assert cell.key["label_method"] == "release-tuned" and cell.our_label_method == "release-f0.1"
    assert cell.ours["median"] == pytest.approx(75.0)  # release-f0.1 runs 1 point above, f0.5 2 below
    assert cell.published == {"fourth_best": 78.4, "median": 78.4, "second_best": 78.4}
    assert cell_texts(t, cell) == ("(73.0), 75.0, (77.0) [10%]", "(78.4), 78.4, (78.4)", "-3.4")
    assert any("best of our release-fF runs" in n for n in t.notes)


def test_a4_budget_columns_keep_the_papers_and_ours(tables):
    t = tables["A4"]
    names = [c[0] for c in t.cols]
    # the paper's seven fractions have published numbers on CIFAR-100, so all stay; 0.1 and 0.5 also ours
    assert names == [
        "Budget: 2.5%",
        "Budget: 3.59%",
        "Budget: 5.99%",
        "Budget: 10%",
        "Budget: 20%",
        "Budget: 30%",
        "Budget: 50%",
    ]
    c = _tidy(t, benchmark="split_cifar100", epsilon="1", learner="cosine", label_method="release-f0.5")
    assert c.loc["median", "ours"] == pytest.approx(72.0) and c.loc["median", "published"] == 76.7
    c = _tidy(t, benchmark="split_cifar100", epsilon="1", learner="cosine", label_method="release-f0.025")
    assert math.isnan(c.loc["median", "ours"]) and c.loc["median", "published"] == 71.9
    assert any("'Budget: 2.5%': no runs; add release-f0.025" in n for n in t.notes)


def test_columns_without_any_number_are_dropped():
    """Fashion-MNIST alone: only the fractions we ran remain (no published numbers fill the others)."""
    only = {"split_fmnist": BENCHMARKS["split_fmnist"]}
    t = {t.table: t for t in build_paper_tables({"split_fmnist": _records(5)}, only)}
    assert [c[0] for c in t["A4"].cols] == ["Budget: 10%", "Budget: 50%"]
    assert [c[0] for c in t["A5"].cols] == ["Budget: 10%", "Budget: 50%"]
    assert [c[0] for c in t["A6"].cols] == [
        "Label Oracle (Baseline)",
        "Base Dataset (Baseline)",
        "Public Labels (1000×)",
    ]
    assert len(t["A3"].cols) == 4  # the published layout, always
    assert not any("no runs" in n for n in t["A4"].notes)
    assert to_tidy(t["A4"])["published"].isna().all()
    assert [c[0] for c in t["A8"].cols] == ["ε = 1", "ε = 1", "ε = 8", "ε = 8"]  # no non-DP runs, no paper


def test_a5_counts_released_labels_over_tasks(tables):
    t = tables["A5"]
    assert t.row_header == ["Benchmark", "ε"] and len(t.rows) == 4  # 2 benchmarks × ε 1, 8
    c = _tidy(t, benchmark="split_cifar100", epsilon="1", label_method="release-f0.1")
    # per seed Σ_t |O_t| = (8 + s) + 9 × 10 -> 98 ... 102
    assert c.loc[["fourth_best", "median", "second_best"], "ours"].tolist() == [99, 100, 101]
    assert c.loc["median", "published"] == 100 and c.loc["median", "diff"] == 0
    assert set(to_tidy(t)["learner"]) == {"both"} and set(to_tidy(t)["metric"]) == {"n_labels"}
    assert (
        _tidy(t, benchmark="split_cifar100", epsilon="1", label_method="release-f0.025").loc[
            "median", "published"
        ]
        == 90
    )
    fm = _tidy(t, benchmark="split_fmnist", epsilon="8", label_method="release-f0.1")
    assert fm.loc["median", "ours"] == 50 and math.isnan(fm.loc["median", "published"])


def test_a6_public_label_columns(tables):
    t = tables["A6"]
    assert [c[0] for c in t.cols] == [
        "Label Oracle (Baseline)",
        "Base Dataset (Baseline)",
        "Public Labels (10×)",
        "Public Labels (1000×)",
    ]
    c = _tidy(t, benchmark="split_cifar100", epsilon="8", learner="cosine", label_method="public-x10")
    assert math.isnan(c.loc["median", "ours"]) and c.loc["median", "published"] == 78.9
    assert any("'Public Labels (10×)': no runs; add public-x10" in n for n in t.notes)


def test_a8_mean_std_with_published_and_diff(tables):
    t = tables["A8"]
    assert t.col_levels == 2 and len(t.cols) == 6  # (ε 1, 8, non-DP) × (AA, AF)
    assert t.cols[0] == ("ε = 1", "AA (↑)") and t.cols[-1] == ("non-DP", "AF (↓)")
    cif = [r[1] for r in t.rows if r[0].startswith("CIFAR")]
    assert cif == [
        "Naive (head-only)",
        "Cosine Classifier",
        "PEFT Ensemble (FiLM)",
        "Non-CL (FiLM)",
        "PEFT Ensemble (head-only)",
        "Non-CL (head-only)",
    ]
    c = _tidy(t, benchmark="split_cifar100", epsilon="1", learner="cosine", metric="aa")
    assert c.loc["mean", "ours"] == pytest.approx(74.0) and c.loc["std", "ours"] == pytest.approx(STD)
    assert c.loc["mean", "published"] == 72.78 and c.loc["mean", "diff"] == pytest.approx(74 - 72.78)
    i = t.rows.index(("CIFAR-100 (split_cifar100)", "Cosine Classifier"))
    assert cell_texts(t, t.cells[i][0]) == ("74.00 ± 3.16", "72.78 ± 0.51", "+1.22")  # √10: ddof = 1
    assert cell_texts(t, t.cells[i][1]) == ("5.00 ± 0.00", "9.92 ± 0.51", "-4.92")
    # Naive (head-only) is compared with the paper's Naive; Non-CL has a bare published mean, no AF
    naive = _tidy(t, benchmark="split_cifar100", epsilon="1", learner="naive_head", metric="aa")
    assert naive.loc["mean", "published"] == 9.35
    j = t.rows.index(("CIFAR-100 (split_cifar100)", "Non-CL (head-only)"))
    assert cell_texts(t, t.cells[j][0]) == ("74.00 ± 3.16", "85.10", "-11.10")
    assert cell_texts(t, t.cells[j][1]) == ("–", "–", "–")  # no forgetting without tasks
    # non-DP was not run: ours "–", the paper's number stays
    assert cell_texts(t, t.cells[i][4]) == ("–", "79.02 ± 0.00", "–")
    assert any("add inf to the config key 'epsilons'" in n for n in t.notes)
    assert any("add peft_film, noncl_film to the config key 'learners'" in n for n in t.notes)
    fm = _tidy(t, benchmark="split_fmnist")
    assert fm["published"].isna().all() and fm.loc["mean", "ours"].notna().any()


@pytest.mark.parametrize(
    "tid,key", [("A7", "'benchmarks'"), ("A9", "split_imagenet_r"), ("A10", "five_datasets")]
)
def test_tables_without_runs_say_which_config_keys_fill_them(tables, tid, key):
    t = tables[tid]
    assert t.rows == [] and to_tidy(t).empty
    md = to_markdown(t)
    assert "(no rows)" in md and key in md and "config key 'benchmarks'" in md
    assert "(no rows)" in to_latex(t)


def test_a7_blurry_ratio_columns():
    bm = {
        f"ib_m{m}": {
            "dataset": "cifar100",
            "backbone": "vit_b16",
            "scenario": "iblurry",
            "disjoint_pct": 50,
            "blurry_pct": m,
            "n_tasks": 10,
        }
        for m in (10, 50)
    }
    bm["si"] = {
        "dataset": "cifar100",
        "backbone": "vit_b16",
        "scenario": "siblurry",
        "disjoint_pct": 50,
        "blurry_pct": 10,
        "n_tasks": 10,
    }
    recs = {"ib_m10": _records(), "ib_m50": [r for r in _records() if r["learner"] == "cosine"]}
    t = {t.table: t for t in build_paper_tables(recs, bm)}["A7"]
    assert t.cols == [("M = 10",), ("M = 50",)]
    assert t.row_header == ["Data set", "ε", "Classifier", "Label method"]
    # (ε 1, 8) × (cosine, peft_film from the paper, peft_head) × 3 label methods
    assert len(t.rows) == 2 * 3 * 3
    assert t.rows[0] == ("CIFAR-100, N = 50", "1", "Cosine Classifier", "Base Dataset (Baseline)")
    assert cell_texts(t, t.cells[0][0]) == ("(72.0), 74.0, (76.0)", "(72.2), 72.7, (73.1)", "+1.3")
    assert cell_texts(t, t.cells[0][1])[1] == "(72.4), 73.0, (73.4)"
    tuned = t.cells[2][1]  # ε 1, cosine, Release Labels (Ours), M = 50
    assert tuned.our_label_method == "release-f0.1" and tuned.published["median"] == 71.8
    head = t.rows.index(("CIFAR-100, N = 50", "1", "PEFT Ensemble (head-only)", "Base Dataset (Baseline)"))
    assert cell_texts(t, t.cells[head][1]) == ("–", "–", "–")  # not run at M = 50, no published head-only
    assert any("si" in n and "Si-Blurry" in n for n in t.notes)
    _check_latex(t)


def _latex_rows(tex: str) -> list[str]:
    body = tex.split(r"\toprule", 1)[1].split(r"\bottomrule", 1)[0]
    return [ln for ln in body.splitlines() if ln.rstrip().endswith(r"\\")]


def test_latex_is_balanced_and_rows_have_every_column(tables):
    for t in tables.values():
        _check_latex(t)


def _check_latex(t):
    """Compiles-ish: balanced braces and environments, every row spans every column, ASCII only."""
    tex = to_latex(t)
    assert tex.count("{") == tex.count("}"), t.table
    assert tex.count(r"\begin{") == tex.count(r"\end{")
    n_cols = len(re.search(r"\\begin\{tabular\}\{([lr]+)\}", tex).group(1))
    assert n_cols == len(t.row_header) + 3 * len(t.cols)
    for line in _latex_rows(tex):
        spans = [int(s) for s in re.findall(r"\\multicolumn\{(\d+)\}", line)]
        amps = len(re.findall(r"(?<!\\)&", line))
        assert amps + 1 - len(spans) + sum(spans) == n_cols, (t.table, line)
    assert "_" not in tex.replace(r"\_", ""), t.table  # every _ escaped
    assert tex.isascii(), (
        t.table,
        sorted({ch for ch in tex if not ch.isascii()}),
    )  # symbols as LaTeX math
    assert "\n\n" not in tex.split(r"\begin{tabular}")[1].split(r"\end{tabular}")[0]  # no blank line inside


def test_markdown_rows_have_every_column(tables):
    for t in tables.values():
        lines = [ln for ln in to_markdown(t).splitlines() if ln.startswith("|")]
        if t.rows:
            assert len(lines) == 2 + len(t.rows)
            widths = {ln.count("|") for ln in lines}
            assert widths == {len(t.row_header) + 3 * len(t.cols) + 1}
    md = to_markdown(tables["A3"])
    assert (
        "| CIFAR-100 (split_cifar100) | 1 | Cosine Classifier | (72.0), 74.0, (76.0) | (78.3), 78.4, (78.5) | -4.4 |"
        in md
    )
    assert "|  |  | PEFT Ensemble (FiLM) | – | (78.5), 79.0, (80.0) | – |" in md  # repeated labels blank


def test_stage_reads_metrics_files_and_writes_every_format(tmp_path):
    paths = {}
    for name, bench, recs in (
        ("split_cifar100", "cifar100/vit_b16/disjoint-t10", _records()),
        ("split_fmnist", "fashion_mnist/effnet_lite0/disjoint-t5", _records(5)),
    ):
        paths[name] = []
        for r in recs:
            eps = r["epsilon"]
            p = (
                tmp_path
                / f"runs/{r['learner']}/{bench}/seed{r['seed']}/eps{eps}/{r['label_method']}/metrics.json"
            )
            write_json(
                p,
                {
                    **r,
                    "epsilon": float(eps),
                    "acc": [[r["final_accuracy"]]],
                    "average_accuracy": [r["final_accuracy"]],
                    "average_forgetting": [r["final_forgetting"]],
                },
            )
            paths[name].append(p)
    out = tmp_path / "tables" / "paper"
    written = stage_build(paths, BENCHMARKS, out)
    assert sorted(p.name for p in written) == sorted(
        f"table_{t}.{e}" for t in TABLE_IDS for e in ("csv", "md", "tex")
    )
    for p in written:
        assert p.stat().st_size > 0
    df = pd.read_csv(out / "table_A3.csv", dtype={"epsilon": str})
    assert list(df.columns) == TIDY_COLUMNS and len(df) == 10 * 4 * 3
    row = df[
        (df.benchmark == "split_cifar100")
        & (df.epsilon == "1")
        & (df.learner == "cosine")
        & (df.label_method == "oracle")
        & (df.statistic == "median")
    ].iloc[0]
    assert (row["ours"], row["published"], row["diff"]) == pytest.approx((74.0, 78.4, -4.4))
    assert pd.read_csv(out / "table_A9.csv").empty
    assert (
        "Table A10" in (out / "table_A10.md").read_text()
        and r"\toprule" in (out / "table_A10.tex").read_text()
    )


def test_unknown_benchmark_is_named():
    with pytest.raises(KeyError, match="split_x.*'benchmarks'"):
        build_paper_tables({"split_x": []}, BENCHMARKS)


def test_canonical_method_matches_the_reference_spelling():
    assert canonical_method("release-f0.10") == "release-f0.1"
    assert canonical_method("release-f0.0359") == "release-f0.0359"
    assert canonical_method("public-x1000") == "public-x1000"
    assert canonical_method("public-x1000-grow") == "public-x1000-grow"  # variants are their own columns
    assert canonical_method("release-laplace-f0.1") == "release-laplace-f0.1"


def test_a8_to_a10_report_the_sample_std_and_a9_notes_the_papers_three_seeds(tables):
    for tid in ("A8", "A9", "A10"):
        t = tables[tid]
        assert any("ddof = 1" in n for n in t.notes), tid
    assert any("three seeds" in n for n in tables["A9"].notes)
    from dpcl.report.paper_cells import _our_stats

    stats, n = _our_stats([70.0, 74.0, 78.0], "mean")
    assert n == 3 and stats["std"] == pytest.approx(4.0)  # ddof = 1: √((16 + 0 + 16) / 2)
    assert "std" not in _our_stats([70.0], "mean")[0]  # one seed: no spread to report


# --- [Tobaben2024] Tables F.1 and F.2 ------------------------------------------------------------


def _cell_of(t, *row):
    return t.cells[t.rows.index(tuple(row))]


def test_f1_mean_std_beside_paper_003(tables):
    t = tables["F1"]
    assert t.kind == "mean" and t.row_header == ["Benchmark", "ε", "Classifier"]
    assert [c[0] for c in t.cols] == [
        "Label Oracle (Baseline)",
        "Base Dataset (Baseline)",
        "Public Labels (10×)",
        "Public Labels (100×)",
        "Public Labels (1000×)",
    ]
    cif = _cell_of(t, "CIFAR-100 (split_cifar100)", "1", "Cosine Classifier")
    assert cell_texts(t, cif[0]) == ("74.00 ± 3.16", "78.38 ± 0.13", "-4.38")  # ours: mean ± std, ddof = 1
    assert cif[0].ours["std"] == pytest.approx(STD)
    assert cell_texts(t, cif[2]) == ("–", "72.38 ± 0.54", "–")  # public-x10 not run: the paper's number stays
    assert cell_texts(t, cif[4]) == ("74.00 ± 3.16", "72.78 ± 0.58", "+1.22")
    film = _cell_of(t, "CIFAR-100 (split_cifar100)", "8", "PEFT Ensemble (FiLM)")  # published only
    assert cell_texts(t, film[3]) == ("–", "85.32 ± 0.45", "–")
    fm = _cell_of(t, "Fashion-MNIST (split_fmnist)", "1", "PEFT Ensemble (head-only)")
    assert cell_texts(t, fm[1]) == ("84.00 ± 3.16", "–", "–")  # no published number for the data set
    assert ("Naive (head-only)" not in {r[2] for r in t.rows}) and ("8" in {r[1] for r in t.rows})
    notes = " ".join(t.notes)
    assert (
        "ddof = 1" in notes
        and "[Tobaben2024]" in notes
        and "add public-x10" in notes
        and "add public-x100" in notes
    )
    assert "add peft_film" in notes
    assert "([Tobaben2024])" in to_latex(t) and "([LabelSpace])" in to_latex(tables["A3"])


def test_f1_names_the_key_a_partly_filled_column_lacks():
    recs = [
        r for r in _records() if not (r["learner"] == "peft_head" and r["label_method"] == "public-x1000")
    ]
    t = {t.table: t for t in build_paper_tables({"split_cifar100": recs}, BENCHMARKS)}["F1"]
    assert any(
        "'Public Labels (1000×)': no runs of PEFT Ensemble (head-only) in some rows; add public-x1000 to "
        "the config key 'head_label_methods'" in n
        for n in t.notes
    )


F2_BENCHMARKS = {
    **BENCHMARKS,
    "ib_m10": {
        "dataset": "cifar100",
        "backbone": "vit_b16",
        "scenario": "iblurry",
        "disjoint_pct": 50,
        "blurry_pct": 10,
        "n_tasks": 10,
    },
    "ib_m50": {
        "dataset": "cifar100",
        "backbone": "vit_b16",
        "scenario": "iblurry",
        "disjoint_pct": 50,
        "blurry_pct": 50,
        "n_tasks": 10,
    },
    "si": {
        "dataset": "cifar100",
        "backbone": "vit_b16",
        "scenario": "siblurry",
        "disjoint_pct": 50,
        "blurry_pct": 10,
        "n_tasks": 10,
    },
}


def test_f2_not_blurry_iblurry_50_10_and_siblurry_beside_paper_003():
    recs = {
        "split_cifar100": _records(),
        "ib_m10": _records(offset=0.02),
        "ib_m50": _records(offset=-0.3),
        "split_fmnist": _records(5),
    }
    t = {t.table: t for t in build_paper_tables(recs, F2_BENCHMARKS)}["F2"]
    assert t.cols == [("Not Blurry",), ("I-Blurry",), ("Si-Blurry",)]
    # CIFAR-100 only (the data set with blurry benchmarks); ours at ε 1, 8, the paper's rows add non-DP
    assert {r[0] for r in t.rows} == {"CIFAR-100"}
    assert [r[1:] for r in t.rows] == [
        (e, lr)
        for e in ("1", "8")
        for lr in ("Cosine Classifier", "PEFT Ensemble (FiLM)", "PEFT Ensemble (head-only)")
    ] + [("non-DP", "Cosine Classifier"), ("non-DP", "PEFT Ensemble (FiLM)")]
    row = _cell_of(t, "CIFAR-100", "1", "Cosine Classifier")
    assert cell_texts(t, row[0]) == ("74.00 ± 3.16", "76.16 ± 0.33", "-2.16")  # base runs, ddof = 1
    assert cell_texts(t, row[1]) == ("76.00 ± 3.16", "75.96 ± 0.29", "+0.04")  # i-Blurry(50, 10), not M = 50
    assert cell_texts(t, row[2]) == ("–", "76.08 ± 0.47", "–")  # Si-Blurry configured, not run
    assert cell_texts(t, _cell_of(t, "CIFAR-100", "non-DP", "PEFT Ensemble (FiLM)")[2]) == (
        "–",
        "52.74 ± 26.11",
        "–",
    )
    tidy = _tidy(t, epsilon="1", learner="cosine", setting="iblurry")
    assert tidy.loc["mean", "benchmark"] == "ib_m10" and tidy.loc["mean", "our_label_method"] == "base"
    assert set(to_tidy(t)["label_method"]) == {"unspecified"}
    notes = " ".join(t.notes)
    assert "does not state F.2's label method" in notes and "Base Dataset (base)" in notes
    assert "i-Blurry-50-10" in notes and "states neither N nor M" in notes
    assert "Not Blurry = split_cifar100, I-Blurry = ib_m10, Si-Blurry = si (N = 50, M = 10)" in notes
    assert "no non-DP runs of split_cifar100, ib_m10" in notes and "ddof = 1" in notes
    _check_latex(t)


def test_f2_without_blurry_benchmarks_shows_the_disjoint_data_sets_and_says_what_to_add(tables):
    t = tables["F2"]  # split_cifar100 and split_fmnist, no blurry benchmark
    assert {r[0] for r in t.rows} == {"CIFAR-100", "Fashion-MNIST"}
    fm = _cell_of(t, "Fashion-MNIST", "8", "Cosine Classifier")
    assert cell_texts(t, fm[0]) == ("84.00 ± 3.16", "–", "–") and cell_texts(t, fm[1]) == ("–", "–", "–")
    notes = " ".join(t.notes)
    assert (
        "Fashion-MNIST: no I-Blurry benchmark; add one on the same data set, backbone and n_tasks "
        "(fashion_mnist / effnet_lite0, 5 tasks) with scenario 'iblurry', disjoint_pct 50, blurry_pct 10"
    ) in notes
    assert "Fashion-MNIST: no Si-Blurry benchmark" in notes and "scenario 'siblurry'" in notes
    none = {
        t.table: t
        for t in build_paper_tables(
            {}, {"five": {"dataset": "five_datasets", "backbone": "b", "scenario": "datasets", "n_tasks": 5}}
        )
    }
    for tid in ("F1", "F2"):
        assert none[tid].rows == [] and "config key 'benchmarks'" in to_markdown(none[tid])
    assert "iblurry_cifar100_m10" in to_markdown(none["F2"])
