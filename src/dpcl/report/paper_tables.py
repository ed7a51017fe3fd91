"""Paper 000's Tables A3-A10 and paper 003's Tables F.1, F.2 rebuilt from our runs, beside the
published numbers.
(One concept in one module: every paper table shares the cell layout, reference lookup and notes.)

Each table keeps the published layout (paper 000 App. E.2: A3-A7, "(2nd worst), median, (2nd
best)" over seeds; App. F.2-F.4: A8-A10, and paper 003 App. F.1, F.2: "mean ± std") and puts the
published value and our difference (ours − published) beside every cell. Published numbers come
from ``config/paper_reference`` (``dpcl.report.reference``); where the paper has no number (other
data sets such as the embedded Fashion-MNIST default, learners the paper did not run) the
published and difference columns read "–". A table whose inputs were not run is still
written, with a note naming the config keys that would fill it; no number is ever invented.

Which benchmarks feed which table (config ``benchmarks`` entries):

* A3, A4, A5, A6: class-incremental benchmarks without blurry tasks (scenario ``disjoint`` or
  ``datasets``); rows benchmark × ε × classifier (Cosine, PEFT FiLM, PEFT head-only).
* A7: i-Blurry benchmarks, one column per blurry sample ratio M, grouped by data set and N.
* A8: disjoint benchmarks on any data set but ImageNet-R (the paper's: Split-CIFAR-100; the
  embedded default's Split-Fashion-MNIST lands here), A9: disjoint ImageNet-R, A10:
  5-datasets (scenario ``datasets``). Label method ``base`` (reference README, decision 2).
* F1 (paper 003 App. F.1, its Fig. 3): disjoint benchmarks (scenario ``disjoint``); rows
  benchmark × ε × classifier, columns Label Oracle, Base Dataset, Public Labels ×10, ×100, ×1000.
* F2 (paper 003 App. F.2, Sec. 7.2): per data set (and backbone, task count) its disjoint
  benchmark (Not Blurry), its i-Blurry benchmark with N = 50, M = 10 (I-Blurry; paper 003 states
  neither) and its first Si-Blurry benchmark (``paper_figures.blurry_comparisons``); rows ε ×
  classifier, label method ``base`` (paper 003 does not state F.2's). Data sets with a blurry
  benchmark are shown; without any, every disjoint benchmark's data set (Not Blurry only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .names import canonical_method, eps_key, eps_name, learner_name, public_multiplier, release_fraction
from .paper_figures import BLURRY_SETTINGS, IBLURRY_NM, blurry_comparisons
from .reference import PAPER_LEARNERS, load_reference
from .reference import TABLES as SOURCES
from .table import Table, blank_repeats, fmt_mean_sd, fmt_order, tex_escape, to_csv, write_table
from .table import to_latex as render_latex
from .table import to_markdown as render_markdown
from .tables import order_stats

TABLE_IDS = ("A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10", "F1", "F2")
ORDER_STATS = ("fourth_best", "median", "second_best")  # (2nd worst), median, (2nd best) of 5 seeds
MEAN_STATS = ("mean", "std")
MISSING = "–"

#: our learner -> the reference's learner tag (reference.PAPER_LEARNERS)
REF_LEARNER = {ours: ref for ref, learners, _ in PAPER_LEARNERS for ours in learners}
#: Table A8's row order: each paper method, then ours that reproduce it; other learners after, by name
LEARNER_ORDER = tuple(dict.fromkeys(x for ref, learners, _ in PAPER_LEARNERS for x in (ref, *learners)))
_REF_ONLY_NAMES = {ref: name for ref, _, name in PAPER_LEARNERS if name}


def classifiers() -> set[str]:
    """The "Classifier" rows of Tables A3-A7: paper 000's own methods (registry role "ours")."""
    from ..learners import registry

    return {s.name for s in registry.specs() if s.fig3 == "ours"}


DATASET_NAMES = {
    "cifar100": "CIFAR-100",
    "imagenet_r": "ImageNet-R",
    "five_datasets": "5-datasets",
    "fashion_mnist": "Fashion-MNIST",
    "mnist": "MNIST",
    "svhn": "SVHN",
    "notmnist": "notMNIST",
    "cifar10": "CIFAR-10",
}
PAPER_FRACTIONS = (0.025, 0.0359, 0.0599, 0.1, 0.2, 0.3, 0.5)  # Tables A4/A5 columns
_eps_key = eps_key
_eps_name = eps_name
_fraction = release_fraction


def _learner_key(tag: str) -> tuple[int, str]:
    return (LEARNER_ORDER.index(tag) if tag in LEARNER_ORDER else len(LEARNER_ORDER), tag)


def _our_learners(ref_learner: str) -> list[str]:
    """Our learners that reproduce the paper's method ``ref_learner``."""
    return [lr for lr, ref in REF_LEARNER.items() if ref == ref_learner]


def _methods_key(learner: str) -> str:
    """The config list learner ``learner`` takes its label methods from."""
    from ..learners import registry

    return registry.label_methods_key(learner) if learner in registry.names() else "label_methods"


def _learner_name(tag: str) -> str:
    return _REF_ONLY_NAMES.get(tag) or learner_name(tag)


@dataclass(frozen=True)
class Bench:
    """A configured benchmark as the tables see it: data set, split and the reference's tags."""

    name: str
    dataset: str  # config key (may carry a variant suffix, e.g. imagenet_r__seed1)
    ref_dataset: str  # the data set kind, as the reference names it
    scenario: str
    setting: str  # the reference's setting tag (disjoint, datasets, iblurry-mM)
    disjoint_pct: float | None
    blurry_pct: float | None
    backbone: str

    @classmethod
    def from_config(cls, name: str, cfg: Mapping) -> Bench:
        """Read one ``benchmarks`` entry; i-Blurry maps to ``iblurry-mM`` only for the paper's N = 50."""
        scenario = cfg.get("scenario", "disjoint")
        n, m = cfg.get("disjoint_pct"), cfg.get("blurry_pct")
        if scenario == "iblurry" and n is not None and m is not None:
            setting = f"iblurry-m{float(m):g}" if float(n) == 50 else f"iblurry-n{float(n):g}-m{float(m):g}"
        elif scenario in ("iblurry", "siblurry"):
            setting = scenario
        else:
            setting = scenario
        dataset = str(cfg["dataset"])
        return cls(
            name,
            dataset,
            dataset.split("__", 1)[0],
            scenario,
            setting,
            None if n is None else float(n),
            None if m is None else float(m),
            str(cfg.get("backbone", "")),
        )

    @property
    def display(self) -> str:
        return f"{DATASET_NAMES.get(self.ref_dataset, self.ref_dataset)} ({self.name})"


@dataclass
class Cell:
    """One published cell: our seed statistics, the published ones, and what identifies it."""

    key: dict  # benchmark, dataset, setting, epsilon, learner, label_method, metric
    ours: dict[str, float] = field(default_factory=dict)
    published: dict[str, float] = field(default_factory=dict)
    n_seeds: int = 0
    our_label_method: str = ""  # the run behind a "release-tuned" cell


@dataclass
class PaperTable:
    """A table in the published layout: row labels × column groups of (ours, paper, Δ)."""

    table: str
    caption: str
    kind: str  # "order" (A3-A7) or "mean" (A8-A10)
    decimals: int
    row_header: list[str]
    col_levels: int
    rows: list[tuple[str, ...]] = field(default_factory=list)
    cols: list[tuple[str, ...]] = field(default_factory=list)
    cells: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def stats(self) -> tuple[str, ...]:
        return ORDER_STATS if self.kind == "order" else MEAN_STATS

    @property
    def main_stat(self) -> str:
        return "median" if self.kind == "order" else "mean"


# --- statistics ------------------------------------------------------------------------------


def _metric_value(record: dict, metric: str) -> float:
    """A run's number in the paper's units: AA/AF in %, released labels summed over tasks."""
    if metric == "aa":
        return 100 * float(record["final_accuracy"])
    if metric == "af":
        return 100 * float(record["final_forgetting"])
    if metric == "n_labels":
        # Σ_t |O_t|: the number of distinct released labels when every class lives in one task
        # (disjoint and 5-datasets splits, the only ones Table A5 covers).
        return float(sum(record["released_labels"]))
    raise ValueError(f"unknown metric {metric!r}: allowed are 'aa', 'af', 'n_labels'")


def _our_stats(values: Sequence[float], kind: str) -> tuple[dict[str, float], int]:
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return {}, 0
    if kind == "order":
        lo, med, hi = order_stats(v)
        return {"fourth_best": lo, "median": med, "second_best": hi}, int(v.size)
    # sample standard deviation (ddof = 1), as the paper reports: 27 of the 32 cells of paper 003's
    # Table F.1 that repeat paper 000's Table A6 fit ddof = 1 only, none ddof = 0 only (issue 14)
    stats = {"mean": float(v.mean())}
    if v.size > 1:
        stats["std"] = float(v.std(ddof=1))
    return stats, int(v.size)


class _Runs:
    """Records of one benchmark indexed by (learner, ε tag, canonical label method)."""

    def __init__(self, records: Sequence[dict]) -> None:
        self.by_key: dict[tuple[str, str, str], list[dict]] = {}
        for r in records:
            key = (str(r["learner"]), str(r["epsilon"]), canonical_method(str(r["label_method"])))
            self.by_key.setdefault(key, []).append(r)

    def get(self, learner: str, eps: str, method: str) -> list[dict]:
        return self.by_key.get((learner, eps, method), [])

    def keys(self):
        return self.by_key.keys()


class _Reference:
    """The published numbers of one table as a dict (fast lookups, missing -> absent)."""

    def __init__(self, ref: pd.DataFrame | None, table: str) -> None:
        self.values: dict[tuple, float] = {}
        if ref is not None:
            sub = ref[ref["table"] == table]
            cols = ["dataset", "epsilon", "learner", "label_method", "setting", "metric", "statistic"]
            for row in sub[cols + ["value"]].itertuples(index=False):
                self.values[tuple(row[:-1])] = float(row[-1])

    def stats(self, dataset: str, eps: str, learner: str, method: str, setting: str, metric: str) -> dict:
        out = {}
        for s in ORDER_STATS + MEAN_STATS:
            v = self.values.get((dataset, eps, learner, method, setting, metric, s))
            if v is not None:
                out[s] = v
        return out

    def rows(self, dataset: str, setting: str) -> set[tuple[str, str, str]]:
        """(ε, learner, label method) of every published cell for this data set and setting."""
        return {(k[1], k[2], k[3]) for k in self.values if k[0] == dataset and k[4] == setting}


def _cell(
    bench: Bench,
    runs: _Runs,
    ref: _Reference,
    kind: str,
    eps: str,
    learner: str,
    method: str,
    metric: str,
    label_method: str | None = None,
) -> Cell:
    """Our statistics over seeds for (learner, ε, method) beside the published ones."""
    records = [] if learner == "both" else runs.get(learner, eps, method)
    if learner == "both":  # Table A5: the release does not depend on the learner; take one learner's runs
        # prefer a learner run with every label method (registry: the "label_methods" list)
        learners = sorted({k[0] for k in runs.keys()}, key=_learner_key)
        for cand in sorted(learners, key=lambda lr: _methods_key(lr) != "label_methods"):
            if records := runs.get(cand, eps, method):
                break
    ours, n = _our_stats([_metric_value(r, metric) for r in records], kind)
    ref_learner = "both" if learner == "both" else REF_LEARNER.get(learner, learner)
    published = ref.stats(bench.ref_dataset, eps, ref_learner, label_method or method, bench.setting, metric)
    key = dict(
        benchmark=bench.name,
        dataset=bench.dataset,
        setting=bench.setting,
        epsilon=eps,
        learner=learner,
        label_method=label_method or method,
        metric=metric,
    )
    return Cell(key, ours, published, n, method if label_method else "")


def _tuned_cell(bench: Bench, runs: _Runs, ref: _Reference, eps: str, learner: str) -> Cell:
    """Release Labels (Ours): the best of our release-fF runs by median (the paper tunes F, Sec. 6.2)."""
    best: Cell | None = None
    for method in sorted({k[2] for k in runs.keys() if k[0] == learner and k[1] == eps and _fraction(k[2])}):
        c = _cell(bench, runs, ref, "order", eps, learner, method, "aa", label_method="release-tuned")
        if c.ours and (best is None or c.ours["median"] > best.ours["median"]):
            best = c
    return best or _cell(bench, runs, ref, "order", eps, learner, "release-tuned", "aa")


# --- the tables ------------------------------------------------------------------------------

_ORDER_NOTE = (
    "Cells: (2nd worst), median, (2nd best) seed over the runs' seeds (min and max below three "
    "seeds); paper: the published cell; Δ = our median − published median."
)
_MEAN_NOTE = (
    "Cells: mean ± sample std over seeds (ddof = 1, as published; one seed: no std); paper: the published cell; "
    "Δ = our mean − published mean."
)
_REF_NOTE = (
    "Published: paper {source} (ViT-B/16 pre-trained on ImageNet-21k, δ = 1e-5), transcribed in "
    "config/paper_reference; '–' where the paper has no number for that data set, setting or learner."
)
_NO_BASE_NOTE = (
    "No runs with label method 'base': add base to the config key 'label_methods' (and 'head_label_methods')."
)


def _non_blurry(benches: Sequence[Bench]) -> list[Bench]:
    return [b for b in benches if b.scenario in ("disjoint", "datasets")]


def _disjoint(benches: Sequence[Bench]) -> list[Bench]:
    return [b for b in benches if b.scenario == "disjoint"]


def _classifier_rows(
    bench: Bench, runs: _Runs, ref: _Reference, methods: Sequence[str]
) -> list[tuple[str, str]]:
    """(ε, learner) rows of a classifier table: ours with a run in ``methods`` ∪ the published ones."""
    ours_learners = {k[0] for k in runs.keys()}
    rows = {
        (k[1], k[0])
        for k in runs.keys()
        if k[0] in classifiers() and (k[2] in methods or ("release-tuned" in methods and _fraction(k[2])))
    }
    for eps, ref_learner, method in ref.rows(bench.ref_dataset, bench.setting):
        if method not in methods:
            continue
        mapped = [lr for lr in ours_learners if REF_LEARNER.get(lr) == ref_learner] or [ref_learner]
        rows |= {(eps, lr) for lr in mapped}
    return sorted(rows, key=lambda r: (_eps_key(r[0]), _learner_key(r[1])))


def _missing_row_notes(t: PaperTable, runs_by_bench: Mapping[str, _Runs]) -> None:
    ref_only = sorted(
        {
            c.key["learner"]
            for row in t.cells
            for c in row
            if c.key["learner"] not in {k[0] for r in runs_by_bench.values() for k in r.keys()}
            and c.key["learner"] != "both"
        },
        key=_learner_key,
    )
    if ref_only:
        t.notes.append(
            f"Rows of {', '.join(_learner_name(lr) for lr in ref_only)} show only the published "
            f"numbers: add {', '.join(' or '.join(_our_learners(lr)) or lr for lr in ref_only)} "
            "to the config key 'learners' to run them."
        )


def _head_only_note(t: PaperTable) -> None:
    if any(c.key["learner"] == "peft_head" for row in t.cells for c in row):
        t.notes.append(
            "The paper's PEFT Ensemble rows are FiLM (peft_film); PEFT (head-only) has no published "
            "counterpart in this table."
        )


def _column_notes(t: PaperTable, methods: Sequence[str]) -> None:
    """Which config key fills an empty column, or the rows a partly filled column lacks (a learner
    with runs of other label methods in that row but none of this one)."""
    for i, (m, col) in enumerate(zip(methods, t.cols, strict=True)):
        if t.cells and not any(row[i].ours for row in t.cells):
            tag = "release-fF tags (e.g. release-f0.1)" if m == "release-tuned" else m
            t.notes.append(
                f"Column '{col[0]}': no runs; add {tag} to the config key 'label_methods' "
                "(and 'head_label_methods' for the DP-SGD heads)."
            )
            continue
        lacking = sorted(
            {
                row[i].key["learner"]
                for row in t.cells
                if m != "release-tuned" and not row[i].ours and any(c.ours for c in row)
            },
            key=_learner_key,
        )
        if lacking:
            keys = sorted({_methods_key(lr) for lr in lacking})
            t.notes.append(
                f"Column '{col[0]}': no runs of {', '.join(map(_learner_name, lacking))} in some rows; "
                f"add {m} to the config key {' and '.join(repr(k) for k in keys)}."
            )


def _label_method_table(
    tid: str,
    caption: str,
    columns: list[tuple[str, str]],
    benches: Sequence[Bench],
    runs: Mapping[str, _Runs],
    ref: pd.DataFrame | None,
    kind: str = "order",
    select=_non_blurry,
    fixed: bool = False,
) -> PaperTable:
    """Tables A3, A4, A6, F1: rows benchmark × ε × classifier, one column group per label method;
    ``select`` picks the benchmarks, ``fixed`` keeps every column (the published layout)."""
    r = _Reference(ref, tid)
    t = PaperTable(tid, caption, kind, 1 if kind == "order" else 2, ["Benchmark", "ε", "Classifier"], 1)
    methods = [m for m, _ in columns]
    grid: list[tuple[tuple[str, ...], list[Cell]]] = []
    for b in select(benches):
        for eps, learner in _classifier_rows(b, runs[b.name], r, methods):
            cells = [
                _tuned_cell(b, runs[b.name], r, eps, learner)
                if m == "release-tuned"
                else _cell(b, runs[b.name], r, kind, eps, learner, m, "aa")
                for m in methods
            ]
            grid.append(((b.display, _eps_name(eps), _learner_name(learner)), cells))
    keep = [
        j
        for j, (m, _) in enumerate(columns)
        if fixed or m in ("oracle", "base") or any(row[j].ours or row[j].published for _, row in grid)
    ]
    t.cols = [(columns[j][1],) for j in keep]
    t.rows = [lab for lab, _ in grid]
    t.cells = [[row[j] for j in keep] for _, row in grid]
    if not select(benches):
        t.notes.append(
            "No benchmark without blurry tasks is configured: add one with scenario 'disjoint' "
            "(config/paper.yaml: split_cifar100, split_imagenet_r) to the config key 'benchmarks'."
        )
    _column_notes(t, [methods[j] for j in keep])
    if "release-tuned" in methods:
        t.notes.append(
            "Release Labels (Ours): the paper tunes the label-release budget fraction per setting "
            "(grid search, Sec. 6.2; not published); here the best of our release-fF runs by median, "
            "its fraction in brackets."
        )
    _head_only_note(t)
    _missing_row_notes(t, runs)
    return t


def _fraction_columns(benches: Sequence[Bench], runs: Mapping[str, _Runs]) -> list[tuple[str, str]]:
    fracs = set(PAPER_FRACTIONS)
    for b in _non_blurry(benches):
        fracs |= {f for k in runs[b.name].keys() if (f := _fraction(k[2])) is not None}
    return [(f"release-f{f:g}", f"Budget: {100 * f:g}%") for f in sorted(fracs)]


def _fraction_notes(t: PaperTable) -> None:
    if not t.cols:
        t.notes.append(
            "No Release Labels runs: add release-fF tags to the config key 'label_methods' (the paper's: "
            + ", ".join(f"release-f{f:g}" for f in PAPER_FRACTIONS)
            + ")."
        )


def table_a3(benches, runs, ref) -> PaperTable:
    """Table A3 (Fig. 4): final accuracy for Label Oracle, Base Dataset, Public Labels ×1000, Release Labels."""
    cols = [
        *_public_columns(()),
        ("public-x1000", "Public Labels (Ours)"),
        ("release-tuned", "Release Labels (Ours)"),
    ]
    t = _label_method_table(
        "A3",
        "Performance (final test accuracy in %) when varying the label space (tabular version of Fig. 4).",
        cols,
        benches,
        runs,
        ref,
        fixed=True,
    )
    t.notes.insert(0, "Public Labels (Ours) is public-x1000 (1000× the base labels, Fig. 4 caption).")
    return t


def table_a4(benches, runs, ref) -> PaperTable:
    """Table A4 (Fig. 5): final accuracy per label-release budget fraction (of both ε and δ)."""
    t = _label_method_table(
        "A4",
        "Performance (test accuracy in %) when varying the budget fraction for "
        "releasing the labels (tabular form of Fig. 5).",
        _fraction_columns(benches, runs),
        benches,
        runs,
        ref,
    )
    _fraction_notes(t)
    return t


def _public_columns(ns) -> list[tuple[str, str]]:
    """The baselines' columns, then Public Labels ×N for every N in ``ns``."""
    return [("oracle", "Label Oracle (Baseline)"), ("base", "Base Dataset (Baseline)")] + [
        (f"public-x{n}", f"Public Labels ({n}×)") for n in sorted(ns)
    ]


def table_a6(benches, runs, ref) -> PaperTable:
    """Table A6 (Fig. 6): final accuracy for Oracle, Base and Public Labels ×N."""
    ns = {10, 1000}
    for b in _non_blurry(benches):
        ns |= {n for k in runs[b.name].keys() if (n := public_multiplier(k[2]))}
    return _label_method_table(
        "A6",
        "Performance (final test accuracy in %) when varying the label space "
        "method (tabular version of Fig. 6).",
        _public_columns(ns),
        benches,
        runs,
        ref,
    )


def table_f1(benches, runs, ref) -> PaperTable:
    """Paper 003 Table F.1 (its Fig. 3): final accuracy, mean ± std, of Label Oracle, Base Dataset and
    Public Labels ×10, ×100, ×1000 on the disjoint benchmarks."""
    t = _label_method_table(
        "F1",
        "Performance (final test accuracy in %, mean ± std) when varying the label "
        "space: label match and additional dummy labels (paper 003 App. F.1, tabular "
        "form of its Fig. 3).",
        _public_columns((10, 100, 1000)),
        benches,
        runs,
        ref,
        kind="mean",
        select=_disjoint,
        fixed=True,
    )
    t.notes.insert(
        0,
        "Columns as paper 003 prints them: Label Oracle (labels matching the task data), Base "
        "Dataset (no additional labels), Public Labels (N×): dummy labels up to N× the base labels.",
    )
    return t


def table_a5(benches, runs, ref) -> PaperTable:
    """Table A5 (Fig. 5): number of released labels per budget fraction (the same for every learner)."""
    r = _Reference(ref, "A5")
    t = PaperTable(
        "A5",
        "Number of released labels when varying the budget fraction for releasing the labels "
        "(tabular form of Fig. 5).",
        "order",
        0,
        ["Benchmark", "ε"],
        1,
    )
    cols = _fraction_columns(benches, runs)
    grid = []
    for b in _non_blurry(benches):
        eps_set = {k[1] for k in runs[b.name].keys() if _fraction(k[2])}
        eps_set |= {e for e, lr, _ in r.rows(b.ref_dataset, b.setting) if lr == "both"}
        for eps in sorted(eps_set, key=_eps_key):
            grid.append(
                (
                    (b.display, _eps_name(eps)),
                    [_cell(b, runs[b.name], r, "order", eps, "both", m, "n_labels") for m, _ in cols],
                )
            )
    keep = [j for j in range(len(cols)) if any(row[j].ours or row[j].published for _, row in grid)]
    t.cols = [(cols[j][1],) for j in keep]
    t.rows = [lab for lab, _ in grid]
    t.cells = [[row[j] for j in keep] for _, row in grid]
    _fraction_notes(t)
    t.notes.append(
        "Released labels per seed: Σ_t |O_t| over the tasks (= the distinct labels, each class "
        "lives in one task); taken from the Cosine Classifier's runs where present (the release "
        "does not depend on the learner)."
    )
    return t


def table_a7(benches, runs, ref) -> PaperTable:
    """Table A7 (Fig. 7): final accuracy on i-Blurry(N, M) per blurry sample ratio M."""
    r = _Reference(ref, "A7")
    t = PaperTable(
        "A7",
        "Performance (test accuracy in %) when varying the blurry sample ratio M "
        "(tabular version of Fig. 7; i-Blurry with N % disjoint classes).",
        "order",
        1,
        ["Data set", "ε", "Classifier", "Label method"],
        1,
    )
    blurry = [b for b in benches if b.scenario == "iblurry"]
    groups: dict[tuple[str, float, str], dict[float, Bench]] = {}
    for b in blurry:
        groups.setdefault((b.ref_dataset, b.disjoint_pct, b.backbone), {})[b.blurry_pct] = b
    ms = sorted({m for g in groups.values() for m in g})
    t.cols = [(f"M = {m:g}",) for m in ms]
    methods = [
        ("base", "Base Dataset (Baseline)"),
        ("public-x1000", "Public Labels (Ours)"),
        ("release-tuned", "Release Labels (Ours)"),
    ]
    backbones = {g[2] for g in groups}
    for (dataset, n, backbone), by_m in groups.items():
        label = f"{DATASET_NAMES.get(dataset, dataset)}, N = {n:g}" + (
            f" ({backbone})" if len(backbones) > 1 else ""
        )
        rows: set[tuple[str, str]] = set()
        for b in by_m.values():
            ours_learners = {k[0] for k in runs[b.name].keys()}
            rows |= {(k[1], k[0]) for k in runs[b.name].keys() if k[0] in classifiers()}
            for eps, ref_learner, _ in r.rows(b.ref_dataset, b.setting):
                rows |= {
                    (eps, lr)
                    for lr in (
                        [lr for lr in ours_learners if REF_LEARNER.get(lr) == ref_learner] or [ref_learner]
                    )
                }
        for eps, learner in sorted(rows, key=lambda x: (_eps_key(x[0]), _learner_key(x[1]))):
            for m, name in methods:
                cells = []
                for mm in ms:
                    b = by_m.get(mm)
                    if b is None:
                        cells.append(
                            Cell(
                                dict(
                                    benchmark="",
                                    dataset=dataset,
                                    setting=f"iblurry-m{mm:g}",
                                    epsilon=eps,
                                    learner=learner,
                                    label_method=m,
                                    metric="aa",
                                )
                            )
                        )
                    elif m == "release-tuned":
                        cells.append(_tuned_cell(b, runs[b.name], r, eps, learner))
                    else:
                        cells.append(_cell(b, runs[b.name], r, "order", eps, learner, m, "aa"))
                t.rows.append((label, _eps_name(eps), _learner_name(learner), name))
                t.cells.append(cells)
    if not blurry:
        t.notes.append(
            "No i-Blurry benchmarks are configured: add benchmarks with scenario 'iblurry', "
            "disjoint_pct 50 and blurry_pct M ∈ {10, 25, 50, 75, 100} to the config key 'benchmarks' "
            "(config/paper.yaml: iblurry_cifar100_m10 ... iblurry_cifar100_m100)."
        )
    else:
        t.notes.append(
            "Public Labels (Ours) is public-x1000 (Fig. 7 caption); Release Labels (Ours): the best of "
            "our release-fF runs by median, its fraction in brackets (the paper tunes it, Sec. 6.2)."
        )
        if any(b.disjoint_pct != 50 for b in blurry):
            t.notes.append("Published numbers exist only for N = 50 disjoint classes (Sec. 6.3).")
    si = [b.name for b in benches if b.scenario == "siblurry"]
    if si:
        t.notes.append(
            f"Si-Blurry benchmarks ({', '.join(si)}) appear in none of Tables A3-A10 (paper 003 App. F.2)."
        )
    _missing_row_notes(t, runs)
    return t


_AAAF_SCOPE = {
    "A8": (
        "Split-CIFAR-100 (and every other disjoint benchmark but ImageNet-R)",
        lambda b: b.scenario == "disjoint" and b.ref_dataset != "imagenet_r",
        "a benchmark with scenario 'disjoint' (config/paper.yaml: split_cifar100)",
    ),
    "A9": (
        "Split ImageNet-R",
        lambda b: b.scenario == "disjoint" and b.ref_dataset == "imagenet_r",
        "a benchmark on imagenet_r with scenario 'disjoint' (config/paper.yaml: split_imagenet_r)",
    ),
    "A10": (
        "5-datasets (task orders as seeds)",
        lambda b: b.scenario == "datasets",
        "a benchmark with scenario 'datasets' (config/paper.yaml: five_datasets)",
    ),
}


def table_aa_af(tid: str, benches, runs, ref) -> PaperTable:
    """Tables A8-A10 (App. F.2-F.4): AA and AF (× 100) after the final task, mean ± std, per learner and ε."""
    scope, select, hint = _AAAF_SCOPE[tid]
    r = _Reference(ref, tid)
    t = PaperTable(
        tid,
        f"Average accuracy (AA) and average forgetting (AF, scaled by 100) after learning the "
        f"final task in %, {scope}; Base Dataset label space.",
        "mean",
        2,
        ["Benchmark", "Method"],
        2,
    )
    chosen = [b for b in benches if select(b)]
    eps_set = {"1", "8", "inf"}
    for b in chosen:
        eps_set |= {k[1] for k in runs[b.name].keys() if k[2] == "base"}
    eps_list = sorted(eps_set, key=_eps_key)
    t.cols = [
        (f"ε = {e}" if e != "inf" else "non-DP", f"{m} ({'↑' if m == 'AA' else '↓'})")
        for e in eps_list
        for m in ("AA", "AF")
    ]
    for b in chosen:
        ours = {k[0] for k in runs[b.name].keys() if k[2] == "base"}
        learners = set(ours)
        for _eps, ref_learner, _m in r.rows(b.ref_dataset, b.setting):
            if not any(REF_LEARNER.get(lr) == ref_learner for lr in ours):
                learners.add(ref_learner)
        for learner in sorted(learners, key=_learner_key):
            t.rows.append((b.display, _learner_name(learner)))
            t.cells.append(
                [
                    _cell(b, runs[b.name], r, "mean", e, learner, "base", metric)
                    for e in eps_list
                    for metric in ("aa", "af")
                ]
            )
    # an ε with neither our runs nor published numbers is left out (e.g. non-DP for Fashion-MNIST)
    keep = [
        j
        for j in range(len(t.cols))
        if any(row[j - j % 2].ours or row[j - j % 2].published for row in t.cells)
        or any(row[j - j % 2 + 1].published for row in t.cells)
    ]
    if t.cells:
        t.cols = [t.cols[j] for j in keep]
        t.cells = [[row[j] for j in keep] for row in t.cells]
    if not chosen:
        t.notes.append(
            f"No benchmark for this table is configured: add {hint} to the config key 'benchmarks'."
        )
    elif not any(c.ours for row in t.cells for c in row):
        t.notes.append(_NO_BASE_NOTE)
    if chosen and "inf" not in {k[1] for b in chosen for k in runs[b.name].keys()}:
        t.notes.append("non-DP columns: add inf to the config key 'epsilons'.")
    if any(REF_LEARNER.get(c.key["learner"]) == "naive" for row in t.cells for c in row):
        t.notes.append(
            "The paper does not say whether its Naive baseline trains FiLM or the last layer; our "
            "Naive rows are compared with it either way."
        )
    _missing_row_notes(t, runs)
    return t


_F2_SPEC = {
    "disjoint": "scenario 'disjoint'",
    "iblurry": f"scenario 'iblurry', disjoint_pct {IBLURRY_NM[0]:g}, blurry_pct {IBLURRY_NM[1]:g}",
    "siblurry": "scenario 'siblurry' (config/paper.yaml: disjoint_pct 50, blurry_pct 10)",
}
_F2_NOTES = (
    "Label method: ours are Base Dataset (base) runs. Paper 003 does not state F.2's label method; base is its "
    "stated default prior ('all classes of the base dataset(s) at all tasks', Sec. 7), though its Cosine ε = 1 "
    "Not Blurry mean (76.16) matches neither its F.1 Base (72.44) nor Oracle (78.38) mean.",
    f"I-Blurry: i-Blurry-{IBLURRY_NM[0]:g}-{IBLURRY_NM[1]:g} of Koh et al. 2022 (N = {IBLURRY_NM[0]:g} % "
    f"disjoint classes, blurry sample ratio M = {IBLURRY_NM[1]:g} %), our choice: paper 003 states neither N nor "
    "M (nor Si-Blurry's).",
)


def _f2_group(
    t: PaperTable,
    settings: Mapping[str, str],
    by_name: Mapping[str, Bench],
    runs: Mapping[str, _Runs],
    r: _Reference,
    label: str,
    group: str,
) -> None:
    """Rows ε × classifier of one data set; a setting without a benchmark keeps the published cell."""
    proto = by_name[next(iter(settings.values()))]
    cols = {
        s: replace(by_name[settings[s]], setting=s)
        if s in settings
        else replace(proto, name="", scenario=s, setting=s)
        for s in BLURRY_SETTINGS
    }
    empty = _Runs([])
    rows = {
        row
        for b in cols.values()
        for row in _classifier_rows(b, runs.get(b.name, empty), r, ("base", "unspecified"))
    }
    for eps, learner in sorted(rows, key=lambda x: (_eps_key(x[0]), _learner_key(x[1]))):
        t.rows.append((label, _eps_name(eps), _learner_name(learner)))
        t.cells.append(
            [
                _cell(
                    b,
                    runs.get(b.name, empty),
                    r,
                    "mean",
                    eps,
                    learner,
                    "base",
                    "aa",
                    label_method="unspecified",
                )
                for b in cols.values()
            ]
        )
    t.notes.append(
        f"{label}: "
        + ", ".join(
            f"{BLURRY_SETTINGS[s]} = {n}"
            + (
                f" (N = {by_name[n].disjoint_pct:g}, M = {by_name[n].blurry_pct:g})"
                if s == "siblurry" and by_name[n].blurry_pct is not None
                else ""
            )
            for s, n in settings.items()
        )
        + "."
    )
    for s in [s for s in BLURRY_SETTINGS if s not in settings]:
        t.notes.append(
            f"{label}: no {BLURRY_SETTINGS[s]} benchmark; add one on the same data set, backbone and "
            f"n_tasks ({group}) with {_F2_SPEC[s]} to the config key 'benchmarks'."
        )
    no_dp = [n for n in settings.values() if runs[n].keys() and "inf" not in {k[1] for k in runs[n].keys()}]
    if no_dp:
        t.notes.append(
            f"{label}: no non-DP runs of {', '.join(no_dp)}; add inf to the config key 'epsilons' "
            "(or to these benchmarks' own 'epsilons')."
        )


def table_f2(benches, runs, ref, benchmarks: Mapping[str, Mapping]) -> PaperTable:
    """Paper 003 Table F.2 (Sec. 7.2): final accuracy, mean ± std, on Not Blurry, I-Blurry and
    Si-Blurry tasks per data set, ε and classifier, label method Base Dataset."""
    r = _Reference(ref, "F2")
    t = PaperTable(
        "F2",
        "Performance (final test accuracy in %, mean ± std) with blurry tasks (paper 003 "
        "App. F.2, Sec. 7.2).",
        "mean",
        2,
        ["Data set", "ε", "Classifier"],
        1,
    )
    t.cols = [(name,) for name in BLURRY_SETTINGS.values()]
    groups = blurry_comparisons(benchmarks)
    shown = {g: s for g, s in groups.items() if s.keys() - {"disjoint"}} or groups
    by_name = {b.name: b for b in benches}
    kinds = [by_name[next(iter(s.values()))].ref_dataset for s in shown.values()]
    names = [DATASET_NAMES.get(k, k) for k in kinds]  # the data set's name, with the group where it repeats
    for (title, settings), name in zip(shown.items(), names, strict=True):
        _f2_group(
            t, settings, by_name, runs, r, name if names.count(name) == 1 else f"{name} ({title})", title
        )
    if not shown:
        t.notes.append(
            "No benchmark for this table is configured: add a disjoint, an i-Blurry (disjoint_pct 50, "
            "blurry_pct 10) and a Si-Blurry benchmark on one data set, backbone and n_tasks to the config "
            "key 'benchmarks' (config/paper.yaml: split_cifar100, iblurry_cifar100_m10, siblurry_cifar100)."
        )
    elif not any(c.ours for row in t.cells for c in row):
        t.notes.append(_NO_BASE_NOTE)
    t.notes[:0] = _F2_NOTES
    _head_only_note(t)
    _missing_row_notes(t, runs)
    return t


#: First note of every table, and the report's header, of a miniature run (config key ``miniature``).
MINIATURE_NOTE = (
    "Miniature run: random weights, synthetic data (config/paper_mini.yaml). These numbers check "
    "that every step of the paper's workflow runs end to end; they say nothing about the published "
    "accuracies."
)


def build_paper_tables(
    records: Mapping[str, Sequence[dict]],
    benchmarks: Mapping[str, Mapping],
    reference: pd.DataFrame | None = None,
    notes: Sequence[str] = (),
) -> list[PaperTable]:
    """Tables A3-A10, F1, F2 from run records per benchmark (as ``dpcl.stages._read_records`` gives them).

    ``records``: benchmark name -> its runs' metrics dicts (ε as a tag); ``benchmarks``: the config's
    ``benchmarks`` entries; ``reference``: the published numbers (default: the shipped copy); ``notes``
    end every table (e.g. how the hyperparameters were tuned).
    """
    unknown = sorted(set(records) - set(benchmarks))
    if unknown:
        raise KeyError(
            f"records for benchmark(s) {unknown} not in the config key 'benchmarks' ({sorted(benchmarks)})"
        )
    ref = load_reference() if reference is None else reference
    benches = [Bench.from_config(name, cfg) for name, cfg in benchmarks.items()]
    runs = {b.name: _Runs(records.get(b.name, [])) for b in benches}
    tables = [
        table_a3(benches, runs, ref),
        table_a4(benches, runs, ref),
        table_a5(benches, runs, ref),
        table_a6(benches, runs, ref),
        table_a7(benches, runs, ref),
    ]
    tables += [table_aa_af(tid, benches, runs, ref) for tid in ("A8", "A9", "A10")]
    tables += [table_f1(benches, runs, ref), table_f2(benches, runs, ref, benchmarks)]
    for t in tables:
        seeds = sorted({c.n_seeds for row in t.cells for c in row if c.n_seeds})
        t.notes.insert(0, _ORDER_NOTE if t.kind == "order" else _MEAN_NOTE)
        t.notes.insert(1, _REF_NOTE.format(source=SOURCES[t.table]))
        if seeds:
            t.notes.insert(0, f"Seeds per cell: {seeds[0]}" + (f"-{seeds[-1]}." if len(seeds) > 1 else "."))
        if not t.rows:
            t.notes.insert(0, "No rows: the runs this table needs are not part of this configuration.")
        if t.table == "A9":
            t.notes.append(
                "The paper reports Table A9 over three seeds (App. F.3); ours over the seeds above."
            )
        t.notes.extend(notes)
    return tables


# --- output ----------------------------------------------------------------------------------

TIDY_COLUMNS = [
    "table",
    "row",
    "benchmark",
    "dataset",
    "setting",
    "epsilon",
    "learner",
    "label_method",
    "our_label_method",
    "metric",
    "statistic",
    "ours",
    "published",
    "diff",
    "n_seeds",
]


def to_tidy(t: PaperTable) -> pd.DataFrame:
    """One row per published number position: (cell, statistic) with ours, published and ours − published."""
    out = []
    for i, row in enumerate(t.cells):
        for c in row:
            for s in t.stats:
                o, p = c.ours.get(s, math.nan), c.published.get(s, math.nan)
                out.append(
                    {
                        "table": t.table,
                        "row": i,
                        **c.key,
                        "our_label_method": c.our_label_method,
                        "statistic": s,
                        "ours": o,
                        "published": p,
                        "diff": o - p,
                        "n_seeds": c.n_seeds,
                    }
                )
    return pd.DataFrame(out, columns=TIDY_COLUMNS)


def cell_texts(t: PaperTable, c: Cell) -> tuple[str, str, str]:
    """(ours, paper, Δ) as printed: "(x), m, (y)" or "m ± s"; "–" where there is no number."""
    d = t.decimals

    def show(stats: dict[str, float]) -> str:
        return fmt_order(stats, d, ORDER_STATS) if t.kind == "order" else fmt_mean_sd(stats, d)

    ours, paper = show(c.ours), show(c.published)
    if ours != MISSING and c.our_label_method and (f := _fraction(c.our_label_method)) is not None:
        ours += f" [{100 * f:g}%]"
    m = t.main_stat
    diff = f"{c.ours[m] - c.published[m]:+.{max(d, 1)}f}" if m in c.ours and m in c.published else MISSING
    return ours, paper, diff


def as_table(t: PaperTable) -> Table:
    """The table model of ``t``: row labels (repeats blanked, as the paper prints them), then
    (ours, paper, Δ) per column group."""
    header = list(t.row_header)
    for col in t.cols:
        header += [" ".join(col), "paper", "Δ"]
    rows = [
        labels + [x for c in cells for x in cell_texts(t, c)]
        for labels, cells in zip(blank_repeats(t.rows), t.cells, strict=True)
    ]
    align = ["l"] * len(t.row_header) + ["r"] * 3 * len(t.cols)
    title = f"Table {t.table}: {t.caption}"
    return Table(title, header, rows, list(t.notes), align, len(t.row_header), empty="(no rows)")


def to_markdown(t: PaperTable) -> str:
    """GitHub Markdown: caption, the table (ours | paper | Δ per column group) and the notes."""
    return render_markdown(as_table(t))


def to_latex(t: PaperTable) -> str:
    """A booktabs ``table`` with a multi-row header (column groups over ours / paper / Δ) and the notes."""
    header = [tex_escape(h) for h in t.row_header] + ["ours", "paper", r"$\Delta$"] * len(t.cols)
    return render_latex(
        as_table(t),
        comment=f"% Table {t.table} (paper {SOURCES[t.table]}) rebuilt by dpcl; needs \\usepackage{{booktabs}}",
        groups=t.cols if t.col_levels else (),
        group_width=3,
        header=header,
    )


def write_paper_tables(tables: Sequence[PaperTable], out_dir: str | Path) -> list[Path]:
    """``table_<ID>.csv`` (tidy), ``.md`` and ``.tex`` per table in ``out_dir``; returns the paths."""
    out_dir = Path(out_dir)
    written = []
    for t in tables:
        stem = out_dir / f"table_{t.table}"
        written += write_table(stem, to_markdown(t), to_csv(to_tidy(t)), to_latex(t))
    return written
