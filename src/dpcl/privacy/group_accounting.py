"""Per-record (per-group) accounting of DP-SGD phase histories: PLD (pessimistic) or RDP.

[Schwethelm2025] (DP active learning) trains records that joined at different times with different
Poisson rates: a record's privacy loss is that of **its own** phase history, a list of
(noise_multiplier, sample_rate, steps) segments (Sec. III-C), plus the selection ε it paid
(Sec. III-E, basic composition). This module computes such losses quickly enough to *solve*
schedules (hundreds of evaluations) and to re-derive every group's loss when a ledger is
verified, with one of two accountants:

- ``"pld"`` (the default of our schedules): the **pessimistic** privacy-loss distribution of
  the Poisson-subsampled Gaussian (:mod:`dpcl.privacy.pld`, dp_accounting, connect-the-dots),
  composed segment by segment in history order, at :data:`PLD_DISCRETIZATION`. Its ε(δ) is a
  valid upper bound, and the tightest we have: at ε ≈ 8 it certifies 0.5-0.65 more of the
  budget than RDP for the same phases, which our schedules spend on larger rates.
- ``"rdp"``: RDP of the Poisson-subsampled Gaussian ([Mironov2019], opacus's
  implementation) over the integer orders of :data:`dpcl.privacy.sgd_accounting.RDP_ORDERS`,
  converted to (ε, δ) with [Balle2020], Thm 21 (opacus's ``get_privacy_spent``); kept to
  compare with the paper's own (RDP) numbers and to read schedules solved before the switch.

A solver holds each group's *state* (an RDP curve, or the composed PLD) and extends it by one
segment per trial: :class:`GroupAccountant`. A sample rate of 0 means the group is not sampled
in that segment and costs nothing. :func:`group_epsilon` is what a verifier calls.
"""

from __future__ import annotations

import abc
import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import pld as _pld
from .sgd_accounting import RDP_ORDERS

#: RDP orders used to solve and state per-group losses (integers of RDP_ORDERS: 2..63, 128..1024).
ORDERS: tuple[float, ...] = tuple(a for a in RDP_ORDERS if float(a).is_integer())
_ORDERS = np.asarray(ORDERS, dtype=float)
#: the accountants a schedule can be solved and stated with
ACCOUNTANTS = ("pld", "rdp")
#: the accountant our DP-AL schedules are solved and stated with
DEFAULT_ACCOUNTANT = "pld"
#: dp_accounting's privacy-loss discretisation for group losses. Coarser than pld.py's 1e-4 for
#: speed (a PLD's support, and so each composition's cost, scales with 1/discretisation): at ε ≈ 8
#: it states ε well under 1e-3 higher than 1e-4 would. Any discretisation gives a valid upper bound; solver, ledger and verifier use this one.
PLD_DISCRETIZATION = 3e-3

Segment = tuple[float, float, int]  # (noise_multiplier, sample_rate, steps)


@functools.lru_cache(maxsize=65536)
def step_rdp(noise_multiplier: float, sample_rate: float) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step at every order of :data:`ORDERS` (cached)."""
    from opacus.accountants.analysis.rdp import compute_rdp

    if sample_rate <= 0:
        return np.zeros(len(ORDERS))
    if not noise_multiplier > 0:
        return np.full(len(ORDERS), np.inf)
    curve = np.asarray(
        compute_rdp(
            q=float(sample_rate), noise_multiplier=float(noise_multiplier), steps=1, orders=list(ORDERS)
        ),
        dtype=float,
    )
    curve.setflags(write=False)
    return curve


def history_rdp(history: Sequence[Segment]) -> np.ndarray:
    """RDP curve of a sequence of segments composed (sum of per-step curves × steps)."""
    total = np.zeros(len(ORDERS))
    for sigma, q, steps in history:
        if q > 0 and steps > 0:
            total = total + int(steps) * step_rdp(float(sigma), float(q))
    return total


def rdp_to_epsilon(curve: np.ndarray, delta: float) -> float:
    """(ε, δ) conversion of an RDP curve ([Balle2020], Thm 21; opacus's formula), ε ≥ 0."""
    if not np.any(curve > 0):
        return 0.0
    with np.errstate(all="ignore"):
        eps = curve - (math.log(delta) + np.log(_ORDERS)) / (_ORDERS - 1) + np.log((_ORDERS - 1) / _ORDERS)
    eps = eps[np.isfinite(eps)]
    return float(max(0.0, eps.min())) if eps.size else math.inf


# ----------------------------------------------------------------------------- accountants


class GroupAccountant(abc.ABC):
    """Incremental accounting of one group's history: ``empty()``, ``extend(state, σ, q, n)``,
    ``epsilon(state, δ)``; ``training_epsilon(history, δ)`` is ``epsilon`` of the extended empty
    state (the figure a ledger states)."""

    name = ""

    @abc.abstractmethod
    def empty(self) -> Any:
        """The state of an empty history."""

    @abc.abstractmethod
    def extend(self, state: Any, sigma: float, q: float, steps: int) -> Any:
        """``state`` followed by ``steps`` steps at (σ, q)."""

    @abc.abstractmethod
    def epsilon(self, state: Any, delta: float) -> float:
        """An upper bound on ε(δ) of ``state``."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """The ledger's description of this accountant."""

    def state_of(self, history: Sequence[Segment]) -> Any:
        state = self.empty()
        for s, q, n in history:
            state = self.extend(state, float(s), float(q), int(n))
        return state

    def training_epsilon(self, history: Sequence[Segment], delta: float) -> float:
        return self.epsilon(self.state_of(history), delta)


class RDPGroupAccountant(GroupAccountant):
    """RDP over :data:`ORDERS` (state: the curve)."""

    name = "rdp"

    def empty(self) -> np.ndarray:
        return np.zeros(len(ORDERS))

    def extend(self, state: np.ndarray, sigma: float, q: float, steps: int) -> np.ndarray:
        return state + int(steps) * step_rdp(float(sigma), float(q)) if q > 0 and steps > 0 else state

    def epsilon(self, state: np.ndarray, delta: float) -> float:
        return rdp_to_epsilon(state, delta)

    def describe(self) -> dict[str, Any]:
        return {
            "name": "rdp",
            "orders": list(ORDERS),
            "conversion": "[Balle2020], Thm 21; selection + training by basic composition",
        }


class PLDGroupAccountant(GroupAccountant):
    """Pessimistic PLD (state: the segments so far and their composed PLD, ``None`` when empty).

    Extends with :func:`dpcl.privacy.pld`'s cached segment PLDs composed in history order, so
    that the ε of a state equals :func:`dpcl.privacy.pld.epsilon_upper` of its history.
    """

    name = "pld"

    def __init__(self, discretization: float = PLD_DISCRETIZATION):
        self.discretization = float(discretization)

    def empty(self) -> tuple:
        return ((), None)

    def extend(self, state: tuple, sigma: float, q: float, steps: int) -> tuple:
        if not (q > 0 and steps > 0):
            return state
        hist, dist = state
        seg = _pld._segment_pld(float(sigma), float(q), int(steps), True, self.discretization)
        return (*hist, (float(sigma), float(q), int(steps))), seg if dist is None else dist.compose(seg)

    def epsilon(self, state: tuple, delta: float) -> float:
        if state[1] is None:
            return 0.0
        # the PLD epsilon_upper builds for this history, composed in the same order: the same number
        return max(0.0, float(state[1].get_epsilon_for_delta(_pld._check_delta(delta))))

    def training_epsilon(self, history: Sequence[Segment], delta: float) -> float:
        # the same number as epsilon(state_of(history)), cached by history (ledgers, figures, checks)
        return _pld.epsilon_upper([tuple(h) for h in history], delta, self.discretization)

    def describe(self) -> dict[str, Any]:
        return {
            "name": "pld",
            "estimate": "pessimistic (a valid upper bound on ε(δ))",
            "implementation": "dp_accounting privacy-loss distributions, connect-the-dots",
            "value_discretization": _pld.VALUE_DISCRETIZATION,
            "solve_discretization": self.discretization,
            "conversion": "ε(δ) of the composed PLD (stated on the fine grid; schedules solved on the coarse one, "
            "whose bound is at least as large); selection + training by basic composition",
        }


def accountant(name: str) -> GroupAccountant:
    """The group accountant called ``name`` (one of :data:`ACCOUNTANTS`)."""
    if name == "pld":
        return PLDGroupAccountant()
    if name == "rdp":
        return RDPGroupAccountant()
    raise ValueError(f"unknown group accountant {name!r}; allowed: {list(ACCOUNTANTS)}")


def training_epsilon(history: Sequence[Segment], delta: float, accountant_name: str = "rdp") -> float:
    """ε of a record's DP-SGD history with the named accountant (RDP over :data:`ORDERS` by default)."""
    return accountant(accountant_name).training_epsilon(history, delta)


# ----------------------------------------------------------------------------- rate solving

#: relative resolution of a solved sampling rate, per group accountant (:func:`max_sample_rate`)
RATE_RTOL = {"pld": 1e-3, "rdp": 1e-4}
#: the coarsest resolution a schedule's σ (bisection to 1e-4) or rates (:data:`RATE_RTOL`) are solved to: two
#: correct solves of one public plan (on two CPUs, whose accountants differ in their last bits) agree to it
SOLVE_RESOLUTION = max(RATE_RTOL.values())


def solve_rate(
    eps_of: Callable[[float], float],
    target: float,
    floor: float,
    rtol: float = 1e-4,
    hint: float | None = None,
) -> float:
    """Largest q ∈ [0, 1] with eps_of(q) ≤ target, for eps_of increasing in q; ``floor`` = eps_of(0⁺).

    A bracketed root search in u = log q on y(u) = log(ε(q) − floor), nearly linear for
    subsampled Gaussians: secant steps through the last two points (the first from ``hint``, e.g.
    the rate of a neighbouring trial, and a point 1 % above it), false position between the
    bracket's ends when a secant step leaves the bracket, bisection when the bracket stops
    shrinking; every estimate that lands within ``rtol`` of the root is confirmed by probing its
    neighbour on the other side, which usually ends the search there. Returns a rate whose ε was
    evaluated and found ≤ target (never an interpolation); 0 if even q = 1e-9 exceeds it.
    """
    if floor > target:
        return 0.0
    cache: dict[float, float] = {}

    def f(q: float) -> float:
        if q not in cache:
            cache[q] = eps_of(q)
        return cache[q]

    gap = math.log(max(target - floor, 1e-300))

    def y(q: float) -> float:
        return math.log(max(f(q) - floor, 1e-300))

    if f(1.0) <= target:
        return 1.0
    lo, hi = 1e-9, 1.0
    pts: list[float] = []  # evaluated rates, most recent last (secant through the last two)

    def visit(q: float) -> None:
        nonlocal lo, hi
        pts.append(q)
        if f(q) <= target:
            lo = max(lo, q)
        else:
            hi = min(hi, q)

    if hint is not None and lo < hint < hi:
        visit(hint)
        visit(min(1.0, hint * 1.01) if f(hint) <= target else max(1e-9, hint / 1.01))
    if f(lo) > target:
        return 0.0
    step = math.log1p(rtol)
    stalled = 0
    while math.log(hi) - math.log(lo) > step * (1 + 1e-9):
        a, b = math.log(lo), math.log(hi)
        width = b - a
        u = math.nan
        if len(pts) >= 2 and stalled < 2:
            q1, q2 = pts[-2], pts[-1]
            y1, y2 = y(q1), y(q2)
            if y2 != y1 and min(y1, y2) > -600:
                u = math.log(q2) + (gap - y2) * (math.log(q2) - math.log(q1)) / (y2 - y1)
        if not (a < u < b) and stalled < 2:
            ya, yb = y(lo), y(hi)
            if yb > ya and ya > -600:
                u = a + (gap - ya) * width / (yb - ya)
        if not (a < u < b) or stalled >= 2:
            u, stalled = a + width / 2, 0
        if width > 2 * step:
            u = min(max(u, a + step), b - step)  # keep off the ends (the probe below covers them)
        m = math.exp(u)
        if not lo < m < hi:
            m = math.sqrt(lo * hi)
            if not lo < m < hi:
                break
        visit(m)
        if f(m) <= target:  # confirm from above: is the root within rtol?
            up = math.exp(u + step)
            if up < hi:
                visit(up)
        else:
            down = math.exp(u - step)
            if down > lo:
                visit(down)
        stalled = stalled + 1 if math.log(hi) - math.log(lo) > width / 2 else 0
    return lo


def max_sample_rate(
    prefix: Any,
    noise_multiplier: float,
    steps: int,
    target: float,
    delta: float,
    *,
    rtol: float | None = None,
    acc: GroupAccountant | None = None,
    hint: float | None = None,
) -> float:
    """Largest q ∈ [0, 1] with ε(prefix + steps × step(σ, q)) ≤ target (0 if even q → 0 exceeds it).

    ``prefix`` is the accountant's state of the record's history so far (an RDP curve for the
    default RDP accountant). See :func:`solve_rate`.
    """
    acc = acc or RDPGroupAccountant()
    if rtol is None:  # PLD evaluations are ~50x dearer than RDP's: rates to 0.1 % (batch to ~0.3 records)
        rtol = RATE_RTOL.get(acc.name, RATE_RTOL["rdp"])
    floor = acc.epsilon(prefix, delta)
    return solve_rate(
        lambda q: acc.epsilon(acc.extend(prefix, noise_multiplier, q, steps), delta),
        target,
        floor,
        rtol,
        hint,
    )


# ----------------------------------------------------------------------------- verification


def verify_group(history: Sequence[Segment], selection_epsilon: float, delta: float) -> float:
    """A group's total ε with RDP: its selection ε plus its training ε (basic composition, Sec. III-E).

    Recomputed with the project's RDP accountant over *all* its orders
    (:func:`dpcl.privacy.sgd_accounting.compose_epsilon`), independently of the curves used to
    solve the schedule; a history with no training is its selection ε alone.
    """
    return group_epsilon(history, selection_epsilon, delta, "rdp")


@functools.lru_cache(maxsize=8192)
def _training_upper(history: tuple[Segment, ...], delta: float, accountant: str) -> float:
    if accountant == "rdp":
        from .sgd_accounting import compose_epsilon

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compose_epsilon(list(history), delta, "rdp")
    from .pld import epsilon_upper

    # the fine grid (1e-4): at most what the schedules were solved with at PLD_DISCRETIZATION
    return epsilon_upper(history, delta)


def group_epsilon(
    history: Sequence[Segment], selection_epsilon: float, delta: float, accountant: str = "rdp"
) -> float:
    """A group's total ε: selection ε + an upper bound on the ε of its own DP-SGD history.

    ``accountant``: ``"rdp"`` (the project's RDP accountant over all its orders, [Balle2020]
    Thm 21) or ``"pld"`` (pessimistic PLD of :mod:`dpcl.privacy.pld` on its fine grid, at
    most what the schedules were solved with at :data:`PLD_DISCRETIZATION`); both are valid
    upper bounds, RDP the looser. Segments that never sample the group (q = 0 or no steps)
    cost nothing; selection and training compose by basic composition ([Schwethelm2025], Sec. III-E).
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown group accountant {accountant!r}; allowed: {list(ACCOUNTANTS)}")
    phases = tuple((float(s), float(q), int(n)) for s, q, n in history if q > 0 and n > 0)
    train = _training_upper(phases, float(delta), accountant) if phases else 0.0
    return float(selection_epsilon) + train
