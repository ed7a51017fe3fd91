"""opacus's RDP accountant over a heterogeneous history, as [Schwethelm2025]'s released code uses it
(Alg. 6), fast and bit-identical: the one-step RDP of opacus's public ``compute_rdp`` cached by
(σ, q, order), a history's RDP summed in history order, and opacus's (ε, δ) conversion
(``get_privacy_spent``, [Balle2020] Thm 21) with its default orders (``RDPAccountant.DEFAULT_ALPHAS``)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np


def default_orders() -> tuple[float, ...]:
    """opacus's default RDP orders (what the released code's ``create_accountant("rdp")`` uses)."""
    from opacus.accountants import RDPAccountant

    return tuple(float(a) for a in RDPAccountant.DEFAULT_ALPHAS)


#: the slack of the lower bound an order's RDP gives the orders above it (:meth:`OpacusRDP.epsilon`):
#: RDP is non-decreasing in the order, and opacus's series for a fractional order falls below its
#: closed form at the integer order beneath by at most 3e-17 (absolute) wherever we have compared them
#: (tests/active/test_active_paper_schedule.py); the bound subtracts 1e-12 plus a millionth of the value
ORDER_SLACK_ABS, ORDER_SLACK_REL = 1e-12, 1e-6


@functools.lru_cache(maxsize=1_000_000)
def _step_rdp(sigma: float, q: float, order: float) -> float:
    """RDP of one Poisson-subsampled Gaussian step at one order (opacus ``compute_rdp``, cached): the
    value ``compute_rdp`` gives at that order in a list of orders, bit for bit (it computes each alone)."""
    from opacus.accountants.analysis.rdp import compute_rdp

    return float(
        np.asarray(compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=[order]), dtype=float)[0]
    )


@functools.lru_cache(maxsize=200_000)
def _step_curve(sigma: float, q: float, orders: tuple[float, ...]) -> np.ndarray:
    """RDP of one Poisson-subsampled Gaussian step at every order (opacus ``compute_rdp``, cached)."""
    curve = np.array([_step_rdp(sigma, q, a) for a in orders], dtype=float)
    curve.setflags(write=False)
    return curve


class OpacusRDP:
    """opacus's RDP accountant (``RDPAccountant.get_epsilon``) over a heterogeneous history (Alg. 6).

    A history is a sequence of (σ, q, steps); its RDP is the sum of steps × the one-step curve,
    in history order (as opacus sums it), converted with opacus's ``get_privacy_spent``.

    :meth:`epsilon` and :meth:`below` return what the whole curve gives, bit for bit, but compute an
    order's RDP only where it can matter: the integer orders (opacus's closed form) first, then a
    fractional order (its series, several times slower) only if the bound from the integer order beneath
    it (RDP is non-decreasing in the order, less :data:`ORDER_SLACK_ABS` and :data:`ORDER_SLACK_REL`) could still be the minimum, or
    could still come in below the target. Floating-point addition and multiplication are monotone, so
    the bound, summed over the history in the same order, stays at or below the value it bounds.
    """

    def __init__(self, orders: Sequence[float] | None = None):
        self.orders = tuple(float(a) for a in (default_orders() if orders is None else orders))
        self._alpha = np.asarray(self.orders, dtype=float)
        self._closed_form = [i for i, a in enumerate(self.orders) if a.is_integer()]
        #: per fractional order, the largest integer order beneath it (None: no order beneath; RDP ≥ 0)
        self._beneath = {
            i: max(
                (j for j in self._closed_form if self.orders[j] < a),
                key=lambda j: self.orders[j],
                default=None,
            )
            for i, a in enumerate(self.orders)
            if not a.is_integer()
        }
        self._conversion: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def curve(self, sigma: float, q: float) -> np.ndarray:
        return _step_curve(float(sigma), float(q), self.orders)

    def rdp(self, history: Sequence[tuple[float, float, int]]) -> np.ndarray:
        total = np.zeros(len(self.orders))
        for sigma, q, steps in history:
            total = total + self.curve(sigma, q) * steps
        return total

    def _terms(self, delta: float) -> tuple[np.ndarray, np.ndarray]:
        """The conversion's two terms per order, as :meth:`epsilon_of_rdp` computes them (whole arrays)."""
        if delta not in self._conversion:
            a = self._alpha
            with np.errstate(all="ignore"):
                self._conversion[delta] = ((math.log(delta) + np.log(a)) / (a - 1), np.log((a - 1) / a))
        return self._conversion[delta]

    def epsilon_of_rdp(self, rdp: np.ndarray, delta: float) -> float:
        a = self._alpha
        with np.errstate(all="ignore"):
            eps = rdp - (math.log(delta) + np.log(a)) / (a - 1) + np.log((a - 1) / a)
        if np.isnan(eps).all():
            return math.inf
        return float(eps[int(np.nanargmin(eps))])

    def epsilon(self, history: Sequence[tuple[float, float, int]], delta: float) -> float:
        if not history:
            return 0.0
        return self._search(history, delta, None)

    def below(self, history: Sequence[tuple[float, float, int]], delta: float, target: float) -> bool:
        """Whether ``epsilon(history, delta) < target`` (the orders computed stop once it is decided)."""
        if not history:
            return 0.0 < target
        return self._search(history, delta, target)

    def _search(self, history, delta: float, target: float | None):
        """The minimum over the orders of the converted ε (NaN ignored; ∞ if every order is NaN), as
        :meth:`epsilon_of_rdp` of :meth:`rdp`; with ``target``: whether that minimum is below it."""
        sub, add = self._terms(delta)
        hist = [(float(s), float(q), steps) for s, q, steps in history]
        best = math.inf

        def total(i: int) -> float:
            t = 0.0
            for s, q, steps in hist:
                t = t + _step_rdp(s, q, self.orders[i]) * steps
            return t

        with np.errstate(all="ignore"):
            for i in self._closed_form:
                e = float((total(i) - sub[i]) + add[i])
                if e < best:
                    best = e
                    if target is not None and best < target:
                        return True
            lower: dict[int | None, float] = {}  # the history's RDP bound per integer order beneath
            for j in set(self._beneath.values()):
                lb = 0.0
                for s, q, steps in hist:
                    v = _step_rdp(s, q, self.orders[j]) if j is not None else 0.0
                    lb = lb + (v - ORDER_SLACK_ABS - ORDER_SLACK_REL * abs(v)) * steps
                lower[j] = lb
            bounds = [(float((lower[j] - sub[i]) + add[i]), i) for i, j in self._beneath.items()]
            for lb_eps, i in sorted(bounds, key=lambda b: (math.isnan(b[0]), b[0])):
                if (lb_eps >= target) if target is not None else (lb_eps > best):
                    continue  # this order's ε is at least its bound: it cannot decide
                e = float((total(i) - sub[i]) + add[i])
                if e < best:
                    best = e
                    if target is not None and best < target:
                        return True
        return False if target is not None else best
