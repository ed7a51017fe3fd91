"""Privacy auditing with one training run ([Steinke2023], arXiv 2305.08846, Thm. 3.1 and
App. D): a lower bound on ε from m canaries, each included in the training data by an independent fair
coin, and an auditor that guesses the coins of some of them after seeing the one output.

Statement (add/remove adjacency, each canary present or absent): let the mechanism be (ε, δ)-DP, let
the auditor make r guesses (abstaining on the other m − r canaries) and let W be its number of correct
guesses. Then for every v,

    P[W ≥ v] ≤ P[Binomial(r, q) ≥ v] + 2mδ · max_{i=1..v} P[v − i ≤ Binomial(r, q) < v] / i,
    q = e^ε / (1 + e^ε),

the first term being what ε-randomized response on every guessed coin would give. With v observed
correct guesses the right side is a p-value for the hypothesis "the mechanism is (ε, δ)-DP"
(:func:`p_value`); the largest ε it rejects at level α is the audit's lower bound
(:func:`epsilon_lower_bound`): with probability ≥ 1 − α over the coins and the mechanism's randomness,
a mechanism that is (ε, δ)-DP gives a bound ≤ ε. The guesses may depend on the output in any way, and
the canaries' scores need not be independent (the coins are); they must not depend on the coins
themselves. Choosing *how many* to guess after seeing which guesses were right would void the bound:
:func:`audit_scores` takes the numbers of guesses from the audit's public plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import binom


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def _probability(value, name: str, *, open_low: bool = False, open_high: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    low_ok = value > 0 if open_low else value >= 0
    high_ok = value < 1 if open_high else value <= 1
    if not (math.isfinite(value) and low_ok and high_ok):
        lo, hi = "(" if open_low else "[", ")" if open_high else "]"
        raise ValueError(f"{name} must lie in {lo}0, 1{hi}, got {value!r}")
    return value


def _check_counts(m, r, v) -> tuple[int, int, int]:
    m, r, v = _count(m, "m"), _count(r, "r"), _count(v, "v")
    if not 0 <= v <= r <= m or m < 1:
        raise ValueError(
            f"need 0 <= v <= r <= m and m >= 1 (correct <= guesses <= canaries), got {m=}, {r=}, {v=}"
        )
    return m, r, v


def p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """P-value of ``v`` correct guesses out of ``r`` on ``m`` fair-coin canaries under the hypothesis that
    the mechanism is (``epsilon``, ``delta``)-DP (module docstring; clipped at 1)."""
    m, r, v = _check_counts(m, r, v)
    if isinstance(epsilon, bool) or not (isinstance(epsilon, int | float | np.number) and epsilon >= 0):
        raise ValueError(f"epsilon must be a number >= 0, got {epsilon!r}")
    if not math.isfinite(float(epsilon)):
        raise ValueError(f"epsilon must be finite, got {epsilon!r}")
    delta = _probability(delta, "delta")
    q = float(expit(float(epsilon)))  # e^ε / (1 + e^ε), the accuracy of ε-randomized response
    p = float(binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    if delta > 0 and v > 0:
        # P[v - i <= B < v] for i = 1..v: cumulative sums of the pmf at v - 1, v - 2, ..., 0
        mass = np.cumsum(binom.pmf(np.arange(v - 1, -1, -1), r, q))
        p += 2.0 * m * delta * float(np.max(mass / np.arange(1, v + 1)))
    return min(p, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, delta: float, alpha: float = 0.05) -> float:
    """The largest ε whose hypothesis "(ε, δ)-DP" :func:`p_value` rejects at level ``alpha`` (0 where
    even ε = 0 is not rejected): with confidence 1 − α the mechanism is not (ε', δ)-DP for any ε' below
    it. Found by bracketing (doubling) and Brent's method on p(ε) − α, then, where Brent's answer has a
    p-value above α in floating point, by bisection down to the last float whose p-value is ≤ α (the safe
    side: never a bound whose own p-value exceeds α)."""
    m, r, v = _check_counts(m, r, v)
    delta = _probability(delta, "delta")
    alpha = _probability(alpha, "alpha", open_low=True, open_high=True)
    f = lambda e: p_value(m, r, v, e, delta) - alpha  # noqa: E731
    if f(0.0) > 0:
        return 0.0
    lo, hi = 0.0, 1.0
    while f(hi) <= 0:  # p → P[Binomial(r, 1) >= v] = 1 > α as ε → ∞
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:  # pragma: no cover - e^ε/(1+e^ε) is 1 in double precision long before
            raise RuntimeError(f"could not bracket the bound for {m=}, {r=}, {v=}")
    eps = float(brentq(f, lo, hi, xtol=1e-12, rtol=1e-12, maxiter=500))
    if f(eps) <= 0:
        return max(eps, 0.0)
    # f(lo) <= 0 < f(eps): bisect to adjacent floats (brentq's answer may lie thousands of floats above
    # the last one whose p-value is <= α; a walk float by float cost thousands of p-values)
    good, bad = lo, eps
    while True:
        mid = good + (bad - good) / 2
        if mid <= good or mid >= bad:
            return max(good, 0.0)
        if f(mid) <= 0:
            good = mid
        else:
            bad = mid


def audit_scores(
    scores: np.ndarray,
    coins: np.ndarray,
    *,
    guesses: Sequence[tuple[int, int]],
    delta: float,
    alpha: float = 0.05,
) -> dict:
    """The one-run audit of canary ``scores`` (higher: more likely included) with the true ``coins``.

    ``guesses`` is a fixed list of (k₊, k₋) pairs from the audit's public plan, never chosen after
    looking at the outcome: for each, the auditor guesses "in" for the k₊ highest scores and "out" for
    the k₋ lowest (r = k₊ + k₋ guesses, v correct). With more than one pair, α is split equally between
    them (Bonferroni) and the best bound is reported, valid at confidence 1 − α as a whole. Returns m,
    r, v, k_plus, k_minus of the best pair, its ``epsilon_lower_bound`` and ``candidates`` (every
    pair's r, v and bound at α / len(guesses))."""
    scores = np.asarray(scores)
    coins = np.asarray(coins)
    if scores.ndim != 1 or scores.shape != coins.shape or scores.size == 0:
        raise ValueError(
            f"scores and coins must be non-empty 1-d arrays of one length, got {scores.shape} and {coins.shape}"
        )
    if scores.dtype.kind not in "fiu" or not np.isfinite(scores).all():
        raise ValueError("scores must be finite real numbers (a non-finite score cannot be ranked)")
    if coins.dtype != bool:
        raise ValueError(f"coins must be a bool array (the canaries' inclusion), got dtype {coins.dtype}")
    alpha = _probability(alpha, "alpha", open_low=True, open_high=True)
    pairs = [(_count(a, "k_plus"), _count(b, "k_minus")) for a, b in guesses]
    m = int(scores.size)
    if not pairs or any(a < 0 or b < 0 or a + b < 1 or a + b > m for a, b in pairs):
        raise ValueError(
            f"guesses must be (k_plus, k_minus) pairs with 1 <= k_plus + k_minus <= m = {m}, got {guesses!r}"
        )
    order = np.argsort(-scores, kind="stable")  # highest first
    share = alpha / len(pairs)
    candidates = []
    for k_plus, k_minus in pairs:
        top, bottom = order[:k_plus], order[m - k_minus :] if k_minus else order[:0]
        v = int(coins[top].sum()) + int((~coins[bottom]).sum())
        r = k_plus + k_minus
        candidates.append(
            {
                "k_plus": k_plus,
                "k_minus": k_minus,
                "r": r,
                "v": v,
                "epsilon_lower_bound": epsilon_lower_bound(m, r, v, delta, share),
            }
        )
    best = max(candidates, key=lambda c: c["epsilon_lower_bound"])
    return {"m": m, **best, "alpha": alpha, "candidates": candidates}
