import math

import numpy as np
import pytest
from scipy.stats import norm

from dpcl.privacy.accounting import Budget, PrivacyBudgetExceeded, split_budget
from dpcl.privacy.gaussian import gaussian_delta, gaussian_sigma
from dpcl.privacy.label_release import (
    keep_probability,
    release_labels,
    sample_tsgd,
    tsgd_delta,
    tsgd_pmf,
    tsgd_threshold,
)
from dpcl.privacy.ledger import Ledger


@pytest.mark.parametrize("eps,expected", [(1.0, 3.7306), (8.0, 0.6002)])
def test_analytic_gaussian_sigma_reference_values(eps, expected):
    assert gaussian_sigma(eps, 1e-5) == pytest.approx(expected, abs=5e-5)


@pytest.mark.parametrize(
    "eps,delta,sens", [(0.1, 1e-6, 1.0), (1.0, 1e-5, 2.0), (8.0, 1e-5, 1.0), (30.0, 1e-9, 1.0)]
)
def test_sigma_is_the_smallest_that_meets_delta(eps, delta, sens):
    s = gaussian_sigma(eps, delta, sens)
    assert gaussian_delta(s, eps, sens) <= delta
    assert gaussian_delta(s * (1 - 1e-6), eps, sens) > delta
    # scaling: sigma is linear in the sensitivity
    assert gaussian_sigma(eps, delta, 3 * sens) == pytest.approx(3 * s, rel=1e-9)


def test_gaussian_delta_matches_direct_formula():
    s, eps = 2.0, 0.5
    direct = norm.cdf(1 / (2 * s) - eps * s) - math.exp(eps) * norm.cdf(-1 / (2 * s) - eps * s)
    assert gaussian_delta(s, eps) == pytest.approx(direct, rel=1e-12)


def test_sigma_rejects_bad_input():
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_sigma(0, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        gaussian_sigma(1, 1.5)


def test_tsgd_threshold_formula_and_delta():
    for eps, delta in [(1.0, 1e-5), (0.1, 1e-6), (0.025, 2.5e-7), (8.0, 1e-5)]:
        k = tsgd_threshold(eps, delta)
        raw = math.log((math.exp(eps) + 2 * delta - 1) / ((math.exp(eps) + 1) * delta)) / eps
        assert k == math.ceil(raw)
        # The achieved delta is Pr[Z = k] of the pmf and is within the target.
        z, p = tsgd_pmf(eps, k)
        assert tsgd_delta(k, eps) == pytest.approx(p[-1], rel=1e-9)
        assert tsgd_delta(k, eps) <= delta
        assert tsgd_delta(k - 1, eps) > delta  # k is the smallest threshold that works


def test_tsgd_pmf_is_symmetric_geometric():
    z, p = tsgd_pmf(0.7, 5)
    assert p.sum() == pytest.approx(1.0)
    assert np.allclose(p, p[::-1])
    assert np.allclose(p[1:6] / p[:5], math.exp(0.7))  # ratio e^eps between neighbours below 0


def test_keep_probability_exact_and_paper_table_a5():
    eps, delta = 1.0, 1e-5
    k = tsgd_threshold(eps, delta)
    z, p = tsgd_pmf(eps, k)
    for n in [1, 3, k, k + 1, 2 * k, 2 * k + 1]:
        assert keep_probability(n, eps, delta) == pytest.approx(p[z > k - n].sum(), abs=1e-15)
    assert keep_probability(0, eps, delta) == 0.0
    assert keep_probability(2 * k + 1, eps, delta) == 1.0  # never dropped once n > 2k
    assert keep_probability(2 * k, eps, delta) < 1.0
    # Table A5: CIFAR-100 (500/class, 100 classes), eps = 1, delta = 1e-5, 2.5 % of both
    # to label release -> median 90 released labels; the expectation is 90.5.
    expected = 100 * keep_probability(500, 0.025, 2.5e-7)
    assert expected == pytest.approx(90.5, abs=0.05)


def test_tsgd_sampler_matches_pmf():
    eps, k, n = 0.5, 6, 200_000
    draws = sample_tsgd(eps, k, n, np.random.default_rng(0))
    z, p = tsgd_pmf(eps, k)
    freq = np.array([(draws == v).sum() for v in z]) / n
    # 5 standard errors of a binomial proportion for every support point
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n))
    assert draws.min() >= -k and draws.max() <= k


def test_release_labels_keep_rate_matches_exact_probability():
    eps, delta, n_rep = 1.0, 1e-5, 4000
    counts = {0: 8, 1: 12, 2: 0, 3: 100}
    gen = np.random.default_rng(1)
    kept = np.zeros(4)
    for _ in range(n_rep):
        released, rec = release_labels(counts, 4, eps, delta, gen)
        kept[released] += 1
    assert kept[2] == 0  # labels absent from the data are never released
    assert kept[3] == n_rep
    for y in (0, 1):
        p = keep_probability(counts[y], eps, delta)
        assert abs(kept[y] / n_rep - p) <= 5 * math.sqrt(p * (1 - p) / n_rep)
    assert rec["k"] == tsgd_threshold(eps, delta) and rec["delta_achieved"] <= delta


def test_release_labels_noise_independent_of_other_labels():
    gen_a, gen_b = np.random.default_rng(5), np.random.default_rng(5)
    a, _ = release_labels({0: 11, 1: 11, 2: 11}, 3, 1.0, 1e-5, gen_a)
    b, _ = release_labels({0: 11, 2: 11}, 3, 1.0, 1e-5, gen_b)
    assert [y for y in a if y != 1] == b


def test_split_budget_takes_fraction_of_both():
    lab, train = split_budget(Budget(1.0, 1e-5), 0.1)
    assert lab.epsilon == pytest.approx(0.1) and lab.delta == pytest.approx(1e-6)
    assert lab.epsilon + train.epsilon <= 1.0 + 1e-15 and lab.delta + train.delta <= 1e-5 * (1 + 1e-12)
    with pytest.raises(ValueError):
        split_budget(Budget(1.0, 1e-5), 1.0)


def test_ledger_composes_and_verifies():
    target = Budget(1.0, 1e-5)
    lab, train = split_budget(target, 0.1)
    k = tsgd_threshold(lab.epsilon, lab.delta)
    ledger = Ledger(target)
    for t in range(3):
        ledger.add(
            t, {"mechanism": "ktsgd_label_release", "epsilon": lab.epsilon, "delta": lab.delta, "k": k}
        )
        s = gaussian_sigma(train.epsilon, train.delta)
        ledger.add(
            t,
            {
                "mechanism": "gaussian",
                "epsilon": train.epsilon,
                "delta": train.delta,
                "sigma": s,
                "sensitivity": 1.0,
                "query": "class_sums_of_unit_norm_features",
            },
        )
    total = ledger.check()
    assert total.epsilon == pytest.approx(1.0) and total.delta == pytest.approx(1e-5)
    d = ledger.to_dict()
    assert d["guarantee_holds"] and len(d["tasks"]) == 3
    # Too little noise is caught when the entry is added.
    with pytest.raises(PrivacyBudgetExceeded, match="parameters give"):
        ledger.add(
            0,
            {
                "mechanism": "gaussian",
                "epsilon": 1.0,
                "delta": 1e-5,
                "sigma": 1.0,
                "query": "class_sums_of_unit_norm_features",
            },
        )
    # A second full-budget mechanism on the same task exceeds the target.
    ledger.add(
        1,
        {
            "mechanism": "gaussian",
            "epsilon": 1.0,
            "delta": 1e-5,
            "sigma": gaussian_sigma(1.0, 1e-5),
            "query": "class_sums_of_unit_norm_features",
        },
    )
    with pytest.raises(PrivacyBudgetExceeded, match="exceeds the target"):
        ledger.check()


def test_ledger_marks_label_oracle_as_not_dp():
    ledger = Ledger(Budget(1.0, 1e-5))
    ledger.add(0, {"mechanism": "label_oracle", "epsilon": math.inf, "delta": 1.0})
    ledger.add(
        0,
        {
            "mechanism": "gaussian",
            "epsilon": 1.0,
            "delta": 1e-5,
            "sigma": gaussian_sigma(1.0, 1e-5),
            "query": "class_sums_of_unit_norm_features",
        },
    )
    d = ledger.to_dict()
    assert d["guarantee_holds"] is False and d["leaky_baseline"] is True
    assert math.isinf(d["overall"]["epsilon"])
