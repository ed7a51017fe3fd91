"""[LabelSpace]'s per-task figures (App. E.1, F: Figs. A4-A9) and the privacy-utility figure."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from ..data.registry import display_name
from .fig_common import (
    TASK_METHOD,
    _eps_name,
    _epsilons,
    _final,
    _finish,
    _note,
    _note_figure,
    _pyplot,
)
from .names import label_methods_key, learner_name
from .plotting import save_figure, series_style

# --- Appendix figures A3-A9 ([LabelSpace] App. E.1, F) ------------------------------------------


def task_learners() -> tuple[str, ...]:
    """Learners of Figs. A4-A9 (App. F) in order: Table A8's (reference.PAPER_LEARNERS), then every
    other registered learner (registry order)."""
    from ..learners import registry
    from .reference import PAPER_LEARNERS

    paper = [lr for _, ours, _ in PAPER_LEARNERS for lr in ours]
    return tuple(dict.fromkeys([*paper, *registry.names()]))


_NO_BASE = (
    "no runs with label method 'base' (Base Dataset, the setting of App. F): add base to label_methods "
    "(Cosine Classifier) and head_label_methods (DP-SGD learners)"
)


def _learner_name(learner: str) -> str:
    return learner_name(learner)


def _task_learners(records: list[dict]) -> list[str]:
    """Learners present in ``records``: App. F's order first, then any other in name order."""
    present, order = {r["learner"] for r in records}, task_learners()
    return [lr for lr in order if lr in present] + sorted(present - set(order))


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
        f"{head}: median {what} per task, {bench} ({display_name(dataset)}, {scenario}); "
        f"Base Dataset, error bars min/max over {over}"
    )
    if not records:
        return _note_figure(title, f"no runs for benchmark {bench} in this config", outputs)
    base = [r for r in records if r["label_method"] == TASK_METHOD]
    if not base:
        return _note_figure(title, _NO_BASE, outputs)
    notes = [
        f"no Base Dataset runs for {_learner_name(lr)}: add base to " + label_methods_key(lr)
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
        ax.set_title(f"{bench} ({display_name(ds)}, {cfg.get('scenario', 'disjoint')})", fontsize=9)
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
