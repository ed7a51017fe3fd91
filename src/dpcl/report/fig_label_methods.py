"""[LabelSpace] Figs. 4-6 (Sec. 6.1-6.2): label methods, Public Labels sizes and the release fraction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .fig_common import (
    _bar_figure,
    _eps_name,
    _epsilons,
    _final,
    _finish,
    _largest_public,
    _learners,
    _note,
    _note_figure,
    _pyplot,
    best_release,
    public_multiplier,
    release_fraction,
)
from .names import label_method_name, learner_name
from .plotting import MARKERS, save_figure, series_offsets
from .tables import order_stats


def plot_fig4_label_methods(bench_records: dict[str, list[dict]], outputs: list[str | Path]) -> list[str]:
    """Fig. 4 (Sec. 6.1): final accuracy of Label Oracle, Base Dataset, Public Labels (largest
    ×N run, the paper's ×1000) and Release Labels (best budget fraction f per ε) per learner."""
    missing = []
    all_recs = [r for recs in bench_records.values() for r in recs]
    methods = {r["label_method"] for r in all_recs}
    if not any(release_fraction(m) for m in methods):
        missing.append("no Release Labels runs (add release-f<F> to label_methods)")
    if not any(public_multiplier(m) for m in methods):
        missing.append("no Public Labels runs (add public-x1000 to label_methods)")

    def categories(records, learner, eps):
        pub = _largest_public([r for r in records if r["learner"] == learner])
        return [
            ("Label Oracle (Baseline)", "oracle"),
            ("Base Dataset (Baseline)", "base"),
            (f"Public Labels ({public_multiplier(pub)}x)" if pub else "Public Labels", pub),
            ("Release Labels (best f)", best_release(records, learner, eps)),
        ]

    return _bar_figure(
        bench_records,
        categories,
        "Fig. 4: comparison of label methods (median, 2nd/4th best seed)",
        "; ".join(missing),
        outputs,
    )


def plot_fig6_public_labels(bench_records: dict[str, list[dict]], outputs: list[str | Path]) -> list[str]:
    """Fig. 6 (Sec. 6.1): the baselines beside Public Labels of every size ×N that was run."""
    methods = {r["label_method"] for recs in bench_records.values() for r in recs}
    publics = sorted((m for m in methods if public_multiplier(m)), key=public_multiplier)
    missing = (
        ""
        if len(publics) > 1
        else ("no Public Labels runs" if not publics else f"only {label_method_name(publics[0])} was run")
        + ": add public-x10 / public-x100 / public-x1000 to label_methods (config/paper.yaml has all three)"
    )

    def categories(records, learner, eps):
        return [(label_method_name(m), m) for m in ("oracle", "base", *publics)]

    return _bar_figure(
        bench_records,
        categories,
        "Fig. 6: details on Public Labels (median, 2nd/4th best seed)",
        missing,
        outputs,
    )


def _log_offsets(n: int) -> np.ndarray:
    """Factors that set ``n`` series apart on a log x axis (at most ±25 %, less than the factor 2
    between the swept fractions f)."""
    return np.exp(series_offsets(n, min(0.06, 0.45 / max(1, n))))


def _released_total(r: dict) -> float:
    """Labels released over the whole stream: Σ_t |O_t| (each class once in a disjoint split)."""
    return float(np.sum(r["released_labels"]))


def plot_fig5_release_fraction(bench_records: dict[str, list[dict]], outputs: list[str | Path]) -> list[str]:
    """Fig. 5 (Sec. 6.1): final accuracy and number of released labels against the fraction f
    of (ε, δ) spent on the label release; a red dotted line marks the best f of each curve."""
    plt = _pyplot()
    title = "Fig. 5: Release Labels, accuracy and released labels vs budget fraction f"
    benches = [b for b, recs in bench_records.items() if recs]
    if not benches:
        return _note_figure(title, "no runs for any disjoint-split benchmark in this config", outputs)
    fig, axes = plt.subplots(len(benches), 2, figsize=(10, 4.8 * len(benches)), squeeze=False)
    notes: list[str] = []
    for i, bench in enumerate(benches):
        records = bench_records[bench]
        rel = [r for r in records if release_fraction(r["label_method"])]
        ax_acc, ax_lab = axes[i]
        if not rel:
            _note(
                ax_acc,
                f"no Release Labels runs for {bench}: add release-f<F> methods to label_methods",
                notes,
            )
            _note(ax_lab, f"no Release Labels runs for {bench}")
            continue
        fracs = sorted({release_fraction(r["label_method"])[1] for r in rel})
        if len(fracs) == 1:
            notes.append(
                f"{bench}: one release fraction (f = {100 * fracs[0]:g} %); add release-f<F> methods "
                "(config/paper.yaml sweeps 2.5-50 %) to trace the trade-off"
            )
        styles = {"ktsgd": "-", "laplace": "--"}
        series = []  # (name, ε index, mechanism, f, lo, med, hi)
        for learner in _learners(rel):
            learner_eps = _epsilons([r for r in rel if r["learner"] == learner])
            for eps in learner_eps:
                for mech in ("ktsgd", "laplace"):
                    pts = []
                    for m in sorted({r["label_method"] for r in rel}, key=lambda m: release_fraction(m)[1]):
                        if release_fraction(m)[0] != mech:
                            continue
                        v = _final(rel, learner, eps, m)
                        if v.size:
                            pts.append((release_fraction(m)[1], *order_stats(v)))
                    if not pts:
                        continue
                    name = f"{learner_name(learner)}, {_eps_name(eps)}" + (
                        ", Laplace" if mech == "laplace" else ""
                    )
                    f, lo, med, hi = (np.array(c) for c in zip(*pts, strict=True))
                    series.append((name, _epsilons(rel).index(eps), mech, f, lo, med, hi))
        # Series a small factor apart on the log f axis and one marker per ε: equal points stay visible.
        shift = _log_offsets(len(series))
        for k, (name, e, mech, f, lo, med, hi) in enumerate(series):
            ax_acc.errorbar(
                100 * f * shift[k],
                med,
                yerr=[med - lo, hi - med],
                fmt=styles[mech],
                marker=MARKERS[e % len(MARKERS)],
                ms=4,
                capsize=2,
                color=f"C{k % 10}",
                label=name,
            )
            ax_acc.axvline(100 * f[np.argmax(med)], color="red", ls=":", lw=1)
        # The label release depends on (seed, ε, f), not on the learner: one curve per ε.
        lab_learner = _learners(rel)[0] if _learners(rel) else rel[0]["learner"]
        lab = [r for r in rel if r["learner"] == lab_learner]
        lab_eps = _epsilons(lab)
        shift = _log_offsets(len(lab_eps))
        top = 0.0
        for c, eps in enumerate(lab_eps):
            pts = []
            for m in sorted({r["label_method"] for r in lab}, key=lambda m: release_fraction(m)[1]):
                v = [
                    _released_total(r)
                    for r in lab
                    if r["epsilon"] == eps and r["label_method"] == m and release_fraction(m)[0] == "ktsgd"
                ]
                if v:
                    pts.append((release_fraction(m)[1], *order_stats(v)))
            if pts:
                f, lo, med, hi = (np.array(x) for x in zip(*pts, strict=True))
                top = max(top, float(hi.max()))
                ax_lab.errorbar(
                    100 * f * shift[c],
                    med,
                    yerr=[med - lo, hi - med],
                    marker=MARKERS[c % len(MARKERS)],
                    ms=5,
                    capsize=2,
                    color=f"C{c}",
                    label=_eps_name(eps),
                )
        oracle = [
            _released_total(r)
            for r in records
            if r["label_method"] == "oracle" and r["learner"] == lab_learner
        ]
        if oracle:
            top = max(top, float(np.median(oracle)))
            ax_lab.axhline(
                np.median(oracle), color="gray", ls="--", lw=1, label="Label Oracle (labels present)"
            )
        ax_lab.set_ylim(0, 1.15 * top if top > 0 else 1)  # counts from 0: equal totals read as equal
        for ax in (ax_acc, ax_lab):
            ax.set_xscale("log")
            ax.set_xticks(100 * np.array(fracs), [f"{100 * x:g}" for x in fracs])
            ax.set_xlim(100 * min(fracs) / 1.6, 100 * max(fracs) * 1.6)
            ax.minorticks_off()
            ax.set_xlabel("budget fraction f for label release (%)")
            ax.grid(alpha=0.3)
            n = len(ax.get_legend_handles_labels()[1])
            ax.legend(  # under the panel, off the data
                fontsize=7,
                loc="upper center",
                bbox_to_anchor=(0.5, -0.2),
                ncol=2 if n > 3 else max(1, n),
                frameon=False,
            )
        ax_acc.set_ylabel("final accuracy (%)")
        ax_acc.set_title(f"{bench}: accuracy (red dotted: best f)", fontsize=9)
        ax_lab.set_ylabel("labels released, Σ_t |O_t|")
        ax_lab.set_title(f"{bench}: released labels (k-TSGD)", fontsize=9)
    _finish(fig, title, notes, {}, 1)
    save_figure(fig, outputs)
    plt.close(fig)
    return notes
