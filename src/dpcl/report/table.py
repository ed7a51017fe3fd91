"""The one table model of the reports: a :class:`Cell` (numbers and how to print them), a
:class:`Table` (title, columns, rows, notes) and its renderers (Markdown, LaTeX, CSV).

Every table the pipeline writes (the benchmark summaries, tables of [LabelSpace] and [Tobaben2024], the
active-learning tables, the privacy tables) is built as a :class:`Table` and printed by
:func:`to_markdown` / :func:`to_latex` / :func:`to_csv`; a table family differs only in its cells
(what they hold and how they print) and its layout options (column alignment, how notes are set).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

MISSING = "–"  #: a cell with no number


@dataclass
class Cell:
    """Numbers (``values``, by statistic name) and how they print: ``fmt(values) -> str``;
    ``meta`` identifies the cell in a tidy CSV. With no ``fmt`` and one value, that value with
    ``decimals`` decimals; with no values, :data:`MISSING`."""

    values: dict[str, float] = field(default_factory=dict)
    fmt: Callable[[Mapping[str, float]], str] | None = None
    decimals: int = 1
    meta: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        if self.fmt is not None:
            return self.fmt(self.values)
        if not self.values:
            return MISSING
        (v,) = self.values.values()
        return f"{v:.{self.decimals}f}"

    def __str__(self) -> str:
        return self.text()


def fmt_number(v: float, decimals: int) -> str:
    return f"{v:.{decimals}f}"


def fmt_order(stats: Mapping[str, float], decimals: int, keys=("lo", "median", "hi")) -> str:
    """ "(2nd worst), median, (2nd best)" as [LabelSpace] App. E.2 prints seed statistics; the median
    alone where the others are missing; :data:`MISSING` without a median."""
    lo, mid, hi = keys
    if all(k in stats for k in keys):
        return f"({stats[lo]:.{decimals}f}), {stats[mid]:.{decimals}f}, ({stats[hi]:.{decimals}f})"
    return f"{stats[mid]:.{decimals}f}" if mid in stats else MISSING


def fmt_mean_sd(stats: Mapping[str, float], decimals: int, mean: str = "mean", sd: str = "std") -> str:
    """ "mean ± sd" (the sd only where present and finite); :data:`MISSING` without a mean."""
    if mean not in stats:
        return MISSING
    s = stats.get(sd)
    spread = f" ± {s:.{decimals}f}" if s is not None and math.isfinite(s) else ""
    return f"{stats[mean]:.{decimals}f}{spread}"


@dataclass
class Table:
    """A rendered table: ``columns`` headers (the first ``n_labels`` are row labels), ``rows`` of
    text or :class:`Cell` s, ``notes`` under it.

    Layout options (each table family keeps its published look):
    ``align``: per column ``"l"`` or ``"r"`` (Markdown ``---`` / ``--:``; default all left);
    ``notes_style``: ``"bullets"`` (each note a paragraph "- note"), ``"list"`` (one list),
    ``"plain"`` (each note a paragraph of its own); ``empty``: the line printed for no rows (None:
    nothing); ``heading``: the Markdown heading level of the title (None: no title line)."""

    title: str
    columns: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    align: list[str] | None = None
    n_labels: int = 0
    notes_style: str = "bullets"
    empty: str | None = None
    heading: int | None = 3

    def __post_init__(self) -> None:
        if self.notes_style not in ("bullets", "list", "plain"):
            raise ValueError(f"notes_style must be 'bullets', 'list' or 'plain', got {self.notes_style!r}")
        if self.align is not None and len(self.align) != len(self.columns):
            raise ValueError(f"align has {len(self.align)} entries for {len(self.columns)} columns")

    def texts(self) -> list[list[str]]:
        return [[c.text() if isinstance(c, Cell) else str(c) for c in row] for row in self.rows]


def blank_repeats(rows: Sequence[Sequence[str]], depth: int | None = None) -> list[list[str]]:
    """Leading row labels equal to the row above are left blank, as the papers print them: the first
    ``depth`` labels of a row (default: all but the last) are blanked while they and every label before
    them repeat the row above."""
    out, prev = [], None
    for r in rows:
        r = tuple(r)
        cur = list(r)
        if prev is not None:
            for j in range(len(r) - 1 if depth is None else depth):
                if r[: j + 1] == prev[: j + 1]:
                    cur[j] = ""
                else:
                    break
        out.append(cur)
        prev = r
    return out


def _notes_md(t: Table) -> list[str]:
    if not t.notes:
        return []
    if t.notes_style == "list":
        return ["", *(f"- {n}" for n in t.notes)]
    lines = []
    for n in t.notes:
        lines += ["", f"- {n}" if t.notes_style == "bullets" else n]
    return lines


def to_markdown(t: Table) -> str:
    """GitHub Markdown: ``### title``, the table, the notes."""
    align = t.align or ["l"] * len(t.columns)
    lines = [f"{'#' * t.heading} {t.title}", ""] if t.heading else []
    if t.rows or t.empty is None:
        lines += [
            "| " + " | ".join(t.columns) + " |",
            "|" + "|".join("--:" if a == "r" else "---" for a in align) + "|",
        ]
        lines += ["| " + " | ".join(row) + " |" for row in t.texts()]
    else:
        lines.append(t.empty)
    return "\n".join(lines + _notes_md(t)) + "\n"


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "ε": r"$\varepsilon$",
    "±": r"$\pm$",
    "Δ": r"$\Delta$",
    "–": "--",
    "×": r"$\times$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "Σ": r"$\Sigma$",
    "−": "-",
    "∈": r"$\in$",
    "…": r"\dots{}",
    "δ": r"$\delta$",
    "|": r"\textbar{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def tex_escape(s: str) -> str:
    """Text -> LaTeX (special characters escaped, the tables' Unicode symbols as math)."""
    return "".join(_TEX.get(ch, ch) for ch in s)


def to_latex(
    t: Table,
    *,
    comment: str = "",
    caption: str | None = None,
    groups: Sequence[tuple[str, ...]] = (),
    group_width: int = 1,
    header: Sequence[str] | None = None,
) -> str:
    """A booktabs ``table``: ``comment`` line, ``caption`` (default the title), optional multi-row
    column groups (``groups``: one label tuple per group of ``group_width`` columns after the row
    labels, one header row per tuple level, equal neighbours merged), the column header (``header``
    as given, already LaTeX, else the escaped ``columns``), the rows and the notes."""
    nl, ng = t.n_labels, len(groups)
    ncols = len(t.columns)
    lines = [comment] if comment else []
    lines += [
        r"\begin{table}[ht]",
        r"\centering",
        r"\scriptsize",
        f"\\caption{{{tex_escape(t.title) if caption is None else caption}}}",
        f"\\begin{{tabular}}{{{''.join(t.align or ['l'] * ncols)}}}",
        r"\toprule",
    ]
    for level in range(len(groups[0]) if ng else 0):
        parts, rules, j = [""] * nl, [], 0
        while j < ng:
            k = j
            while k + 1 < ng and groups[k + 1][: level + 1] == groups[j][: level + 1]:
                k += 1
            span, first = group_width * (k - j + 1), nl + group_width * j + 1
            parts.append(f"\\multicolumn{{{span}}}{{c}}{{{tex_escape(groups[j][level])}}}")
            rules.append(f"\\cmidrule(lr){{{first}-{first + span - 1}}}")
            j = k + 1
        lines += [" & ".join(parts) + r" \\", " ".join(rules)]
    lines.append(" & ".join(header if header is not None else [tex_escape(h) for h in t.columns]) + r" \\")
    lines.append(r"\midrule")
    for row in t.texts():
        lines.append(" & ".join(tex_escape(x) for x in row) + r" \\")
    if not t.rows and t.empty is not None:
        lines.append(f"\\multicolumn{{{ncols}}}{{c}}{{{t.empty}}} \\\\")
    lines += [r"\bottomrule", r"\end{tabular}", "", r"\par\smallskip\raggedright"]
    lines += [tex_escape(n) + r"\par" for n in t.notes]
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(df: pd.DataFrame, float_format: str | None = "%.4f") -> str:
    """The tidy CSV of a table (one row per number) as every report writes it."""
    return df.to_csv(index=False, float_format=float_format)


def write_table(
    stem: str | Path, markdown: str, csv: str | None = None, latex: str | None = None
) -> list[Path]:
    """Write ``stem.md`` (and ``stem.csv`` / ``stem.tex`` where given); returns the paths, CSV first."""
    from ..io import write_text

    stem = Path(stem)
    out = []
    for ext, text in ((".csv", csv), (".md", markdown), (".tex", latex)):
        if text is not None:
            write_text(stem.with_suffix(ext), text)
            out.append(stem.with_suffix(ext))
    return out
