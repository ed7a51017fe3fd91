"""Tables and figures of DP active learning ([Schwethelm2025]) from our runs.

Reads ``results/active/summary.csv`` (one row per run: pool, mode, method, acquisition,
selection, schedule, epsilon, selection_epsilon, seed, final_accuracy, guarantee_holds) and
schedule JSONs (:meth:`dpcl.active.schedules.Schedule.to_dict`); never trains.

- :func:`active_tables`: analogues of Table I (AL methods at the main setting), Table II
  (Random vs. Entropy per ε(ε_Sel)) and Table V (alternatives to step amplification), with the
  published numbers beside ours as context only (the paper's data are CIFAR-10 and RetinalOCT,
  ours cached Fashion-MNIST features).
- :func:`.active_figures.selection_epsilon_figure`: Fig. 5 (accuracy against ε_Sel at a fixed total ε).
- :func:`.active_figures.group_privacy_figure`: Figs. 2/4 (each group's cumulative ε after each training phase).

Method tags are ``{acquisition}-{selection}-{schedule}`` (``nal``: no active learning, the
paper's "Random"; ``naive``, ``sa``: step amplification, ``cl``: continual learning, ``nr``:
noise reduction); random methods have no selection part.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .table import MISSING, blank_repeats, to_csv, to_markdown, write_table
from .table import Table as ModelTable

DECIMALS = 2
PAPER_RUNS = 5  # the paper's tables: mean ± sd over 5 runs (CheXpert 3, not transcribed)
CIFAR = "CIFAR-10 ResNet-9"
OCT = "RetinalOCT ResNet-9"

#: Published numbers of [Schwethelm2025] (accuracy in %, (mean, sd) over 5 runs), keyed by our method
#: tag. Different data from ours (CIFAR-10 / RetinalOCT): context only, never a target.
PUBLISHED: dict[str, Any] = {
    # Table I, ε = 8 (ε_Sel = 2 for DP selection, as Table II's 8 (2) Entropy cell shows)
    "table1": {
        "random-nal": {CIFAR: (66.58, 0.94), OCT: (74.54, 3.37)},
        "random-naive": {CIFAR: (63.40, 0.67), OCT: (69.84, 2.47)},
        "random-sa": {CIFAR: (66.55, 1.22), OCT: (73.50, 4.28)},
        "confidence-nondp-sa": {CIFAR: (68.32, 0.66), OCT: (76.58, 3.65)},
        "margin-nondp-sa": {CIFAR: (68.19, 0.48), OCT: (80.73, 3.57)},
        "entropy-nondp-sa": {CIFAR: (68.43, 0.59), OCT: (81.48, 2.79)},
        "bald-nondp-sa": {CIFAR: (67.09, 0.94), OCT: (76.95, 2.98)},
        "confidence-dp-sa": {CIFAR: (66.91, 0.63), OCT: (75.92, 3.11)},
        "margin-dp-sa": {CIFAR: (66.40, 0.50), OCT: (77.60, 3.34)},
        "entropy-dp-sa": {CIFAR: (67.30, 0.82), OCT: (78.00, 3.34)},
        "bald-dp-sa": {CIFAR: (66.12, 0.94), OCT: (76.37, 3.14)},
    },
    # Table II, CIFAR-10 ResNet-9, columns ε (ε_Sel)
    "table2": {
        "random-nal": {
            (3.0, 1.0): (57.73, 0.85),
            (5.0, 1.0): (62.66, 0.96),
            (8.0, 2.0): (66.58, 0.94),
            (16.0, 4.0): (70.39, 0.50),
        },
        "entropy-dp-sa": {
            (3.0, 1.0): (57.42, 0.91),
            (5.0, 1.0): (63.15, 0.75),
            (8.0, 2.0): (67.30, 0.82),
            (16.0, 4.0): (71.93, 0.48),
        },
    },
    # Table V (App. E-B), CIFAR-10 ResNet-9, entropy sampling, ε = 8
    "table5": {
        "entropy-dp-cl": (63.94, 0.98),
        "entropy-dp-nr": (66.83, 0.72),
        "entropy-dp-sa": (67.30, 0.82),
    },
}

#: Table I rows in the paper's order: (method tag, name, step amplification, DP selection)
TABLE1_ROWS = (
    ("random-nal", "Random", "–", "✓"),
    ("random-naive", "Random Naive AL", "×", "✓"),
    ("random-sa", "Random AL", "✓", "✓"),
    ("confidence-nondp-sa", "Least Confidence", "✓", "×"),
    ("margin-nondp-sa", "Minimum Margin", "✓", "×"),
    ("entropy-nondp-sa", "Entropy", "✓", "×"),
    ("bald-nondp-sa", "MC BALD", "✓", "×"),
    ("confidence-dp-sa", "Least Confidence", "✓", "✓"),
    ("margin-dp-sa", "Minimum Margin", "✓", "✓"),
    ("entropy-dp-sa", "Entropy", "✓", "✓"),
    ("bald-dp-sa", "MC BALD", "✓", "✓"),
)
TABLE2_ROWS = (("random-nal", "Random"), ("entropy-dp-sa", "Entropy"))
TABLE5_ROWS = (
    ("entropy-dp-cl", "Continual learning"),
    ("entropy-dp-nr", "Noise reduction"),
    ("entropy-dp-sa", "Step amplification"),
)
POOL_ORDER = ("balanced", "imbalanced")
MODE_ORDER = ("paper", "sound")
GUARANTEE_NOTE = (
    "paper mode has no end-to-end guarantee (the fixed-size initial set and top-k selection couple "
    "records); non-DP selection has no guarantee (the selection is not private)"
)
TIDY_COLUMNS = [
    "table",
    "row",
    "method",
    "column",
    "source",
    "pool",
    "mode",
    "epsilon",
    "selection_epsilon",
    "n",
    "mean",
    "sd",
    "guarantee_holds",
    "cell",
]


# ----------------------------------------------------------------------------- reading


def _as_bool(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("true", "1", "yes")
    return bool(v)


def load_summary(summary_csv: str | Path) -> pd.DataFrame:
    """The summary CSV with ε, ε_Sel rounded (so that 2.0 and 2.0000000001 are one setting) and
    ``guarantee_holds`` as bool."""
    df = pd.read_csv(summary_csv)
    for c in ("epsilon", "selection_epsilon"):
        df[c] = df[c].astype(float).round(6)
    df["guarantee_holds"] = df["guarantee_holds"].map(_as_bool)
    df["pool"] = df["pool"].astype(str)
    df["mode"] = df["mode"].astype(str)
    return df


def main_setting(df: pd.DataFrame) -> tuple[float, float | None]:
    """(ε, ε_Sel) with the most ``entropy-dp-sa`` runs (ties: the one with the most runs of all
    methods, then the smaller pair); without such runs the ε with the most runs and no ε_Sel."""
    sa = df[df["method"] == "entropy-dp-sa"]
    if len(sa):
        counts = sa.groupby(["epsilon", "selection_epsilon"]).size()

        def key(kv: tuple[tuple[float, float], int]) -> tuple:
            (eps, sel), n = kv
            at = np.isclose(df["epsilon"], eps) & (
                ~df["method"].str.contains("-dp-") | np.isclose(df["selection_epsilon"], sel)
            )
            return n, int(at.sum()), -eps, -sel

        best = max(counts.items(), key=key)[0]
        return float(best[0]), float(best[1])
    if not len(df):
        raise ValueError("the summary has no runs")
    counts = df.groupby("epsilon").size()
    return float(max(counts.items(), key=lambda kv: (kv[1], -kv[0]))[0]), None


def _ordered(values: Sequence[str], order: Sequence[str]) -> list[str]:
    vals = set(values)
    return [v for v in order if v in vals] + sorted(vals - set(order))


def _pool_modes(df: pd.DataFrame) -> list[tuple[str, str]]:
    present = set(zip(df["pool"], df["mode"], strict=True))
    return [
        (p, m)
        for p in _ordered([p for p, _ in present], POOL_ORDER)
        for m in _ordered([m for _, m in present], MODE_ORDER)
        if (p, m) in present
    ]


def _pm_name(pool: str, mode: str) -> str:
    return f"{pool} pool, {mode} mode"


def _paper_col(dataset: str) -> str:
    return f"[Schwethelm2025]: {dataset} (other data)"


def _setting_name(eps: float, sel: float | None) -> str:
    return f"{eps:g} ({MISSING if sel is None else f'{sel:g}'})"


def _at(df: pd.DataFrame, method: str, eps: float, sel: float | None) -> pd.DataFrame:
    """Runs of ``method`` at ε; ε_Sel is matched only for DP selection (the others spend none)."""
    sub = df[(df["method"] == method) & np.isclose(df["epsilon"], eps)]
    if sel is not None and "-dp-" in method:
        sub = sub[np.isclose(sub["selection_epsilon"], sel)]
    return sub


# ----------------------------------------------------------------------------- cells and tables


@dataclass
class Cell:
    """Mean ± sample sd (ddof = 1) of final accuracy in %, over ``n`` runs (n = 0: no runs)."""

    mean: float = math.nan
    sd: float = math.nan
    n: int = 0
    holds: float = math.nan  # fraction of runs whose privacy guarantee holds
    meta: dict[str, Any] = field(default_factory=dict)
    published: bool = False

    @classmethod
    def of(cls, runs: pd.DataFrame, **meta: Any) -> Cell:
        if not len(runs):
            return cls(meta=meta)
        acc = 100 * runs["final_accuracy"].astype(float).to_numpy()
        sd = float(np.std(acc, ddof=1)) if acc.size > 1 else math.nan
        return cls(float(acc.mean()), sd, int(acc.size), float(runs["guarantee_holds"].mean()), meta)

    @classmethod
    def paper(cls, value: tuple[float, float] | None, **meta: Any) -> Cell:
        if value is None:
            return cls(meta=meta, published=True)
        return cls(value[0], value[1], PAPER_RUNS, math.nan, meta, True)

    def text(self) -> str:
        if self.n == 0:
            return MISSING
        if self.published:
            return f"{self.mean:.{DECIMALS}f} ± {self.sd:.{DECIMALS}f}"
        sd = f" ± {self.sd:.{DECIMALS}f}" if math.isfinite(self.sd) else ""
        return f"{self.mean:.{DECIMALS}f}{sd} ({self.n})"


@dataclass
class Table:
    name: str  # file stem: table1, table2, table5
    title: str
    row_header: list[str]
    columns: list[str]
    rows: list[tuple[list[str], str]] = field(default_factory=list)  # (labels, method tag)
    cells: list[list[Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_table(self) -> ModelTable:
        """The table model: a row group's label only on its first row, then the cells."""
        labels = blank_repeats([lab for lab, _ in self.rows], depth=1 if len(self.row_header) > 1 else 0)
        return ModelTable(
            self.title,
            self.row_header + self.columns,
            [lab + [c.text() for c in cells] for lab, cells in zip(labels, self.cells, strict=True)],
            list(self.notes),
            ["l"] * len(self.row_header) + ["r"] * len(self.columns),
            len(self.row_header),
        )

    def markdown(self) -> str:
        return to_markdown(self.as_table())

    def tidy(self) -> pd.DataFrame:
        out = []
        for (labels, method), cells in zip(self.rows, self.cells, strict=True):
            for col, c in zip(self.columns, cells, strict=True):
                out.append(
                    {
                        "table": self.name,
                        "row": " / ".join(x for x in labels if x),
                        "method": method,
                        "column": col,
                        "source": "[Schwethelm2025]" if c.published else "ours",
                        "pool": c.meta.get("pool", ""),
                        "mode": c.meta.get("mode", ""),
                        "epsilon": c.meta.get("epsilon", math.nan),
                        "selection_epsilon": c.meta.get("selection_epsilon", math.nan),
                        "n": c.n,
                        "mean": c.mean,
                        "sd": c.sd,
                        "guarantee_holds": c.holds,
                        "cell": c.text(),
                    }
                )
        return pd.DataFrame(out, columns=TIDY_COLUMNS)

    def write(self, out_dir: Path, prefix: str = "") -> list[Path]:
        return write_table(out_dir / f"{prefix}{self.name}", self.markdown(), to_csv(self.tidy()))


def _stats_note(extra: str = "") -> str:
    return (
        f"Ours: final test accuracy in %, mean ± sample sd (ddof = 1) over seeds, (n) = runs{extra}; "
        f"{MISSING}: no runs. [Schwethelm2025]: mean ± sd over {PAPER_RUNS} runs on other data (context only)."
    )


def _guarantee_note(runs: pd.DataFrame) -> str:
    """Which (mode, selection) run groups of ``runs`` have ``guarantee_holds`` true."""
    holds: list[str] = []
    fails: list[str] = []
    mixed: list[str] = []
    for (mode, sel), g in runs.groupby(["mode", "selection"], sort=True):
        name = f"{mode} mode with {sel} selection"
        frac = g["guarantee_holds"].mean()
        (holds if frac == 1 else fails if frac == 0 else mixed).append(
            name if frac in (0, 1) else f"{name} ({frac:.0%} of runs)"
        )
    parts = [f"holds for {', '.join(holds)}" if holds else "holds for no runs"]
    if fails:
        parts.append(f"does not hold for {', '.join(fails)}")
    if mixed:
        parts.append(f"holds for some runs of {', '.join(mixed)}")
    return f"Privacy guarantee (summary's guarantee_holds): {'; '.join(parts)}. Why: {GUARANTEE_NOTE}."


def table1(df: pd.DataFrame, setting: tuple[float, float | None]) -> Table | None:
    """Table I analogue: every AL method at the main setting, per pool × mode, beside Table I's
    CIFAR-10 and RetinalOCT ResNet-9 columns."""
    eps, sel = setting
    runs = {m: _at(df, m, eps, sel) for m, *_ in TABLE1_ROWS}
    used = pd.concat(list(runs.values()))
    if not len(used):
        return None
    pms = _pool_modes(used)
    sel_txt = f", ε_Sel = {sel:g} for DP selection" if sel is not None else ""
    t = Table(
        "table1",
        f"Table I analogue ([Schwethelm2025]): AL methods under DP, ε = {eps:g}{sel_txt}",
        ["Method", "SA", "DP"],
        [_pm_name(p, m) for p, m in pms] + [_paper_col(CIFAR), _paper_col(OCT)],
    )
    for method, name, sa, dp in TABLE1_ROWS:
        r = runs[method]
        cells = [
            Cell.of(
                r[(r["pool"] == p) & (r["mode"] == m)],
                pool=p,
                mode=m,
                epsilon=eps,
                selection_epsilon=sel if "-dp-" in method else 0.0,
            )
            for p, m in pms
        ]
        pub = PUBLISHED["table1"][method]
        cells += [Cell.paper(pub[CIFAR], epsilon=8.0), Cell.paper(pub[OCT], epsilon=8.0)]
        t.rows.append(([name, sa, dp], method))
        t.cells.append(cells)
    t.notes = [
        _stats_note(),
        "SA: step amplification; DP: the selection is privatised (×: non-DP selection, an upper bound on "
        "utility). Random: one training phase on a random labelled set of the whole budget.",
        _guarantee_note(used),
        "[Schwethelm2025] columns: Table I at ε = 8 (ε_Sel = 2), CIFAR-10 and RetinalOCT with ResNet-9.",
    ]
    return t


def table2(df: pd.DataFrame, only: Sequence[Sequence[float]] | None = None) -> Table | None:
    """Table II analogue: Random and Entropy (DP selection, SA) per ε (ε_Sel), per pool × mode,
    then the published CIFAR-10 rows; ``only``: the (ε, ε_Sel) columns to show (the config's
    table2_settings; default every setting of the summary and the paper)."""
    rnd, ent = df[df["method"] == "random-nal"], df[df["method"] == "entropy-dp-sa"]
    if not len(rnd) and not len(ent):
        return None
    settings: set[tuple[float, float | None]] = set(
        zip(ent["epsilon"], ent["selection_epsilon"], strict=True)
    )
    settings |= set(PUBLISHED["table2"]["random-nal"])
    settings |= {(e, None) for e in rnd["epsilon"] if not any(math.isclose(e, s[0]) for s in settings)}
    if only:
        settings = {(float(e), float(s)) for e, s in only}
    cols = sorted(settings, key=lambda s: (s[0], -1.0 if s[1] is None else s[1]))
    t = Table(
        "table2",
        "Table II analogue ([Schwethelm2025]): Random vs. Entropy (DP selection, SA) per overall ε",
        ["Data", "Method"],
        [f"ε (ε_Sel) = {_setting_name(*s)}" for s in cols],
    )
    for p, m in _pool_modes(pd.concat([rnd, ent])):
        for method, name in TABLE2_ROWS:
            sub = df[(df["pool"] == p) & (df["mode"] == m)]
            t.rows.append(([_pm_name(p, m), name], method))
            t.cells.append(
                [
                    Cell.of(
                        _at(sub, method, e, s),
                        pool=p,
                        mode=m,
                        epsilon=e,
                        selection_epsilon=s if method != "random-nal" else 0.0,
                    )
                    for e, s in cols
                ]
            )
    for method, name in TABLE2_ROWS:
        pub = PUBLISHED["table2"][method]
        t.rows.append(([_paper_col(CIFAR), name], method))
        t.cells.append([Cell.paper(pub.get(s), epsilon=s[0], selection_epsilon=s[1]) for s in cols])
    t.notes = [
        _stats_note(),
        "Random uses no selection budget: its cell under ε (ε_Sel) holds its runs at that ε, whatever ε_Sel.",
        _guarantee_note(pd.concat([rnd, ent])),
    ]
    return t


def table5(df: pd.DataFrame, setting: tuple[float, float | None]) -> Table | None:
    """Table V analogue: continual learning, noise reduction and step amplification (entropy, DP
    selection) at the main setting; written only if continual learning or noise reduction ran."""
    eps, sel = setting
    runs = {m: _at(df, m, eps, sel) for m, _ in TABLE5_ROWS}
    if not len(runs["entropy-dp-cl"]) and not len(runs["entropy-dp-nr"]):
        return None
    used = pd.concat(list(runs.values()))
    pms = _pool_modes(used)
    sel_txt = f", ε_Sel = {sel:g}" if sel is not None else ""
    t = Table(
        "table5",
        f"Table V analogue ([Schwethelm2025]): handling disparate privacy leakage, ε = {eps:g}{sel_txt}",
        ["Method"],
        [_pm_name(p, m) for p, m in pms] + [_paper_col(CIFAR)],
    )
    for method, name in TABLE5_ROWS:
        r = runs[method]
        cells = [
            Cell.of(
                r[(r["pool"] == p) & (r["mode"] == m)], pool=p, mode=m, epsilon=eps, selection_epsilon=sel
            )
            for p, m in pms
        ]
        cells.append(Cell.paper(PUBLISHED["table5"][method], epsilon=8.0, selection_epsilon=2.0))
        t.rows.append(([name], method))
        t.cells.append(cells)
    t.notes = [
        _stats_note(),
        "Entropy acquisition with DP selection in every row.",
        _guarantee_note(used),
        "[Schwethelm2025] column: Table V (App. E-B), CIFAR-10 ResNet-9, ε = 8.",
    ]
    return t


def active_tables(
    summary_csv: str | Path,
    out_dir: str | Path,
    setting: tuple[float, float] | None = None,
    prefix: str = "",
    table2_settings: Sequence[Sequence[float]] | None = None,
) -> list[Path]:
    """Write ``table1``, ``table2``, ``table5`` (.csv tidy, .md) — analogues of [Schwethelm2025] Tables
    I, II and V — skipping a table without runs; ``setting``: the main (ε, ε_Sel), else :func:`main_setting`."""
    df = load_summary(summary_csv)
    if not len(df):
        return []
    main = (float(setting[0]), float(setting[1])) if setting is not None else main_setting(df)
    out_dir = Path(out_dir)
    written: list[Path] = []
    for t in (table1(df, main), table2(df, table2_settings), table5(df, main)):
        if t is not None:
            written += t.write(out_dir, prefix)
    return written


def load_schedule(src: Any):
    from ..active.schedules import Schedule

    if isinstance(src, Schedule):
        return src
    if isinstance(src, Mapping):
        return Schedule.from_dict(dict(src))
    return Schedule.from_dict(json.loads(Path(src).read_text()))
