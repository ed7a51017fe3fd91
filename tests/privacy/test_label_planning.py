"""Laplace thresholding, the any-mechanism bound and budget planning ([LabelSpace] App. C.3, Sec. 7)."""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from dpcl.privacy.accounting import Budget, PrivacyBudgetExceeded
from dpcl.privacy.label_release import (
    drop_lower_bound,
    keep_probabilities,
    keep_probability,
    laplace_delta,
    laplace_delta_star,
    laplace_keep_probability,
    laplace_threshold,
    min_fraction,
    plan_fraction,
    release_labels,
    tsgd_threshold,
)
from dpcl.privacy.ledger import Ledger


def test_fig2_caption_values():
    # k(1, 1e-7) = 16; classes with fewer than 13 samples are dropped with prob >= 99 %
    assert tsgd_threshold(1.0, 1e-7) == 16
    drop = 1 - keep_probability(np.arange(1, 13), 1.0, 1e-7)
    assert np.all(drop >= 0.99)
    # ... and the same holds for the lower bound of Fig. A1 (any mechanism)
    assert np.all(drop_lower_bound(np.arange(1, 13), 1.0, 1e-7) >= 0.99)
    assert drop_lower_bound(13, 1.0, 1e-7) < 0.99


def test_drop_lower_bound_formula_and_tsgd_respects_it():
    eps, delta = 0.5, 1e-5
    n = np.arange(0, 60)
    lb = drop_lower_bound(n, eps, delta)
    assert lb[0] == 1.0 and lb[1] == pytest.approx(1 - delta)
    assert lb[3] == pytest.approx(1 - (1 + math.exp(eps) + math.exp(2 * eps)) * delta)  # Eq. A40 sum
    for mech in ("tsgd", "laplace"):
        drop = 1 - np.asarray(keep_probabilities(n, eps, delta, mech))
        assert np.all(drop >= lb - 1e-12), mech  # no DP mechanism beats the bound


def test_laplace_threshold_delta():
    eps, delta = 1.0, 1e-5
    tau = laplace_threshold(eps, delta)
    # for small delta the first term of Eq. A97 is negative and tau = 1 + ln(1/(2 delta))/eps
    assert tau == pytest.approx(1 + math.log(1 / (2 * delta)) / eps, rel=1e-9)
    assert laplace_delta(tau, eps) <= delta
    assert laplace_delta(tau - 1e-6, eps) > delta
    assert laplace_delta_star(tau, eps) == pytest.approx(0.5 * math.exp(-eps * (tau - 1)))
    # the first term dominates when delta* is large
    assert laplace_delta(1.0, 0.1) == pytest.approx(max(1 / 0.5 - math.exp(0.1), 0.5))


def test_laplace_keep_probability_matches_sampling():
    eps, tau, n, reps = 1.0, 11.8, 10, 200_000
    p = laplace_keep_probability(n, eps, tau)
    draws = np.random.default_rng(0).laplace(0, 1 / eps, reps)
    emp = np.mean(n + draws > tau)
    assert abs(emp - p) <= 5 * math.sqrt(p * (1 - p) / reps)
    assert laplace_keep_probability(0, eps, tau) == 0.0


def test_laplace_release_is_ledgered_and_verified():
    released, rec = release_labels({0: 50, 1: 1}, 2, 1.0, 1e-5, np.random.default_rng(0), mechanism="laplace")
    assert 0 in released and rec["mechanism"] == "laplace_label_release"
    ledger = Ledger(target=Budget(1.0, 1e-5))
    ledger.add(0, rec)
    ledger.add(0, {"mechanism": "nonprivate", "epsilon": math.inf, "delta": 0.0})  # its training
    assert ledger.total().epsilon == math.inf and ledger.task_budget(0).epsilon == math.inf
    only = Ledger(target=Budget(1.0, 1e-5), n_tasks=1)
    only.add(0, rec)
    assert only.task_budget(0).epsilon == 1.0
    with pytest.raises(PrivacyBudgetExceeded):  # a threshold too low for the claimed delta
        ledger.add(1, {**rec, "tau": 5.0})


def test_plan_fraction_reproduces_table_a5():
    res = plan_fraction([500] * 100, 1.0, 1e-5, 0.025)
    assert res["expected_released"] == pytest.approx(90.5, abs=0.05)
    assert plan_fraction([500] * 100, 1.0, 1e-5, 0.0359)["expected_released"] > 99.9


def test_min_fraction_is_minimal():
    sizes = [41, 100, 334]  # ImageNet-R's training class-size range
    res = min_fraction(sizes, 8.0, 1e-5, 0.99)
    f = res["fraction"]
    assert keep_probability(41, 8 * f, 1e-5 * f) >= 0.99
    assert keep_probability(41, 8 * f * 0.999, 1e-5 * f * 0.999) < 0.99
    with pytest.raises(ValueError, match="no fraction"):
        min_fraction([1], 0.1, 1e-9, 0.999)


@pytest.mark.parametrize(
    "argv",
    [
        ["privacy", "sigma", "--epsilon", "0", "--delta", "1e-5"],
        ["privacy", "sigma", "--epsilon", "1", "--delta", "1"],
        [
            "labels",
            "plan",
            "--class-sizes",
            "5",
            "-3",
            "--epsilon",
            "1",
            "--delta",
            "1e-5",
            "--fraction",
            "0.1",
        ],
        ["labels", "plan", "--class-sizes", "5", "--epsilon", "1", "--delta", "1e-5", "--fraction", "1.5"],
        ["labels", "keep-prob", "--class-size", "-1", "--epsilon", "1", "--delta", "1e-5"],
        ["labels", "release", "--class-counts", "3", "-1", "--epsilon", "1", "--delta", "1e-5"],
    ],
)
def test_cli_invalid_inputs_fail_without_a_number(argv):
    res = subprocess.run([sys.executable, "-m", "dpcl.cli", *argv, "--json"], capture_output=True, text=True)
    assert res.returncode != 0
    assert res.stdout == ""
    assert "error" in res.stderr


def test_cli_plan_and_release_json():
    def run(*argv):
        out = subprocess.run(
            [sys.executable, "-m", "dpcl.cli", *argv, "--json"], capture_output=True, text=True, check=True
        )
        return json.loads(out.stdout)

    plan = run(
        "labels",
        "plan",
        "--class-sizes",
        *["500"] * 100,
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--fraction",
        "0.025",
    )
    assert plan["expected_released"] == pytest.approx(90.5, abs=0.05)
    frac = run(
        "labels",
        "plan",
        "--class-sizes",
        "41",
        "334",
        "--epsilon",
        "8",
        "--delta",
        "1e-5",
        "--min-keep-prob",
        "0.99",
    )
    assert 0 < frac["fraction"] < 1
    rel = run(
        "labels",
        "release",
        "--class-counts",
        "0",
        "100",
        "11",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--repeat",
        "2000",
        "--seed",
        "3",
    )
    assert rel["repeat"] == 2000 and rel["kept_counts"][0] == 0 and rel["kept_counts"][1] == 2000
    p = keep_probability(11, 1.0, 1e-5)
    assert abs(rel["kept_counts"][2] / 2000 - p) <= 5 * math.sqrt(p * (1 - p) / 2000)
    kp = run(
        "labels",
        "keep-prob",
        "--class-size",
        "12",
        "--epsilon",
        "1",
        "--delta",
        "1e-7",
        "--mechanism",
        "laplace",
    )
    assert kp["keep_probability"] == pytest.approx(float(keep_probabilities(12, 1.0, 1e-7, "laplace")))
    assert kp["drop_lower_bound"] == pytest.approx(float(drop_lower_bound(12, 1.0, 1e-7)))


def test_independent_oracle_google_partition_selection():
    ps = pytest.importorskip("pydp.algorithms.partition_selection")
    n = np.arange(0, 120)
    for eps, delta in [(1.0, 1e-5), (0.1, 1e-6), (8.0, 1e-5)]:
        lap = ps.create_laplace_partition_strategy(eps, delta, 1)
        google = np.array([lap.probability_of_keep(int(x)) for x in n])
        ours = np.asarray(keep_probabilities(n, eps, delta, "laplace"))
        assert np.allclose(ours[1:], google[1:], rtol=1e-9, atol=1e-12)  # same mechanism, same numbers
        # Google's truncated-geometric strategy is the *optimal* partition selection
        # ([Desfontaines2022], Thm 1): keep(1) = delta exactly. Our k-TSGD with the
        # integer k = ceil(...) of [LabelSpace] Eq. 7 is (eps, delta)-DP with slack, so it
        # never keeps a class more often than the optimum does.
        opt = ps.create_truncated_geometric_partition_strategy(eps, delta, 1)
        optimum = np.array([opt.probability_of_keep(int(x)) for x in n])
        assert optimum[1] == pytest.approx(delta, rel=1e-6)
        assert np.all(optimum >= np.asarray(keep_probability(n, eps, delta)) - 1e-12)
