"""The paper's Figures 4-7, A3-A9 (paper 000 Sec. 6.1-6.2, App. E-F) and paper 003's Fig. 4 (Sec. 7.2:
Not Blurry vs I-Blurry vs Si-Blurry, ``plot_p003_fig4_blurry``) from the configured runs.
(One concept in one module: every paper figure shares the panel layout, order statistics and notes.)

Each figure draws what the runs provide and writes a short note ("no runs for …") in a
panel whose axis the config does not sweep, instead of failing: the embedded default has one
release fraction and no i-Blurry benchmark, the paper's config has all of them. Points are
the median over seeds with error bars from the 2nd worst to the 2nd best seed (the paper's
"2nd/4th best seed" of five; min/max below three seeds, see ``tables.order_stats``); paper 003
plots "the min, median and max seed" (Sec. 7), and so does its Fig. 4 here.
"""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .names import label_method_name, learner_name
from .plotting import MARKERS, save_figure, series_offsets, series_style
from .tables import order_stats

#: Learners the paper compares in Figs. 4-7: the Cosine Classifier and the PEFT Ensemble.
FIG_LEARNERS = ("cosine", "peft_head", "peft_film")

_RELEASE = re.compile(r"^release-(laplace-)?f([0-9.eE+-]+)$")
_PUBLIC = re.compile(r"^public-x([0-9]+)$")


def _eps_key(tag: str) -> float:
    return math.inf if tag == "inf" else float(tag)


def _eps_name(tag: str) -> str:
    return "non-DP" if tag == "inf" else f"ε = {tag}"


def release_fraction(method: str) -> tuple[str, float] | None:
    """('ktsgd' | 'laplace', f) for a Release Labels tag ``release-[laplace-]f<F>``, else None."""
    m = _RELEASE.match(method)
    if not m:
        return None
    return ("laplace" if m.group(1) else "ktsgd", float(m.group(2)))


def public_multiplier(method: str) -> int | None:
    """N for a Public Labels tag ``public-x<N>``, else None."""
    m = _PUBLIC.match(method)
    return int(m.group(1)) if m else None


def _final(records: list[dict], learner: str, eps: str, method: str) -> np.ndarray:
    """Final accuracies (%) of the seeds of one (learner, ε, label method)."""
    return np.array(
        [
            100 * float(r["final_accuracy"])
            for r in records
            if r["learner"] == learner and r["epsilon"] == eps and r["label_method"] == method
        ]
    )


def _learners(records: list[dict]) -> list[str]:
    present = {r["learner"] for r in records}
    return [lr for lr in FIG_LEARNERS if lr in present]


def _epsilons(records: list[dict]) -> list[str]:
    return sorted({r["epsilon"] for r in records}, key=_eps_key)


def best_release(records: list[dict], learner: str, eps: str, mechanism: str = "ktsgd") -> str | None:
    """The Release Labels tag with the highest median final accuracy for (learner, ε): the
    paper tunes the budget fraction f by grid search (Sec. 6, Label Methods)."""
    best, best_med = None, -math.inf
    for m in sorted({r["label_method"] for r in records}):
        rf = release_fraction(m)
        if rf is None or rf[0] != mechanism:
            continue
        v = _final(records, learner, eps, m)
        if v.size and np.median(v) > best_med:
            best, best_med = m, float(np.median(v))
    return best


def _note(ax, text: str, notes: list[str] | None = None) -> None:
    """A readable 'nothing to draw' message in place of a panel's data (also kept in ``notes``)."""
    if notes is not None:
        notes.append(text)
    ax.text(
        0.5,
        0.5,
        textwrap.fill(text, 55),
        ha="center",
        va="center",
        fontsize=8,
        wrap=True,
        transform=ax.transAxes,
        bbox={"boxstyle": "round", "fc": "#f4f4f4", "ec": "#bbbbbb"},
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _note_figure(title: str, text: str, outputs: list[str | Path]) -> list[str]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 2.6))
    _note(ax, text)
    fig.suptitle("\n".join(textwrap.fill(line, 80) for line in title.split("\n")), fontsize=10)
    fig.tight_layout()
    save_figure(fig, outputs)
    plt.close(fig)
    return [text]


def _finish(fig, title: str, notes: list[str], handles: dict[str, object], ncol: int) -> None:
    """Suptitle, the 'what this config lacks' notes under it and a shared legend at the bottom."""
    notes = list(dict.fromkeys(n for n in notes if n))
    h_in = fig.get_size_inches()[1]
    # fig.text, not suptitle: tight_layout would reserve the suptitle's room a second time
    fig.text(0.5, 1 - 0.05 / h_in, title, fontsize=10, ha="center", va="top")
    used = 0.1 + 0.2 * (title.count("\n") + 1)  # inches taken at the top
    if notes:
        fig.text(0.5, 1 - used / h_in, "\n".join(notes), fontsize=7, ha="center", va="top", color="#883333")
        used += 0.13 * len(notes) + 0.05
    bottom = 0.0
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=ncol, fontsize=8)
        bottom = (0.22 * math.ceil(len(handles) / ncol) + 0.1) / h_in
    fig.tight_layout(rect=(0, bottom, 1, 1 - used / h_in))


def min_median_max(values) -> tuple[float, float, float]:
    """(min, median, max) over seeds: paper 003's "min, median and max seed" (Sec. 7)."""
    v = np.asarray(values, dtype=float)
    return float(v.min()), float(np.median(v)), float(v.max())


def _stat_bar(
    ax, x: float, values: np.ndarray, width: float, name: str, colors: dict, handles: dict, stats=order_stats
) -> float:
    """One bar at the median of ``values``, error bars from ``stats`` (low, median, high; default the
    2nd/4th best seed), one colour per name across panels; returns the bar's upper error."""
    lo, med, hi = stats(values)
    color = colors.setdefault(name, f"C{len(colors)}")
    bar = ax.bar(x, med, width, yerr=[[med - lo], [hi - med]], capsize=2, color=color, label=name)
    handles.setdefault(name, bar)
    return hi


def _bar_figure(
    bench_records: dict[str, list[dict]], categories, title: str, empty: str, outputs: list[str | Path]
) -> list[str]:
    """Rows benchmarks, columns learners; per panel bars of final accuracy grouped by ε, one
    colour per category. ``categories(records, learner, eps)`` yields (name, method tag | None)."""
    plt = _pyplot()
    benches = [b for b, recs in bench_records.items() if recs]
    if not benches:
        return _note_figure(title, "no runs for any disjoint-split benchmark in this config", outputs)
    learners = sorted({lr for b in benches for lr in _learners(bench_records[b])}, key=FIG_LEARNERS.index)
    ncol = max(1, len(learners))
    fig, axes = plt.subplots(len(benches), ncol, figsize=(4.6 * ncol, 3.4 * len(benches)), squeeze=False)
    handles: dict[str, object] = {}
    colors: dict[str, str] = {}  # one colour per category in every panel
    notes = [empty] if empty else []
    for i, bench in enumerate(benches):
        records = bench_records[bench]
        if not learners:
            _note(
                axes[i][0],
                f"no runs for {' / '.join(learner_name(x) for x in FIG_LEARNERS)} on {bench}",
                notes,
            )
            continue
        for j, learner in enumerate(learners):
            ax = axes[i][j]
            epsilons = _epsilons([r for r in records if r["learner"] == learner])
            if not epsilons:
                _note(ax, f"no runs for {learner_name(learner)} on {bench}", notes)
                continue
            names = list(dict.fromkeys(n for e in epsilons for n, _ in categories(records, learner, e)))
            for name in names:  # one colour per category, whichever panel draws it first
                colors.setdefault(name, f"C{len(colors)}")
            present = {
                name
                for e in epsilons
                for name, method in categories(records, learner, e)
                if method and _final(records, learner, e, method).size
            }
            absent = [n for n in names if n not in present]  # no empty slots: named in the title
            names = [n for n in names if n not in absent]
            width = 0.8 / max(1, len(names))
            drawn = False
            top = 0.0
            for k, name in enumerate(names):
                for x, eps in enumerate(epsilons):
                    method = dict(categories(records, learner, eps)).get(name)
                    v = _final(records, learner, eps, method) if method else np.array([])
                    if v.size == 0:
                        continue
                    xk = x + (k - (len(names) - 1) / 2) * width
                    hi = _stat_bar(ax, xk, v, width, name, colors, handles)
                    top = max(top, hi)
                    drawn = True
                    rf = release_fraction(method)
                    if rf is not None and name.startswith("Release Labels"):
                        ax.annotate(
                            f"f={100 * rf[1]:g}%",
                            (xk, hi),
                            ha="center",
                            va="bottom",
                            fontsize=6,
                            xytext=(0, 2),
                            textcoords="offset points",
                        )
            if not drawn:
                _note(ax, f"no runs of these label methods for {learner_name(learner)} on {bench}", notes)
                continue
            ax.set_ylim(0, max(ax.get_ylim()[1], 1.12 * top))  # room for the f = … labels over the bars
            ax.set_xticks(np.arange(len(epsilons)), [_eps_name(e) for e in epsilons])
            ax.set_title(
                f"{bench}: {learner_name(learner)}" + (f"\n(not run: {', '.join(absent)})" if absent else ""),
                fontsize=9,
            )
            ax.set_ylabel("final accuracy (%)")
            ax.grid(alpha=0.3, axis="y")
    _finish(fig, title, notes[:1] if empty else [], handles, min(4, max(1, len(handles))))
    save_figure(fig, outputs)
    plt.close(fig)
    return notes


def _largest_public(records: list[dict]) -> str | None:
    tags = [m for m in {r["label_method"] for r in records} if public_multiplier(m)]
    return max(tags, key=public_multiplier) if tags else None


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
    notes = []
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


def blurry_groups(benchmarks: dict[str, dict]) -> dict[str, dict[float, str]]:
    """i-Blurry benchmarks grouped by (dataset, backbone, tasks, N): group title → {M: benchmark}.
    A disjoint benchmark of the same dataset, backbone and task count joins every group as M = 0
    (the disjoint split is i-Blurry with M = 0)."""
    groups: dict[tuple, dict[float, str]] = {}
    for name, b in benchmarks.items():
        if b.get("scenario") == "iblurry":
            key = (b["dataset"], b["backbone"], int(b["n_tasks"]), float(b["disjoint_pct"]))
            groups.setdefault(key, {})[float(b["blurry_pct"])] = name
    for name, b in benchmarks.items():
        if b.get("scenario") == "disjoint":
            for key, members in groups.items():
                if key[:3] == (b["dataset"], b["backbone"], int(b["n_tasks"])):
                    members.setdefault(0.0, name)
    return {
        f"{d} / {bb}, i-Blurry N = {n:g} %, {t} tasks": dict(sorted(v.items()))
        for (d, bb, t, n), v in groups.items()
    }


#: Paper 003 Sec. 7.2 (Fig. 4, Table F.2): the task splits compared on one data set, by scenario.
BLURRY_SETTINGS = {"disjoint": "Not Blurry", "iblurry": "I-Blurry", "siblurry": "Si-Blurry"}
#: The i-Blurry(N, M) of that comparison. Paper 003 states neither N nor M: Koh et al.'s i-Blurry-50-10.
IBLURRY_NM = (50.0, 10.0)


def blurry_comparisons(benchmarks: dict[str, dict]) -> dict[str, dict[str, str]]:
    """Paper 003's Not Blurry / I-Blurry / Si-Blurry benchmarks grouped by (dataset, backbone, tasks):
    group title → {scenario: benchmark} in ``BLURRY_SETTINGS`` order, with the first disjoint, the
    i-Blurry with (N, M) = ``IBLURRY_NM`` and the first Si-Blurry benchmark of the group in config
    order; a group may lack some of the three."""
    groups: dict[tuple, dict[str, str]] = {}
    for name, b in benchmarks.items():
        scenario = b.get("scenario", "disjoint")
        if scenario not in BLURRY_SETTINGS or (
            scenario == "iblurry" and (float(b["disjoint_pct"]), float(b["blurry_pct"])) != IBLURRY_NM
        ):
            continue
        key = (str(b["dataset"]), str(b.get("backbone", "")), int(b["n_tasks"]))
        groups.setdefault(key, {}).setdefault(scenario, name)
    return {
        f"{d} / {bb}, {t} tasks": {s: v[s] for s in BLURRY_SETTINGS if s in v}
        for (d, bb, t), v in groups.items()
    }


def blurry_trios(benchmarks: dict[str, dict]) -> dict[str, dict[str, str]]:
    """The groups of ``blurry_comparisons`` with all three settings: those paper 003 Fig. 4 draws."""
    return {g: s for g, s in blurry_comparisons(benchmarks).items() if len(s) == len(BLURRY_SETTINGS)}


def _blurry_layout(groups: dict[str, dict[float, list[dict]]], title: str, outputs: list[str | Path]):
    """(rows (group, learner), ε tags, None) of a blurriness figure, or (…, notes) after writing a
    note figure when no i-Blurry runs exist."""
    rows = [
        (g, lr) for g, by_m in groups.items() for lr in _learners([r for recs in by_m.values() for r in recs])
    ]
    if not rows:
        why = "no runs of the i-Blurry benchmarks" if groups else "no i-Blurry benchmarks in this config"
        return (
            [],
            [],
            _note_figure(
                title,
                f"{why}: add benchmarks with scenario: iblurry, disjoint_pct N and "
                "blurry_pct M (config/paper.yaml has N = 50, M = 10, 25, 50, 75, 100 on "
                "CIFAR-100)",
                outputs,
            ),
        )
    epsilons = sorted(
        {r["epsilon"] for by_m in groups.values() for recs in by_m.values() for r in recs}, key=_eps_key
    )
    return rows, epsilons, None


def plot_fig7_blurriness(groups: dict[str, dict[float, list[dict]]], outputs: list[str | Path]) -> list[str]:
    """Fig. 7 left (Sec. 6.2): final accuracy against the blurry ratio M per label method (Public
    Labels: largest ×N run; Release Labels: best f at each M), a row per group and learner, a
    column per ε. ``groups`` maps a group title to {M: run records of that benchmark}."""
    plt = _pyplot()
    title = "Fig. 7 (left): impact of blurriness, final accuracy vs blurry ratio M"
    rows, epsilons, empty = _blurry_layout(groups, title, outputs)
    if empty is not None:
        return empty
    fig, axes = plt.subplots(
        len(rows), len(epsilons), figsize=(4.4 * len(epsilons), 3.4 * len(rows)), squeeze=False, sharey="row"
    )
    handles: dict[str, object] = {}
    colors: dict[str, str] = {}
    notes = []
    for i, (group, learner) in enumerate(rows):
        by_m = groups[group]
        if len(by_m) == 1:
            notes.append(
                f"{group}: one blurry ratio (M = {next(iter(by_m)):g} %); add i-Blurry benchmarks with "
                "other blurry_pct values"
            )
        for j, eps in enumerate(epsilons):
            ax = axes[i][j]
            series: dict[str, list[tuple]] = {}
            for m_pct, recs in by_m.items():
                pub = _largest_public([r for r in recs if r["learner"] == learner])
                picks = [
                    ("Label Oracle (Baseline)", "oracle"),
                    ("Base Dataset (Baseline)", "base"),
                    (f"Public Labels ({public_multiplier(pub)}x)" if pub else "", pub),
                    ("Release Labels (best f)", best_release(recs, learner, eps)),
                ]
                for name, method in picks:
                    v = _final(recs, learner, eps, method) if method else np.array([])
                    if v.size:
                        series.setdefault(name, []).append((m_pct, *order_stats(v)))
            if not series:
                _note(ax, f"no runs for {learner_name(learner)} at {_eps_name(eps)}", notes)
                continue
            for name, pts in series.items():
                m_pct, lo, med, hi = (np.array(c) for c in zip(*pts, strict=True))
                color = colors.setdefault(name, f"C{len(colors)}")
                h = ax.errorbar(
                    m_pct,
                    med,
                    yerr=[med - lo, hi - med],
                    marker="o",
                    ms=3,
                    capsize=2,
                    color=color,
                    label=name,
                )
                handles.setdefault(name, h)
            ax.set_xticks(sorted(by_m))
            span = (max(by_m) - min(by_m)) or 10.0
            ax.set_xlim(min(by_m) - 0.06 * span, max(by_m) + 0.06 * span)
            ax.set_xlabel("blurry ratio M (%)")
            head = f"{group}\n" if len(groups) > 1 else ""
            ax.set_title(f"{head}{learner_name(learner)}, {_eps_name(eps)}", fontsize=8 if head else 9)
            ax.grid(alpha=0.3)
        axes[i][0].set_ylabel("final accuracy (%)")
    if len(groups) == 1:
        title += f"\n{next(iter(groups))}"
    notes = list(dict.fromkeys(notes))
    _finish(fig, title, [n for n in notes if "one blurry ratio" in n], handles, min(4, max(1, len(handles))))
    save_figure(fig, outputs)
    plt.close(fig)
    return notes


# --- Appendix figures A3-A9 (paper 000 App. E.1, F) ------------------------------------------

#: Learners of Figs. A4-A9 (App. F): Table A8's row order, then the DP-A-GEM baselines of ours.
TASK_LEARNERS = (
    "naive_head",
    "naive_film",
    "cosine",
    "peft_film",
    "noncl_film",
    "peft_head",
    "noncl_head",
    "agem_head",
    "agem_film",
)
#: The label method of App. F (Tables A8-A10 match Table A3's Base Dataset column).
TASK_METHOD = "base"
_NO_BASE = (
    "no runs with label method 'base' (Base Dataset, the setting of App. F): add base to label_methods "
    "(Cosine Classifier) and head_label_methods (DP-SGD learners)"
)
_DATASET_NAMES = {"cifar100": "CIFAR-100", "imagenet_r": "ImageNet-R", "five_datasets": "5-dataset"}


def _learner_name(learner: str) -> str:
    return learner_name(learner)


def _task_learners(records: list[dict]) -> list[str]:
    """Learners present in ``records``: App. F's order first, then any other in name order."""
    present = {r["learner"] for r in records}
    return [lr for lr in TASK_LEARNERS if lr in present] + sorted(present - set(TASK_LEARNERS))


def task_figure_ids(bench_cfg: dict) -> tuple[str | None, str | None]:
    """The paper's (accuracy, forgetting) per-task figures a benchmark stands for (App. F.2-F.4):
    A5/A6 for Split-CIFAR-100 and every other disjoint split, A7/- for ImageNet-R (the paper shows
    no forgetting figure for it), A8/A9 for 5-dataset; (None, None) for the i-Blurry splits."""
    scenario = bench_cfg.get("scenario", "disjoint")
    if scenario == "datasets":
        return "A8", "A9"
    if scenario != "disjoint":
        return None, None
    if str(bench_cfg.get("dataset", "")).split("__", 1)[0] == "imagenet_r":
        return "A7", None
    return "A5", "A6"


def _per_task_stats(curves: list[list[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, min, median, max) in % over seeds at every task t with a finite value (t = 1..T);
    NaN entries (AF_1, a Non-CL model's rows before the last) are left out, not counted as 0."""
    c = 100 * np.asarray(curves, dtype=float)
    ok = ~np.all(np.isnan(c), axis=0)
    t = np.arange(1, c.shape[1] + 1)[ok]
    c = c[:, ok]
    if c.size == 0:
        return t, *(np.array([]),) * 3
    return t, np.nanmin(c, axis=0), np.nanmedian(c, axis=0), np.nanmax(c, axis=0)


def task_series(base: list[dict], metric: str) -> dict[str, dict[str, tuple[np.ndarray, ...]]]:
    """ε tag → learner → (t, min, median, max) in % of AA_t ('accuracy') or AF_t ('forgetting')
    over the seeds of ``base`` (records of one label method), learners in App. F's order."""
    key = f"average_{metric}"
    out: dict[str, dict[str, tuple[np.ndarray, ...]]] = {}
    for eps in _epsilons(base):
        for lr in _task_learners(base):
            curves = [r[key] for r in base if r["learner"] == lr and r["epsilon"] == eps]
            if not curves:
                continue
            if len({len(c) for c in curves}) > 1:
                raise ValueError(
                    f"{_learner_name(lr)} at {_eps_name(eps)}: runs with different task counts "
                    f"{sorted({len(c) for c in curves})}; one benchmark has one task count"
                )
            out.setdefault(eps, {})[lr] = _per_task_stats(curves)
    return out


def plot_task_metric(
    records: list[dict], metric: str, bench: str, bench_cfg: dict, outputs: list[str | Path]
) -> list[str]:
    """Figs. A5-A9 (App. F): median over seeds of the accuracy AA_t (``metric`` 'accuracy') or the
    forgetting AF_t ('forgetting') after each task t, error bars min/max over the seeds (task orders
    for 5-dataset), a line per learner, a panel per ε, label method Base Dataset. Non-CL models are
    evaluated once, after seeing all data: one point at t = T, and no forgetting."""
    if metric not in ("accuracy", "forgetting"):
        raise ValueError(f"metric must be 'accuracy' or 'forgetting', not {metric!r}")
    plt = _pyplot()
    key = f"average_{metric}"
    fig_id = task_figure_ids(bench_cfg)[0 if metric == "accuracy" else 1]
    scenario = bench_cfg.get("scenario", "disjoint")
    dataset = str(bench_cfg.get("dataset", "")).split("__", 1)[0]
    what = "test accuracy" if metric == "accuracy" else "forgetting measure"
    head = (
        f"Fig. {fig_id}" if fig_id else "Style of Figs. " + ("A5/A7/A8" if metric == "accuracy" else "A6/A9")
    )
    over = "task orders" if scenario == "datasets" else "seeds"
    title = (
        f"{head}: median {what} per task, {bench} ({_DATASET_NAMES.get(dataset, dataset)}, {scenario}); "
        f"Base Dataset, error bars min/max over {over}"
    )
    if not records:
        return _note_figure(title, f"no runs for benchmark {bench} in this config", outputs)
    base = [r for r in records if r["label_method"] == TASK_METHOD]
    if not base:
        return _note_figure(title, _NO_BASE, outputs)
    notes = [
        f"no Base Dataset runs for {_learner_name(lr)}: add base to "
        + ("label_methods" if lr == "cosine" else "head_label_methods")
        for lr in _task_learners(records)
        if lr not in {r["learner"] for r in base}
    ]
    learners = _task_learners(base)
    epsilons = _epsilons(base)
    n_tasks = max(len(r[key]) for r in base)
    fig, axes = plt.subplots(
        1,
        len(epsilons),
        figsize=(max(4.6, 0.35 * n_tasks + 2.6) * len(epsilons), 3.8),
        squeeze=False,
        sharey=True,
    )
    handles: dict[str, object] = {}
    styles = {lr: series_style(k) for k, lr in enumerate(learners)}  # colour, marker, line style
    offsets = {
        lr: (k - (len(learners) - 1) / 2) * min(0.08, 0.6 / len(learners)) for k, lr in enumerate(learners)
    }
    series = task_series(base, metric)
    for lr in learners:
        if any(lr in by_lr for by_lr in series.values()) and not any(
            by_lr[lr][0].size for by_lr in series.values() if lr in by_lr
        ):
            why = (
                " (one model trained on all data at once, nothing to forget)"
                if lr.startswith("noncl")
                else ""
            )
            notes.append(f"{_learner_name(lr)}: no finite {key} values{why}")
    for ax, eps in zip(axes[0], epsilons, strict=True):
        for lr, (t, lo, med, hi) in series[eps].items():
            if t.size == 0:
                continue
            single = t.size == 1 and lr.startswith("noncl")
            name = _learner_name(lr) + (" (after all data)" if single else "")
            h = ax.errorbar(
                t + offsets[lr],
                med,
                yerr=[med - lo, hi - med],
                marker="*" if single else styles[lr]["marker"],
                ms=8 if single else 3.5,
                capsize=2,
                color=styles[lr]["color"],
                ls="none" if single else styles[lr]["linestyle"],
                label=name,
            )
            handles.setdefault(name, h)
        ax.set_title(_eps_name(eps), fontsize=9)
        ax.set_xlabel("task t")
        ax.set_xticks(np.arange(1, n_tasks + 1))
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(
        "test accuracy on tasks seen, AA_t (%)" if metric == "accuracy" else "average forgetting AF_t (%)"
    )
    if metric == "forgetting":
        notes.append("AF_1 is undefined (no earlier task to forget): curves start at t = 2")
    notes = list(dict.fromkeys(notes))
    _finish(fig, "\n".join(textwrap.wrap(title, 110)), notes, handles, min(4, max(1, len(handles))))
    save_figure(fig, outputs)
    plt.close(fig)
    return notes


def plot_figA4_privacy_utility(
    bench_records: dict[str, list[dict]], benchmarks: dict[str, dict], outputs: list[str | Path]
) -> list[str]:
    """Fig. A4 (App. F): final accuracy against the privacy budget ε per learner (Cosine Classifier,
    PEFT Ensemble, Naive, Non-CL), a panel per disjoint or 5-dataset benchmark (the paper:
    Split-CIFAR-100 left, Split-ImageNet-R right); Base Dataset, median with min/max over seeds as
    in Figs. A5-A9, whose last point (t = T) each panel summarises."""
    plt = _pyplot()
    title = (
        "Fig. A4: final accuracy vs privacy budget ε per learner (Base Dataset; median, min/max over seeds)"
    )
    benches = [
        b
        for b in bench_records
        if benchmarks.get(b, {}).get("scenario", "disjoint") in ("disjoint", "datasets")
    ]
    if not any(bench_records[b] for b in benches):
        why = "no runs for" if benches else "no"
        return _note_figure(title, f"{why} disjoint-split or 5-dataset benchmarks in this config", outputs)
    width = max(7.5, 4.8 * len(benches))  # one panel still fits the title and the legend
    fig, axes = plt.subplots(1, len(benches), figsize=(width, 3.8), squeeze=False)
    handles: dict[str, object] = {}
    colors: dict[str, str] = {}
    notes: list[str] = []
    for ax, bench in zip(axes[0], benches, strict=True):
        base = [r for r in bench_records[bench] if r["label_method"] == TASK_METHOD]
        if not base:
            _note(ax, f"{bench}: " + (_NO_BASE if bench_records[bench] else "no runs"), notes)
            continue
        epsilons = _epsilons(base)
        learners = _task_learners(base)
        for k, lr in enumerate(learners):
            pts = []
            for x, e in enumerate(epsilons):
                v = _final(base, lr, e, TASK_METHOD)
                if v.size:
                    pts.append((x, float(np.median(v)), float(v.min()), float(v.max())))
            if not pts:
                continue
            x, med, lo, hi = (np.array(c) for c in zip(*pts, strict=True))
            color = colors.setdefault(lr, f"C{len(colors)}")
            off = (k - (len(learners) - 1) / 2) * min(0.06, 0.4 / len(learners))
            h = ax.errorbar(
                x + off,
                med,
                yerr=[med - lo, hi - med],
                marker="o",
                ms=3,
                capsize=2,
                color=color,
                label=_learner_name(lr),
            )
            handles.setdefault(_learner_name(lr), h)
        cfg = benchmarks.get(bench, {})
        ds = str(cfg.get("dataset", "")).split("__", 1)[0]
        ax.set_xticks(np.arange(len(epsilons)), [_eps_name(e) for e in epsilons])
        ax.set_xlim(-0.4, len(epsilons) - 0.6)
        ax.set_title(f"{bench} ({_DATASET_NAMES.get(ds, ds)}, {cfg.get('scenario', 'disjoint')})", fontsize=9)
        ax.set_xlabel(
            "privacy budget (δ = "
            + ", ".join(
                f"{d:g}" for d in sorted({r.get("delta", math.nan) for r in base if r["epsilon"] != "inf"})
            )
            + ")"
        )
        ax.set_ylabel("final accuracy (%)")
        ax.grid(alpha=0.3)
    _finish(
        fig,
        "\n".join(textwrap.wrap(title, int(width * 13))),
        notes,
        handles,
        min(int(width // 2.4), max(1, len(handles))),
    )
    save_figure(fig, outputs)
    plt.close(fig)
    return notes


def plot_figA3_blurriness(groups: dict[str, dict[float, list[dict]]], outputs: list[str | Path]) -> list[str]:
    """Fig. A3 (App. E.1, "an additional illustration of Fig. 7"): the data of Table A7 as bars,
    final accuracy per blurry ratio M for Base Dataset, Public Labels (largest ×N run, the paper's
    1000×) and Release Labels (best f at each M), a panel per group, learner and ε; median with
    the 2nd/4th best seed as error bars (Table A7's statistics)."""
    plt = _pyplot()
    title = "Fig. A3: impact of blurriness, final accuracy per blurry ratio M and label method (median, 2nd/4th best seed)"
    rows, epsilons, empty = _blurry_layout(groups, title, outputs)
    if empty is not None:
        return empty
    fig, axes = plt.subplots(
        len(rows), len(epsilons), figsize=(4.6 * len(epsilons), 3.4 * len(rows)), squeeze=False, sharey="row"
    )
    handles: dict[str, object] = {}
    colors: dict[str, str] = {}
    notes: list[str] = []
    for i, (group, learner) in enumerate(rows):
        by_m = groups[group]
        ms = sorted(by_m)
        for j, eps in enumerate(epsilons):
            ax = axes[i][j]
            drawn = False
            for x, m_pct in enumerate(ms):
                recs = by_m[m_pct]
                pub = _largest_public([r for r in recs if r["learner"] == learner])
                picks = [
                    ("Base Dataset (Baseline)", "base"),
                    ("Public Labels (largest ×N run)", pub),
                    ("Release Labels (best f)", best_release(recs, learner, eps)),
                ]
                width = 0.8 / len(picks)
                for k, (name, method) in enumerate(picks):
                    v = _final(recs, learner, eps, method) if method else np.array([])
                    if not v.size:
                        continue
                    xk = x + (k - (len(picks) - 1) / 2) * width
                    hi = _stat_bar(ax, xk, v, width, name, colors, handles)
                    drawn = True
                    if method and method != "base":
                        tag = (
                            f"{public_multiplier(method)}x"
                            if public_multiplier(method)
                            else (f"f={100 * release_fraction(method)[1]:g}%")
                        )
                        ax.annotate(
                            tag,
                            (xk, hi),
                            ha="center",
                            va="bottom",
                            fontsize=5,
                            xytext=(0, 2),
                            textcoords="offset points",
                            rotation=90,
                        )
            if not drawn:
                _note(
                    ax,
                    f"no Base / Public / Release Labels runs for {learner_name(learner)} at {_eps_name(eps)}",
                    notes,
                )
                continue
            ax.set_xticks(np.arange(len(ms)), [f"{m:g}" for m in ms])
            ax.set_xlabel("blurry ratio M (%)")
            head = f"{group}\n" if len(groups) > 1 else ""
            ax.set_title(f"{head}{learner_name(learner)}, {_eps_name(eps)}", fontsize=8 if head else 9)
            ax.grid(alpha=0.3, axis="y")
        axes[i][0].set_ylabel("final accuracy (%)")
        axes[i][0].set_ylim(
            0, axes[i][0].get_ylim()[1] * 1.12
        )  # the row shares y: room for the ×N / f labels
        if len(ms) == 1:
            notes.append(
                f"{group}: one blurry ratio (M = {ms[0]:g} %); add i-Blurry benchmarks with other "
                "blurry_pct values"
            )
    if len(groups) == 1:
        title += f"\n{next(iter(groups))}"
    notes = list(dict.fromkeys(notes))
    _finish(fig, title, [n for n in notes if "one blurry ratio" in n], handles, min(3, max(1, len(handles))))
    save_figure(fig, outputs)
    plt.close(fig)
    return notes


# --- Paper 003 Fig. 4 (Sec. 7.2): Not Blurry vs I-Blurry vs Si-Blurry ------------------------


@dataclass
class BlurrySetting:
    """One column of paper 003's blurry comparison: a benchmark, its runs and its task data."""

    benchmark: str
    records: list[dict]
    #: training samples per task of (disjoint, blurry) classes (``data.scenarios.samples_per_task``)
    samples: tuple[np.ndarray, np.ndarray] | None = None
    seed: int | None = None  # the scenario seed ``samples`` come from


_NO_COMPARISON = (
    "no data set with a disjoint, an i-Blurry (disjoint_pct 50, blurry_pct 10) and a Si-Blurry "
    "benchmark (same dataset, backbone and n_tasks) in this config: add them to the config key "
    "'benchmarks' (config/paper.yaml: split_cifar100, iblurry_cifar100_m10, siblurry_cifar100)"
)


def _samples_panel(ax, setting: str, s: BlurrySetting, notes: list[str], handles: dict, top: float) -> None:
    """Stacked bars per task: training samples of disjoint classes, then (hatched) of blurry classes;
    y from 0 to ``top`` (the same in the three panels)."""
    if s.samples is None:
        _note(ax, f"{s.benchmark}: no scenario file given", notes)
        return
    disjoint, blurry = s.samples
    t = np.arange(1, len(disjoint) + 1)
    color = f"C{list(BLURRY_SETTINGS).index(setting)}"
    ax.bar(t, disjoint, 0.8, color=color)
    ax.bar(t, blurry, 0.8, bottom=disjoint, color=color, alpha=0.35, hatch="///", ec=color, lw=0)
    for name, kw in (("disjoint classes", {}), ("blurry classes", {"alpha": 0.35, "hatch": "///", "lw": 0})):
        handles.setdefault(name, ax.bar([np.nan], [np.nan], color="0.4", ec="0.4", **kw))  # legend proxies
    ax.set_xticks(t)
    ax.set_ylim(0, top)
    ax.set_title(
        f"{BLURRY_SETTINGS[setting]}: {s.benchmark}" + (f", seed {s.seed}" if s.seed is not None else ""),
        fontsize=8,
    )
    ax.set_ylabel("train samples", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, axis="y")


def _accuracy_panel(
    ax, settings: dict[str, BlurrySetting], learner: str, handles: dict, notes: list[str]
) -> None:
    """Bars per ε and setting: final accuracy (Base Dataset), median with min/max over seeds."""
    base = {
        k: [r for r in s.records if r["label_method"] == TASK_METHOD and r["learner"] == learner]
        for k, s in settings.items()
    }
    epsilons = _epsilons([r for recs in base.values() for r in recs])
    if not epsilons:
        _note(
            ax,
            f"no Base Dataset runs of {learner_name(learner)}: add base to "
            + ("label_methods" if learner == "cosine" else "head_label_methods"),
            notes,
        )
        return
    width = 0.8 / len(settings)
    colors = {BLURRY_SETTINGS[k]: f"C{i}" for i, k in enumerate(BLURRY_SETTINGS)}
    for k, (setting, recs) in enumerate(base.items()):
        for x, eps in enumerate(epsilons):
            v = _final(recs, learner, eps, TASK_METHOD)
            if v.size:
                xk = x + (k - (len(settings) - 1) / 2) * width
                _stat_bar(ax, xk, v, width, BLURRY_SETTINGS[setting], colors, handles, stats=min_median_max)
        if not recs:
            notes.append(f"no Base Dataset runs of {learner_name(learner)} on {settings[setting].benchmark}")
    ax.set_xticks(np.arange(len(epsilons)), [_eps_name(e) for e in epsilons])
    ax.set_title(learner_name(learner), fontsize=9)
    ax.set_ylabel("final test accuracy (%)")
    ax.grid(alpha=0.3, axis="y")


def plot_p003_fig4_blurry(
    groups: dict[str, dict[str, BlurrySetting]], outputs: list[str | Path]
) -> list[str]:
    """Paper 003 Fig. 4 (Sec. 7.2): per data set, training samples per task of disjoint and blurry
    classes for Not Blurry, I-Blurry and Si-Blurry (left) and the final accuracy of the Cosine
    Classifier and the PEFT Ensemble per setting and ε (right; Base Dataset, median with min/max
    over seeds). ``groups``: title → {scenario: BlurrySetting} with all of ``BLURRY_SETTINGS``
    (``blurry_comparisons``); without any, a note figure says which benchmarks to add."""
    plt = _pyplot()
    title = (
        "Paper 003 Fig. 4: Not Blurry vs I-Blurry (N = 50, M = 10) vs Si-Blurry; train samples per task "
        "(left), final accuracy, Base Dataset, median and min/max over seeds (right)"
    )
    groups = {g: s for g, s in groups.items() if len(s) == len(BLURRY_SETTINGS)}
    if not groups:
        return _note_figure(title, _NO_COMPARISON, outputs)
    learners = _learners([r for g in groups.values() for s in g.values() for r in s.records]) or ["cosine"]
    n = len(BLURRY_SETTINGS)
    fig = plt.figure(figsize=(4.2 + 3.6 * len(learners), 5.6 * len(groups)))
    grid = fig.add_gridspec(n * len(groups), 1 + len(learners), width_ratios=[1.25] + [1] * len(learners))
    handles: dict[str, object] = {}
    notes: list[str] = []
    for i, (group, settings) in enumerate(groups.items()):
        rows = slice(n * i, n * (i + 1))
        top = 1.05 * max(
            [float(np.max(s.samples[0] + s.samples[1])) for s in settings.values() if s.samples] or [1]
        )
        for k, setting in enumerate(BLURRY_SETTINGS):
            ax = fig.add_subplot(grid[n * i + k, 0])
            _samples_panel(ax, setting, settings[setting], notes, handles, top)
            if k == 0 and len(groups) > 1:
                ax.annotate(group, (0, 1.25), xycoords="axes fraction", fontsize=9, fontweight="bold")
        ax.set_xlabel("task", fontsize=8)
        for j, learner in enumerate(learners):
            _accuracy_panel(fig.add_subplot(grid[rows, 1 + j]), settings, learner, handles, notes)
    if len(groups) == 1:
        title += f"\n{next(iter(groups))}"
    notes = list(dict.fromkeys(notes))
    _finish(
        fig, "\n".join(textwrap.fill(line, 100) for line in title.split("\n")), notes, handles, len(handles)
    )
    save_figure(fig, outputs)
    plt.close(fig)
    return notes
