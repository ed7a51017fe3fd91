"""Result tables in the layout of the paper's Table A3 (median with the 2nd and 4th best
seed in parentheses; [LabelSpace] App. E.2)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .names import eps_key, eps_name, label_method_name, learner_name
from .table import Table, to_markdown

__all__ = ["label_method_name", "order_stats", "summarise", "table_a3", "table_a3_markdown"]


def order_stats(values: list[float] | np.ndarray) -> tuple[float, float, float]:
    """(2nd worst, median, 2nd best) as the paper reports over 5 seeds; min/max below 3 seeds."""
    v = np.asarray(values, dtype=float)
    v = np.sort(v[~np.isnan(v)])
    if v.size == 0:
        return (math.nan, math.nan, math.nan)
    lo, hi = (v[1], v[-2]) if v.size >= 3 else (v[0], v[-1])
    return float(lo), float(np.median(v)), float(hi)


def summarise(records: list[dict], benchmark: str) -> pd.DataFrame:
    """One row per (learner, ε tag, label method): seed statistics of final accuracy/forgetting in %."""
    df = pd.DataFrame.from_records(records)
    rows = []
    for (learner, eps, method), g in df.groupby(["learner", "epsilon", "label_method"], sort=False):
        lo, med, hi = order_stats(100 * g["final_accuracy"])
        flo, fmed, fhi = order_stats(100 * g["final_forgetting"])
        rows.append(
            {
                "benchmark": benchmark,
                "learner": learner,
                "epsilon": eps,
                "label_method": method,
                "n_seeds": len(g),
                "acc_median": med,
                "acc_2nd_worst": lo,
                "acc_2nd_best": hi,
                "acc_mean": float(100 * g["final_accuracy"].mean()),
                "acc_std": float(100 * g["final_accuracy"].std(ddof=0)),
                "forgetting_median": fmed,
                "forgetting_2nd_worst": flo,
                "forgetting_2nd_best": fhi,
                "released_labels_final_task_median": float(np.median([r[-1] for r in g["released_labels"]])),
            }
        )
    return pd.DataFrame(rows)


def table_a3(summary: pd.DataFrame, methods: list[str], title: str) -> Table:
    """Rows (ε, classifier), columns label methods, cells "(2nd worst), median, (2nd best)"."""
    cols = ["ε", "Classifier"] + [label_method_name(m) for m in methods]
    rows = []
    for eps in sorted(summary["epsilon"].unique(), key=eps_key):
        for learner in summary["learner"].unique():
            sub = summary[(summary["epsilon"] == eps) & (summary["learner"] == learner)].set_index(
                "label_method"
            )
            cells = []
            for m in methods:
                if m in sub.index:
                    r = sub.loc[m]
                    cells.append(f"({r.acc_2nd_worst:.1f}), {r.acc_median:.1f}, ({r.acc_2nd_best:.1f})")
                else:
                    cells.append("-")
            rows.append([eps_name(eps), learner_name(learner), *cells])
    n = int(summary["n_seeds"].max()) if len(summary) else 0
    note = (
        f"Final average accuracy in % over {n} seed{'s' if n != 1 else ''}: median, with the 2nd worst and 2nd best seed "
        "in parentheses ([LabelSpace] Table A3 layout)."
    )
    return Table(title, cols, rows, [note], n_labels=2, notes_style="plain")


def table_a3_markdown(summary: pd.DataFrame, methods: list[str], title: str) -> str:
    """Markdown of :func:`table_a3`."""
    return to_markdown(table_a3(summary, methods, title))
