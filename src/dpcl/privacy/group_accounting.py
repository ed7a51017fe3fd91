"""Per-record (per-group) accounting of DP-SGD phase histories with the RDP accountant.

Paper 004 (DP active learning) trains records that joined at different times with different
Poisson rates: a record's privacy loss is that of **its own** phase history, a list of
(noise_multiplier, sample_rate, steps) segments (Sec. III-C), plus the selection ε it paid
(Sec. III-E, basic composition). This module computes such losses quickly enough to *solve*
schedules (thousands of evaluations) and to re-derive every group's loss when a ledger is
verified.

RDP of the Poisson-subsampled Gaussian (Mironov et al. 2019, opacus's implementation) over
the integer orders of :data:`dpcl.privacy.sgd_accounting.RDP_ORDERS` (exact finite sums in
opacus, ten times faster than the fractional orders), converted to (ε, δ) with Balle et al.
2020, Thm 21 (opacus's ``get_privacy_spent``). Per-step curves are cached by (σ, q), and a
history's curve is the sum of its segments' (RDP composition). A sample rate of 0 means the
group is not sampled in that segment and costs nothing.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence

import numpy as np

from .sgd_accounting import RDP_ORDERS

#: RDP orders used to solve and state per-group losses (integers of RDP_ORDERS: 2..63, 128..1024).
ORDERS: tuple[float, ...] = tuple(a for a in RDP_ORDERS if float(a).is_integer())
_ORDERS = np.asarray(ORDERS, dtype=float)

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
    """(ε, δ) conversion of an RDP curve (Balle et al. 2020, Thm 21; opacus's formula), ε ≥ 0."""
    if not np.any(curve > 0):
        return 0.0
    with np.errstate(all="ignore"):
        eps = curve - (math.log(delta) + np.log(_ORDERS)) / (_ORDERS - 1) + np.log((_ORDERS - 1) / _ORDERS)
    eps = eps[np.isfinite(eps)]
    return float(max(0.0, eps.min())) if eps.size else math.inf


def training_epsilon(history: Sequence[Segment], delta: float) -> float:
    """ε of a record's DP-SGD history (RDP over :data:`ORDERS`)."""
    return rdp_to_epsilon(history_rdp(history), delta)


def max_sample_rate(
    prefix: np.ndarray, noise_multiplier: float, steps: int, target: float, delta: float, rtol: float = 1e-4
) -> float:
    """Largest q ∈ [0, 1] with ε(prefix + steps × step(σ, q)) ≤ target (0 if even q → 0 exceeds it).

    ``prefix`` is the RDP curve of the record's history so far. Bisection in log q; the
    returned rate is one whose ε was evaluated and found ≤ target (never an interpolation).
    """
    if rdp_to_epsilon(prefix, delta) > target:
        return 0.0

    def ok(q: float) -> bool:
        return rdp_to_epsilon(prefix + steps * step_rdp(noise_multiplier, q), delta) <= target

    if ok(1.0):
        return 1.0
    lo, hi = 1e-9, 1.0
    if not ok(lo):
        return 0.0
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def verify_group(history: Sequence[Segment], selection_epsilon: float, delta: float) -> float:
    """A group's total ε: its selection ε plus its training ε (basic composition, Sec. III-E).

    Recomputed with the project's RDP accountant over *all* its orders
    (:func:`dpcl.privacy.sgd_accounting.compose_epsilon`), independently of the curves used to
    solve the schedule; a history with no training is its selection ε alone.
    """
    return group_epsilon(history, selection_epsilon, delta, "rdp")


#: accountants a per-group ledger may name, each a valid upper bound on a group's training ε
ACCOUNTANTS = ("rdp", "pld")


@functools.lru_cache(maxsize=8192)
def _training_upper(history: tuple[Segment, ...], delta: float, accountant: str) -> float:
    if accountant == "rdp":
        from .sgd_accounting import compose_epsilon

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return compose_epsilon(list(history), delta, "rdp")
    from .pld import epsilon_upper

    return epsilon_upper(history, delta)


def group_epsilon(
    history: Sequence[Segment], selection_epsilon: float, delta: float, accountant: str = "rdp"
) -> float:
    """A group's total ε: selection ε + an upper bound on the ε of its own DP-SGD history.

    ``accountant``: ``"rdp"`` (the project's RDP accountant over all its orders, Balle et al.
    2020 Thm 21) or ``"pld"`` (pessimistic PLD of :mod:`dpcl.privacy.pld`); both are valid
    upper bounds, RDP the looser. Segments that never sample the group (q = 0 or no steps)
    cost nothing; selection and training compose by basic composition (paper 004, Sec. III-E).
    """
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; allowed: {list(ACCOUNTANTS)}")
    phases = tuple((float(s), float(q), int(n)) for s, q, n in history if q > 0 and n > 0)
    train = _training_upper(phases, float(delta), accountant) if phases else 0.0
    return float(selection_epsilon) + train
