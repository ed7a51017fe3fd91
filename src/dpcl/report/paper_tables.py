"""[LabelSpace] Tables A3-A10 and [Tobaben2024] Tables F.1, F.2 rebuilt from our runs, beside the
published numbers.
(One concept in one module: every paper table shares the cell layout, reference lookup and notes.)

Each table keeps the published layout ([LabelSpace] App. E.2: A3-A7, "(2nd worst), median, (2nd
best)" over seeds; App. F.2-F.4: A8-A10, and [Tobaben2024] App. F.1, F.2: "mean ± std") and puts the
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
* F1 ([Tobaben2024] App. F.1, its Fig. 3): disjoint benchmarks (scenario ``disjoint``); rows
  benchmark × ε × classifier, columns Label Oracle, Base Dataset, Public Labels ×10, ×100, ×1000.
* F2 ([Tobaben2024] App. F.2, Sec. 7.2): per data set (and backbone, task count) its disjoint
  benchmark (Not Blurry), its i-Blurry benchmark with N = 50, M = 10 (I-Blurry; [Tobaben2024] states
  neither) and its first Si-Blurry benchmark (``paper_figures.blurry_comparisons``); rows ε ×
  classifier, label method ``base`` ([Tobaben2024] does not state F.2's). Data sets with a blurry
  benchmark are shown; without any, every disjoint benchmark's data set (Not Blurry only).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pandas as pd

from ..data.registry import display_name
from .names import canonical_method, eps_title, public_multiplier
from .paper_cells import (
    _MEAN_NOTE,
    _NO_BASE_NOTE,
    _ORDER_NOTE,
    _REF_NOTE,
    REF_LEARNER,
    TABLE_IDS,
    TIDY_COLUMNS,
    Bench,
    Cell,
    PaperTable,
    _cell,
    _eps_key,
    _eps_name,
    _fraction,
    _learner_key,
    _learner_name,
    _Reference,
    _Runs,
    _tuned_cell,
    as_table,
    cell_texts,
    classifiers,
    to_latex,
    to_markdown,
    to_tidy,
    write_paper_tables,
)
from .paper_figures import BLURRY_SETTINGS, IBLURRY_NM, blurry_comparisons
from .paper_table_rows import (
    classifier_rows,
    disjoint,
    fraction_columns,
    fraction_notes,
    label_method_table,
    learner_notes,
    missing_row_notes,
    non_blurry,
    public_columns,
)
from .reference import CITATION_KEYS, load_reference
from .reference import TABLES as SOURCES

# --- the tables ------------------------------------------------------------------------------


def table_a3(benches, runs, ref) -> PaperTable:
    """Table A3 (Fig. 4): final accuracy for Label Oracle, Base Dataset, Public Labels ×1000, Release Labels."""
    cols = [
        *public_columns(()),
        ("public-x1000", "Public Labels (Ours)"),
        ("release-tuned", "Release Labels (Ours)"),
    ]
    t = label_method_table(
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
    t = label_method_table(
        "A4",
        "Performance (test accuracy in %) when varying the budget fraction for "
        "releasing the labels (tabular form of Fig. 5).",
        fraction_columns(benches, runs),
        benches,
        runs,
        ref,
    )
    fraction_notes(t)
    return t


def table_a6(benches, runs, ref) -> PaperTable:
    """Table A6 (Fig. 6): final accuracy for Oracle, Base and Public Labels ×N."""
    ns = {10, 1000}
    for b in non_blurry(benches):
        ns |= {n for k in runs[b.name].keys() if (n := public_multiplier(k[2]))}
    return label_method_table(
        "A6",
        "Performance (final test accuracy in %) when varying the label space "
        "method (tabular version of Fig. 6).",
        public_columns(ns),
        benches,
        runs,
        ref,
    )


def table_f1(benches, runs, ref) -> PaperTable:
    """[Tobaben2024] Table F.1 (its Fig. 3): final accuracy, mean ± std, of Label Oracle, Base Dataset and
    Public Labels ×10, ×100, ×1000 on the disjoint benchmarks."""
    t = label_method_table(
        "F1",
        "Performance (final test accuracy in %, mean ± std) when varying the label "
        "space: label match and additional dummy labels ([Tobaben2024] App. F.1, tabular "
        "form of its Fig. 3).",
        public_columns((10, 100, 1000)),
        benches,
        runs,
        ref,
        kind="mean",
        select=disjoint,
        fixed=True,
    )
    t.notes.insert(
        0,
        "Columns as [Tobaben2024] prints them: Label Oracle (labels matching the task data), Base "
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
    cols = fraction_columns(benches, runs)
    grid = []
    for b in non_blurry(benches):
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
    fraction_notes(t)
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
        label = f"{display_name(dataset)}, N = {n:g}" + (f" ({backbone})" if len(backbones) > 1 else "")
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
            f"Si-Blurry benchmarks ({', '.join(si)}) appear in none of Tables A3-A10 ([Tobaben2024] App. F.2)."
        )
    missing_row_notes(t, runs)
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
    t.cols = [(eps_title(e), f"{m} ({'↑' if m == 'AA' else '↓'})") for e in eps_list for m in ("AA", "AF")]
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
    missing_row_notes(t, runs)
    return t


_F2_SPEC = {
    "disjoint": "scenario 'disjoint'",
    "iblurry": f"scenario 'iblurry', disjoint_pct {IBLURRY_NM[0]:g}, blurry_pct {IBLURRY_NM[1]:g}",
    "siblurry": "scenario 'siblurry' (config/paper.yaml: disjoint_pct 50, blurry_pct 10)",
}
_F2_NOTES = (
    "Label method: ours are Base Dataset (base) runs. [Tobaben2024] does not state F.2's label method; base is its "
    "stated default prior ('all classes of the base dataset(s) at all tasks', Sec. 7), though its Cosine ε = 1 "
    "Not Blurry mean (76.16) matches neither its F.1 Base (72.44) nor Oracle (78.38) mean.",
    f"I-Blurry: i-Blurry-{IBLURRY_NM[0]:g}-{IBLURRY_NM[1]:g} of [Koh2022] (N = {IBLURRY_NM[0]:g} % "
    f"disjoint classes, blurry sample ratio M = {IBLURRY_NM[1]:g} %), our choice: [Tobaben2024] states neither N nor "
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
        for row in classifier_rows(b, runs.get(b.name, empty), r, ("base", "unspecified"))
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
    """[Tobaben2024] Table F.2 (Sec. 7.2): final accuracy, mean ± std, on Not Blurry, I-Blurry and
    Si-Blurry tasks per data set, ε and classifier, label method Base Dataset."""
    r = _Reference(ref, "F2")
    t = PaperTable(
        "F2",
        "Performance (final test accuracy in %, mean ± std) with blurry tasks ([Tobaben2024] "
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
    names = [display_name(k) for k in kinds]  # the data set's name, with the group where it repeats
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
    learner_notes(t)
    missing_row_notes(t, runs)
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
        t.notes.insert(1, _REF_NOTE.format(source=CITATION_KEYS[SOURCES[t.table]]))
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


__all__ = [
    "Bench",
    "Cell",
    "MINIATURE_NOTE",
    "PaperTable",
    "TABLE_IDS",
    "TIDY_COLUMNS",
    "as_table",
    "build_paper_tables",
    "canonical_method",
    "cell_texts",
    "to_latex",
    "to_markdown",
    "to_tidy",
    "write_paper_tables",
]
