"""dpcl.privacy.pld_ops against dp_accounting's own methods: the same composed PMFs and the same ε(δ),
bit for bit, on the PLDs dpcl composes and on constructed PMFs that take every branch of the walks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import pld_pmf

from dpcl.privacy import pld, pld_ops

# (segments (σ, q, steps, choice probability), pessimistic, discretisation): the shapes of dpcl's
# histories (a DP-SGD part, then rereads of a block chosen with probability 1/τ), coarser grids
HISTORIES = [
    (((1.1, 0.05, 40, 1.0), (0.9, 0.2, 30, 0.5), (0.9, 0.2, 30, 1 / 3)), True, 1e-4),
    (((1.1, 0.05, 40, 1.0), (0.9, 0.2, 30, 0.5)), False, 2e-4),
    (((0.7, 0.01, 200, 1.0), (0.7, 0.1, 20, 1.0)), False, 1e-4),
    (((2.0, 0.3, 5, 1.0), (3.0, 1.0, 2, 1.0)), True, 1e-3),
]
DELTAS = (1e-5, 1e-3, 1e-9, 0.2, 0.9)


def _same_pmf(ours, theirs) -> None:
    assert type(ours) is type(theirs)
    assert ours._lower_loss == theirs._lower_loss
    assert ours._infinity_mass == theirs._infinity_mass
    assert ours._pessimistic_estimate == theirs._pessimistic_estimate
    if isinstance(theirs, pld_pmf.DensePLDPmf):
        assert ours._probs.dtype == theirs._probs.dtype and np.array_equal(ours._probs, theirs._probs)
    else:
        assert ours._loss_probs == theirs._loss_probs


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of a few elements, so that every walk crosses many block boundaries."""
    monkeypatch.setattr(pld_ops, "_FIRST_BLOCK", 5)


@pytest.mark.parametrize(("history", "pessimistic", "discretization"), HISTORIES)
def test_compose_and_epsilon_equal_dp_accountings(history, pessimistic, discretization):
    segments = [pld._segment_pld(s, q, n, pessimistic, discretization, p) for s, q, n, p in history]
    ours = theirs = segments[0]
    for seg in segments[1:]:
        ours, theirs = pld_ops.compose(ours, seg), theirs.compose(seg)
        _same_pmf(ours._pmf_remove, theirs._pmf_remove)
        _same_pmf(ours._pmf_add, theirs._pmf_add)
    for delta in DELTAS:
        assert pld_ops.epsilon_for_delta(theirs, delta) == theirs.get_epsilon_for_delta(delta)


def test_the_bounds_dpcl_writes_are_dp_accountings(small_blocks, monkeypatch):
    """epsilon_upper / epsilon_lower (which compose and walk here) against the same PLD composed and
    walked by dp_accounting, across block boundaries."""
    monkeypatch.setenv("DPCL_ACCOUNTING_CACHE", "off")  # computed here, not read from the disk cache
    history = [(1.3, 0.1, 25), (1.3, 0.25, 25, 0.5)]
    for pessimistic, fn in ((True, pld.epsilon_upper), (False, pld.epsilon_lower)):
        segments = [pld._segment_pld(*(*seg[:3], pessimistic, 2e-4, *seg[3:])) for seg in history]
        theirs = segments[0].compose(segments[1])
        pld._epsilon.cache_clear()
        assert fn(history, 1e-5, 2e-4) == max(0.0, float(theirs.get_epsilon_for_delta(1e-5)))


def _random_pmf(
    seed: int,
    n: int | None = None,
    lower: int | None = None,
    discretization: float = 1e-3,
    infinity_mass: float | None = None,
):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 20_000)) if n is None else n
    probs = rng.exponential(size=n) * (rng.random(n) < 0.9)  # some exact zeros
    probs /= probs.sum()
    probs[rng.random(n) < 0.05] *= -1e-12  # an FFT's round-off: tiny negative masses
    lower = int(rng.integers(-n, n // 2)) if lower is None else lower
    infinity_mass = (0.0, 1e-7, 1e-3)[seed % 3] if infinity_mass is None else infinity_mass
    return pld_pmf.DensePLDPmf(discretization, lower, probs, infinity_mass, bool(seed % 2))


@pytest.mark.parametrize("seed", range(24))
def test_epsilon_walk_on_constructed_pmfs(seed, small_blocks):
    pmf = _random_pmf(seed, discretization=(1e-4, 1e-3, 2e-2)[seed % 3])
    for delta in (1e-12, 1e-8, 1e-5, 1e-2, 0.5, 0.999):
        assert pld_ops._dense_epsilon_for_delta(pmf, delta) == pmf.get_epsilon_for_delta(delta)


def test_epsilon_walk_where_exp_underflows():
    """Losses above ~745: e^(−loss) is 0, and the walk returns max(0, loss) where the mass above reaches δ
    with none below; and losses straddling that range."""
    for lower, n in ((40_000, 300), (37_000, 2_000), (36_000, 40_000)):  # losses lower·0.02 …
        pmf = _random_pmf(7, n=n, lower=lower, discretization=2e-2, infinity_mass=0.0)
        for delta in (1e-9, 1e-4, 0.3):
            ours, theirs = pld_ops._dense_epsilon_for_delta(pmf, delta), pmf.get_epsilon_for_delta(delta)
            assert ours == theirs and not math.isinf(theirs)


def test_infinite_epsilon_when_the_infinity_mass_exceeds_delta():
    pmf = pld_pmf.DensePLDPmf(1e-3, 0, np.array([0.5, 0.5]), 1e-3, True)
    assert pld_ops._dense_epsilon_for_delta(pmf, 1e-4) == math.inf == pmf.get_epsilon_for_delta(1e-4)


@pytest.mark.parametrize("seed", range(12))
def test_tail_truncation_equals_dp_accountings(seed, small_blocks):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 30_000))
    probs = np.exp(-(np.linspace(-8, 8, n) ** 2)) * rng.random(n)  # tails far below the truncated mass
    probs /= probs.sum()
    for mass in (0.0, 1e-15, 1e-6, 0.3, 0.999):  # 0.999: prefix and suffix meet
        for pessimistic in (True, False):
            ours = pld_ops.truncate_tails(probs.copy(), mass, pessimistic)
            theirs = pld_pmf._truncate_tails(probs.copy(), mass, pessimistic)
            assert ours[0] == theirs[0] and ours[2] == theirs[2]
            assert np.array_equal(ours[1], theirs[1])


@pytest.mark.parametrize("seed", range(6))
def test_tail_truncation_at_running_sums_themselves(seed, small_blocks):
    """A truncated mass of exactly twice one of the loop's own running sums: the index found must be the
    loop's, which holds only if every running sum is the loop's to the last bit."""
    rng = np.random.default_rng(200 + seed)
    probs = rng.random(3_000) ** 8
    probs /= probs.sum()
    running, s = [], 0
    for v in probs:
        s += v
        running.append(s)
    for k in rng.integers(0, len(probs), 40):
        for threshold in (running[k], np.nextafter(running[k], 0)):
            ours = pld_ops.truncate_tails(probs.copy(), 2 * threshold, True)
            theirs = pld_pmf._truncate_tails(probs.copy(), 2 * threshold, True)
            assert ours[0] == theirs[0] and np.array_equal(ours[1], theirs[1])
