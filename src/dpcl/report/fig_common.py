"""What the paper figures (``paper_figures``) share: which learners they compare, order statistics,
panels that say what the config lacks, bar figures and the shared legend."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from .names import eps_key, eps_title, label_method, learner_name
from .plotting import pyplot, save_figure
from .tables import order_stats


def fig_learners() -> tuple[str, ...]:
    """Learners the paper compares in Figs. 4-7: [LabelSpace]'s own methods (registry Fig. 3 role "ours":
    the Cosine Classifier and the PEFT Ensembles)."""
    from ..learners import registry

    return tuple(s.name for s in registry.specs() if s.fig3 == "ours")


#: The label method of App. F (Tables A8-A10 match Table A3's Base Dataset column).
TASK_METHOD = "base"
_eps_key = eps_key
_eps_name = eps_title


def release_fraction(method: str) -> tuple[str, float] | None:
    """('ktsgd' | 'laplace', f) for a Release Labels tag ``release-[laplace-]f<F>``, else None."""
    m = label_method(method)
    if m is None or m.kind != "release":
        return None
    return ("laplace" if m.mechanism == "laplace" else "ktsgd", m.fraction)


def public_multiplier(method: str) -> int | None:
    """N for a plain Public Labels tag ``public-x<N>``, else None."""
    from .names import public_multiplier as multiplier

    return multiplier(method)


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
    return [lr for lr in fig_learners() if lr in present]


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


_pyplot = pyplot


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
    """(min, median, max) over seeds: [Tobaben2024]'s "min, median and max seed" (Sec. 7)."""
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
    learners = sorted({lr for b in benches for lr in _learners(bench_records[b])}, key=fig_learners().index)
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
                f"no runs for {' / '.join(learner_name(x) for x in fig_learners())} on {bench}",
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
