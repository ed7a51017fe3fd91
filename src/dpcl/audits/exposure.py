"""The exposure check: every read of a record, and every sample that could draw it, counted against what
its run's ledger accounts for it.

An audit run records every release its primitives make, with the rows each read, and every Poisson sample
its sampling primitive draws, with the population and the rate it used (:mod:`dpcl.privacy.releases`,
:mod:`dpcl.privacy.sampling`). The records are identified by their content (the audit's data has
distinct rows), so the count needs nothing from the learner: a read or a sample that its ledger does not
expect is counted like any other. For every record of task t, its reads are grouped by the release's
noise multiplier σ and its samples by their rate, and compared with task t's ledger entries
(``noise_multiplier`` or ``sigma`` / ``sensitivity``, the ``sample_rate`` q, ``steps``; an entry without
steps is one release): under the hypothesis that the record belongs to part p of its task (an entry's
``part``; entries without one are shared by every part), the entries of p allow ``steps`` samples at
rate q and ``steps`` reads at σ. The record is accounted for when some part's hypothesis covers all its
samples and reads:

- **every sample exactly**: each rate a sample stated is the rate of one of the part's entries, and the
  record was in the population of at most as many samples at that rate as those entries have steps;
- **reads at q = 1, exactly**: reads at σ ≤ the steps of the part's entries at σ;
- **reads at q < 1, exactly and by a binomial test**: a read at σ must come from a sample at the rate of
  an entry at σ (reads ≤ those samples), and under the claim the reads are independent draws at the
  entries' rates, whose upper tail is bounded by the Binomial with the same mean [Hoeffding1956]: a count
  whose tail bound is below α / (2 × records × noise levels) refutes it (Bonferroni over the run);
- **the task's totals, by a binomial test**: per task and σ, the reads of all its records against the
  samples that could have drawn them (Binomial(samples, q) under the claim), at α / (2 × tasks × levels).
  A sampler that draws at 2q while stating q escapes a per-record test on few steps, not this one.

A read at a σ that no entry of any hypothesis states is unaccounted outright, whatever the rate: so is
a release at noise multiplier 0 in a private run (a "non-private reference"), and a sample at a rate the
ledger does not state. The check refutes, never certifies: a read the ledger accounts for may still be
noised wrongly (the statistical audits test that), and a record the code reads fewer times than stated
is on the safe side.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import binom

from ..privacy.releases import Release, Sample

#: relative tolerance when matching a release's σ with a ledger entry's (both are the same float, up to
#: the division noise_scale / sensitivity)
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

    #: what :meth:`lookup` returns for a public record (a read of it spends no one's privacy)
    PUBLIC = (-1, -1)

    def __init__(self) -> None:
        self._exact: dict[bytes, tuple[int, int]] = {}
        self._rows: dict[int, tuple[np.ndarray, list[tuple[int, int]]]] = {}

    def add_public(self, x: np.ndarray) -> None:
        """Add public records (a shadow pool, a public split): reads of them are not counted."""
        self.add(x, np.full(len(x), -1), -1)

    def add(self, x: np.ndarray, ids: np.ndarray, task: int) -> None:
        """Add task ``task``'s records ``ids`` in the representation ``x`` (one row each)."""
        x = np.asarray(x)
        for row, i in zip(x, np.asarray(ids), strict=True):
            key = row_key(row)
            if key in self._exact and self._exact[key] != (task, int(i)) and task >= 0:
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

    releases: int = 0  #: releases of records the run made
    samples: int = 0  #: samples the run drew
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
            return "not auditable: releases outside the mechanism primitives"
        return "not refuted"

    def summary(self) -> str:
        if self.unaccounted:
            u = self.unaccounted[0]
            return (
                f"{len(self.unaccounted)} record(s) read or sampled more than the ledger accounts, e.g. record "
                f"{u['record']} of task {u['task']}: {u['reads']}"
            )
        how = "exact, q = 1" if self.exact else f"samples exact, reads binomial, alpha {self.alpha:g}"
        return (
            f"{self.releases} releases, {self.samples} samples, {self.records_read} records read, at most "
            f"{self.max_reads} reads of one record; every read and sample accounted for by its part ({how})"
        )

    def merge(self, other: Exposure) -> None:
        """Add the check of another run of the same learner (another label method)."""
        self.releases += other.releases
        self.samples += other.samples
        self.records_read = max(self.records_read, other.records_read)
        self.max_reads = max(self.max_reads, other.max_reads)
        self.unattributed_rows += other.unattributed_rows
        self.unaccounted += other.unaccounted
        self.exact = self.exact and other.exact


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= SIGMA_RTOL * max(abs(a), abs(b))


def _reads(releases: list[Release], index: RecordIndex, out: Exposure) -> dict[tuple[int, int], dict]:
    """Every read of every record by a release of rows (a label release reads counts, no rows; a release
    at noise multiplier 0 counts, at σ 0, which no ledger entry states): {(task, id): {(noise, σ): count}}."""
    reads: dict[tuple[int, int], dict[tuple[str, float], int]] = defaultdict(lambda: defaultdict(int))
    for r in releases:
        sigma = r.noise_multiplier
        if r.rows is None or not (sigma >= 0 and math.isfinite(sigma)):
            continue
        out.releases += 1
        for who in index.lookup(r.rows):
            if who is None:
                out.unattributed_rows += 1
                continue
            if who == RecordIndex.PUBLIC:
                continue
            levels = reads[who]
            key = next((k for k in levels if k[0] == r.noise and _same(k[1], sigma)), (r.noise, sigma))
            levels[key] += 1
    return reads


def _candidacies(samples: list[Sample], index: RecordIndex, out: Exposure) -> dict[tuple[int, int], dict]:
    """How often every record was in the population of a sample, by the rate the sample used for it:
    {(task, id): {rate: count}} (populations of public records, or of rows that are no record, count
    nothing: the reads of such rows are what the check flags)."""
    cands: dict[tuple[int, int], dict[float, int]] = defaultdict(lambda: defaultdict(int))
    for s in samples:
        if s.rows is None:
            continue
        out.samples += 1
        for who, rate in zip(index.lookup(s.rows), s.rates(), strict=True):
            if who is None or who == RecordIndex.PUBLIC:
                continue
            levels = cands[who]
            key = next((k for k in levels if _same(k, float(rate))), float(rate))
            levels[key] += 1
    return cands


def check_exposure(
    releases: list[Release],
    ledger: dict,
    index: RecordIndex,
    *,
    alpha: float = 0.05,
    samples: list[Sample] = (),
) -> Exposure:
    """Count every record's reads in ``releases`` and its samples in ``samples`` and compare them with
    ``ledger``'s accounting of its task (module docstring)."""
    out = Exposure(alpha=alpha)
    reads = {
        who: {s: k for (_, s), k in levels.items()} for who, levels in _reads(releases, index, out).items()
    }
    cands = _candidacies(list(samples), index, out)
    entries = [ledger_entries(task) for task in ledger.get("tasks", [])]
    out.exact = all(e.rate >= 1.0 for es in entries for e in es)
    out.records_read = len(reads)
    who_all = sorted(set(reads) | set(cands))
    tests = max(1, sum(len(reads.get(w, {})) for w in who_all))
    for t, rid in who_all:
        levels, sampled = reads.get((t, rid), {}), cands.get((t, rid), {})
        out.max_reads = max(out.max_reads, sum(levels.values()))
        es = entries[t] if t < len(entries) else []
        parts = sorted({e.part for e in es if e.part is not None}) or [None]
        if not any(
            _covered(levels, [e for e in es if e.part in (p, None)], alpha / (2 * tests), sampled)
            for p in parts
        ):
            out.unaccounted.append(_unaccounted(t, rid, levels, sampled, es))
    _check_totals(reads, cands, entries, out, alpha / 2)
    return out


def _unaccounted(t: int, rid, levels: dict, sampled: dict, es: list[Entry]) -> dict:
    return {
        "task": t,
        "record": rid,
        "reads": {f"sigma {s:.6g}": k for s, k in sorted(levels.items())}
        | {f"samples at rate {r:.6g}": k for r, k in sorted(sampled.items())},
        "ledger": [
            {"part": e.part, "sigma": round(e.sigma, 6), "rate": e.rate, "steps": e.steps} for e in es
        ],
    }


def _check_totals(reads: dict, cands: dict, entries: list[list[Entry]], out: Exposure, alpha: float) -> None:
    """Per task and σ of entries at q < 1: the reads of all the task's records against the samples that
    could have drawn them (Binomial with the same mean, [Hoeffding1956]); Bonferroni over the tests."""
    tests = []
    for t, es in enumerate(entries):
        for sigma in sorted({e.sigma for e in es if e.rate < 1.0}):
            rates = sorted({e.rate for e in es if _same(e.sigma, sigma) and e.rate < 1.0})
            k = n = 0
            mean = 0.0
            for (task, _), levels in reads.items():
                if task == t:
                    k += sum(v for s, v in levels.items() if _same(s, sigma))
            for (task, _), sampled in cands.items():
                if task == t:
                    for r, c in sampled.items():
                        if any(_same(r, q) for q in rates):
                            n += c
                            mean += c * r
            tests.append((t, sigma, k, n, mean))
    for t, sigma, k, n, mean in tests:
        if n and _tail(k, n, mean) < alpha / len(tests):
            out.unaccounted.append(
                {
                    "task": t,
                    "record": "all",
                    "reads": {f"sigma {sigma:.6g}, task total": k, "samples that could draw them": n},
                    "expected": mean,
                }
            )


def _tail(k: int, n: int, mean: float) -> float:
    """Pr[Binomial(n, mean / n) ≥ k]: the bound on the tail of a sum of n Bernoullis with that mean."""
    if k > n:
        return 0.0
    if mean >= n or k < mean + 1:
        return 1.0
    return float(binom.sf(k - 1, n, mean / n))


def upper_tail(k: int, entries: list[Entry]) -> float:
    """An upper bound on Pr[reads ≥ k] when each entry's ``steps`` releases read a record independently
    at its ``rate``: 0 past the steps; else the Binomial(N, p̄) tail with the same mean (N the steps,
    p̄ their mean rate), which bounds the tail of a sum of Bernoullis with unequal rates for
    k ≥ N·p̄ + 1 [Hoeffding1956]; below that the bound is 1 (no evidence)."""
    return _tail(k, sum(e.steps for e in entries), sum(e.steps * min(e.rate, 1.0) for e in entries))


def _covered(
    levels: dict[float, int], entries: list[Entry], alpha: float, sampled: dict | None = None
) -> bool:
    """Whether ``entries`` (one part's hypothesis) account for reads ``levels`` (σ -> count) and samples
    ``sampled`` (rate -> count)."""
    sampled = sampled or {}
    for rate, c in sampled.items():
        match = [e for e in entries if _same(min(e.rate, 1.0), min(rate, 1.0))]
        if not match or c > sum(e.steps for e in match):
            return False
    for sigma, k in levels.items():
        match = [e for e in entries if _same(e.sigma, sigma)]
        if not match or upper_tail(k, match) < alpha:
            return False
        if all(e.rate < 1.0 for e in match):  # every such read comes from a sample at an entry's rate
            drawn = sum(c for r, c in sampled.items() if any(_same(r, e.rate) for e in match))
            if k > drawn:
                return False
    return True


def _group_entries(ledger: dict) -> dict:
    """{group: (Laplace selection entries, training entries)} of a DP active-learning group ledger: a
    record of group g was scored at g selection phases (the unselected at all of them; ``selection_
    epsilon`` / ``epsilon_per_phase`` reads at b / C_Sel) and trained along its group's phases."""
    sel = ledger.get("selection", {})
    per_phase = float(sel.get("epsilon_per_phase", 0) or 0)
    scale, sens = float(sel.get("laplace_scale", 0) or 0), float(sel.get("sensitivity", 0) or 0)
    out = {}
    for g in ledger.get("groups", []):
        n_sel = round(float(g["selection_epsilon"]) / per_phase) if per_phase > 0 else 0
        laplace = [Entry(None, scale / sens, 1.0, n_sel)] if n_sel and sens > 0 and scale > 0 else []
        train = [
            Entry(None, float(p["noise_multiplier"]), float(p["sample_rate"]), int(p["steps"]))
            for p in g["phases"]
        ]
        out[g["group"]] = (laplace, train)
    return out


def check_group_exposure(
    releases: list[Release],
    ledger: dict,
    index: RecordIndex,
    *,
    alpha: float = 0.05,
    samples: list[Sample] = (),
) -> dict[str, Exposure]:
    """The exposure check of a DP active-learning run, per group of its ledger: each record is placed in
    the group its count of Laplace selection reads names (a record of group g was scored g times, an
    unselected one at every phase), and its reads must be covered by that group's entries: the
    selection reads exactly, the training reads (per-record Poisson rates) by the binomial test.
    A record whose count names no group, or whose reads its group does not cover, refutes the group it
    names (or the row ``"none"``)."""
    entries = _group_entries(ledger)
    shared = Exposure(alpha=alpha)
    reads = _reads(releases, index, shared)
    cands = _candidacies(list(samples), index, shared)
    by_group = {str(g): Exposure(alpha=alpha, exact=False) for g in entries} | {"none": Exposure(alpha=alpha)}
    tests = max(1, sum(len(v) for v in reads.values()))
    members: dict[str, list[dict]] = defaultdict(list)  # the training reads of the records each group names
    for who in sorted(set(reads) | set(cands)):
        rid, levels = who[1], reads.get(who, {})
        n_laplace = sum(k for (noise, _), k in levels.items() if noise == "laplace")
        trained = any(noise != "laplace" for noise, _ in levels) or who in cands
        named = [
            g
            for g, (lap, _) in entries.items()
            if sum(e.steps for e in lap) == n_laplace and (trained or g == "unselected" or n_laplace == 0)
        ]
        sigma_reads = {s: k for (_, s), k in levels.items()}
        group = next(
            (
                g
                for g in named
                if _covered(sigma_reads, entries[g][0] + entries[g][1], alpha / (2 * tests), cands.get(who))
            ),
            None,
        )
        name = str(group if group is not None else (named[0] if named else "none"))
        members[name].append({s: k for (noise, s), k in levels.items() if noise != "laplace"})
        target = by_group[name]
        target.records_read += 1
        target.max_reads = max(target.max_reads, sum(levels.values()))
        if group is None:
            target.unaccounted.append(
                {
                    "task": 0,
                    "record": rid,
                    "reads": {f"{n} {s:.6g}": k for (n, s), k in sorted(levels.items())},
                }
            )
    # each group's training reads in total: a rate a little above the plan's escapes a per-record test
    # but not the sum over the group (Binomial(records × steps, q) under the claim)
    for g, (_, train) in entries.items():
        for sigma in sorted({e.sigma for e in train}):
            match = [e for e in train if _same(e.sigma, sigma)]
            records = len(members[str(g)])
            k = sum(v for m in members[str(g)] for s, v in m.items() if _same(s, sigma))
            total = [Entry(e.part, e.sigma, e.rate, e.steps * records) for e in match]
            if records and upper_tail(k, total) < alpha / (2 * len(entries)):
                by_group[str(g)].unaccounted.append(
                    {
                        "task": 0,
                        "record": "all",
                        "reads": {f"gaussian {sigma:.6g}, group total": k},
                        "expected": sum(e.steps * e.rate for e in total),
                    }
                )
    for e in by_group.values():
        e.releases, e.samples, e.unattributed_rows = shared.releases, shared.samples, shared.unattributed_rows
    return by_group
