"""The paper's Figures 4-7 (paper 000 Sec. 6.1-6.2) from the configured runs.

Each figure draws what the runs provide and writes a short note ("no runs for …") in a
panel whose axis the config does not sweep, instead of failing: the embedded default has one
release fraction and no i-Blurry benchmark, the paper's config has all of them. Points are
the median over seeds with error bars from the 2nd worst to the 2nd best seed (the paper's
"2nd/4th best seed" of five; min/max below three seeds, see ``tables.order_stats``).
"""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import numpy as np

from .figures import _save
from .tables import LEARNER_NAMES, label_method_name, order_stats

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
    return np.array([100 * float(r["final_accuracy"]) for r in records
                     if r["learner"] == learner and r["epsilon"] == eps and r["label_method"] == method])  # fmt: skip


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
    ax.text(0.5, 0.5, textwrap.fill(text, 55), ha="center", va="center", fontsize=8, wrap=True, transform=ax.transAxes,
            bbox={"boxstyle": "round", "fc": "#f4f4f4", "ec": "#bbbbbb"})  # fmt: skip
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
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, outputs)
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


def _bar_figure(bench_records: dict[str, list[dict]], categories, title: str, empty: str,
                outputs: list[str | Path]) -> list[str]:  # fmt: skip
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
                f"no runs for {' / '.join(LEARNER_NAMES[x] for x in FIG_LEARNERS)} on {bench}",
                notes,
            )
            continue
        for j, learner in enumerate(learners):
            ax = axes[i][j]
            epsilons = _epsilons([r for r in records if r["learner"] == learner])
            if not epsilons:
                _note(ax, f"no runs for {LEARNER_NAMES[learner]} on {bench}", notes)
                continue
            names = list(dict.fromkeys(n for e in epsilons for n, _ in categories(records, learner, e)))
            width = 0.8 / max(1, len(names))
            drawn = False
            for k, name in enumerate(names):
                for x, eps in enumerate(epsilons):
                    method = dict(categories(records, learner, eps)).get(name)
                    v = _final(records, learner, eps, method) if method else np.array([])
                    if v.size == 0:
                        continue
                    lo, med, hi = order_stats(v)
                    xk = x + (k - (len(names) - 1) / 2) * width
                    color = colors.setdefault(name, f"C{len(colors)}")
                    bar = ax.bar(
                        xk, med, width, yerr=[[med - lo], [hi - med]], capsize=2, color=color, label=name
                    )
                    handles.setdefault(name, bar)
                    drawn = True
                    rf = release_fraction(method)
                    if rf is not None and name.startswith("Release Labels"):
                        ax.annotate(f"f={100 * rf[1]:g}%", (xk, hi), ha="center", va="bottom", fontsize=6,
                                    xytext=(0, 2), textcoords="offset points")  # fmt: skip
            if not drawn:
                _note(ax, f"no runs of these label methods for {LEARNER_NAMES[learner]} on {bench}", notes)
                continue
            ax.set_xticks(np.arange(len(epsilons)), [_eps_name(e) for e in epsilons])
            ax.set_title(f"{bench}: {LEARNER_NAMES[learner]}", fontsize=9)
            ax.set_ylabel("final accuracy (%)")
            ax.grid(alpha=0.3, axis="y")
    _finish(fig, title, notes[:1] if empty else [], handles, min(4, max(1, len(handles))))
    _save(fig, outputs)
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

    return _bar_figure(bench_records, categories, "Fig. 4: comparison of label methods (median, 2nd/4th best seed)",
                "; ".join(missing), outputs)  # fmt: skip


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

    return _bar_figure(bench_records, categories, "Fig. 6: details on Public Labels (median, 2nd/4th best seed)",
                missing, outputs)  # fmt: skip


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
    fig, axes = plt.subplots(len(benches), 2, figsize=(10, 3.6 * len(benches)), squeeze=False)
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
            notes.append(f"{bench}: one release fraction (f = {100 * fracs[0]:g} %); add release-f<F> methods "
                         "(config/paper.yaml sweeps 2.5-50 %) to trace the trade-off")  # fmt: skip
        styles = {"ktsgd": "-", "laplace": "--"}
        k = 0
        for learner in _learners(rel):
            for eps in _epsilons([r for r in rel if r["learner"] == learner]):
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
                    f, lo, med, hi = (np.array(c) for c in zip(*pts, strict=True))
                    name = f"{LEARNER_NAMES[learner]}, {_eps_name(eps)}" + (
                        ", Laplace" if mech == "laplace" else ""
                    )
                    ax_acc.errorbar(100 * f, med, yerr=[med - lo, hi - med], fmt=styles[mech], marker="o", ms=3,
                                    capsize=2, color=f"C{k}", label=name)  # fmt: skip
                    ax_acc.axvline(100 * f[np.argmax(med)], color="red", ls=":", lw=1)
                    k += 1
        # The label release depends on (seed, ε, f), not on the learner: one curve per ε.
        lab_learner = _learners(rel)[0] if _learners(rel) else rel[0]["learner"]
        lab = [r for r in rel if r["learner"] == lab_learner]
        for c, eps in enumerate(_epsilons(lab)):
            pts = []
            for m in sorted({r["label_method"] for r in lab}, key=lambda m: release_fraction(m)[1]):
                v = [_released_total(r) for r in lab if r["epsilon"] == eps and r["label_method"] == m
                     and release_fraction(m)[0] == "ktsgd"]  # fmt: skip
                if v:
                    pts.append((release_fraction(m)[1], *order_stats(v)))
            if pts:
                f, lo, med, hi = (np.array(x) for x in zip(*pts, strict=True))
                ax_lab.errorbar(100 * f, med, yerr=[med - lo, hi - med], marker="o", ms=3, capsize=2, color=f"C{c}",
                                label=_eps_name(eps))  # fmt: skip
        oracle = [
            _released_total(r)
            for r in records
            if r["label_method"] == "oracle" and r["learner"] == lab_learner
        ]
        if oracle:
            ax_lab.axhline(
                np.median(oracle), color="gray", ls="--", lw=1, label="Label Oracle (labels present)"
            )
        for ax in (ax_acc, ax_lab):
            ax.set_xscale("log")
            ax.set_xticks(100 * np.array(fracs), [f"{100 * x:g}" for x in fracs])
            ax.minorticks_off()
            ax.set_xlabel("budget fraction f for label release (%)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=6, loc="best", framealpha=0.7)
        ax_acc.set_ylabel("final accuracy (%)")
        ax_acc.set_title(f"{bench}: accuracy (red dotted: best f)", fontsize=9)
        ax_lab.set_ylabel("labels released, Σ_t |O_t|")
        ax_lab.set_title(f"{bench}: released labels (k-TSGD)", fontsize=9)
    _finish(fig, title, notes, {}, 1)
    _save(fig, outputs)
    plt.close(fig)
    return notes


def blurry_groups(benchmarks: dict[str, dict]) -> dict[str, dict[float, str]]:
    """i-Blurry benchmarks grouped by (dataset, backbone, tasks, N): group title → {M: benchmark}.
    A disjoint benchmark of the same dataset, backbone and task count joins every group as M = 0
    (the disjoint split is i-Blurry with M = 0, DESIGN §6)."""
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
    return {f"{d} / {bb}, i-Blurry N = {n:g} %, {t} tasks": dict(sorted(v.items()))
            for (d, bb, t, n), v in groups.items()}  # fmt: skip


def plot_fig7_blurriness(groups: dict[str, dict[float, list[dict]]], outputs: list[str | Path]) -> list[str]:
    """Fig. 7 left (Sec. 6.2): final accuracy against the blurry ratio M per label method (Public
    Labels: largest ×N run; Release Labels: best f at each M), a row per group and learner, a
    column per ε. ``groups`` maps a group title to {M: run records of that benchmark}."""
    plt = _pyplot()
    title = "Fig. 7 (left): impact of blurriness, final accuracy vs blurry ratio M"
    rows = [(g, lr) for g, by_m in groups.items()
            for lr in _learners([r for recs in by_m.values() for r in recs])]  # fmt: skip
    if not rows:
        why = "no runs of the i-Blurry benchmarks" if groups else "no i-Blurry benchmarks in this config"
        return _note_figure(title, f"{why}: add benchmarks with scenario: iblurry, disjoint_pct N and blurry_pct M "
                     "(config/paper.yaml has N = 50, M = 10, 25, 50, 75, 100 on CIFAR-100)", outputs)  # fmt: skip
    epsilons = sorted(
        {r["epsilon"] for by_m in groups.values() for recs in by_m.values() for r in recs}, key=_eps_key
    )
    fig, axes = plt.subplots(len(rows), len(epsilons), figsize=(4.4 * len(epsilons), 3.4 * len(rows)),
                             squeeze=False, sharey="row")  # fmt: skip
    handles: dict[str, object] = {}
    colors: dict[str, str] = {}
    notes = []
    for i, (group, learner) in enumerate(rows):
        by_m = groups[group]
        if len(by_m) == 1:
            notes.append(f"{group}: one blurry ratio (M = {next(iter(by_m)):g} %); add i-Blurry benchmarks with "
                         "other blurry_pct values")  # fmt: skip
        for j, eps in enumerate(epsilons):
            ax = axes[i][j]
            series: dict[str, list[tuple]] = {}
            for m_pct, recs in by_m.items():
                pub = _largest_public([r for r in recs if r["learner"] == learner])
                picks = [("Label Oracle (Baseline)", "oracle"), ("Base Dataset (Baseline)", "base"),
                         (f"Public Labels ({public_multiplier(pub)}x)" if pub else "", pub),
                         ("Release Labels (best f)", best_release(recs, learner, eps))]  # fmt: skip
                for name, method in picks:
                    v = _final(recs, learner, eps, method) if method else np.array([])
                    if v.size:
                        series.setdefault(name, []).append((m_pct, *order_stats(v)))
            if not series:
                _note(ax, f"no runs for {LEARNER_NAMES[learner]} at {_eps_name(eps)}", notes)
                continue
            for name, pts in series.items():
                m_pct, lo, med, hi = (np.array(c) for c in zip(*pts, strict=True))
                color = colors.setdefault(name, f"C{len(colors)}")
                h = ax.errorbar(m_pct, med, yerr=[med - lo, hi - med], marker="o", ms=3, capsize=2, color=color,
                                label=name)  # fmt: skip
                handles.setdefault(name, h)
            ax.set_xticks(sorted(by_m))
            span = (max(by_m) - min(by_m)) or 10.0
            ax.set_xlim(min(by_m) - 0.06 * span, max(by_m) + 0.06 * span)
            ax.set_xlabel("blurry ratio M (%)")
            head = f"{group}\n" if len(groups) > 1 else ""
            ax.set_title(f"{head}{LEARNER_NAMES[learner]}, {_eps_name(eps)}", fontsize=8 if head else 9)
            ax.grid(alpha=0.3)
        axes[i][0].set_ylabel("final accuracy (%)")
    if len(groups) == 1:
        title += f"\n{next(iter(groups))}"
    notes = list(dict.fromkeys(notes))
    _finish(fig, title, [n for n in notes if "one blurry ratio" in n], handles, min(4, max(1, len(handles))))
    _save(fig, outputs)
    plt.close(fig)
    return notes
