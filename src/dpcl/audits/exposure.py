"""The exposure check: every read of a record, counted, against what its run's ledger accounts for it.

An audit run records every Gaussian release its primitives make (:mod:`dpcl.privacy.releases`), with the
rows each read. The records are identified by their content (the audit's data has distinct rows), so
the count needs nothing from the learner: a read that its ledger does not expect is counted like any
other. For every record of task t, its reads are grouped by the release's noise multiplier σ and
compared with task t's ledger entries (``noise_multiplier`` or ``sigma`` / ``sensitivity``, the
``sample_rate`` q, ``steps``; an entry without steps is one release): under the hypothesis that the
record belongs to part p of its task (an entry's ``part``; entries without one are shared by every
part), the entries of p with that σ allow ``steps`` reads at rate q each. The record is accounted for
when some part's hypothesis covers all its reads:

- **at q = 1, exactly**: reads at σ ≤ the steps of the part's entries at σ;
- **at q < 1, by a binomial test**: the reads at σ are at most Binomial(steps, q) under the claim; a
  count whose upper tail is below α / (records × noise levels) (Bonferroni over the run) refutes it.

A read at a σ that no entry of any hypothesis states is unaccounted outright, whatever the rate. The
check refutes, never certifies: a read the ledger accounts for may still be noised wrongly (the
statistical audits test that), and a record the code reads fewer times than stated is on the safe side.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom

from ..privacy.releases import Release

#: relative tolerance when matching a release's σ with a ledger entry's (both are the same float, up to
#: the division noise_std / sensitivity)
SIGMA_RTOL = 1e-9


def row_key(row: np.ndarray) -> bytes:
    """A record's identity in an audit: its row's bytes in float32 (the features' type)."""
    return np.ascontiguousarray(row, dtype=np.float32).tobytes()


class RecordIndex:
    """Who a row read by a release is: the audit's records by content, in each public representation a
    primitive may see them in (the features themselves; a public projection of them). A row matches a
    record exactly in float32, or failing that within a relative 1e-6 in L2 (a public transform applied
    by the learner to a batch rather than row by row may round differently)."""

    RTOL = 1e-6

    def __init__(self) -> None:
        self._exact: dict[bytes, tuple[int, int]] = {}
        self._rows: dict[int, tuple[np.ndarray, list[tuple[int, int]]]] = {}

    def add(self, x: np.ndarray, ids: np.ndarray, task: int) -> None:
        """Add task ``task``'s records ``ids`` in the representation ``x`` (one row each)."""
        x = np.asarray(x)
        for row, i in zip(x, np.asarray(ids), strict=True):
            key = row_key(row)
            if key in self._exact and self._exact[key] != (task, int(i)):
                raise ValueError(f"the audit's records must be distinct rows: record {int(i)} repeats one")
            self._exact[key] = (task, int(i))
        rows, who = self._rows.get(x.shape[1], (np.zeros((0, x.shape[1])), []))
        self._rows[x.shape[1]] = (
            np.vstack([rows, x.astype(np.float64)]),
            who + [(task, int(i)) for i in ids],
        )

    def lookup(self, rows: np.ndarray) -> list[tuple[int, int] | None]:
        """(task, record id) of every row, None for a row that is no record."""
        rows = np.asarray(rows)
        out: list[tuple[int, int] | None] = [self._exact.get(row_key(r)) for r in rows]
        missing = [k for k, w in enumerate(out) if w is None]
        if missing and rows.ndim == 2 and rows.shape[1] in self._rows:
            known, who = self._rows[rows.shape[1]]
            for k in missing:
                r = rows[k].astype(np.float64)
                d = np.linalg.norm(known - r, axis=1)
                j = int(np.argmin(d))
                if d[j] <= self.RTOL * max(1.0, float(np.linalg.norm(r))):
                    out[k] = who[j]
        return out


@dataclass(frozen=True)
class Entry:
    """One private Gaussian entry of a task's ledger: its part (None: shared), σ, rate and releases."""

    part: str | None
    sigma: float
    rate: float
    steps: int


def ledger_entries(task: dict) -> list[Entry]:
    """The private Gaussian entries of one task of a ledger (``privacy.json``'s ``tasks[t]``)."""
    out = []
    for m in task.get("mechanisms", []):
        if "noise_multiplier" in m:
            sigma = float(m["noise_multiplier"])
        elif "sigma" in m and isinstance(m.get("sensitivity"), int | float):
            sigma = float(m["sigma"]) / float(m["sensitivity"])
        else:
            continue
        if not (sigma > 0 and math.isfinite(sigma)):
            continue
        out.append(Entry(m.get("part"), sigma, float(m.get("sample_rate", 1.0)), int(m.get("steps", 1))))
    return out


@dataclass
class Exposure:
    """The exposure check of one run."""

    releases: int = 0  #: private releases the run made
    records_read: int = 0  #: distinct records some release read
    max_reads: int = 0  #: most reads of one record
    unattributed_rows: int = 0  #: rows read that are none of the run's records (transformed, or foreign)
    unaccounted: list[dict] = field(default_factory=list)  #: records whose reads no part accounts for
    alpha: float = 0.05
    exact: bool = True  #: every entry at q = 1 (the check is exact)

    @property
    def verdict(self) -> str:
        if self.unaccounted:
            return "refuted"
        if self.unattributed_rows:
            return "not auditable: releases read rows that are not the run's records"
        if not self.releases:
            return "not auditable: no release through the mechanism primitives"
        return "not refuted"

    def summary(self) -> str:
        if self.unaccounted:
            u = self.unaccounted[0]
            return (
                f"{len(self.unaccounted)} record(s) read more than the ledger accounts, e.g. record {u['record']} "
                f"of task {u['task']}: {u['reads']}"
            )
        return (
            f"{self.releases} releases, {self.records_read} records read, at most {self.max_reads} reads of one record; "
            f"every read accounted for by its part ({'exact, q = 1' if self.exact else f'binomial, alpha {self.alpha:g}'})"
        )


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= SIGMA_RTOL * max(abs(a), abs(b))


def check_exposure(
    releases: list[Release], ledger: dict, index: RecordIndex, *, alpha: float = 0.05
) -> Exposure:
    """Count every record's reads in ``releases`` (private ones: 0 < σ < ∞) and compare them with
    ``ledger``'s accounting of its task (module docstring)."""
    out = Exposure(alpha=alpha)
    reads: dict[tuple[int, int], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    for r in releases:
        sigma = r.noise_multiplier
        if not (sigma > 0 and math.isfinite(sigma)):
            continue
        out.releases += 1
        for who in index.lookup(r.rows):
            if who is None:
                out.unattributed_rows += 1
                continue
            levels = reads[who]
            key = next((s for s in levels if _same(s, sigma)), sigma)
            levels[key] += 1
    entries = [ledger_entries(task) for task in ledger.get("tasks", [])]
    out.exact = all(e.rate >= 1.0 for es in entries for e in es)
    out.records_read = len(reads)
    tests = max(1, sum(len(v) for v in reads.values()))
    for (t, rid), levels in sorted(reads.items()):
        out.max_reads = max(out.max_reads, sum(levels.values()))
        es = entries[t] if t < len(entries) else []
        parts = sorted({e.part for e in es if e.part is not None}) or [None]
        if not any(_covered(levels, [e for e in es if e.part in (p, None)], alpha / tests) for p in parts):
            out.unaccounted.append(
                {
                    "task": t,
                    "record": rid,
                    "reads": {f"sigma {s:.6g}": k for s, k in sorted(levels.items())},
                    "ledger": [
                        {"part": e.part, "sigma": round(e.sigma, 6), "rate": e.rate, "steps": e.steps}
                        for e in es
                    ],
                }
            )
    return out


def _covered(levels: dict[float, int], entries: list[Entry], alpha: float) -> bool:
    """Whether ``entries`` (one part's hypothesis) account for reads ``levels`` (σ -> count)."""
    for sigma, k in levels.items():
        match = [e for e in entries if _same(e.sigma, sigma)]
        if not match:
            return False
        n, rate = sum(e.steps for e in match), max(e.rate for e in match)
        if k > n:
            return False
        if rate < 1.0 and float(binom.sf(k - 1, n, rate)) < alpha:  # Pr[Bin(n, q) ≥ k]
            return False
    return True
