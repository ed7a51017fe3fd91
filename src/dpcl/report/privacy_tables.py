"""The privacy tables: the label-space attack game ([LabelSpace] Fig. 1, :func:`dpcl.audits.attack.attack_table`)
and the empirical audits (:func:`dpcl.audits.audit.audit_table`) through the table model."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from .table import Table, to_markdown


def attack_table_markdown(df: pd.DataFrame) -> str:
    """Markdown rendering of :func:`attack_table` with a caption that says what the columns mean."""
    alpha = float(df.attrs.get("alpha", 0.05))
    rows = [
        [
            str(r.label_method),
            f"{r.epsilon:g}",
            f"{r.delta:g}",
            str(r.trials),
            f"{r.attack_accuracy:.4f}",
            f"[{r.ci_low:.4f}, {r.ci_high:.4f}]",
            f"{r.expected_accuracy:.4f}",
            f"{r.dp_bound:.4f}",
        ]
        for r in df.itertuples(index=False)
    ]
    note = (
        f"The attacker guesses D' (one extra example with a new label y*) iff y* is in the released label "
        f"space. CI: Clopper-Pearson {100 * (1 - alpha):g} % interval. Expected: exact accuracy of this "
        "attack under the mechanism. Bound: (e^ε + δ)/(1 + e^ε), the most any attack can reach against an "
        "(ε, δ)-DP release; Release Labels spends only the fraction f of (ε, δ) on the label space."
    )
    columns = ["Label method", "ε", "δ", "Trials", "Attack accuracy", "CI", "Expected", "(ε, δ)-DP bound"]
    title = "Attack on the output label space ([LabelSpace] Fig. 1)"
    return to_markdown(Table(title, columns, rows, [note], notes_style="plain"))


def audit_table_markdown(df: pd.DataFrame, notes: Sequence[str] = ()) -> str:
    """Markdown rendering of :func:`audit_table`; ``notes``: further paragraphs under it."""
    rows = []
    has_mu = "mu_lower_bound" in df.columns
    has_threat = "threat_model" in df.columns
    for r in df.itertuples():
        lb = (
            "—"
            if math.isnan(r.epsilon_lower_bound)
            else "∞"
            if math.isinf(r.epsilon_lower_bound)
            else f"{r.epsilon_lower_bound:.3f}"
        )
        tag = (
            f" ({r.tag})"
            if isinstance(getattr(r, "tag", None), str) and r.tag
            else (" (broken on purpose)" if r.broken else "")
        )
        used_by = getattr(r, "used_by", "")  # a mechanism row: the learners whose runs use its primitive
        if isinstance(used_by, str) and used_by:
            tag += f" (used by {used_by})"
        mu = getattr(r, "mu_lower_bound", math.nan)
        rows.append(
            [
                f"{r.mechanism}{tag}",
                f"{r.claimed_epsilon:g}",
                lb,
                *(
                    [
                        "—"
                        if not (isinstance(mu, float) and math.isfinite(mu))
                        else f"{mu:.3f} / {r.claimed_mu:.3f} ({r.epsilon_gdp:.3f})"
                    ]
                    if has_mu
                    else []
                ),
                "—" if pd.isna(r.trials) else str(int(r.trials)),
                str(r.verdict),
                *([str(r.threat_model)] if has_threat else []),
                str(r.setting),
            ]
        )
    a = float(df["alpha"].iloc[0]) if len(df) else 0.05
    note = (
        f"Each row's verdict errs with probability at most {a:g} (Clopper-Pearson bounds; a row with an ε and "
        f"a μ test runs each at half of it); δ = {float(df['delta'].iloc[0]) if len(df) else 0:g}. "
        "Verdict: refuted where a lower bound exceeds what the claim allows, else not refuted. An audit can "
        "refute a claim, never certify one (that is the accountant's, through the verified ledger): not "
        "refuted means only that this audit found no evidence against the claim. Correct mechanisms must "
        "not be refuted; the variants broken on purpose must be. Every audit here is under add/remove "
        "adjacency (a class count n vs n + 1, a canary present or absent). Learners: a canary individual in "
        "one task, independent trainings with and without it, a threshold on the released model "
        "(dpcl.audits.learners)."
    )
    columns = [
        "mechanism",
        "claimed ε",
        "empirical lower bound on ε",
        *(["μ: lower bound / claim (ε of G_μ at δ)"] if has_mu else []),
        "trials/side",
        "verdict",
        *(["threat model"] if has_threat else []),
        "setting",
    ]
    if has_mu:
        note += (
            " The μ column is the f-DP route of the white-box audits (dpcl.audits.gdp): in their setting "
            "(sampling rate 1) each release is a Gaussian mechanism, error rates near one half bound μ, and "
            "the claim is the largest μ whose curve stays within the claimed (ε, δ), derived from the claim "
            "alone, not from the noise the code used; a μ bound above it refutes the claim. "
            "The ε in brackets is the ε at δ of the μ-GDP curve at that bound: a lower bound on ε for "
            "Gaussian-shaped mechanisms only, so the ε column stays the assumption-free bound."
        )
    return to_markdown(Table("", columns, rows, [note, *notes], notes_style="plain", heading=None))
