"""Empirical privacy audits and the label-space attack game ([LabelSpace] Fig. 1, Prop. 4.1).

Statistical checks use fixed seeds and tolerances from the distributions: Clopper-Pearson
bounds hold with probability ≥ 1 − α by construction, and "the audit reaches at least X"
is checked against the bound at binomial quantiles q, which holds with probability ≥ 1 − 2q.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import broken_copy
from scipy.special import ndtr
from scipy.stats import binom

from dpcl.audits.attack import (
    TABLE_COLUMNS,
    attack_table,
    dp_attack_bound,
    expected_attack_accuracy,
    label_space_attack,
)
from dpcl.audits.audit import (
    attainable_lower_bound,
    audit_gaussian_sums,
    audit_label_release,
    clopper_pearson,
    epsilon_lower_bound,
    gaussian_epsilon,
    planned_gaussian_threshold,
)
from dpcl.privacy.gaussian import gaussian_sigma
from dpcl.privacy.label_release import keep_probabilities
from dpcl.report.privacy_tables import attack_table_markdown

DELTA = 1e-5
TRIALS = 200_000
ALPHA = 0.05
FLOOR_Q = 1e-3  # an audit falls below its quantile-q floor with probability <= 2q


def binomial_range(n: int, p: float, q: float = 1e-4) -> tuple[int, int]:
    """Central range of Binomial(n, p) holding all but probability ≤ 2q."""
    return int(binom.ppf(q, n, p)), int(binom.isf(q, n, p))


# --------------------------------------------------------------------------- Clopper-Pearson


@pytest.mark.parametrize("n", [1, 7, 100, 10_000])
def test_clopper_pearson_edges(n):
    a = 0.05
    lo, hi = clopper_pearson(0, n, a, two_sided=False)
    assert lo == 0.0 and hi == pytest.approx(1 - a ** (1 / n), rel=1e-10)
    lo, hi = clopper_pearson(0, n, a)  # two-sided: α/2 per tail
    assert hi == pytest.approx(1 - (a / 2) ** (1 / n), rel=1e-10)
    lo, hi = clopper_pearson(n, n, a, two_sided=False)
    assert hi == 1.0 and lo == pytest.approx(a ** (1 / n), rel=1e-10)


def test_clopper_pearson_reference_value_and_symmetry():
    # R: binom.test(3, 10)$conf.int = 0.06673951 0.65245285
    lo, hi = clopper_pearson(3, 10, 0.05)
    assert (lo, hi) == pytest.approx((0.06673951, 0.65245285), abs=1e-8)
    n = 37
    k = np.arange(n + 1)
    lo, hi = clopper_pearson(k, np.full_like(k, n), 0.1)
    np.testing.assert_allclose(lo, 1 - hi[::-1], atol=1e-12)
    assert np.all(np.diff(lo) > 0) and np.all(np.diff(hi) > 0)


@pytest.mark.parametrize("two_sided", [True, False])
def test_clopper_pearson_exact_coverage(two_sided):
    """Exact coverage (summing the binomial pmf) is at least 1 − α for every p on a grid."""
    n, a = 40, 0.1
    k = np.arange(n + 1)
    lo, hi = clopper_pearson(k, np.full_like(k, n), a, two_sided=two_sided)
    for p in np.linspace(0.001, 0.999, 199):
        pmf = binom.pmf(k, n, p)
        if two_sided:
            assert pmf[(lo <= p) & (p <= hi)].sum() >= 1 - a - 1e-12
        else:
            assert pmf[lo <= p].sum() >= 1 - a - 1e-12
            assert pmf[p <= hi].sum() >= 1 - a - 1e-12


def test_clopper_pearson_rejects_bad_input():
    with pytest.raises(ValueError, match="k <= n"):
        clopper_pearson(5, 3)
    with pytest.raises(ValueError, match="alpha"):
        clopper_pearson(1, 3, alpha=0)


# --------------------------------------------------------------------------- ε lower bound


def test_epsilon_lower_bound_edge_cases():
    assert epsilon_lower_bound(500, 1000, 500, 1000, 0.0) == 0.0  # nothing to conclude
    assert epsilon_lower_bound(0, 0, 0, 0, 0.0) == 0.0  # no trials
    # Disjoint outcomes (the Label Oracle): both Bonferroni bounds at α/4 one-sided.
    n, a, d = 1000, 0.05, 1e-5
    lo = (a / 4) ** (1 / n)
    expected = math.log((lo - d) / (1 - lo))
    assert epsilon_lower_bound(0, n, n, n, d) == pytest.approx(expected, rel=1e-9)
    assert epsilon_lower_bound(n, n, 0, n, d) == pytest.approx(expected, rel=1e-9)  # symmetric
    # δ eats a numerator that small
    assert epsilon_lower_bound(0, n, 3, n, 0.5) == 0.0


def test_epsilon_lower_bound_is_valid_at_level_alpha():
    """A mechanism that is exactly (ε, δ)-tight on this event: the bound exceeds ε at most α of the time."""
    eps, delta, n, reps, a = 1.0, 0.01, 2000, 400, 0.2
    p_d = 0.1
    p_dp = math.exp(eps) * p_d + delta
    g = np.random.default_rng(7)
    k_d, k_dp = g.binomial(n, p_d, reps), g.binomial(n, p_dp, reps)
    over = sum(
        epsilon_lower_bound(int(x), n, int(y), n, delta, a) > eps for x, y in zip(k_d, k_dp, strict=True)
    )
    assert over <= binom.isf(1e-6, reps, a)  # exceedances ~ Binomial(reps, <= α)
    # ... and the bound is informative: at median counts it is close to ε
    assert attainable_lower_bound(p_d, p_dp, n, delta, a) > 0.5 * eps


# --------------------------------------------------------------------------- label release audits


@pytest.mark.parametrize("mechanism", ["tsgd", "laplace"])
@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_label_release_audit_is_tight_but_never_exceeds_claim(mechanism, eps):
    res = audit_label_release(mechanism, eps, DELTA, TRIALS, seed=0, alpha=ALPHA)
    n = res["class_size"]
    q = np.asarray(keep_probabilities(np.array([n, n + 1]), eps, DELTA, mechanism))
    case = res["cases"][0]
    # The real release code has the exact keep probabilities' law.
    for k, p in zip(case["released"], q, strict=True):
        lo, hi = binomial_range(TRIALS, float(p))
        assert lo <= k <= hi
    # Valid: the (1 − α) lower bound does not exceed the claim (the claim is true).
    assert res["epsilon_lower_bound"] <= eps
    # Powerful: at least the floor attainable from the exact probabilities (prob. >= 1 − 2q),
    # and that floor is a large share of ε because the tail ratio of keep probabilities is e^ε.
    floor = attainable_lower_bound(float(q[0]), float(q[1]), TRIALS, DELTA, ALPHA / 2, FLOOR_Q)
    assert floor > 0.5 * eps
    assert res["epsilon_lower_bound"] >= floor
    # A new label (0 vs 1 example) is released with probability <= δ: nothing to conclude.
    assert res["cases"][1]["keep_probabilities"][1] <= DELTA * (1 + 1e-9)
    assert res["cases"][1]["epsilon_lower_bound"] == 0.0


@pytest.mark.parametrize("eps", [1.0, 2.0])
def test_label_oracle_is_caught(eps):
    trials = 20_000
    res = audit_label_release("oracle", eps, DELTA, trials, seed=1, alpha=ALPHA)
    new = res["cases"][1]
    assert new["released"] == [0, trials]  # Prop. 4.1: released iff present
    assert res["epsilon_lower_bound"] > eps
    assert res["epsilon_lower_bound"] == pytest.approx(
        epsilon_lower_bound(0, trials, trials, trials, DELTA, ALPHA / 2)
    )


def test_label_release_audit_with_given_class_size_and_errors():
    res = audit_label_release("tsgd", 1.0, DELTA, 5000, seed=2, class_size=3)
    assert res["class_size"] == 3 and res["cases"][0]["class_sizes"] == [3, 4]
    assert res["epsilon_lower_bound"] <= 1.0
    with pytest.raises(ValueError, match="mechanism"):
        audit_label_release("gaussian", 1.0, DELTA, 10, seed=0)
    with pytest.raises(ValueError, match="class_size"):
        audit_label_release("tsgd", 1.0, DELTA, 10, seed=0, class_size=0)


# --------------------------------------------------------------------------- Gaussian sums


@pytest.mark.parametrize("eps,rule", [(1.0, "split"), (4.0, "split"), (1.0, "fixed"), (4.0, "fixed")])
def test_gaussian_sums_audit_never_exceeds_claim(eps, rule):
    sigma = gaussian_sigma(eps, DELTA)
    assert gaussian_epsilon(sigma, DELTA) == pytest.approx(eps, rel=1e-6)
    res = audit_gaussian_sums(sigma, eps, DELTA, dim=4, trials=TRIALS, seed=0, alpha=ALPHA, threshold=rule)
    assert 0.0 < res["epsilon_lower_bound"] <= eps
    # The CosineClassifier's released sums have the Gaussian law N(0, σ²) vs N(1, σ²) on v.
    for k, p in zip(res["counts"], res["exact_probabilities"], strict=True):
        lo, hi = binomial_range(res["bound_trials"], p)
        assert lo <= k <= hi
    if rule == "fixed":
        p_d, p_dp = res["exact_probabilities"]
        assert res["epsilon_lower_bound"] >= attainable_lower_bound(p_d, p_dp, TRIALS, DELTA, ALPHA, FLOOR_Q)


@pytest.mark.parametrize("rule", ["split", "fixed"])
def test_gaussian_sums_with_too_little_noise_are_caught(rule):
    eps = 1.0
    sigma = gaussian_sigma(eps, DELTA) / 4  # a bug: a quarter of the calibrated noise
    # The audit has the power to see it: its floor at the σ-derived threshold exceeds the claim.
    t, _ = planned_gaussian_threshold(sigma, DELTA, TRIALS, ALPHA)
    floor = attainable_lower_bound(
        float(ndtr(-t / sigma)), float(ndtr(-(t - 1) / sigma)), TRIALS, DELTA, ALPHA, FLOOR_Q
    )
    assert floor > eps
    res = audit_gaussian_sums(sigma, eps, DELTA, dim=3, trials=TRIALS, seed=3, alpha=ALPHA, threshold=rule)
    assert res["epsilon_lower_bound"] > eps
    assert res["epsilon_lower_bound"] <= res["actual_epsilon"]


def test_gaussian_audit_rejects_bad_input():
    with pytest.raises(ValueError, match="threshold"):
        audit_gaussian_sums(1.0, 1.0, DELTA, dim=2, trials=10, seed=0, threshold="best")
    with pytest.raises(ValueError, match="dim"):
        audit_gaussian_sums(1.0, 1.0, DELTA, dim=1, trials=10, seed=0)
    with pytest.raises(ValueError, match="sigma"):
        audit_gaussian_sums(0.0, 1.0, DELTA, dim=2, trials=10, seed=0)


# --------------------------------------------------------------------------- attack game


@pytest.mark.parametrize("eps,delta", [(0.0, 1e-5), (1.0, 0.0), (1.0, 1e-5), (3.0, 0.2), (40.0, 1e-5)])
def test_dp_attack_bound_matches_hypothesis_testing_region(eps, delta):
    """Max of ½(1 + TPR − FPR) over TPR ≤ e^ε FPR + δ, 1 − FPR ≤ e^ε (1 − TPR) + δ, on a fine grid."""
    fpr = np.linspace(0, 1, 200_001)
    ee = math.exp(eps)
    tpr = np.minimum.reduce([np.ones_like(fpr), ee * fpr + delta, 1 - (1 - fpr - delta) / ee])
    best = float(np.max(0.5 * (1 + tpr - fpr)))
    assert dp_attack_bound(eps, delta) == pytest.approx(best, abs=1e-5)
    assert dp_attack_bound(eps, delta) == pytest.approx((ee + delta) / (1 + ee), rel=1e-12)
    assert dp_attack_bound(math.inf, delta) == 1.0


@pytest.mark.parametrize("eps", [1.0, 8.0])
def test_oracle_attack_always_wins(eps):
    res = label_space_attack("oracle", (10, 10), eps, 1e-5, 100_000, seed=0)
    assert res["attack_accuracy"] == 1.0 and res["expected_accuracy"] == 1.0
    assert res["ci_low"] > res["dp_bound"]  # Prop. 4.1: beyond every (ε, δ < 1) guarantee


@pytest.mark.parametrize("method", ["base", "public-x10"])
def test_data_independent_label_space_is_a_coin_flip(method):
    res = label_space_attack(method, (5, 1, 30), 1.0, 1e-5, 100_000, seed=0, alpha=1e-3)
    assert res["expected_accuracy"] == 0.5
    assert res["ci_low"] <= 0.5 <= res["ci_high"]


@pytest.mark.parametrize(
    "method,eps,delta,mechanism",
    [
        ("release-f0.1", 1.0, 1e-5, "tsgd"),
        ("release-f0.5", 2.0, 0.2, "tsgd"),
        ("release-f0.5", 2.0, 0.2, "laplace"),
    ],
)
def test_release_labels_attack_within_dp_bound(method, eps, delta, mechanism):
    res = label_space_attack(method, (10, 10), eps, delta, 100_000, seed=0, alpha=1e-3, mechanism=mechanism)
    assert res["ci_low"] <= res["expected_accuracy"] <= res["ci_high"]
    assert res["ci_low"] <= res["dp_bound"]
    # Exact: ½(1 + Pr[singleton kept]) with Pr ≤ the label release's δ, under both bounds.
    assert res["expected_accuracy"] <= 0.5 * (1 + res["label_delta"]) * (1 + 1e-9)
    assert res["expected_accuracy"] <= res["label_dp_bound"] <= res["dp_bound"]
    assert expected_attack_accuracy(method, eps, delta, mechanism) == res["expected_accuracy"]


def test_attack_is_reproducible_and_validates():
    a = label_space_attack("release-f0.5", (3,), 2.0, 0.2, 1000, seed=4)
    assert a == label_space_attack("release-f0.5", (3,), 2.0, 0.2, 1000, seed=4)
    with pytest.raises(ValueError, match="label method"):
        label_space_attack("everything", (3,), 1.0, 1e-5, 10, seed=0)
    with pytest.raises(ValueError, match="class sizes"):
        label_space_attack("oracle", (3, 0), 1.0, 1e-5, 10, seed=0)
    with pytest.raises(ValueError, match="mechanism"):
        label_space_attack("release-f0.5", (3,), 1.0, 1e-5, 10, seed=0, mechanism="gauss")


def test_attack_table_and_markdown():
    methods = ["oracle", "base", "public-x10", "release-f0.1"]
    df = attack_table([1.0, 8.0], 1e-5, 2000, seed=0, methods=methods)
    assert list(df.columns) == TABLE_COLUMNS
    assert len(df) == len(methods) * 2
    assert (df["ci_low"] <= df["attack_accuracy"]).all() and (df["attack_accuracy"] <= df["ci_high"]).all()
    assert (df.loc[df.label_method == "oracle", "attack_accuracy"] == 1.0).all()
    md = attack_table_markdown(df)
    assert md.count("\n| ") == len(df) + 1  # header + one line per row
    assert "| oracle | 8 | 1e-05 | 2000 | 1.0000 |" in md


def test_audit_verdict_refutes_or_not_never_certifies():
    from dpcl.audits.audit import audit_verdict

    assert audit_verdict(1.0, 3.8) == "refuted (add/remove; the ε bound exceeds the claim)"
    assert audit_verdict(1.0, 0.5) == "not refuted (add/remove)"
    assert audit_verdict(1.0, 1.0) == "not refuted (add/remove)"  # at the claim: no evidence against it
    assert audit_verdict(1.0, 0.5, claimed_mu=0.268, mu_lower=0.3).startswith("refuted (add/remove; the μ")
    assert audit_verdict(1.0, 0.5, claimed_mu=0.268, mu_lower=0.2) == "not refuted (add/remove)"


def test_claim_mu_is_the_largest_mu_within_the_claim():
    """The μ a claim allows, from the GDP curve alone, equals 1/σ of the analytic Gaussian mechanism
    (Balle & Wang's calibration, an independent route) and its curve meets δ at ε."""
    from dpcl.audits.gdp import claim_mu, gdp_delta
    from dpcl.privacy.gaussian import gaussian_sigma

    for eps in (0.5, 1.0, 2.0, 8.0):
        mu = claim_mu(eps, 1e-5)
        assert mu == pytest.approx(1 / gaussian_sigma(eps, 1e-5), rel=1e-7)
        assert gdp_delta(mu, eps) == pytest.approx(1e-5, rel=1e-6)
        assert gdp_delta(mu * 1.01, eps) > 1e-5
    assert claim_mu(1.0, 1e-5) == pytest.approx(0.268, abs=1e-3)


def test_label_release_through_the_split_is_audited_against_its_share(monkeypatch):
    """The pipeline's label release (output_label_spaces, Release Labels f = 0.1) at a run's ε = 1: the
    claim is the share f·ε = 0.1 of the plan; the bound stays below it. With the split bypassed (the
    release drawn at the run's full (ε, δ) while the training still gets (1 − f)ε), the same audit
    refutes it: its counts then follow k-TSGD at ε = 1, whose n vs n + 1 ratio is e^1."""
    import dpcl.audits.audit as audit_mod
    import dpcl.data.label_space as ls
    from dpcl.audits.audit import audit_split_release

    ok = audit_split_release("release-f0.1", 1.0, 1e-5, 200_000, 0)
    assert ok["claimed_epsilon"] == pytest.approx(0.1) and ok["delta"] == pytest.approx(1e-6)
    assert 0.05 < ok["epsilon_lower_bound"] <= 0.1
    changes = [
        (old, old.replace("label_budget", "budget"))
        for old in ("label_budget.epsilon,\n", "label_budget.delta,\n")
    ]
    monkeypatch.setattr(audit_mod, "output_label_spaces", broken_copy(ls, "output_label_spaces", *changes))
    broken = audit_split_release("release-f0.1", 1.0, 1e-5, 200_000, 0)
    assert broken["epsilon_lower_bound"] > 0.5 > broken["claimed_epsilon"]
