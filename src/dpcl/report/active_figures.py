"""Figures of DP active learning ([Schwethelm2025]) from our runs: Fig. 5 (accuracy against ε_Sel at a fixed
total ε, :func:`selection_epsilon_figure`) and Figs. 2/4 (each group's cumulative ε after each training
phase, :func:`group_privacy_figure`). Tables: :mod:`dpcl.report.active`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .active import Cell, _at, _pm_name, _pool_modes, load_schedule, load_summary, main_setting
from .plotting import pyplot, save_figure

# ----------------------------------------------------------------------------- figures


_pyplot = pyplot


def _outputs(out_png: str | Path) -> list[Path]:
    png = Path(out_png)
    return [png, png.with_suffix(".pdf")]


def selection_epsilon_figure(
    summary_csv: str | Path, out_png: str | Path, epsilon: float | None = None
) -> list[Path]:
    """Fig. 5 analogue ([Schwethelm2025]): ``entropy-dp-sa`` accuracy against ε_Sel at total ε, bands for
    Random and non-DP-selection Entropy; one panel per pool × mode. Writes the PNG and a PDF beside it."""
    df = load_summary(summary_csv)
    eps = float(epsilon) if epsilon is not None else main_setting(df)[0]
    ent = _at(df, "entropy-dp-sa", eps, None)
    if not len(ent):
        raise ValueError(f"no entropy-dp-sa runs at ε = {eps:g} in {summary_csv}")
    plt = _pyplot()
    pms = _pool_modes(ent)
    fig, axes = plt.subplots(1, len(pms), figsize=(4.2 * len(pms), 3.9), sharey=True, squeeze=False)
    for ax, (p, m) in zip(axes[0], pms, strict=True):
        here = df[(df["pool"] == p) & (df["mode"] == m)]
        e = ent[(ent["pool"] == p) & (ent["mode"] == m)]
        xs = sorted(e["selection_epsilon"].unique())
        for k, (method, name, color) in enumerate(
            (("random-nal", "Random (no AL)", "C7"), ("entropy-nondp-sa", "Entropy, non-DP selection", "C2"))
        ):
            c = Cell.of(_at(here, method, eps, None))
            if c.n:
                sd = c.sd if math.isfinite(c.sd) else 0.0
                ax.axhline(
                    c.mean, color=color, ls="--" if k == 0 else ":", lw=1.2, label=f"{name} (n = {c.n})"
                )
                ax.axhspan(c.mean - sd, c.mean + sd, color=color, alpha=0.15, lw=0)
        cells = [Cell.of(e[np.isclose(e["selection_epsilon"], x)]) for x in xs]
        ax.errorbar(
            xs,
            [c.mean for c in cells],
            yerr=[c.sd if math.isfinite(c.sd) else 0.0 for c in cells],
            color="C0",
            marker="o",
            ms=4,
            capsize=3,
            label="Entropy, DP selection (SA)",
        )
        ax.set_title(_pm_name(p, m), fontsize=9)
        ax.set_xlabel("selection budget ε_Sel")
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:g}" for x in xs])
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("final test accuracy (%)")
    handles: list = []
    labels: list[str] = []
    for ax in axes[0]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            key = lab.split(" (n =")[0]
            if key not in [x.split(" (n =")[0] for x in labels]:
                handles.append(h)
                labels.append(key)
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle(
        f"Accuracy against the selection budget at total ε = {eps:g} ([Schwethelm2025] Fig. 5 analogue; "
        "mean ± sd over seeds)",
        fontsize=10,
    )
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    outs = _outputs(out_png)
    save_figure(fig, outs)
    plt.close(fig)
    return outs


def group_epsilon_curves(schedule: Any) -> list[list[float]]:
    """Per group g, its cumulative ε after each training phase p ≥ g (0-based): selection ε paid
    plus the ε of its own segments up to phase p ([Schwethelm2025] Sec. III-E, basic composition), with
    the schedule's stating accountant (PLD, or RDP for a schedule solved with RDP)."""
    from ..privacy.group_accounting import training_epsilon

    s = load_schedule(schedule)
    curves = []
    for g in range(s.groups):
        curves.append(
            [
                s.plan.paid(g)
                + training_epsilon(
                    [
                        (x.noise_multiplier, x.rates[g], x.steps)
                        for x in s.segments
                        if x.phase <= p and x.rates[g] > 0
                    ],
                    s.plan.delta,
                    s.stating_accountant,
                )
                for p in range(g, s.plan.phases)
            ]
        )
    return curves


def _group_name(g: int) -> str:
    sub = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
    return "D₁" if g == 0 else f"K{str(g + 1).translate(sub)}"


def group_privacy_figure(
    schedules: Mapping[str, str | Path], out_png: str | Path, rel_tol: float = 1e-6
) -> list[Path]:
    """Figs. 2/4 analogue ([Schwethelm2025]): per schedule, each group's cumulative ε (selection paid +
    training, the schedule's stating accountant: an upper bound) after each training phase, the
    target ε dashed; groups whose upper bound ends above it in red ("not certified": an upper bound
    above the target is no proof of a violation, see :func:`dpcl.report.active_authors.authors_schedule_table`)."""
    if not schedules:
        raise ValueError("no schedules to plot")
    plt = _pyplot()
    loaded = {name: load_schedule(src) for name, src in schedules.items()}
    n = len(loaded)
    fig, axes = plt.subplots(1, n, figsize=(4.4 * n, 4.6), sharey=True, squeeze=False)
    top = 0.0
    for ax, (name, s) in zip(axes[0], loaded.items(), strict=True):
        target = s.plan.epsilon
        curves = group_epsilon_curves(s)
        phases = s.plan.phases
        worst = -1
        for g, ys in enumerate(curves):
            # groups apart by a small x offset: under step amplification their curves coincide
            xs = np.arange(g + 1, phases + 1) + (g - (len(curves) - 1) / 2) * 0.07
            over = ys[-1] > target * (1 + rel_tol)
            paid = s.plan.paid(g)
            label = f"{_group_name(g)}: final ε = {ys[-1]:.2f}" + (f" (sel. {paid:.2f})" if paid > 0 else "")
            ax.plot(
                xs,
                ys,
                marker="o",
                ms=4,
                lw=1.4,
                color=f"C{g % 10}",
                label=label + (" > target: not certified" if over else ""),
            )
            if over:
                ax.plot(xs[-1:], ys[-1:], "o", ms=9, mfc="none", mec="red", mew=1.3)
                worst = g if worst < 0 or ys[-1] > curves[worst][-1] else worst
            top = max(top, max(ys))
        if worst >= 0:
            ax.annotate(
                f"max {curves[worst][-1]:.2f} > {target:g}: not certified",
                (phases, curves[worst][-1]),
                ha="right",
                va="bottom",
                textcoords="offset points",
                xytext=(-12, 6),
                fontsize=8,
                color="red",
            )
        ax.axhline(target, color="k", ls="--", lw=1, label=f"target ε = {target:g}")
        ax.set_title(
            f"{name}\n(ε = {target:g}, ε_Sel = {s.plan.selection_epsilon:g}, T = {phases - 1}; "
            f"{s.stating_accountant.upper()} upper bound)",
            fontsize=9,
        )
        ax.set_xlabel("training phase")
        ax.set_xticks(np.arange(1, phases + 1))
        ax.set_xlim(0.7, phases + 0.3)
        ax.grid(alpha=0.3)
        leg = ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
        for text in leg.get_texts():
            if text.get_text().endswith("not certified"):
                text.set_color("red")
    axes[0][0].set_ylabel("cumulative ε of the group")
    axes[0][0].set_ylim(0, 1.2 * top)  # headroom for the red "max" note above the target line
    fig.suptitle(
        "Privacy loss per group across training phases ([Schwethelm2025] Figs. 2/4 analogue)", fontsize=10
    )
    fig.tight_layout()
    outs = _outputs(out_png)
    save_figure(fig, outs)
    plt.close(fig)
    return outs
