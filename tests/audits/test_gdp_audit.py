"""The f-DP route of the audits (dpcl.audits.gdp): the μ lower bound is valid (it covers the true μ of a
Gaussian mechanism at its stated confidence), tight with many trials, and its ε is the μ-GDP curve's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtri

from dpcl.audits.audit import clopper_pearson
from dpcl.audits.gdp import gdp_bound, gdp_epsilon, mu_lower_bound
from dpcl.privacy.gaussian import gaussian_sigma


def test_mu_lower_bound_is_the_trade_off_inequality_at_the_upper_confidence_bounds():
    k_d, k_dp, n = 4_000, 6_000, 10_000
    _, fpr = clopper_pearson(k_d, n, 0.025, two_sided=False)
    _, fnr = clopper_pearson(n - k_dp, n, 0.025, two_sided=False)
    assert mu_lower_bound(k_d, n, k_dp, n, 0.05) == pytest.approx(ndtri(1 - fpr) - ndtri(fnr), rel=1e-12)
    assert mu_lower_bound(5_000, n, 5_000, n) == 0.0  # no separation: nothing to conclude
    assert mu_lower_bound(0, n, n, n) > 6.0  # perfect separation of 10,000 trials
    with pytest.raises(ValueError, match="0 <= k <= n"):
        mu_lower_bound(3, 2, 1, 2)


def test_gdp_epsilon_inverts_the_gaussian_calibration():
    for eps, delta in ((1.0, 1e-5), (4.0, 1e-6)):
        assert gdp_epsilon(1.0 / gaussian_sigma(eps, delta), delta) == pytest.approx(eps, rel=1e-6)
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    with pytest.raises(ValueError, match="mu"):
        gdp_epsilon(float("nan"), 1e-5)


def test_the_bound_covers_the_true_mu_and_is_tight_with_many_trials():
    """200 audits of an exact μ-GDP statistic (N(0,1) against N(μ,1)): the bound exceeds μ in at most
    5 % of them (binomial(200, 0.05) stays below 19 with probability 0.9995), and with 40,000 trials per
    world its mean sits within 0.06 of μ (the two one-sided bounds' widths: 2 × 1.96 × 2.5 / √30,000)."""
    mu, n, gen = 0.5, 40_000, np.random.default_rng(0)
    bounds = np.array(
        [gdp_bound(gen.normal(0, 1, n), gen.normal(mu, 1, n), n // 4)["mu_lower_bound"] for _ in range(200)]
    )
    assert (bounds > mu).sum() < 19
    assert mu - 0.06 < bounds.mean() < mu


def test_the_direction_comes_from_calibration_and_non_finite_statistics_are_refused():
    gen = np.random.default_rng(1)
    r = gdp_bound(gen.normal(0, 1, 4000), gen.normal(-2, 1, 4000), 1000)  # the canary lowers it
    assert r["gdp_direction"] == -1.0 and r["mu_lower_bound"] > 1.5
    with pytest.raises(ValueError, match="finite"):
        gdp_bound(np.r_[np.nan, np.zeros(9)], np.ones(10), 2)
    with pytest.raises(ValueError, match="calibrate"):
        gdp_bound(np.zeros(10), np.ones(10), 10)
