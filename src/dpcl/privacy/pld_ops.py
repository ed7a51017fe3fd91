"""dp_accounting's composition of two PLDs and its ε(δ), with their Python loops done in numpy.

Two steps of every PLD bound (:mod:`dpcl.privacy.pld`, :mod:`dpcl.privacy.group_accounting`) walk a
PMF of a million or more grid points one element at a time in Python (at dpcl's discretisations
2e-5 and 1e-4, ~0.3 µs an element):

- ``DensePLDPmf.compose`` truncates the convolution's tails (``pld_pmf._truncate_tails``): the
  longest prefix and suffix whose running sums stay at or below half the truncated mass;
- ``DensePLDPmf.get_epsilon_for_delta`` (``pld_pmf._get_epsilon_for_delta``) walks the losses
  down from the largest, accumulating the mass above and e^(−loss)·mass, until the hockey-stick
  divergence at that loss falls to δ.

:func:`compose` and :func:`epsilon_for_delta` here do the same operations in the same order:

- a running sum is ``np.cumsum`` seeded with the loop's starting value (an accumulation adds left
  to right, each sum rounded once, like the loop's ``s += value``); the losses are the running
  sum of −discretisation from the largest loss, as ``itertools.count`` yields them;
- e^(−loss) is ``math.exp``, the function the loop calls (numpy's own ``exp`` may differ from the
  C library's in the last bit on some CPUs), element by element over a block;
- the stopping test ``log((mass_upper − δ) / mass_lower) ≥ loss`` is screened with numpy's ``log``
  and decided with ``math.log`` at each index the screen lets through, in order, so the first index
  where the loop stops is the one found here;
- the walk goes block by block (4,096 elements, doubling) and stops in the block where the loop
  stops, so a short walk stays short.

The results are equal bit for bit; ``tests/test_pld_ops.py`` checks them against dp_accounting's own
methods on the PLDs dpcl composes and on constructed edge cases, which also catches a future
dp_accounting whose internals moved. A sparse PMF (dp_accounting keeps small ones sparse) goes to
dp_accounting's code unchanged.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.pld import pld_pmf as _pld_pmf
from dp_accounting.pld import privacy_loss_distribution as _pld

#: dp_accounting's default tail mass truncated by a composition (``PrivacyLossDistribution.compose``)
TAIL_MASS_TRUNCATION = 1e-15
_FIRST_BLOCK = 4096


def _running_sums(start: float, values: np.ndarray) -> np.ndarray:
    """[start, start + v0, (start + v0) + v1, …]: the running sums of a loop ``s = start; s += v``."""
    seeded = np.empty(len(values) + 1)
    seeded[0] = start
    seeded[1:] = values
    return np.cumsum(seeded)


def _prefix_to_truncate(arr: np.ndarray, threshold: float) -> int:
    """``_truncate_tails``' ``_find_prefix_to_truncate``: the first index whose running sum (from 0)
    exceeds ``threshold``, else ``len(arr)``."""
    n, start, carry, block = len(arr), 0, 0.0, _FIRST_BLOCK
    while start < n:
        sums = _running_sums(carry, arr[start : start + block])[1:]
        hit = np.flatnonzero(sums > threshold)
        if len(hit):
            return start + int(hit[0])
        carry, start, block = sums[-1], start + len(sums), 2 * block
    return n


def truncate_tails(probs: np.ndarray, tail_mass_truncation: float, pessimistic_estimate: bool):
    """``dp_accounting.pld.pld_pmf._truncate_tails``, bit for bit: (size of the truncated prefix,
    the truncated array, the mass that goes to infinity)."""
    if tail_mass_truncation == 0:
        return 0, probs, 0
    left_idx = _prefix_to_truncate(probs, tail_mass_truncation / 2)
    right_idx = len(probs) - _prefix_to_truncate(np.flip(probs), tail_mass_truncation / 2)
    right_idx = max(right_idx, left_idx + 1)
    left_mass = np.sum(probs[:left_idx])
    right_mass = np.sum(probs[right_idx:])
    truncated_probs = probs[left_idx:right_idx]
    if pessimistic_estimate:
        truncated_probs[0] += left_mass
        return left_idx, truncated_probs, right_mass
    truncated_probs[-1] += right_mass
    return left_idx, truncated_probs, 0


def _compose_pmfs(pmf1, pmf2, tail_mass_truncation: float):
    """``pld_pmf.compose_pmfs`` with the dense composition's tail truncation in numpy."""
    if (
        isinstance(pmf1, _pld_pmf.SparsePLDPmf)
        and isinstance(pmf2, _pld_pmf.SparsePLDPmf)
        and pmf1.size * pmf2.size <= _pld_pmf._MAX_PMF_SPARSE_SIZE
    ):
        return pmf1.compose(pmf2, tail_mass_truncation)
    a, b = pmf1.to_dense_pmf(), pmf2.to_dense_pmf()
    a.validate_composable(b)
    from scipy import signal

    lower_loss = a._lower_loss + b._lower_loss
    probs = signal.fftconvolve(a._probs, b._probs)
    infinity_mass = a._infinity_mass + b._infinity_mass - a._infinity_mass * b._infinity_mass
    offset, probs, right_tail = truncate_tails(probs, tail_mass_truncation, a._pessimistic_estimate)
    return _pld_pmf.DensePLDPmf(
        a._discretization, lower_loss + offset, probs, infinity_mass + right_tail, a._pessimistic_estimate
    )


def compose(
    first: _pld.PrivacyLossDistribution,
    second: _pld.PrivacyLossDistribution,
    tail_mass_truncation: float = TAIL_MASS_TRUNCATION,
) -> _pld.PrivacyLossDistribution:
    """``first.compose(second, tail_mass_truncation)``, bit for bit."""
    remove = _compose_pmfs(first._pmf_remove, second._pmf_remove, tail_mass_truncation)
    if first._symmetric and second._symmetric:
        return _pld.PrivacyLossDistribution(remove)
    add = _compose_pmfs(first._pmf_add, second._pmf_add, tail_mass_truncation)
    return _pld.PrivacyLossDistribution(remove, add)


def _exact_exp_neg(losses: np.ndarray) -> np.ndarray:
    """``math.exp(-loss)`` of every loss (the C library's exp, which the loop calls)."""
    return np.fromiter(map(math.exp, (-losses).tolist()), dtype=float, count=len(losses))


def _first_event(losses: np.ndarray, prob: np.ndarray, mass_upper, mass_lower, delta: float):
    """The walk over one block: ("stop", k) when the loop's test holds before element k, ("zero", k)
    when after element k the mass above reached δ with none below (the loop returns max(0, loss_k)),
    else None, whichever comes first; and the block's running sums of both masses."""
    weighted = _exact_exp_neg(losses) * prob
    upper = _running_sums(mass_upper, prob)  # upper[k]: before element k; upper[k + 1]: after it
    lower = _running_sums(mass_lower, weighted)
    stop = None
    cand = np.flatnonzero((upper[:-1] > delta) & (lower[:-1] > 0))
    if len(cand):
        ratio = (upper[cand] - delta) / lower[cand]
        with np.errstate(all="ignore"):  # numpy's log screens (within a few ulps of math.log) ...
            screen = np.log(ratio) >= losses[cand] - 1e-9 * (1.0 + np.abs(losses[cand]))
        for k, r in zip(cand[screen].tolist(), ratio[screen].tolist(), strict=True):
            if math.log(r) >= losses[k]:  # ... and math.log decides, in order
                stop = k
                break
    zero = np.flatnonzero((upper[1:] >= delta) & (lower[1:] == 0))
    if len(zero) and (stop is None or zero[0] < stop):
        return ("zero", int(zero[0])), upper, lower
    return (None if stop is None else ("stop", stop)), upper, lower


def _losses(first: float, step: float, m: int) -> np.ndarray:
    """``itertools.count(first, step)``'s first m values: first, first + step, (first + step) + step, …"""
    return _running_sums(first, np.full(m - 1, step)) if m > 1 else np.array([first], dtype=float)


def _dense_epsilon_for_delta(pmf, delta: float):
    """``DensePLDPmf.get_epsilon_for_delta`` (``pld_pmf._get_epsilon_for_delta`` over the losses from
    the largest down), bit for bit."""
    probs = np.asarray(pmf._probs)
    infinity_mass = pmf._infinity_mass
    if infinity_mass > delta:
        return math.inf
    if not len(probs) or probs.dtype != np.float64:
        return pmf.get_epsilon_for_delta(delta)
    step = -pmf._discretization
    loss = (pmf._lower_loss + len(probs) - 1) * pmf._discretization  # the largest loss, yielded first
    reversed_probs = np.flip(probs)
    n = len(reversed_probs)
    mass_upper, mass_lower, start, block = infinity_mass, 0.0, 0, _FIRST_BLOCK
    while start < n:
        prob = reversed_probs[start : start + block]
        m = len(prob)
        losses = _losses(loss, step, m)
        event, upper, lower = _first_event(losses, prob, mass_upper, mass_lower, delta)
        if event is not None and event[0] == "zero":
            return max(0, float(losses[event[1]]))
        if event is not None:  # the loop breaks before element k: its masses there
            mass_upper, mass_lower = upper[event[1]], lower[event[1]]
            break
        mass_upper, mass_lower = upper[-1], lower[-1]
        loss = float(losses[-1]) + step
        start, block = start + m, 2 * block
    if mass_upper <= mass_lower + delta:
        return 0
    return math.log((mass_upper - delta) / mass_lower)


def _pmf_epsilon_for_delta(pmf, delta: float):
    if isinstance(pmf, _pld_pmf.DensePLDPmf):
        return _dense_epsilon_for_delta(pmf, delta)
    return pmf.get_epsilon_for_delta(delta)


def epsilon_for_delta(pld: _pld.PrivacyLossDistribution, delta: float):
    """``pld.get_epsilon_for_delta(delta)``, bit for bit: the larger of the remove and add ε."""
    eps_remove = _pmf_epsilon_for_delta(pld._pmf_remove, delta)
    if pld._symmetric:
        return eps_remove
    return max(eps_remove, _pmf_epsilon_for_delta(pld._pmf_add, delta))
