"""Figures: average accuracy per task (median over seeds, band from 2nd worst to 2nd best)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .names import eps_key, eps_title, label_method, label_method_name
from .plotting import LINESTYLES, MARKERS, pyplot, save_figure, series_offsets, series_style

__all__ = ["LINESTYLES", "MARKERS", "save_figure", "series_offsets", "series_style"]


def method_styles(methods: list[str]) -> dict[str, dict]:
    """A style per label method, the same in every figure (as in Figs. 4 and 6: Label Oracle C0, Base
    Dataset C1, Public Labels C2, Release Labels C3); a second method of one kind takes the next free."""
    kind = {"oracle": 0, "base": 1}
    taken: set[int] = set()
    out = {}
    for m in methods:
        parsed = label_method(m)
        k = kind.get(m, {"public": 2, "release": 3}.get(parsed.kind if parsed else "", 4))
        while k in taken:
            k = max(k, 3) + 1
        taken.add(k)
        out[m] = series_style(k)
    return out


def _eps_sorted(records: list[dict]) -> list[str]:
    return sorted({r["epsilon"] for r in records}, key=eps_key)


def final_only(records: list[dict]) -> bool:
    """True when no run has an average accuracy before its last task (Non-CL: one model trained on
    all tasks at once has a final accuracy, not a curve over tasks)."""
    return bool(records) and all(
        not np.isfinite(np.asarray(r["average_accuracy"][:-1], dtype=float)).any() for r in records
    )


def plot_average_accuracy(
    records: list[dict],
    methods: list[str],
    title: str,
    outputs: list[str | Path],
    final_title: str | None = None,
) -> None:
    """One panel per ε tag; a line per label method of AA_t against the task index t (median over
    seeds, band from the 2nd worst to the 2nd best seed). Each method has its own marker and line
    style and sits a small step apart in t, and the bands are light, so that methods with equal
    values all stay visible. Runs with a final accuracy only (``final_only``, Non-CL) get
    ``plot_final_accuracy`` under ``final_title`` (default: ``title``) instead of a curve."""
    if final_only(records):
        plot_final_accuracy(records, methods, final_title or title, outputs)
        return
    plt = pyplot()

    epsilons = _eps_sorted(records)
    methods = [m for m in methods if any(r["label_method"] == m for r in records)]
    offsets = series_offsets(len(methods), 0.06)
    styles = method_styles(methods)
    fig, axes = plt.subplots(1, len(epsilons), figsize=(4.2 * len(epsilons), 3.9), sharey=True, squeeze=False)
    for ax, eps in zip(axes[0], epsilons, strict=True):
        for k, m in enumerate(methods):
            curves = np.array(
                [r["average_accuracy"] for r in records if r["epsilon"] == eps and r["label_method"] == m],
                dtype=float,
            )
            if curves.size == 0:
                continue
            curves = 100 * np.sort(curves, axis=0)
            t = np.arange(1, curves.shape[1] + 1) + offsets[k]
            lo, hi = (curves[1], curves[-2]) if len(curves) >= 3 else (curves[0], curves[-1])
            style = styles[m]
            ax.plot(t, np.median(curves, axis=0), ms=4, lw=1.4, label=label_method_name(m), zorder=3, **style)
            ax.fill_between(t, lo, hi, color=style["color"], alpha=0.06, linewidth=0, zorder=1)
            ax.plot(t, lo, color=style["color"], lw=0.6, alpha=0.5, ls=style["linestyle"], zorder=2)
            ax.plot(t, hi, color=style["color"], lw=0.6, alpha=0.5, ls=style["linestyle"], zorder=2)
        _task_axis(ax, eps, len(records[0]["average_accuracy"]))
    _finish_panels(fig, axes, "average accuracy AA_t (%)", title, outputs, legend_below=True)


def plot_final_accuracy(
    records: list[dict], methods: list[str], title: str, outputs: list[str | Path]
) -> None:
    """Final accuracy per ε (groups) and label method (bars): median over seeds, error bars from the
    2nd worst to the 2nd best seed (min/max under three seeds), the median written on each bar.
    For learners with no curve over tasks (Non-CL trains one model on all tasks at once)."""
    plt = pyplot()

    epsilons = _eps_sorted(records)
    methods = [m for m in methods if any(r["label_method"] == m for r in records)]
    width = 0.8 / max(1, len(methods))
    colors = {m: st["color"] for m, st in method_styles(methods).items()}
    fig, ax = plt.subplots(figsize=(max(5.5, 1.1 * len(epsilons) * max(1, len(methods)) + 1.5), 3.9))
    for k, m in enumerate(methods):
        x, med, lo, hi = [], [], [], []
        for j, eps in enumerate(epsilons):
            v = np.sort(
                [
                    100 * float(r["final_accuracy"])
                    for r in records
                    if r["epsilon"] == eps and r["label_method"] == m
                ]
            )
            v = v[np.isfinite(v)]
            if v.size == 0:
                continue
            a, b = (v[1], v[-2]) if v.size >= 3 else (v[0], v[-1])
            x.append(j + (k - (len(methods) - 1) / 2) * width)
            med.append(float(np.median(v)))
            lo.append(med[-1] - a)
            hi.append(b - med[-1])
        if not x:
            continue
        bars = ax.bar(
            x, med, width, yerr=[lo, hi], capsize=2, color=colors[m], label=label_method_name(m), zorder=2
        )
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in med], fontsize=6, padding=2)
    ax.set_xticks(np.arange(len(epsilons)), [eps_title(e) for e in epsilons])
    ax.set_ylabel("final accuracy AA_T (%)")
    ax.set_xlabel("privacy budget")
    ax.set_ylim(0, min(110, ax.get_ylim()[1] * 1.08))
    ax.grid(alpha=0.3, axis="y")
    _finish_panels(fig, np.array([[ax]]), "final accuracy AA_T (%)", title, outputs, legend_below=True)


def _task_axis(ax, eps: str, n_tasks: int) -> None:
    """An ε panel with the task index t = 1..T on the x axis."""
    ax.set_title(eps_title(eps))
    ax.set_xlabel("task t")
    ax.set_xticks(np.arange(1, n_tasks + 1))
    ax.grid(alpha=0.3)


def _finish_panels(
    fig, axes, ylabel: str, title: str, outputs: list[str | Path], legend_below: bool = False
) -> None:
    """Label, title, save and close a row of panels (``legend_below``: one legend under the panels,
    so that it covers no data when there are many series)."""
    import matplotlib.pyplot as plt

    axes[0][0].set_ylabel(ylabel)
    if legend_below:
        handles, labels = axes[0][0].get_legend_handles_labels()
        for ax in axes[0][1:]:  # series missing from the first panel
            for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
                if lab not in labels:
                    handles.append(h)
                    labels.append(lab)
        ncol = min(4, max(1, len(labels)))
        while True:  # as many columns as fit the figure's width
            legend = fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=ncol, frameon=False)
            width = legend.get_window_extent(fig.canvas.get_renderer()).width
            if ncol == 1 or width <= 0.98 * fig.bbox.width:
                break
            legend.remove()
            ncol -= 1
        fig.suptitle(title, fontsize=10)
        rows = -(-len(labels) // ncol)
        h_in = fig.get_size_inches()[1]
        fig.tight_layout(rect=(0, (0.2 * rows + 0.1) / h_in, 1, 1))
    else:
        axes[0][-1].legend(fontsize=8, loc="lower left")
        fig.suptitle(title, fontsize=10)
        fig.tight_layout()
    save_figure(fig, outputs)
    plt.close(fig)


def plot_label_drop(
    epsilons: list[float],
    deltas: list[float],
    max_class_size: int,
    outputs: list[str | Path],
    lower_bound: bool = False,
) -> None:
    """Fig. 2 (``lower_bound=False``): Pr[a new label is not added] under k-TSGD release, or
    Fig. A1 (``lower_bound=True``): the lower bound 1 − δ_n for any (ε, δ)-DP release."""
    plt = pyplot()

    from ..privacy.label_release import drop_lower_bound, keep_probability

    n = np.arange(1, max_class_size + 1)
    styles = ["-", "--", ":", "-."]
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    for j, delta in enumerate(deltas):
        for i, eps in enumerate(epsilons):
            drop = drop_lower_bound(n, eps, delta) if lower_bound else 1.0 - keep_probability(n, eps, delta)
            ax.plot(n, drop, styles[j % len(styles)], color=f"C{i}", label=f"ε = {eps:g}, δ = {delta:g}")
    ax.set_xlabel("class size n (examples of the new label)")
    ax.set_ylabel("lower bound on Pr[label dropped]" if lower_bound else "Pr[label not added]")
    ax.set_title(
        "Any (ε, δ)-DP label release (paper Fig. A1)"
        if lower_bound
        else "k-TSGD label release (paper Fig. 2)",
        fontsize=10,
    )
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)  # beside the curves
    fig.tight_layout()
    save_figure(fig, outputs)
    plt.close(fig)


def blurry_samples_per_task(
    labels: np.ndarray, n_tasks: int, disjoint_pct: float, blurry_pct: float, seed: int
) -> np.ndarray:
    """Mean number of training samples per blurry class present in each task (paper Fig. 7,
    right): M = 0 keeps each blurry class whole in its owner task; larger M spreads fewer
    samples of more blurry classes over every task."""
    from ..data.scenarios import iblurry_scenario

    sc = iblurry_scenario(labels, n_tasks, disjoint_pct, blurry_pct, seed)
    n_disjoint = int(round(disjoint_pct / 100 * len(np.unique(labels))))
    blurry = np.asarray(sc.class_order[n_disjoint:])
    if blurry.size == 0:
        return np.zeros(n_tasks)
    out = []
    for idx in sc.train_indices:
        present = np.intersect1d(np.unique(labels[idx]), blurry)
        out.append(np.isin(labels[idx], blurry).sum() / present.size if present.size else 0.0)
    return np.array(out)


def plot_blurry_samples(
    labels: np.ndarray,
    *,
    n_tasks: int,
    disjoint_pct: float,
    blurry_pcts: list[float],
    seed: int,
    title: str,
    outputs: list[str | Path],
) -> None:
    """Fig. 7 (right panel): samples per blurry class per task, one line per blurry ratio M."""
    plt = pyplot()

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    t = np.arange(1, n_tasks + 1)
    for m in blurry_pcts:
        ax.plot(
            t,
            blurry_samples_per_task(labels, n_tasks, disjoint_pct, m, seed),
            marker="o",
            ms=3,
            label=f"M = {m:g} %",
        )
    ax.set_xlabel("task t")
    ax.set_ylabel("samples per blurry class")
    ax.set_xticks(t)
    ax.set_title(f"{title}: i-Blurry, N = {disjoint_pct:g} % disjoint classes", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, outputs)
    plt.close(fig)


def plot_aggregation_comparison(
    records: list[dict], methods: list[str], title: str, outputs: list[str | Path], rules: tuple[str, ...]
) -> None:
    """Fig. A2: final accuracy of the PEFT ensemble under each aggregation rule (App. D.2);
    one panel per label method, bars per ε, median over seeds with min/max error bars.
    ``rules`` are the rule names in the order to draw them (``dpcl.learners.aggregation.RULES``)."""
    plt = pyplot()

    RULES = tuple(rules)
    epsilons = sorted({r["epsilon"] for r in records}, key=eps_key)
    methods = [m for m in methods if any(r["label_method"] == m for r in records)]
    fig, axes = plt.subplots(
        1, max(1, len(methods)), figsize=(3.6 * max(1, len(methods)), 3.7), sharey=True, squeeze=False
    )
    width = 0.8 / len(RULES)
    for ax, m in zip(axes[0], methods, strict=False):
        for k, rule in enumerate(RULES):
            med, lo, hi = [], [], []
            for eps in epsilons:
                v = 100 * np.array(
                    [
                        r["final_accuracy_by_aggregation"][rule]
                        for r in records
                        if r["epsilon"] == eps and r["label_method"] == m
                    ]
                )
                med.append(np.median(v) if v.size else np.nan)
                lo.append(med[-1] - v.min() if v.size else 0)
                hi.append(v.max() - med[-1] if v.size else 0)
            x = np.arange(len(epsilons)) + (k - (len(RULES) - 1) / 2) * width
            ax.bar(
                x,
                med,
                width,
                yerr=[lo, hi],
                capsize=2,
                label={"argmax": "ArgMax", "median": "Median", "entropy": "Entropy"}[rule],
            )
        ax.set_xticks(np.arange(len(epsilons)), [eps_title(e) for e in epsilons])
        ax.set_title(label_method_name(m), fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    _finish_panels(fig, axes, "final accuracy (%)", title, outputs, legend_below=True)  # bars fill the panels


def fig3_learners() -> dict[str, str]:
    """Fig. 3's learners (registry role "ours", then "compared") and their figure names."""
    from ..learners import registry

    specs = [s for role in ("ours", "compared") for s in registry.specs() if s.fig3 == role]
    return {s.name: s.label for s in specs}


def plot_desai_comparison(records: list[dict], title: str, outputs: list[str | Path]) -> None:
    """Fig. 3 ([LabelSpace] Sec. 6.1): test accuracy after each task t on the tasks seen so far
    (AA_t) of the Cosine Classifier, PEFT Ensemble and DP-A-GEM, one panel per ε; median over
    seeds with min/max error bars. ``records`` are run metrics of one label method (Base Dataset)."""
    plt = pyplot()

    if not records:
        raise ValueError("Fig. 3 needs at least one run")
    epsilons = sorted({r["epsilon"] for r in records}, key=eps_key)
    fig, axes = plt.subplots(1, len(epsilons), figsize=(4.2 * len(epsilons), 4.4), sharey=True, squeeze=False)
    learners = fig3_learners()
    offsets = {name: (k - (len(learners) - 1) / 2) * 0.08 for k, name in enumerate(learners)}  # apart
    notes: dict[str, list[str]] = {}
    for ax, eps in zip(axes[0], epsilons, strict=True):
        for k, (learner, name) in enumerate(learners.items()):
            runs = [r for r in records if r["epsilon"] == eps and r["learner"] == learner]
            curves = [r["average_accuracy"] for r in runs]
            if not curves:
                continue
            curves = 100 * np.asarray(curves, dtype=float)
            med = np.median(curves, axis=0)
            t = np.arange(1, curves.shape[1] + 1) + offsets[learner]
            ax.errorbar(
                t,
                med,
                yerr=[med - curves.min(axis=0), curves.max(axis=0) - med],
                ms=3.5,
                capsize=2,
                label=name,
                **series_style(k),
            )
        _task_axis(ax, eps, len(records[0]["average_accuracy"]))
        notes[eps] = claim_verdict_notes([r for r in records if r["epsilon"] == eps])
    if any(notes.values()):  # the published claims' verdicts per ε, under the panel title (covers no data)
        lines = max(len(n) for n in notes.values())
        for ax, eps in zip(axes[0], epsilons, strict=True):
            text = notes[eps] + [""] * (lines - len(notes[eps]))  # same height: the panels stay aligned
            ax.set_title("\n".join([ax.get_title(), *text]), fontsize=7.5)
    _finish_panels(fig, axes, "test accuracy on tasks seen (%)", title, outputs, legend_below=True)


def claim_names() -> dict[str, str]:
    """The published claim each learner is run against (registry ``published_claim``), by learner."""
    from ..learners import registry

    return {s.name: s.published_claim for s in registry.specs() if s.published_claim}


def _short_adjacency(adjacency: str) -> str:
    for key, short in (("add/remove", "add/remove"), ("Def. 2", "Def. 2"), ("substitution", "substitution")):
        if key in adjacency:
            return short
    return adjacency


def claim_verdict_notes(records: list[dict], width: int = 58) -> list[str]:
    """Lines naming, per learner with a published claim, its three-valued verdict under each
    adjacency over the runs given ("k/n" where the runs disagree); adjacencies with the same
    verdicts share a clause."""
    import textwrap

    order = ("violated", "not certified", "certified")
    lines = []
    for learner, name in claim_names().items():
        claims = [
            r["published_claim"] for r in records if r["learner"] == learner and r.get("published_claim")
        ]
        if not claims:
            continue
        by_summary: dict[str, list[str]] = {}
        for adjacency in claims[0]["verdicts"]:
            got = [str(c["verdicts"].get(adjacency)).replace("_", " ") for c in claims]
            words = sorted(set(got), key=lambda w: order.index(w) if w in order else len(order))
            summary = (
                words[0] if len(words) == 1 else ", ".join(f"{w} {got.count(w)}/{len(got)}" for w in words)
            )
            by_summary.setdefault(summary, []).append(_short_adjacency(adjacency))
        text = f"{name}: " + "; ".join(f"{v} ({', '.join(a)})" for v, a in by_summary.items())
        lines += textwrap.wrap(text, width, subsequent_indent="  ")
    return lines
