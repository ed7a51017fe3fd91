"""The audit figure: claimed ε against the audited lower bound on ε, one point per row of the privacy
audit table (mechanism or learner, ε), log axes, the diagonal drawn; a white-box row also draws a star at
the ε of the μ-GDP curve at its μ lower bound (:mod:`dpcl.audits.gdp`). A correct implementation stays on
or below the diagonal (with the audit's confidence); a point above it is a refuted claim: the broken
variants (built to be caught) and methods whose published claim does not hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .plotting import MARKERS, pyplot, save_figure, series_offsets

#: lower bounds below this are drawn on it (a bound of 0: the audit found no evidence)
FLOOR = 0.01
#: the rows' markers: the plotting module's, without the star that marks the f-DP route's ε
ROW_MARKERS = tuple(m for m in MARKERS if m != "*") + ("p", "h", "<", ">")


def plot_audit_claims(df: pd.DataFrame, outputs: list[str | Path]) -> None:
    """Claimed ε (x) against the empirical lower bound (y) of every audit row in ``df`` (the table of
    :func:`dpcl.stages.privacy.privacy_audit`: mechanism, tag, broken, claimed_epsilon,
    epsilon_lower_bound, verdict)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12.5, 5.6))
    names = list(dict.fromkeys(df["mechanism"]))
    shift = 10.0 ** series_offsets(len(names), 0.012)  # side by side around each claim (log x axis)
    for k, name in enumerate(names):
        rows = df[df["mechanism"] == name]
        claimed = rows["claimed_epsilon"].to_numpy(dtype=float) * shift[k]
        lower = np.maximum(rows["epsilon_lower_bound"].to_numpy(dtype=float), FLOOR)
        refuted = rows["verdict"].astype(str).str.startswith("violated").to_numpy()
        broken = bool(rows["broken"].fillna(False).astype(bool).any())
        tag = rows["tag"].fillna("").iloc[0] if "tag" in rows else ""
        # a white-box row's name says whose code it audits; the learners sharing it are in the table
        tag = "" if "(white-box)" in name else tag
        label = name + (f" ({tag})" if tag else "") + (" [broken on purpose]" if broken and not tag else "")
        style = {"color": f"C{k % 10}", "marker": ROW_MARKERS[k % len(ROW_MARKERS)], "linestyle": "none"}
        ax.plot(
            claimed, lower, markersize=7, label=label, markerfacecolor="none" if broken else None, **style
        )
        ax.plot(claimed[refuted], lower[refuted], "x", color="black", markersize=11, linestyle="none")
        if "epsilon_gdp" in rows:  # the f-DP route of the white-box rows: a star at the ε of its μ bound
            gdp = rows["epsilon_gdp"].to_numpy(dtype=float)
            has = np.isfinite(gdp)
            ax.plot(
                claimed[has], np.maximum(gdp[has], FLOOR), marker="*", markersize=9, linestyle="none",
                color=style["color"], markeredgecolor="black", markeredgewidth=0.4,
            )  # fmt: skip
    finite = df["epsilon_lower_bound"].replace(np.inf, np.nan).dropna()
    hi = max(float(df["claimed_epsilon"].max()), float(finite.max()) if len(finite) else 1.0) * 1.5
    lo = FLOOR / 1.5
    ax.plot([lo, hi], [lo, hi], color="grey", linewidth=1, linestyle="--", label="lower bound = claim")
    # the points of one claim sit side by side around it: a short line at the claim's height spans them
    span = float(shift[-1]) * 1.03
    for c in sorted(set(df["claimed_epsilon"].astype(float))):
        ax.plot([c / span, c * span], [c, c], color="black", linewidth=1.2)
    ax.plot([], [], color="black", linewidth=1.2, label="the claim (its points side by side)")
    ax.plot([], [], "x", color="black", markersize=11, linestyle="none", label="refuted (violated)")
    if "epsilon_gdp" in df and df["epsilon_gdp"].notna().any():
        ax.plot(
            [], [], "*", color="grey", markeredgecolor="black", markeredgewidth=0.4, markersize=9,
            linestyle="none", label="white-box rows: ε of G_μ at the μ lower bound (f-DP route)",
        )  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(float(df["claimed_epsilon"].min()) / 1.6, float(df["claimed_epsilon"].max()) * 1.6)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("claimed ε")
    ax.set_ylabel("audited lower bound on ε (95 %)")
    ax.set_title(
        f"Claimed ε vs audited lower bound (add/remove; a bound of 0 is drawn at {FLOOR:g})",
        fontsize=10,
        loc="left",
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    save_figure(fig, outputs)
    plt.close(fig)
