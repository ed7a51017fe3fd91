"""DP-SGD schedules for DP active learning ([Schwethelm2025], Sec. III-B/C, Alg. 1-3, App. E-B).

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
III-E); every schedule is solved so that each group's loss is at most the target, with an
accountant of :mod:`dpcl.privacy.group_accounting` (the pessimistic PLD by default, RDP on
request), and :meth:`Schedule.check` re-derives it with the same accountant.

- ``naive`` (Alg. 1): rate q_p = b/|D_p| for everyone, n_p = ⌈e/q_p⌉ steps, one σ.
- ``step_amplification`` (Alg. 2/3, ours): σ of the naive schedule; at phase p every group g is
  given the largest rate whose own history stays within R_p − paid_g, R_p being the naive
  schedule's cumulative ε after phase p (the paper's "privacy trajectory"), and n_p is the
  fewest steps ≥ the naive count whose expected batch Σ_g q_g k_g is ≤ b. The authors solve
  every old group against D₁'s history instead, which their RDP accountant cannot certify for
  groups that joined in the middle (:mod:`dpcl.active.paper_schedule`, with the verdicts).
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

from ..privacy.group_accounting import (
    ACCOUNTANTS,
    DEFAULT_ACCOUNTANT,
    GroupAccountant,
    Segment,
    accountant,
    group_epsilon,
    max_sample_rate,
)

SCHEDULES = ("naive", "step_amplification", "noise_reduction", "continual", "single")
#: relative slack allowed between a group's re-derived loss and the target (accountant rounding)
REL_TOL = 1e-9


@dataclass(frozen=True)
class ALPlan:
    """The public inputs of a DP-AL schedule ([Schwethelm2025], Alg. 3 "Require")."""

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
    #: the accountant the schedule was solved with and states its groups' ε with ("pld", "rdp";
    #: "opacus_rdp" for the authors' schedule of :mod:`dpcl.active.paper_schedule`)
    accountant: str = DEFAULT_ACCOUNTANT

    @property
    def groups(self) -> int:
        return self.plan.phases

    def history(self, group: int) -> list[Segment]:
        """The group's own phase history: the segments in which it is sampled."""
        return [(s.noise_multiplier, s.rates[group], s.steps) for s in self.segments if s.rates[group] > 0]

    def expected_batch(self, segment: SegmentPlan) -> float:
        return _batch(self.plan, segment)

    @property
    def stating_accountant(self) -> str:
        """The group accountant that states this schedule's per-group ε: its own, or PLD (the
        tightest valid upper bound) for a schedule solved with another accountant."""
        return self.accountant if self.accountant in ACCOUNTANTS else DEFAULT_ACCOUNTANT

    def group_epsilons(self, accountant_name: str | None = None) -> list[float]:
        """Each group's loss (selection paid + training), by default with the stating accountant."""
        acc = accountant(accountant_name or self.stating_accountant)
        return [
            self.plan.paid(g) + acc.training_epsilon(self.history(g), self.plan.delta)
            for g in range(self.groups)
        ]

    def untrained_groups(self) -> list[int]:
        """Groups sampled in no segment at all: records labelled (and paid for) but never trained on."""
        return [g for g in range(self.groups) if not self.history(g)]

    def check(self) -> list[float]:
        """Re-derive every group's loss with the stating accountant (:func:`group_epsilon`); raise if
        one exceeds ε or if a group is never trained."""
        idle = self.untrained_groups()
        if idle:
            raise ValueError(
                f"{self.kind} schedule: group(s) {idle} are sampled in no phase after they join: their "
                f"records would be labelled (and pay selection ε) without ever being trained on"
            )
        out = []
        for g in range(self.groups):
            eps = group_epsilon(self.history(g), self.plan.paid(g), self.plan.delta, self.stating_accountant)
            if eps > self.plan.epsilon * (1 + REL_TOL):
                raise ValueError(
                    f"{self.kind} schedule: group {g} spends ε = {eps:.6g} > target {self.plan.epsilon} "
                    f"({self.stating_accountant})"
                )
            out.append(eps)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "accountant": self.accountant,
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
        # a schedule file without an accountant was solved with RDP (before the switch to PLD)
        return cls(d["kind"], plan, segs, str(d.get("accountant", "rdp")))


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
            raise ValueError(
                "no noise multiplier up to 1e5 keeps every group of the naive schedule within the target: "
                "the training budget left after selection (epsilon - selection_epsilon) is too small"
            )
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


def naive_sigma(plan: ALPlan, accountant_name: str = DEFAULT_ACCOUNTANT) -> float:
    """Smallest common σ for which every group of the naive schedule stays within ε (Alg. 1 l. 4)."""
    acc = accountant(accountant_name)

    def ok(sigma: float) -> bool:
        sched = Schedule("naive", plan, _naive_segments(plan, sigma), accountant_name)
        return all(
            plan.paid(g) + acc.training_epsilon(sched.history(g), plan.delta) <= plan.epsilon
            for g in range(plan.phases)
        )

    if accountant_name == "pld":
        # PLD certifies more than RDP: its σ lies a little below RDP's (cheap); bracket the search
        # there (_smallest_sigma widens the bracket itself if that ever fails)
        s_rdp = naive_sigma(plan, "rdp")
        return _smallest_sigma(ok, lo=0.8 * s_rdp, hi=s_rdp)
    return _smallest_sigma(ok)


def naive_group_trajectories(
    plan: ALPlan, sigma: float, accountant_name: str = DEFAULT_ACCOUNTANT
) -> list[list[float]]:
    """N[g][p]: group g's training ε after naive phase p (0 for p < g) at σ."""
    acc = accountant(accountant_name)
    out = []
    for g in range(plan.phases):
        state, row = acc.empty(), []
        for p in range(plan.phases):
            if p >= g:
                state = acc.extend(state, sigma, plan.naive_rate(p), plan.naive_steps(p))
            row.append(acc.epsilon(state, plan.delta))
        out.append(row)
    return out


def naive_trajectory(plan: ALPlan, sigma: float, accountant_name: str = DEFAULT_ACCOUNTANT) -> list[float]:
    """R_p: the cumulative ε of D₁ after each naive training phase (the paper's target trajectory)."""
    return naive_group_trajectories(plan, sigma, accountant_name)[0]


def target_trajectory(
    plan: ALPlan, sigma: float, accountant_name: str = DEFAULT_ACCOUNTANT
) -> list[list[float]]:
    """targets[p][g]: the most group g's training may have spent after phase p of a catch-up schedule.

    The paper's trajectory R_p − paid_g (every group catches up with D₁'s naive loss, selection
    included), but never below the group's own naive trajectory N_g(p). Without that floor a
    group whose selection ε exceeds D₁'s naive loss (R_T < paid_g, e.g. the last group at ε = 8,
    ε_Sel = 6, where the naive σ is set by that group) gets target < 0, rate 0 in every phase:
    labelled, paid for, never trained. With it every group's target grows in every phase after it
    joins (R_p and N_g(p) both increase), so it is sampled, and the final targets stay within
    the budget: R_T ≤ ε (D₁ is a naive group) and paid_g + N_g(T) ≤ ε (the naive σ guarantees it).
    """
    r = naive_trajectory(plan, sigma, accountant_name)
    n = naive_group_trajectories(plan, sigma, accountant_name)
    return [
        [max(r[p] - plan.paid(g), n[g][p]) if g <= p else 0.0 for g in range(plan.phases)]
        for p in range(plan.phases)
    ]


def _rates(
    plan: ALPlan,
    acc: GroupAccountant,
    states: list,
    phase: int,
    sigma: float,
    steps: int,
    targets: list[float],
    cap: float = 1.0,
    hints: dict | None = None,
) -> tuple[float, ...]:
    """Per group, the largest rate (≤ cap) keeping its own history within its target; ``hints``
    (group → a rate solved at a neighbouring trial) seeds each solve and is updated."""
    rates = []
    for g in range(plan.phases):
        if g > phase:
            rates.append(0.0)
            continue
        hint = None if hints is None else hints.get(g)
        q = max_sample_rate(states[g], sigma, steps, targets[g], plan.delta, acc=acc, hint=hint)
        if hints is not None and q > 0:
            hints[g] = q
        rates.append(min(cap, q))
    return tuple(rates)


def _batch(plan: ALPlan, seg: SegmentPlan) -> float:
    return float(sum(q * k for q, k in zip(seg.rates, plan.group_sizes, strict=True)))


def _fewest_steps(plan: ALPlan, seg, lo: int, cap: int) -> SegmentPlan:
    """seg(n) with the fewest steps n ∈ [lo, cap] whose expected batch is ≤ b (seg(cap) if none).

    The batch falls as n grows (each group's rate falls): a bracketed search in (log n, log batch),
    interpolating between the nearest steps known above and below b (bisection when that does not
    shrink the bracket), ending when they are adjacent.
    """
    b = plan.batch_size
    tried: dict[int, SegmentPlan] = {}

    def batch(n: int) -> float:
        if n not in tried:
            tried[n] = seg(n)
        return _batch(plan, tried[n])

    if batch(lo) <= b:
        return tried[lo]
    bad, good = lo, None  # batch(bad) > b ≥ batch(good)
    # first guess: batch ∝ n^(-3/4), roughly how the per-group rates fall with more steps
    n = min(cap, max(lo + 1, math.ceil(lo * (batch(lo) / b) ** (4 / 3))))
    while True:
        if batch(n) <= b:
            good = n
        else:
            bad = n
        if good is None:
            if bad >= cap:
                return tried[cap]  # even cap × the naive steps keep the batch above b: keep the cap
            x0, x1 = sorted(tried)[-2:] if len(tried) > 1 else (lo, n)
        elif good - bad <= 1:
            return tried[good]
        else:
            x0, x1 = bad, good
        y0, y1 = math.log(batch(x0)), math.log(batch(x1))
        if x0 != x1 and y0 != y1:
            u = math.log(x1) + (math.log(b) - y1) * (math.log(x1) - math.log(x0)) / (y1 - y0)
            guess = math.ceil(math.exp(min(u, math.log(cap))))
        else:
            guess = 2 * bad
        upper = cap if good is None else good - 1
        nxt = min(max(guess, bad + 1), upper)
        if good is not None and nxt in tried:
            nxt = (bad + good) // 2
        if nxt in tried:  # no new step count between the bracket's ends: bisect
            nxt = (bad + (cap if good is None else good) + 1) // 2
        n = nxt


def _advance(acc: GroupAccountant, states: list, seg: SegmentPlan) -> list:
    return [
        acc.extend(c, seg.noise_multiplier, q, seg.steps) if q > 0 else c
        for c, q in zip(states, seg.rates, strict=True)
    ]


# ----------------------------------------------------------------------------- schedules


def naive(plan: ALPlan, accountant_name: str = DEFAULT_ACCOUNTANT) -> Schedule:
    """Alg. 1: one rate per phase for everyone, one σ."""
    return Schedule("naive", plan, _naive_segments(plan, naive_sigma(plan, accountant_name)), accountant_name)


def single(plan: ALPlan, accountant_name: str = DEFAULT_ACCOUNTANT) -> Schedule:
    """One training phase on one group (the "Random" baseline: DP-SGD on a random labelled set)."""
    if plan.query_sizes:
        raise ValueError("a single-phase schedule has no selection phases (query_sizes must be empty)")
    return Schedule("single", plan, naive(plan, accountant_name).segments, accountant_name)


def _phase_by_phase(plan: ALPlan, kind: str, phase, accountant_name: str) -> Schedule:
    """The shared frame of the schedules that catch later groups up (SA, noise reduction, continual):
    σ and the target trajectory (:func:`target_trajectory`) of the naive schedule, phase 0 as in
    the naive schedule, then ``phase(p, σ, states, targets)`` → the segments of phase p, where
    states[g] is group g's accountant state so far and targets[g] the most it may have spent
    after phase p."""
    acc = accountant(accountant_name)
    sigma = naive_sigma(plan, accountant_name)
    traj = target_trajectory(plan, sigma, accountant_name)
    seg0 = SegmentPlan(0, sigma, plan.naive_steps(0), tuple([plan.naive_rate(0)] + [0.0] * (plan.phases - 1)))
    segments, states = [seg0], _advance(acc, [acc.empty()] * plan.phases, seg0)
    for p in range(1, plan.phases):
        for seg in phase(p, sigma, states, traj[p]):
            segments.append(seg)
            states = _advance(acc, states, seg)
    return Schedule(kind, plan, segments, accountant_name)


def step_amplification(
    plan: ALPlan, max_factor: int = 4, accountant_name: str = DEFAULT_ACCOUNTANT
) -> Schedule:
    """Alg. 2/3 with every group solved against its own history (see the module docstring)."""
    acc = accountant(accountant_name)

    def phase(p: int, sigma: float, states: list, targets: list) -> list[SegmentPlan]:
        hints: dict = {}

        def seg(n: int) -> SegmentPlan:
            return SegmentPlan(p, sigma, n, _rates(plan, acc, states, p, sigma, n, targets, hints=hints))

        return [_fewest_steps(plan, seg, plan.naive_steps(p), plan.naive_steps(p) * max_factor)]

    return _phase_by_phase(plan, "step_amplification", phase, accountant_name)


def noise_reduction(plan: ALPlan, accountant_name: str = DEFAULT_ACCOUNTANT) -> Schedule:
    """App. E-B "noise reduction": naive steps; each phase's σ is lowered to bring the batch to b."""
    acc = accountant(accountant_name)

    def phase(p: int, sigma: float, states: list, targets: list) -> list[SegmentPlan]:
        hints: dict = {}

        def seg(s: float) -> SegmentPlan:
            n = plan.naive_steps(p)
            return SegmentPlan(p, s, n, _rates(plan, acc, states, p, s, n, targets, hints=hints))

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

    return _phase_by_phase(plan, "noise_reduction", phase, accountant_name)


def continual(plan: ALPlan, accountant_name: str = DEFAULT_ACCOUNTANT) -> Schedule:
    """App. E-B "continual learning": the newest group alone first, then the naive phase on all."""
    acc = accountant(accountant_name)

    def phase(p: int, sigma: float, states: list, targets: list) -> list[SegmentPlan]:
        q_new = min(1.0, plan.batch_size / plan.group_sizes[p])
        q_p, n_p = plan.naive_rate(p), plan.naive_steps(p)

        def fits(m: int) -> bool:  # the newest group after m catch-up steps still fits the full naive phase
            state = acc.extend(acc.extend(states[p], sigma, q_new, m), sigma, q_p, n_p)
            return acc.epsilon(state, plan.delta) <= targets[p]

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
            states = _advance(acc, states, out[0])
        out.append(SegmentPlan(p, sigma, n_p, _rates(plan, acc, states, p, sigma, n_p, targets, cap=q_p)))
        return out

    return _phase_by_phase(plan, "continual", phase, accountant_name)


BUILDERS = {
    "naive": naive,
    "step_amplification": step_amplification,
    "noise_reduction": noise_reduction,
    "continual": continual,
    "single": single,
}


def build_schedule(kind: str, plan: ALPlan, accountant_name: str = DEFAULT_ACCOUNTANT) -> Schedule:
    """Solve and verify a schedule with ``accountant_name`` ("pld": pessimistic PLD, the default;
    "rdp"): every group re-derived ≤ ε and trained in some phase, or ValueError."""
    if kind not in BUILDERS:
        raise ValueError(f"unknown schedule {kind!r}; choose one of {sorted(BUILDERS)}")
    if accountant_name not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant_name!r}; choose one of {list(ACCOUNTANTS)}")
    sched = BUILDERS[kind](plan, accountant_name=accountant_name)
    sched.check()
    return sched
