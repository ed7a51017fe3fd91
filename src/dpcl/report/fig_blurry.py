"""Blurry task boundaries: [LabelSpace] Fig. 7 and Fig. A3 (i-Blurry) and [Tobaben2024] Fig. 4 (Sec. 7.2:
Not Blurry vs I-Blurry vs Si-Blurry)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .fig_common import (
    TASK_METHOD,
    _eps_key,
    _eps_name,
    _epsilons,
    _final,
    _finish,
    _largest_public,
    _learners,
    _note,
    _note_figure,
    _pyplot,
    _stat_bar,
    best_release,
    fig_learners,
    min_median_max,
    public_multiplier,
    release_fraction,
)
from .names import label_methods_key, learner_name
from .plotting import save_figure
from .tables import order_stats


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


#: [Tobaben2024] Sec. 7.2 (Fig. 4, Table F.2): the task splits compared on one data set, by scenario.
BLURRY_SETTINGS = {"disjoint": "Not Blurry", "iblurry": "I-Blurry", "siblurry": "Si-Blurry"}
#: The i-Blurry(N, M) of that comparison. [Tobaben2024] states neither N nor M: the i-Blurry-50-10 of [Koh2022].
IBLURRY_NM = (50.0, 10.0)


def blurry_comparisons(benchmarks: dict[str, dict]) -> dict[str, dict[str, str]]:
    """[Tobaben2024]'s Not Blurry / I-Blurry / Si-Blurry benchmarks grouped by (dataset, backbone, tasks):
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
    """The groups of ``blurry_comparisons`` with all three settings: those [Tobaben2024] Fig. 4 draws."""
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


# --- [Tobaben2024] Fig. 4 (Sec. 7.2): Not Blurry vs I-Blurry vs Si-Blurry ------------------------


@dataclass
class BlurrySetting:
    """One column of [Tobaben2024]'s blurry comparison: a benchmark, its runs and its task data."""

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
            f"no Base Dataset runs of {learner_name(learner)}: add base to " + label_methods_key(learner),
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
    """[Tobaben2024] Fig. 4 (Sec. 7.2): per data set, training samples per task of disjoint and blurry
    classes for Not Blurry, I-Blurry and Si-Blurry (left) and the final accuracy of the Cosine
    Classifier and the PEFT Ensemble per setting and ε (right; Base Dataset, median with min/max
    over seeds). ``groups``: title → {scenario: BlurrySetting} with all of ``BLURRY_SETTINGS``
    (``blurry_comparisons``); without any, a note figure says which benchmarks to add."""
    plt = _pyplot()
    title = (
        "[Tobaben2024] Fig. 4: Not Blurry vs I-Blurry (N = 50, M = 10) vs Si-Blurry; train samples per task "
        "(left), final accuracy, Base Dataset, median and min/max over seeds (right)"
    )
    groups = {g: s for g, s in groups.items() if len(s) == len(BLURRY_SETTINGS)}
    if not groups:
        return _note_figure(title, _NO_COMPARISON, outputs)
    learners = _learners([r for g in groups.values() for s in g.values() for r in s.records]) or list(
        fig_learners()[:1]
    )
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
