"""Three-valued verdicts (dpcl.privacy.verdict) and the PLD bounds behind them (dpcl.privacy.pld)."""

from __future__ import annotations

import math

import pytest

from dpcl.privacy import pld
from dpcl.privacy.verdict import CERTIFIED, NOT_CERTIFIED, VIOLATED, Verdict, classify, overall_verdict


@pytest.mark.parametrize(
    ("claim", "upper", "lower", "want"),
    [
        (1.0, 0.9, 0.8, CERTIFIED),
        (1.0, 1.0, 0.9, CERTIFIED),  # a bound equal to the claim certifies it
        (1.0, 1.2, 0.9, NOT_CERTIFIED),
        (1.0, 1.2, 1.1, VIOLATED),
        (1.0, None, 1.1, VIOLATED),  # an audit alone can refute
        (1.0, None, 0.5, NOT_CERTIFIED),
        (1.0, 2.0, None, NOT_CERTIFIED),
        (math.inf, 5.0, None, CERTIFIED),  # nothing is claimed
    ],
)
def test_classify(claim, upper, lower, want):
    assert classify(claim, upper, lower) == want


@pytest.mark.parametrize("bad", [math.nan, True, "1.0"])
def test_classify_refuses_non_numbers(bad):
    with pytest.raises(ValueError, match="number"):
        classify(1.0, bad, None)


def test_inconsistent_bounds_are_an_error():
    with pytest.raises(ValueError, match="inconsistent"):
        classify(1.0, 0.5, 0.9)


def test_overall_verdict_and_record():
    a = Verdict("add/remove", 1.0, 1e-5, upper_bound=0.9, upper_method="pld")
    b = Verdict(
        "substitution", 1.0, 1e-5, upper_bound=None, upper_method=None, lower_bound=1.5, lower_method="audit"
    )
    assert a.to_dict()["verdict"] == CERTIFIED and b.verdict == VIOLATED
    assert overall_verdict([a, b]) == VIOLATED
    assert overall_verdict([a]) == CERTIFIED
    with pytest.raises(ValueError):
        overall_verdict([])


def test_pld_bounds_bracket_the_rdp_and_prv_accountants():
    """Optimistic ≤ pessimistic PLD, and the pessimistic bound is no looser than RDP ([Balle2020]
    conversion) for a Poisson-subsampled Gaussian — the reason verdicts use it."""
    from dpcl.privacy.sgd_accounting import epsilon as sgd_epsilon

    history = [(1.0, 0.01, 1000)]
    b = pld.epsilon_bounds(history, 1e-5)
    assert 0 < b.lower <= b.upper
    assert b.upper <= sgd_epsilon(1.0, 0.01, 1000, 1e-5, "rdp")
    # the discretisation interval 1e-4 bounds the gap between the two estimates per composition loosely
    assert b.upper - b.lower < 0.05 * b.upper


def test_pld_segments_that_never_sample_cost_nothing():
    assert pld.epsilon_upper([(1.0, 0.0, 100)], 1e-5) == 0.0
    with pytest.raises(ValueError, match="steps"):
        pld.epsilon_upper([(1.0, 0.1, 2.5)], 1e-5)
    with pytest.raises(ValueError, match="delta"):
        pld.epsilon_upper([(1.0, 0.1, 2)], 1.0)
