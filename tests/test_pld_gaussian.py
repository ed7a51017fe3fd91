"""dpcl.privacy.pld_gaussian: dp_accounting's subsampled-Gaussian PLD with its inversions done at once
(the pessimistic connect-the-dots grid, the optimistic privacy-buckets steps) is dp_accounting's own
PLD, bit for bit (the PMFs, their offsets and infinity masses), and its δ(ε) on a grid is the scalar
loop's at every point, edges included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from dp_accounting.pld import privacy_loss_mechanism as dp_plm

from dpcl.privacy import pld
from dpcl.privacy.pld_gaussian import GridGaussianPrivacyLoss, _privacy_buckets_pmf, from_gaussian_mechanism


def _bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


def _assert_same_pmf(ours, theirs) -> None:
    for side in ("_pmf_remove", "_pmf_add"):
        a, b = getattr(ours, side).to_dense_pmf(), getattr(theirs, side).to_dense_pmf()
        assert a._lower_loss == b._lower_loss, side
        assert _bits(a._infinity_mass) == _bits(b._infinity_mass), side
        assert a._probs.shape == b._probs.shape, side
        np.testing.assert_array_equal(_bits(a._probs), _bits(b._probs), err_msg=side)


# (σ, q, discretisation): dpcl's own discretisation at a few points, coarser ones over the corners
# (tiny and near-one rates, small and large σ) to keep dp_accounting's scalar loop affordable
CASES = [
    (0.8, 0.01, 1e-4),
    (1.1, 0.1, 1e-4),
    (0.3, 1e-6, 1e-3),
    (0.5, 0.37, 1e-3),
    (0.7, 0.999, 1e-3),
    (2.0, 0.5, 1e-3),
    (5.0, 0.02, 1e-3),
    (50.0, 0.3, 1e-3),
    (1.37, 0.0123, 3e-3),
    (0.6, 1.0, 1e-3),
]


@pytest.mark.parametrize("pessimistic", [True, False], ids=["pessimistic", "optimistic"])
@pytest.mark.parametrize(("sigma", "q", "discretization"), CASES)
def test_the_pld_is_dp_accountings_bit_for_bit(sigma, q, discretization, pessimistic):
    theirs = dp_pld.from_gaussian_mechanism(
        standard_deviation=sigma,
        sensitivity=1.0,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=discretization,
        sampling_prob=q,
        use_connect_dots=pessimistic,
    )
    ours = from_gaussian_mechanism(
        standard_deviation=sigma,
        sampling_prob=q,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=discretization,
        use_connect_dots=pessimistic,
    )
    _assert_same_pmf(ours, theirs)
    if not pessimistic and q < 1:  # the optimistic PMF came from the steps inverted at once
        loss = GridGaussianPrivacyLoss(sigma, pessimistic_estimate=False, sampling_prob=q)
        assert _privacy_buckets_pmf(loss, discretization, False) is not None


def _edge_grid(q: float) -> np.ndarray:
    """ε values on and around the points where the scalar code branches: 0, log(1 − q), −log(1 − q),
    log1p(−q) and their neighbours a few ulps and a relative 1e-9 away, plus an ordinary grid."""
    points = [0.0, -0.0]
    for edge in (math.log(1 - q), -math.log(1 - q), math.log1p(-q), -math.log1p(-q)):
        points += [edge, edge * (1 + 1e-9), edge * (1 - 1e-9), edge * (1 + 2e-9), edge * (1 - 2e-9)]
        x = edge
        for _ in range(4):
            x = math.nextafter(x, math.inf)
            points.append(x)
        x = edge
        for _ in range(4):
            x = math.nextafter(x, -math.inf)
            points.append(x)
    points += list(np.linspace(-3 * abs(math.log(1 - q)) - 1, 3 * abs(math.log(1 - q)) + 1, 401))
    return np.array(points, dtype=float)


def _deltas(loss, grid):
    """δ at every ε of ``grid`` one by one (None where the code raises ValueError)."""
    out = []
    for eps in grid:
        try:
            out.append(loss.get_delta_for_epsilon(np.array([eps])))
        except ValueError:
            out.append(None)
    return out


@pytest.mark.parametrize("adjacency", ["ADD", "REMOVE"])
@pytest.mark.parametrize("q", [1e-6, 0.01, 0.37, 0.999])
def test_delta_on_a_grid_equals_the_scalar_loop_at_every_point_and_edge(adjacency, q):
    kind = getattr(dp_plm.AdjacencyType, adjacency)
    theirs = dp_plm.GaussianPrivacyLoss(0.9, sampling_prob=q, adjacency_type=kind)
    ours = GridGaussianPrivacyLoss(0.9, sampling_prob=q, adjacency_type=kind)
    grid = _edge_grid(q)
    one_by_one = _deltas(theirs, grid)
    assert _deltas(ours, grid) == one_by_one  # the same values, and the same points raise
    usable = np.array([d is not None for d in one_by_one])
    assert usable.sum() > 400
    np.testing.assert_array_equal(
        _bits(ours.get_delta_for_epsilon(grid[usable])), _bits(theirs.get_delta_for_epsilon(grid[usable]))
    )
    if not usable.all():  # a grid holding a point the scalar code refuses is refused whole
        with pytest.raises(ValueError):
            ours.get_delta_for_epsilon(grid)


def test_dpcls_segments_are_built_by_the_grid_construction(monkeypatch):
    """pld.py's segments come from this module (a sentinel in its place reaches the ε)."""
    calls = []
    real = from_gaussian_mechanism

    def spy(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr("dpcl.privacy.pld_gaussian.from_gaussian_mechanism", spy)
    pld._segment_pld.cache_clear()
    pld._epsilon.cache_clear()
    monkeypatch.setenv("DPCL_ACCOUNTING_CACHE", "off")
    try:
        assert pld.epsilon_upper([(1.3, 0.017, 3)], 1e-5) > 0
    finally:
        pld._segment_pld.cache_clear()
        pld._epsilon.cache_clear()
    assert calls and calls[0]["standard_deviation"] == 1.3 and calls[0]["sampling_prob"] == 0.017
