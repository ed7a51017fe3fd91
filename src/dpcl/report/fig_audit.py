"""The audit figure: claimed ε against the audited lower bound on ε, one point per row of the privacy
audit table (mechanism or learner, ε), log axes, the diagonal drawn. The left panel holds the
assumption-free bounds (Clopper-Pearson, the one-run bound); the right panel, drawn apart, the ε at δ of
the μ-GDP curve at each white-box row's μ lower bound (:mod:`dpcl.audits.gdp`), a lower bound on ε for
Gaussian-shaped mechanisms only. A correct implementation stays on or below the diagonal (with the
audit's confidence); a point above it refutes its claim: the broken variants (built to be caught) and
methods whose published claim does not hold."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .plotting import MARKERS, pyplot, save_figure, series_offsets

#: lower bounds below this are drawn on it (a bound of 0: the audit found no evidence)
FLOOR = 0.01
#: the rows' markers: the plotting module's, without the star
ROW_MARKERS = tuple(m for m in MARKERS if m != "*") + ("p", "h", "<", ">")


def _column(rows: pd.DataFrame, name: str) -> np.ndarray:
    return rows[name].to_numpy(dtype=float) if name in rows else np.full(len(rows), np.nan)


def plot_audit_claims(df: pd.DataFrame, outputs: list[str | Path]) -> None:
    """Claimed ε (x) against the empirical lower bounds (y) of every audit row in ``df`` (the table of
    :func:`dpcl.stages.privacy.privacy_audit`: mechanism, tag, broken, claimed_epsilon,
    epsilon_lower_bound, and for white-box rows mu_lower_bound, claimed_mu, epsilon_gdp)."""
    df = df[df["epsilon_lower_bound"].notna()]  # the exposure rows count reads: no bound on ε to draw
    plt = pyplot()
    has_gdp = "epsilon_gdp" in df and df["epsilon_gdp"].notna().any()
    fig, axes = plt.subplots(
        1, 2 if has_gdp else 1, figsize=(16.5 if has_gdp else 12.5, 5.6), squeeze=False, sharey=True
    )
    ax, ax_gdp = axes[0][0], (axes[0][1] if has_gdp else None)
    names = list(dict.fromkeys(df["mechanism"]))
    shift = 10.0 ** series_offsets(len(names), 0.012)  # side by side around each claim (log x axis)
    for k, name in enumerate(names):
        rows = df[df["mechanism"] == name]
        claimed = rows["claimed_epsilon"].to_numpy(dtype=float) * shift[k]
        lower = np.maximum(rows["epsilon_lower_bound"].to_numpy(dtype=float), FLOOR)
        refuted = rows["epsilon_lower_bound"].to_numpy(dtype=float) > rows["claimed_epsilon"].to_numpy(
            dtype=float
        )
        broken = bool(rows["broken"].fillna(False).astype(bool).any())
        tag = rows["tag"].fillna("").iloc[0] if "tag" in rows else ""
        # a white-box row's name says whose code it audits; the learners sharing it are in the table
        tag = "" if "(white-box)" in name else tag
        label = name + (f" ({tag})" if tag else "") + (" [broken on purpose]" if broken and not tag else "")
        style = {"color": f"C{k % 10}", "marker": ROW_MARKERS[k % len(ROW_MARKERS)], "linestyle": "none"}
        face = {"markerfacecolor": "none"} if broken else {}
        ax.plot(claimed, lower, markersize=7, label=label, **face, **style)
        ax.plot(claimed[refuted], lower[refuted], "x", color="black", markersize=11, linestyle="none")
        if ax_gdp is not None:
            gdp = _column(rows, "epsilon_gdp")
            has = np.isfinite(gdp)
            if has.any():
                by_mu = _column(rows, "mu_lower_bound") > _column(rows, "claimed_mu")
                ax_gdp.plot(claimed[has], np.maximum(gdp[has], FLOOR), markersize=7, **face, **style)
                ax_gdp.plot(
                    claimed[has & by_mu], np.maximum(gdp[has & by_mu], FLOOR), "x", color="black",
                    markersize=11, linestyle="none",
                )  # fmt: skip
    finite = df["epsilon_lower_bound"].replace(np.inf, np.nan).dropna()
    hi = max(float(df["claimed_epsilon"].max()), float(finite.max()) if len(finite) else 1.0) * 1.5
    if has_gdp:
        hi = max(hi, float(df["epsilon_gdp"].max()) * 1.5)
    lo = FLOOR / 1.5
    # the points of one claim sit side by side around it: a short line at the claim's height spans them
    span = float(shift[-1]) * 1.03
    for a in (ax, ax_gdp):
        if a is None:
            continue
        a.plot([lo, hi], [lo, hi], color="grey", linewidth=1, linestyle="--")
        for c in sorted(set(df["claimed_epsilon"].astype(float))):
            a.plot([c / span, c * span], [c, c], color="black", linewidth=1.2)
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlim(float(df["claimed_epsilon"].min()) / 1.6, float(df["claimed_epsilon"].max()) * 1.6)
        a.set_ylim(lo, hi)
        a.set_xlabel("claimed ε")
        a.grid(True, which="both", alpha=0.3)
    ax.plot([], [], color="grey", linewidth=1, linestyle="--", label="lower bound = claim")
    ax.plot([], [], color="black", linewidth=1.2, label="the claim (its points side by side)")
    ax.plot([], [], "x", color="black", markersize=11, linestyle="none", label="refuted")
    ax.set_ylabel("audited lower bound on ε at δ")
    ax.set_title(
        f"Assumption-free lower bounds on ε (add/remove; a bound of 0 is drawn at {FLOOR:g})",
        fontsize=10,
        loc="left",
    )
    if ax_gdp is not None:
        ax_gdp.set_title(
            "White-box rows: ε of G_μ at the μ lower bound\n(a bound on ε for Gaussian-shaped mechanisms only)",
            fontsize=10,
            loc="left",
        )
    # the rows' legend beside the last panel (the panels share the rows' markers)
    handles, labels = ax.get_legend_handles_labels()
    (ax_gdp or ax).legend(
        handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
    )
    fig.tight_layout()
    save_figure(fig, outputs)
    plt.close(fig)
