"""The one-run audit bound ([Steinke2023]): validity against the exact worst case
(ε-randomized response), tightness with many guesses, the p-value's shape, and validity on the
Gaussian mechanism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom

from dpcl.audits.audit import gaussian_epsilon
from dpcl.audits.one_run import audit_scores, epsilon_lower_bound, p_value
from dpcl.privacy.gaussian import gaussian_sigma
from dpcl.seeding import rng

ALPHA = 0.05


def _max_failures(reps: int, level: float) -> int:
    """The most repetitions out of ``reps`` whose bound may exceed the truth when each does so with
    probability ≤ ``level``: a one-sided binomial test at 1e-6 (a correct bound fails it once in 10⁶)."""
    return int(binom.isf(1e-6, reps, level))


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_randomized_response_stays_below_its_epsilon(epsilon):
    """ε-randomized response is the extreme (ε, 0)-DP mechanism of the theorem: each guess is right with
    probability e^ε/(1+e^ε) independently. The bound exceeds ε in at most an α fraction of audits."""
    reps, m = 200, 1000
    g = rng(0, "test-one-run", "rr", epsilon)
    r = m // 2
    v = g.binomial(r, expit(epsilon), reps)
    bounds = np.array([epsilon_lower_bound(m, r, int(k), 0.0, ALPHA) for k in v])
    assert (bounds > epsilon).sum() <= _max_failures(reps, ALPHA)
    assert bounds.max() < epsilon + 1.0  # and never wildly above
    with_delta = np.array([epsilon_lower_bound(m, r, int(k), 1e-5, ALPHA) for k in v[:40]])
    assert (with_delta <= bounds[:40] + 1e-9).all()  # the δ term only weakens the bound


def test_many_guesses_get_close_to_epsilon():
    """With 10⁵ guesses at the expected number of correct ones the bound is within 3 % of ε."""
    for epsilon in (1.0, 2.0):
        r = 100_000
        v = int(round(r * expit(epsilon)))
        lb = epsilon_lower_bound(r, r, v, 0.0, ALPHA)
        assert 0.97 * epsilon <= lb <= epsilon
        assert epsilon_lower_bound(r, r, v, 1e-6, ALPHA) <= lb


def test_p_value_shape():
    m, r = 500, 200
    for eps in (0.0, 0.5, 2.0):
        ps = [p_value(m, r, v, eps, 1e-5) for v in range(r + 1)]
        assert all(0.0 <= p <= 1.0 for p in ps)
        assert all(a >= b - 1e-15 for a, b in zip(ps, ps[1:], strict=False))  # non-increasing in v
        for v in (120, 150, 180):
            assert p_value(m, r, v, eps, 1e-3) >= p_value(m, r, v, eps, 0.0)  # δ only adds
            assert p_value(m, r, v, eps, 1e-3) > p_value(m, r, v, eps, 0.0) or p_value(m, r, v, eps, 0) == 1
    # non-decreasing in ε (what the search for the largest rejected ε relies on)
    for v in (110, 150, 190):
        ps = [p_value(m, r, v, e, 1e-5) for e in np.linspace(0, 6, 61)]
        assert all(a <= b + 1e-15 for a, b in zip(ps, ps[1:], strict=False))
    # the bound's own p-value is at most α (safe side), and slightly above it the hypothesis stands
    lb = epsilon_lower_bound(m, r, 170, 1e-5, ALPHA)
    assert lb > 0 and p_value(m, r, 170, lb, 1e-5) <= ALPHA < p_value(m, r, 170, lb * 1.001, 1e-5)
    assert epsilon_lower_bound(m, r, 100, 1e-5, ALPHA) == 0.0  # chance level: no evidence


@pytest.mark.parametrize(
    "args",
    [(0, 0, 0, 1.0, 0.0), (10, 11, 5, 1.0, 0.0), (10, 5, 6, 1.0, 0.0), (10, 5, 2, -1.0, 0.0),
     (10, 5, 2, math.inf, 0.0), (10, 5, 2, 1.0, 1.5), (10, 5, True, 1.0, 0.0), (10.0, 5, 2, 1.0, 0.0)],
)  # fmt: skip
def test_p_value_refuses_bad_input(args):
    with pytest.raises(ValueError):
        p_value(*args)


def test_audit_scores_validates_input():
    coins = np.array([True, False, True, False])
    with pytest.raises(ValueError, match="finite"):
        audit_scores(np.array([0.0, np.nan, 1.0, 2.0]), coins, guesses=[(1, 1)], delta=0.0)
    with pytest.raises(ValueError, match="bool"):
        audit_scores(np.zeros(4), coins.astype(int), guesses=[(1, 1)], delta=0.0)
    with pytest.raises(ValueError, match="one length"):
        audit_scores(np.zeros(3), coins, guesses=[(1, 1)], delta=0.0)
    with pytest.raises(ValueError, match="k_plus"):
        audit_scores(np.zeros(4), coins, guesses=[(3, 2)], delta=0.0)
    with pytest.raises(ValueError, match="alpha"):
        audit_scores(np.zeros(4), coins, guesses=[(1, 1)], delta=0.0, alpha=0.0)


def test_audit_scores_counts_guesses():
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    coins = np.array([True, True, False, False, True, False])
    out = audit_scores(scores, coins, guesses=[(2, 2)], delta=0.0)
    assert (out["m"], out["r"], out["v"]) == (6, 4, 3)  # top two: in, in (right); bottom two: in (wrong), out
    two = audit_scores(scores, coins, guesses=[(2, 2), (1, 0)], delta=0.0)
    assert len(two["candidates"]) == 2
    alone = epsilon_lower_bound(6, 4, 3, 0.0, ALPHA / 2)
    assert two["candidates"][0]["epsilon_lower_bound"] == alone  # Bonferroni: α / 2 each


def test_gaussian_mechanism_stays_below_its_epsilon():
    """Each canary's score is its coin plus N(0, σ²) noise (the Gaussian mechanism with μ = 1/σ, per
    canary): the one-run bound exceeds the mechanism's true ε at δ in at most an α fraction of audits,
    and with little noise it finds real evidence."""
    delta, m, reps = 1e-5, 2000, 60
    guesses = [(m // 10, m // 10)]
    for epsilon in (1.0, 4.0):
        sigma = gaussian_sigma(epsilon, delta)
        truth = gaussian_epsilon(sigma, delta)
        bounds = []
        for i in range(reps):
            g = rng(0, "test-one-run", "gauss", epsilon, i)
            coins = g.random(m) < 0.5
            scores = coins + sigma * g.normal(size=m)
            bounds.append(audit_scores(scores, coins, guesses=guesses, delta=delta)["epsilon_lower_bound"])
        assert (np.array(bounds) > truth).sum() <= _max_failures(reps, ALPHA)
        if epsilon == 4.0:
            assert np.median(bounds) > 1.0  # σ ≈ 1.1: the audit sees the canaries
