"""The building blocks every rebuilt paper table shares (:mod:`dpcl.report.paper_tables`): which
benchmarks feed a table, its rows per benchmark × ε × classifier, the label-method and sampling
fraction columns, and the notes that say what is missing and why."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from .paper_cells import (
    PAPER_FRACTIONS,
    REF_LEARNER,
    Bench,
    Cell,
    PaperTable,
    _cell,
    _eps_key,
    _eps_name,
    _fraction,
    _learner_key,
    _learner_name,
    _methods_key,
    _our_learners,
    _Reference,
    _Runs,
    _tuned_cell,
    classifiers,
)


def non_blurry(benches: Sequence[Bench]) -> list[Bench]:
    return [b for b in benches if b.scenario in ("disjoint", "datasets")]


def disjoint(benches: Sequence[Bench]) -> list[Bench]:
    return [b for b in benches if b.scenario == "disjoint"]


def classifier_rows(
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


def missing_row_notes(t: PaperTable, runs_by_bench: Mapping[str, _Runs]) -> None:
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


def learner_notes(t: PaperTable) -> None:
    """The notes of the learners with rows in ``t`` (:attr:`LearnerSpec.paper_table_note`), in row order."""
    from ..learners import registry

    present = dict.fromkeys(c.key["learner"] for row in t.cells for c in row)
    for learner in present:
        if learner in registry.names() and registry.get(learner).paper_table_note:
            t.notes.append(registry.get(learner).paper_table_note)


def column_notes(t: PaperTable, methods: Sequence[str]) -> None:
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


def label_method_table(
    tid: str,
    caption: str,
    columns: list[tuple[str, str]],
    benches: Sequence[Bench],
    runs: Mapping[str, _Runs],
    ref: pd.DataFrame | None,
    *,
    kind: str = "order",
    select=non_blurry,
    fixed: bool = False,
) -> PaperTable:
    """Tables A3, A4, A6, F1: rows benchmark × ε × classifier, one column group per label method;
    ``select`` picks the benchmarks, ``fixed`` keeps every column (the published layout)."""
    r = _Reference(ref, tid)
    t = PaperTable(tid, caption, kind, 1 if kind == "order" else 2, ["Benchmark", "ε", "Classifier"], 1)
    methods = [m for m, _ in columns]
    grid: list[tuple[tuple[str, ...], list[Cell]]] = []
    for b in select(benches):
        for eps, learner in classifier_rows(b, runs[b.name], r, methods):
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
    column_notes(t, [methods[j] for j in keep])
    if "release-tuned" in methods:
        t.notes.append(
            "Release Labels (Ours): the paper tunes the label-release budget fraction per setting "
            "(grid search, Sec. 6.2; not published); here the best of our release-fF runs by median, "
            "its fraction in brackets."
        )
    learner_notes(t)
    missing_row_notes(t, runs)
    return t


def fraction_columns(benches: Sequence[Bench], runs: Mapping[str, _Runs]) -> list[tuple[str, str]]:
    fracs = set(PAPER_FRACTIONS)
    for b in non_blurry(benches):
        fracs |= {f for k in runs[b.name].keys() if (f := _fraction(k[2])) is not None}
    return [(f"release-f{f:g}", f"Budget: {100 * f:g}%") for f in sorted(fracs)]


def fraction_notes(t: PaperTable) -> None:
    if not t.cols:
        t.notes.append(
            "No Release Labels runs: add release-fF tags to the config key 'label_methods' (the paper's: "
            + ", ".join(f"release-f{f:g}" for f in PAPER_FRACTIONS)
            + ")."
        )


def public_columns(ns) -> list[tuple[str, str]]:
    """The baselines' columns, then Public Labels ×N for every N in ``ns``."""
    return [("oracle", "Label Oracle (Baseline)"), ("base", "Base Dataset (Baseline)")] + [
        (f"public-x{n}", f"Public Labels ({n}×)") for n in sorted(ns)
    ]
