"""Checks of a miniature paper run (``config/paper.yaml`` + ``config/paper_mini.yaml``).

The miniature keeps the paper grid's shape so that every rule of the paper DAG executes on
a CPU in minutes; these checks say whether it did: every rule that ``snakemake -n`` plans
for the full paper config finished at least once in the run, every cell of Tables A3-A10,
F.1 and F.2 where the paper prints a number has ours, every table says it is a miniature,
and the HTML report was built and says so too. ``dpcl miniature check`` runs them (CI).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_FINISHED = re.compile(r"^Finished jobid: \d+ \(Rule: ([A-Za-z_][A-Za-z0-9_]*)\)", re.M)
_STATS_ROW = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s+(\d+)\s*$")


def finished_jobs(log_text: str) -> Counter:
    """Jobs Snakemake reports finished in a run's log, by rule."""
    return Counter(_FINISHED.findall(log_text))


def planned_jobs(dryrun_text: str) -> Counter:
    """The 'Job stats' table of ``snakemake -n`` (first table), by rule."""
    out: Counter = Counter()
    lines = dryrun_text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Job stats:")
    except StopIteration:
        raise ValueError("no 'Job stats:' table in the dry-run output") from None
    for line in lines[start + 1 :]:
        hit = _STATS_ROW.match(line.strip())
        if hit is None:
            if out:
                break
            continue
        if hit.group(1) == "total":
            break
        out[hit.group(1)] = int(hit.group(2))
    if not out:
        raise ValueError("the dry-run's 'Job stats:' table lists no rules")
    return out


def unfilled_cells(tables_dir: str | Path) -> tuple[list[str], int]:
    """(cells of the paper tables with a published number but none of ours, cells with both)."""
    missing, filled = [], 0
    paths = sorted(Path(tables_dir).glob("table_*.csv"))
    if not paths:
        raise FileNotFoundError(f"no table_*.csv in {tables_dir}")
    for path in paths:
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                if not (row.get("published") or "").strip():
                    continue
                if (row.get("ours") or "").strip():
                    filled += 1
                    continue
                missing.append(
                    " ".join(
                        f"{k}={row.get(k, '')}"
                        for k in (
                            "table",
                            "benchmark",
                            "setting",
                            "epsilon",
                            "learner",
                            "label_method",
                            "metric",
                            "statistic",
                        )
                    )
                )
    return missing, filled


@dataclass
class MiniatureReport:
    planned: Counter
    finished: Counter
    cells_filled: int
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        rules = ", ".join(f"{r} {self.finished[r]}" for r in sorted(self.finished))
        head = (
            f"miniature paper run: {sum(self.finished.values())} jobs of {len(self.finished)} rules finished "
            f"({rules}); the full paper config plans {len(self.planned)} rules, "
            f"{sum(self.planned.values())} jobs; {self.cells_filled} published table cells have ours"
        )
        if self.ok:
            return head + "\nOK"
        return head + "\n" + "\n".join(f"PROBLEM: {p}" for p in self.problems)


def check_miniature(results: str | Path, run_log: str, paper_dryrun: str) -> MiniatureReport:
    """Check the miniature run in ``results`` against the paper DAG (see the module docstring)."""
    from .report.paper_tables import MINIATURE_NOTE

    results = Path(results)
    planned, finished = planned_jobs(paper_dryrun), finished_jobs(run_log)
    problems = []
    never = sorted(set(planned) - set(finished))
    if never:
        problems.append(
            f"rules of the paper DAG that never ran: {', '.join(never)} (only this run's log counts: "
            "outputs an earlier run left, e.g. the data sets under the overlay's resources folder, skip their rules)"
        )
    tables = results / "tables" / "paper"
    try:
        missing, filled = unfilled_cells(tables)
    except FileNotFoundError as err:
        missing, filled = [], 0
        problems.append(str(err))
    problems += [f"published cell without ours: {m}" for m in missing[:50]]
    if len(missing) > 50:
        problems.append(f"... and {len(missing) - 50} more published cells without ours")
    for md in sorted(tables.glob("table_*.md")):
        if MINIATURE_NOTE not in md.read_text():
            problems.append(f"{md} does not say it is a miniature run")
    report = results / "report.html"
    if not report.is_file() or report.stat().st_size == 0:
        problems.append(f"{report} was not built")
    elif "Miniature run: random weights, synthetic data" not in report.read_text():
        problems.append(f"{report} does not say it is a miniature run")
    return MiniatureReport(planned, finished, filled, problems)
