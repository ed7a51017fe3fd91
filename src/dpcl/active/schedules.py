"""DP-SGD schedules for DP active learning (paper 004, Sec. III-B/C, Alg. 1-3, App. E-B).

A run has T selection phases and T + 1 training phases. Records form **groups** by when they
were labelled: group 0 is the initial labelled set D₁, group g ≥ 1 the records selected at
selection phase g (they join at training phase g), and the never-selected records pay only
selection. Every schedule here is computed **before any data is read**, from public
quantities only (the planned group sizes k_g, the expected batch size b, epochs, ε, δ,
ε_Sel): it is data-independent, so it costs no privacy, and it never looks at how many records
a selection actually returned.

A schedule is a list of segments; each has a noise multiplier σ, a step count and one Poisson
rate per group (0: not sampled). A group's **own history** is the segments in which it is
sampled, and its loss is ``selection ε paid + ε(own history)`` (basic composition, Sec.
III-E); every schedule is solved so that each group's loss is at most the target, with the
accountant of :mod:`dpcl.privacy.group_accounting`, and :meth:`Schedule.check` re-derives it.

- ``naive`` (Alg. 1): rate q_p = b/|D_p| for everyone, n_p = ⌈e/q_p⌉ steps, one σ.
- ``step_amplification`` (Alg. 2/3, ours): σ of the naive schedule; at phase p every group g is
  given the largest rate whose own history stays within R_p − paid_g, R_p being the naive
  schedule's cumulative ε after phase p (the paper's "privacy trajectory"), and n_p is the
  fewest steps ≥ the naive count whose expected batch Σ_g q_g k_g is ≤ b. The authors solve
  every old group against D₁'s history instead, which overshoots for groups that joined in
  the middle (:mod:`dpcl.active.paper_schedule`).
- ``noise_reduction`` (App. E-B): naive steps; the phase's σ is lowered until the per-group
  rates (solved as above) give an expected batch ≤ b.
- ``continual`` (App. E-B): each phase first trains the newest group alone (rate b/k_p) for as
  many steps as leave room for the naive phase, then runs the naive phase on everyone.
- ``single``: one phase on one group (the "Random" baseline without active learning).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..privacy.group_accounting import (
    ORDERS,
    Segment,
    history_rdp,
    max_sample_rate,
    rdp_to_epsilon,
    step_rdp,
    verify_group,
)

SCHEDULES = ("naive", "step_amplification", "noise_reduction", "continual", "single")
#: relative slack allowed between a group's re-derived loss and the target (accountant rounding)
REL_TOL = 1e-9


@dataclass(frozen=True)
class ALPlan:
    """The public inputs of a DP-AL schedule (paper 004, Alg. 3 "Require")."""

    epsilon: float  # per-record target ε (training + selection)
    delta: float  # per-record δ, set for the whole pool (not 1/B as in the paper)
    selection_epsilon: float  # ε_Sel charged over the T selections (0: selection reads no data)
    initial_size: int  # k₀ = (expected) |D₁|
    query_sizes: tuple[int, ...]  # k₁..k_T, (expected) records labelled per selection
    batch_size: float  # expected batch size b (also the public normaliser of the noisy sum)
    epochs: float  # e per training phase: n_p = ⌈e·|D_p|/b⌉ in the naive schedule

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"epsilon must be positive and finite, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta}")
        if not 0 <= self.selection_epsilon < self.epsilon:
            raise ValueError(
                f"selection_epsilon must lie in [0, epsilon = {self.epsilon}), got "
                f"{self.selection_epsilon}: a never-selected record pays all of it"
            )
        if self.initial_size < 1 or any(k < 1 for k in self.query_sizes):
            raise ValueError(
                f"initial_size and query_sizes must be >= 1, got {self.initial_size}, {self.query_sizes}"
            )
        if not (self.batch_size > 0 and self.epochs > 0):
            raise ValueError(f"batch_size and epochs must be positive, got {self.batch_size}, {self.epochs}")

    @property
    def phases(self) -> int:
        """Number of training phases T + 1."""
        return len(self.query_sizes) + 1

    @property
    def group_sizes(self) -> list[int]:
        return [int(self.initial_size), *map(int, self.query_sizes)]

    def labelled(self, phase: int) -> int:
        """Planned |D_p|: the records labelled before training phase ``phase``."""
        return sum(self.group_sizes[: phase + 1])

    def paid(self, group: int) -> float:
        """Selection ε a record of ``group`` paid before training: g·ε_Sel/T (Sec. III-E, Eq. 6)."""
        t = len(self.query_sizes)
        return 0.0 if group == 0 or t == 0 else group * self.selection_epsilon / t

    def naive_rate(self, phase: int) -> float:
        return min(1.0, self.batch_size / self.labelled(phase))

    def naive_steps(self, phase: int) -> int:
        return max(1, math.ceil(self.epochs / self.naive_rate(phase) - 1e-9))


@dataclass(frozen=True)
class SegmentPlan:
    """``steps`` DP-SGD steps at noise multiplier σ, sampling group g with probability rates[g]."""

    phase: int
    noise_multiplier: float
    steps: int
    rates: tuple[float, ...]


@dataclass
class Schedule:
    kind: str
    plan: ALPlan
    segments: list[SegmentPlan] = field(default_factory=list)

    @property
    def groups(self) -> int:
        return self.plan.phases

    def history(self, group: int) -> list[Segment]:
        """The group's own phase history: the segments in which it is sampled."""
        return [(s.noise_multiplier, s.rates[group], s.steps) for s in self.segments if s.rates[group] > 0]

    def expected_batch(self, segment: SegmentPlan) -> float:
        return _batch(self.plan, segment)

    def group_epsilons(self) -> list[float]:
        """Each group's loss (selection paid + training) with the schedule's accountant."""
        return [
            self.plan.paid(g) + rdp_to_epsilon(history_rdp(self.history(g)), self.plan.delta)
            for g in range(self.groups)
        ]

    def check(self) -> list[float]:
        """Re-derive every group's loss with the project's RDP accountant; raise if one exceeds ε."""
        out = []
        for g in range(self.groups):
            eps = verify_group(tuple(self.history(g)), self.plan.paid(g), self.plan.delta)
            if eps > self.plan.epsilon * (1 + REL_TOL):
                raise ValueError(
                    f"{self.kind} schedule: group {g} spends ε = {eps:.6g} > target {self.plan.epsilon}"
                )
            out.append(eps)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "plan": asdict(self.plan) | {"query_sizes": list(self.plan.query_sizes)},
            "segments": [asdict(s) | {"rates": list(s.rates)} for s in self.segments],
            "expected_batch": [self.expected_batch(s) for s in self.segments],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Schedule:
        plan = ALPlan(**(d["plan"] | {"query_sizes": tuple(d["plan"]["query_sizes"])}))
        segs = [
            SegmentPlan(
                int(s["phase"]),
                float(s["noise_multiplier"]),
                int(s["steps"]),
                tuple(float(q) for q in s["rates"]),
            )
            for s in d["segments"]
        ]
        return cls(d["kind"], plan, segs)


# ----------------------------------------------------------------------------- building blocks


def _naive_segments(plan: ALPlan, sigma: float) -> list[SegmentPlan]:
    return [
        SegmentPlan(
            p,
            sigma,
            plan.naive_steps(p),
            tuple(plan.naive_rate(p) if g <= p else 0.0 for g in range(plan.phases)),
        )
        for p in range(plan.phases)
    ]


def _smallest_sigma(ok, lo: float = 0.05, hi: float = 2.0, rtol: float = 1e-4) -> float:
    """Smallest σ with ok(σ) (ok is monotone: true from some σ on), to ``rtol``; returns a σ with ok true."""
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 1e5:
            raise ValueError("no noise multiplier up to 1e5 meets the target: the budget is too small")
    while ok(lo):
        hi, lo = lo, lo / 2
        if lo < 1e-3:
            return hi
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def naive_sigma(plan: ALPlan) -> float:
    """Smallest common σ for which every group of the naive schedule stays within ε (Alg. 1 l. 4)."""

    def ok(sigma: float) -> bool:
        sched = Schedule("naive", plan, _naive_segments(plan, sigma))
        return max(sched.group_epsilons()) <= plan.epsilon

    return _smallest_sigma(ok)


def naive_trajectory(plan: ALPlan, sigma: float) -> list[float]:
    """R_p: the cumulative ε of D₁ after each naive training phase (the target trajectory)."""
    curve, out = np.zeros(len(ORDERS)), []
    for p in range(plan.phases):
        curve = curve + plan.naive_steps(p) * step_rdp(sigma, plan.naive_rate(p))
        out.append(rdp_to_epsilon(curve, plan.delta))
    return out


def _rates(
    plan: ALPlan,
    curves: list[np.ndarray],
    phase: int,
    sigma: float,
    steps: int,
    targets: list[float],
    cap: float = 1.0,
) -> tuple[float, ...]:
    """Per group, the largest rate (≤ cap) keeping its own history within its target."""
    rates = []
    for g in range(plan.phases):
        if g > phase:
            rates.append(0.0)
            continue
        rates.append(min(cap, max_sample_rate(curves[g], sigma, steps, targets[g], plan.delta)))
    return tuple(rates)


def _batch(plan: ALPlan, seg: SegmentPlan) -> float:
    return float(sum(q * k for q, k in zip(seg.rates, plan.group_sizes, strict=True)))


def _advance(curves: list[np.ndarray], seg: SegmentPlan) -> list[np.ndarray]:
    return [
        c + seg.steps * step_rdp(seg.noise_multiplier, q) if q > 0 else c
        for c, q in zip(curves, seg.rates, strict=True)
    ]


# ----------------------------------------------------------------------------- schedules


def naive(plan: ALPlan) -> Schedule:
    """Alg. 1: one rate per phase for everyone, one σ."""
    return Schedule("naive", plan, _naive_segments(plan, naive_sigma(plan)))


def single(plan: ALPlan) -> Schedule:
    """One training phase on one group (the "Random" baseline: DP-SGD on a random labelled subset)."""
    if plan.query_sizes:
        raise ValueError("a single-phase schedule has no selection phases (query_sizes must be empty)")
    return Schedule("single", plan, naive(plan).segments)


def _phase_by_phase(plan: ALPlan, kind: str, phase) -> Schedule:
    """The shared frame of the schedules that catch later groups up (SA, noise reduction, continual):
    σ and the target trajectory R_p of the naive schedule, phase 0 as in the naive schedule, then
    ``phase(p, σ, curves, targets)`` → the segments of phase p, where curves[g] is group g's RDP so
    far and targets[g] = R_p − paid_g the most it may have spent after phase p."""
    sigma = naive_sigma(plan)
    traj = naive_trajectory(plan, sigma)
    seg0 = SegmentPlan(0, sigma, plan.naive_steps(0), tuple([plan.naive_rate(0)] + [0.0] * (plan.phases - 1)))
    segments, curves = [seg0], _advance([np.zeros(len(ORDERS))] * plan.phases, seg0)
    for p in range(1, plan.phases):
        targets = [traj[p] - plan.paid(g) for g in range(plan.phases)]
        for seg in phase(p, sigma, curves, targets):
            segments.append(seg)
            curves = _advance(curves, seg)
    return Schedule(kind, plan, segments)


def step_amplification(plan: ALPlan, max_factor: int = 4) -> Schedule:
    """Alg. 2/3 with every group solved against its own history (see the module docstring)."""

    def phase(p: int, sigma: float, curves: list, targets: list) -> list[SegmentPlan]:
        def seg(n: int) -> SegmentPlan:
            return SegmentPlan(p, sigma, n, _rates(plan, curves, p, sigma, n, targets))

        lo, hi = plan.naive_steps(p), plan.naive_steps(p) * max_factor
        best = seg(lo)
        if _batch(plan, best) > plan.batch_size:
            best = seg(hi)  # if even max_factor × the naive steps keep the batch above b, keep the cap
            if _batch(plan, best) <= plan.batch_size:
                while hi - lo > 1:  # fewest steps whose expected batch is ≤ b
                    mid = (lo + hi) // 2
                    cand = seg(mid)
                    if _batch(plan, cand) > plan.batch_size:
                        lo = mid
                    else:
                        hi, best = mid, cand
        return [best]

    return _phase_by_phase(plan, "step_amplification", phase)


def noise_reduction(plan: ALPlan) -> Schedule:
    """App. E-B "noise reduction": naive steps; each phase's σ is lowered to bring the batch to b."""

    def phase(p: int, sigma: float, curves: list, targets: list) -> list[SegmentPlan]:
        def seg(s: float) -> SegmentPlan:
            return SegmentPlan(
                p, s, plan.naive_steps(p), _rates(plan, curves, p, s, plan.naive_steps(p), targets)
            )

        best = seg(sigma)
        if _batch(plan, best) > plan.batch_size:
            lo, hi = 0.2 * sigma, sigma  # batch grows with σ: find the largest σ with batch ≤ b
            best = seg(lo)
            if _batch(plan, best) <= plan.batch_size:
                while hi / lo > 1.001:
                    mid = math.sqrt(lo * hi)
                    cand = seg(mid)
                    if _batch(plan, cand) > plan.batch_size:
                        hi = mid
                    else:
                        lo, best = mid, cand
        return [best]

    return _phase_by_phase(plan, "noise_reduction", phase)


def continual(plan: ALPlan) -> Schedule:
    """App. E-B "continual learning": the newest group alone first, then the naive phase on all."""

    def phase(p: int, sigma: float, curves: list, targets: list) -> list[SegmentPlan]:
        q_new = min(1.0, plan.batch_size / plan.group_sizes[p])
        q_p, n_p = plan.naive_rate(p), plan.naive_steps(p)
        main_cost = n_p * step_rdp(sigma, q_p)

        def fits(m: int) -> bool:  # the newest group after m catch-up steps still fits the full naive phase
            return (
                rdp_to_epsilon(curves[p] + m * step_rdp(sigma, q_new) + main_cost, plan.delta) <= targets[p]
            )

        m_lo, m_hi = 0, 1
        while fits(m_hi) and m_hi < 10**6:
            m_lo, m_hi = m_hi, m_hi * 2
        while m_hi - m_lo > 1:
            mid = (m_lo + m_hi) // 2
            m_lo, m_hi = (mid, m_hi) if fits(mid) else (m_lo, mid)
        out = []
        if m_lo > 0:
            out.append(
                SegmentPlan(p, sigma, m_lo, tuple(q_new if g == p else 0.0 for g in range(plan.phases)))
            )
            curves = _advance(curves, out[0])
        out.append(SegmentPlan(p, sigma, n_p, _rates(plan, curves, p, sigma, n_p, targets, cap=q_p)))
        return out

    return _phase_by_phase(plan, "continual", phase)


BUILDERS = {
    "naive": naive,
    "step_amplification": step_amplification,
    "noise_reduction": noise_reduction,
    "continual": continual,
    "single": single,
}


def build_schedule(kind: str, plan: ALPlan) -> Schedule:
    """Solve and verify a schedule (every group re-derived ≤ ε, or ValueError)."""
    if kind not in BUILDERS:
        raise ValueError(f"unknown schedule {kind!r}; choose one of {sorted(BUILDERS)}")
    sched = BUILDERS[kind](plan)
    sched.check()
    return sched
