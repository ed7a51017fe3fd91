"""dp_accounting's PLD of a Poisson-subsampled Gaussian, with the privacy loss inverted at once.

``dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism`` inverts the subsampled
privacy loss point by point in Python loops (tens of microseconds a point, tens of thousands of
points a PLD at dpcl's discretisation):

- the pessimistic PMF ("connect the dots", [Doroshenko2022]) takes the hockey-stick divergence
  δ(ε) at every point of an ε grid, and ``AdditiveNoisePrivacyLoss.get_delta_for_epsilon``
  inverts the loss at each point;
- the optimistic PMF ("privacy buckets", [Koskela2020]) walks the loss down one discretisation
  step at a time, inverting it at each step.

:func:`from_gaussian_mechanism` here builds the same PLD through dp_accounting's own code with
those inversions done in one pass of numpy operations (:class:`GridGaussianPrivacyLoss` for the
grid, :func:`_privacy_buckets_pmf` for the walk, which stops where dp_accounting's loop stops):
the same operations in the same order, element by element (``+ − × /`` are correctly rounded;
numpy's ``exp``, ``log`` and ``log1p`` give an element the same value alone or in an array). The
PMFs are equal bit for bit; ``tests/test_pld_gaussian.py`` checks them against dp_accounting's own
construction over a grid of σ, q and discretisations, which also catches a future dp_accounting
whose internals moved.

Anything other than the add or remove direction with a sampling probability below 1 (a scalar ε,
q = 1, the replace direction) goes to dp_accounting's code unchanged, and so does a walk whose
inversions fail or would end early.
"""

from __future__ import annotations

import collections
import math
import numbers

import numpy as np
from dp_accounting.pld import pld_pmf as _pld_pmf
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.pld import privacy_loss_mechanism as _plm

_ADD = _plm.AdjacencyType.ADD
_REMOVE = _plm.AdjacencyType.REMOVE


def _isclose(values: np.ndarray, target: float) -> np.ndarray:
    """``math.isclose(v, target)`` (relative tolerance 1e-9, absolute 0) for every finite v."""
    diff = np.abs(target - values)
    return (values == target) | (diff <= np.abs(1e-09 * target)) | (diff <= np.abs(1e-09 * values))


def _log_a_times_exp_b_plus_c(a: float, b: np.ndarray, c: float) -> np.ndarray:
    """dp_accounting's ``common.log_a_times_exp_b_plus_c`` for a > 0, c ≤ 0, at every b."""
    if not (a > 0 and c <= 0):
        raise ValueError(f"expected a > 0 and c <= 0, got a={a}, c={c}")
    d = b + np.log(a)
    if c < 0:
        log_c = np.log(-c)
        if np.any(log_c >= d[b != 0]):  # common._log_sub's check
            raise ValueError(f"a exp(b) + c must be positive: {a}, {b}, {c}.")
        with np.errstate(invalid="ignore", divide="ignore"):
            d = d + np.log1p(-np.exp(log_c - d))
    # where b == 0 the scalar code takes log(a + c) directly
    return np.where(b == 0, np.log(a + c), d)


class GridGaussianPrivacyLoss(_plm.GaussianPrivacyLoss):
    """dp_accounting's ``GaussianPrivacyLoss``; ``get_delta_for_epsilon`` on a grid inverts the loss at once."""

    def _inverse_on_grid(self, eps: np.ndarray) -> np.ndarray:
        """``inverse_privacy_loss`` at every ε (add or remove direction, sampling probability < 1)."""
        q = self.sampling_prob
        a, c = 1 / q, 1 - 1 / q
        if self.adjacency_type == _REMOVE:
            edge = math.log(1 - q)
            close = _isclose(eps, edge)
            if np.any(eps[~close] <= edge):
                raise ValueError(f"privacy_loss is smaller than log(1 - sampling_prob) ({edge}).")
            loss = _log_a_times_exp_b_plus_c(a, np.where(close, 1.0, eps), c)
            loss = np.where(close, -math.inf, loss)
            return -0.5 * self.sensitivity - loss * (self._standard_deviation**2) / self.sensitivity
        edge = -math.log(1 - q)
        close = _isclose(eps, edge)
        if np.any(eps[~close] > edge):
            raise ValueError(f"privacy_loss is larger than -log(1 - sampling_prob) ({edge}).")
        loss = -_log_a_times_exp_b_plus_c(a, -np.where(close, -1.0, eps), c)
        loss = np.where(close, math.inf, loss)
        return self.sensitivity + (
            -0.5 * self.sensitivity - loss * (self._standard_deviation**2) / self.sensitivity
        )

    def get_delta_for_epsilon(self, epsilon):
        if (
            isinstance(epsilon, numbers.Number)
            or self.sampling_prob == 1.0
            or self.adjacency_type not in (_ADD, _REMOVE)
        ):
            return super().get_delta_for_epsilon(epsilon)
        # dp_accounting's AdditiveNoisePrivacyLoss.get_delta_for_epsilon, the loop over ε replaced
        epsilons = np.asarray(epsilon)
        deltas = np.zeros_like(epsilons, dtype=float)
        if self.adjacency_type == _ADD:
            inverse_indices = epsilons < -math.log1p(-self.sampling_prob)
        else:
            inverse_indices = epsilons > math.log1p(-self.sampling_prob)
            other_indices = np.logical_not(inverse_indices)
            deltas[other_indices] = -np.expm1(epsilons[other_indices])
        x_cutoffs = self._inverse_on_grid(np.asarray(epsilons[inverse_indices], dtype=float))
        deltas[inverse_indices] = self.mu_upper_cdf(x_cutoffs) - np.exp(
            epsilons[inverse_indices] + self.mu_lower_log_cdf(x_cutoffs)
        )
        return np.clip(deltas, 0, 1)


def _privacy_buckets_pmf(loss: GridGaussianPrivacyLoss, discretization: float, pessimistic: bool):
    """dp_accounting's privacy-buckets PMF of a continuous monotone privacy loss (the branch of
    ``_create_pld_pmf_from_monotone_privacy_loss`` without connect-the-dots), its loop's inversions
    done at once; None (dp_accounting's loop runs instead) where an inversion fails or the walk
    would end early."""
    round_fn = math.ceil if pessimistic else math.floor
    tail = loss.privacy_loss_tail()
    lower_x, upper_x = tail.lower_x_truncation, tail.upper_x_truncation
    masses = collections.defaultdict(lambda: 0)
    infinity_mass = tail.tail_probability_mass_function.get(math.inf, 0)
    for privacy_loss, mass in tail.tail_probability_mass_function.items():
        if privacy_loss != math.inf:
            masses[round_fn(privacy_loss / discretization)] += mass
    rounded_down_value = math.floor(loss.privacy_loss(lower_x) / discretization)
    upper_x_privacy_loss = loss.privacy_loss(upper_x)
    # the loop's k-th step inverts the loss at discretization·(rounded_down_value − k) while that
    # lies above the loss at upper_x, and takes upper_x at the first step where it does not
    stop = math.floor(upper_x_privacy_loss / discretization) - 2  # beyond the loop's last step
    if not lower_x < upper_x or rounded_down_value - stop > 10**8:
        return None
    steps = np.arange(rounded_down_value, stop, -1)
    values = discretization * steps
    above = values > upper_x_privacy_loss
    if above[-1]:
        return None
    inverted = int(np.argmin(above))  # the number of steps that invert the loss
    try:
        xs = loss._inverse_on_grid(values[:inverted])
    except ValueError:
        return None
    if not np.all(xs < upper_x):  # the loop would end early (rounding only: the loss is monotone)
        return None
    xs = np.append(xs, upper_x)  # the loop's last step
    steps = steps[: len(xs)]
    cdf_values = loss.mu_upper_cdf(np.concatenate(([lower_x], xs)))
    probability_mass = cdf_values[1:] - cdf_values[:-1]
    rounded_values = [round_fn(value + 0.5) for value in steps.tolist()]
    for rounded_value, prob in zip(rounded_values, probability_mass, strict=True):
        masses[rounded_value] += prob
    return _pld_pmf.create_pmf(dict(masses), discretization, infinity_mass, pessimistic_estimate=pessimistic)


def from_gaussian_mechanism(
    *,
    standard_deviation: float,
    sampling_prob: float,
    pessimistic_estimate: bool,
    value_discretization_interval: float,
    use_connect_dots: bool,
    sensitivity: float = 1.0,
    log_mass_truncation_bound: float = -50,
) -> _pld.PrivacyLossDistribution:
    """``dp_accounting``'s ``from_gaussian_mechanism`` (add-or-remove-one neighbours), bit for bit."""

    def single(adjacency_type):
        loss = GridGaussianPrivacyLoss(
            standard_deviation,
            sensitivity=sensitivity,
            pessimistic_estimate=pessimistic_estimate,
            log_mass_truncation_bound=log_mass_truncation_bound,
            sampling_prob=sampling_prob,
            adjacency_type=adjacency_type,
        )
        if not (use_connect_dots and pessimistic_estimate) and sampling_prob < 1.0:
            pmf = _privacy_buckets_pmf(loss, value_discretization_interval, pessimistic_estimate)
            if pmf is not None:
                return pmf
        return _pld._create_pld_pmf_from_monotone_privacy_loss(
            loss,
            pessimistic_estimate=pessimistic_estimate,
            value_discretization_interval=value_discretization_interval,
            use_connect_dots=use_connect_dots,
        )

    return _pld._pld_for_subsampled_mechanism(single, sampling_prob)
