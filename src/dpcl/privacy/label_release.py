"""DP release of the output label space ([LabelSpace] Sec. 4.2, Eq. 7; App. C.3).

k-truncated symmetric geometric distribution (k-TSGD) thresholding of
[Desfontaines2022] (Thm 6): with p = 1 − e^{−ε} and::

    k = ⌈(1/ε) ln((e^ε + 2δ − 1) / ((e^ε + 1) δ))⌉,

Pr[Z = z] ∝ e^{−ε|z|} on {−k, …, k}, and label y is released iff |C_t(y)| + Z_y > k.
Only labels present in the data are candidates; each individual is in one class, so
the per-class counts have L1 sensitivity 1 per label and the release is (ε, δ)-DP.

Laplace thresholding (App. C.3, Thm C.3): keep y iff |C(y)| + Lap(1/ε) > τ; it is
(ε, δ)-DP for δ ≥ max(1/(1 − δ*) − e^ε, δ*), δ* = Pr[1 + Lap(1/ε) ≥ τ] (Eq. A97).

Any (ε, δ)-DP label release drops a class of size n with probability at least
1 − δ_n, δ_n = (e^{nε} − 1)/(e^ε − 1) · δ (group privacy, Eq. A40; Fig. A1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from . import releases


def _check(epsilon: float, delta: float) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")


def tsgd_threshold(epsilon: float, delta: float) -> int:
    """The truncation/threshold k(ε, δ) of Eq. 7."""
    _check(epsilon, delta)
    ee = math.exp(epsilon)
    k = math.ceil(math.log((ee + 2 * delta - 1) / ((ee + 1) * delta)) / epsilon)
    return max(int(k), 1)


def tsgd_delta(k: int, epsilon: float) -> float:
    """δ actually achieved by k-TSGD thresholding at ε: Pr[Z = k] = (e^ε − 1)/((e^ε + 1) e^{kε} − 2).

    This is the probability that a label with a single example is released, the worst
    case over neighbouring datasets ([Desfontaines2022], Thm 6).
    """
    ee = math.expm1(epsilon)
    return ee / ((ee + 2.0) * math.exp(k * epsilon) - 2.0)


def tsgd_pmf(epsilon: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Support {−k, …, k} and probabilities ∝ e^{−ε|z|} (exact, normalised in float64)."""
    z = np.arange(-k, k + 1)
    logw = -epsilon * np.abs(z)
    w = np.exp(logw - logw.max())
    return z, w / w.sum()


def tsgd_survival(m: np.ndarray | int, epsilon: float, k: int) -> np.ndarray:
    """Pr[Z ≥ m] for Z ~ k-TSGD(1 − e^{−ε}), in closed form (no pmf array, any k).

    With r = e^{−ε} and C = 1 + 2r(1 − r^k)/(1 − r): for 1 ≤ m ≤ k,
    Pr[Z ≥ m] = r^m (1 − r^{k−m+1}) / ((1 − r) C); for m ≤ 0 use symmetry,
    Pr[Z ≥ m] = 1 − Pr[Z ≥ 1 − m].
    """
    m = np.asarray(m, dtype=float)
    one_minus_r = -math.expm1(-epsilon)
    c = 1.0 + 2.0 * math.exp(-epsilon) * (-math.expm1(-epsilon * k)) / one_minus_r

    def upper(j: np.ndarray) -> np.ndarray:  # Pr[Z >= j] for 1 <= j <= k+1
        return np.exp(-epsilon * j) * -np.expm1(-epsilon * (k - j + 1)) / (one_minus_r * c)

    jj = np.clip(m, 1, k + 1)
    jn = np.clip(1 - m, 1, k + 1)
    out = np.where(m >= 1, upper(jj), 1.0 - upper(jn))
    out = np.where(m > k, 0.0, np.where(m <= -k, 1.0, out))
    return np.clip(out, 0.0, 1.0)


def keep_probability(class_size: int | np.ndarray, epsilon: float, delta: float) -> np.ndarray | float:
    """Exact Pr[n + Z > k] that a class of size n is released (0 for n = 0, 1 for n > 2k)."""
    if math.isinf(epsilon):
        return (
            np.where(np.asarray(class_size) > 0, 1.0, 0.0) if np.ndim(class_size) else float(class_size > 0)
        )
    k = tsgd_threshold(epsilon, delta)
    n = np.asarray(class_size)
    out = np.where(n > 0, tsgd_survival(k - n + 1, epsilon, k), 0.0)  # need Z >= k - n + 1
    return float(out) if np.ndim(class_size) == 0 else out


def sample_tsgd(epsilon: float, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` i.i.d. draws of k-TSGD(p = 1 − e^{−ε}) by inverse-CDF sampling."""
    z, p = tsgd_pmf(epsilon, k)
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    u = rng.random(size)
    return z[np.searchsorted(cdf, u, side="right")]


def laplace_delta_star(tau: float, epsilon: float) -> float:
    """δ* = Pr[1 + Lap(1/ε) ≥ τ], the chance that a singleton class is released (Eq. A96)."""
    x = tau - 1.0
    return 0.5 * math.exp(-epsilon * x) if x >= 0 else 1.0 - 0.5 * math.exp(epsilon * x)


def laplace_delta(tau: float, epsilon: float) -> float:
    """δ of Laplace thresholding at τ (Thm C.3, Eq. A97): max(1/(1 − δ*) − e^ε, δ*)."""
    ds = laplace_delta_star(tau, epsilon)
    if ds >= 1.0:
        return 1.0
    return max(1.0 / (1.0 - ds) - math.exp(epsilon), ds)


def laplace_threshold(epsilon: float, delta: float) -> float:
    """Smallest τ for which Laplace thresholding is (ε, δ)-DP (δ decreases in τ)."""
    _check(epsilon, delta)
    lo, hi = 1.0, 1.0 + math.log(1.0 / delta) / epsilon + 1.0
    while laplace_delta(hi, epsilon) > delta:
        hi += math.log(2.0) / epsilon + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if laplace_delta(mid, epsilon) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def laplace_keep_probability(class_size: int | np.ndarray, epsilon: float, tau: float) -> np.ndarray | float:
    """Exact Pr[n + Lap(1/ε) > τ] (0 for n = 0: absent labels are never candidates)."""
    n = np.asarray(class_size, dtype=float)
    x = tau - n
    p = np.where(
        x >= 0, 0.5 * np.exp(-epsilon * np.maximum(x, 0)), 1.0 - 0.5 * np.exp(epsilon * np.minimum(x, 0))
    )
    p = np.where(n > 0, p, 0.0)
    return float(p) if np.ndim(class_size) == 0 else p


def drop_lower_bound(class_size: int | np.ndarray, epsilon: float, delta: float) -> np.ndarray | float:
    """Lower bound 1 − δ_n on dropping a class of size n, for any (ε, δ)-DP release (Eq. A40)."""
    _check(epsilon, delta)
    n = np.asarray(class_size, dtype=float)
    with np.errstate(over="ignore"):
        delta_n = np.expm1(n * epsilon) / math.expm1(epsilon) * delta
    out = np.clip(1.0 - delta_n, 0.0, 1.0)
    return float(out) if np.ndim(class_size) == 0 else out


MECHANISMS = ("tsgd", "laplace")


def keep_probabilities(
    class_sizes: int | np.ndarray,
    epsilon: float,
    delta: float,
    mechanism: str = "tsgd",
    tau: float | None = None,
) -> np.ndarray | float:
    """Exact release probability of classes of the given sizes under ``mechanism``.

    For ``laplace`` the threshold is ``tau`` if given (then δ is whatever Thm C.3 gives
    at τ), else the smallest τ that is (ε, δ)-DP.
    """
    if mechanism == "tsgd":
        return keep_probability(class_sizes, epsilon, delta)
    if mechanism == "laplace":
        _check(epsilon, delta)
        return laplace_keep_probability(
            class_sizes, epsilon, laplace_threshold(epsilon, delta) if tau is None else tau
        )
    raise ValueError(f"unknown label-release mechanism {mechanism!r}; allowed: {list(MECHANISMS)}")


def _check_sizes(class_sizes) -> np.ndarray:
    n = np.asarray(class_sizes)
    if n.size == 0:
        raise ValueError("class sizes must not be empty")
    if not np.issubdtype(n.dtype, np.integer) and not np.all(np.mod(n, 1) == 0):
        raise ValueError(f"class sizes must be integers, got {class_sizes!r}")
    if np.any(n < 0):
        raise ValueError(f"class sizes must be >= 0, got {class_sizes!r}")
    return n.astype(np.int64)


def plan_fraction(
    class_sizes, epsilon: float, delta: float, fraction: float, mechanism: str = "tsgd"
) -> dict:
    """Per-class keep probabilities and the expected number of released labels when the
    release gets fraction f of both ε and δ (paper Sec. 6.2, 7)."""
    _check(epsilon, delta)
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must lie in (0, 1), got {fraction!r}")
    n = _check_sizes(class_sizes)
    p = np.asarray(keep_probabilities(n, fraction * epsilon, fraction * delta, mechanism), dtype=float)
    return {
        "expected_released": float(p.sum()),
        "keep_probabilities": p.tolist(),
        "fraction": fraction,
        "label_epsilon": fraction * epsilon,
        "label_delta": fraction * delta,
    }


def min_fraction(
    class_sizes, epsilon: float, delta: float, min_keep_prob: float, mechanism: str = "tsgd", grid: int = 4000
) -> dict:
    """Smallest budget fraction f (on a fine log grid, then bisection) that releases every
    class with probability ≥ ``min_keep_prob``: the planning heuristic of paper Sec. 7,
    from data-independent prior knowledge of class sizes. Raises if no f < 1 suffices."""
    _check(epsilon, delta)
    if not 0 < min_keep_prob < 1:
        raise ValueError(f"min-keep-prob must lie in (0, 1), got {min_keep_prob!r}")
    n_min = int(_check_sizes(class_sizes).min())
    if n_min == 0:
        raise ValueError("a class of size 0 can never be released; remove it from the plan")

    def ok(f: float) -> bool:
        return float(keep_probabilities(n_min, f * epsilon, f * delta, mechanism)) >= min_keep_prob

    fs = np.geomspace(1e-5, 1 - 1e-9, grid)
    good = [i for i, f in enumerate(fs) if ok(float(f))] if not ok(float(fs[0])) else [0]
    if not good:
        raise ValueError(
            f"no fraction f < 1 releases a class of size {n_min} with probability >= {min_keep_prob} "
            f"at epsilon={epsilon}, delta={delta}"
        )
    i = good[0]
    lo, hi = (float(fs[i - 1]) if i > 0 else 0.0), float(fs[i])
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if mid > 0 and ok(mid):
            hi = mid
        else:
            lo = mid
    keep = float(keep_probabilities(n_min, hi * epsilon, hi * delta, mechanism))
    return {"fraction": hi, "smallest_class": n_min, "keep_probability_smallest": keep}


def release_labels(
    counts: Mapping[int, int],
    n_label_universe: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
    mechanism: str = "tsgd",
) -> tuple[list[int], dict]:
    """Release O_t = {y : |C_t(y)| + Z_y > threshold} over the labels present in the data.

    ``mechanism="tsgd"``: Z ~ k-TSGD, threshold k (Eq. 7). ``"laplace"``: Z ~ Lap(1/ε),
    threshold τ(ε, δ) (Thm C.3). One noise draw is made per label of the whole universe
    ``0..n_label_universe-1`` in a fixed order, so label y's noise does not depend on
    which other labels are present. ``epsilon = inf`` is the non-private limit: every
    present label is released. Returns the sorted released labels and the mechanism's
    record for the ledger.
    """
    if mechanism not in MECHANISMS:
        raise ValueError(f"unknown label-release mechanism {mechanism!r}; allowed: {list(MECHANISMS)}")
    # the counts as arrays (a data set of 10^5 classes is released in one vectorised pass)
    ys = np.asarray(list(counts.keys()), dtype=np.int64).reshape(-1)
    cs = np.asarray(list(counts.values()), dtype=np.int64).reshape(-1)
    bad = np.flatnonzero((ys < 0) | (ys >= n_label_universe))
    if bad.size:
        raise ValueError(f"label {ys[bad[0]]} outside the label universe 0..{n_label_universe - 1}")
    if np.any(cs < 0):
        i = int(np.flatnonzero(cs < 0)[0])
        raise ValueError(f"negative count {cs[i]} for label {ys[i]}")
    if math.isinf(epsilon):
        released = sorted(ys[cs > 0].tolist())
        return released, {"mechanism": "label_oracle_nonprivate", "epsilon": math.inf, "delta": 0.0}
    _check(epsilon, delta)
    if mechanism == "tsgd":
        threshold: float = tsgd_threshold(epsilon, delta)
        noise = sample_tsgd(epsilon, int(threshold), n_label_universe, rng)
        record = {
            "mechanism": "ktsgd_label_release",
            "k": int(threshold),
            "p": -math.expm1(-epsilon),
            "delta_achieved": tsgd_delta(int(threshold), epsilon),
        }
    else:
        threshold = laplace_threshold(epsilon, delta)
        noise = rng.laplace(0.0, 1.0 / epsilon, n_label_universe)
        record = {
            "mechanism": "laplace_label_release",
            "tau": threshold,
            "delta_achieved": laplace_delta(threshold, epsilon),
        }
    released = sorted(ys[(cs > 0) & (cs + noise[ys] > threshold)].tolist())
    if releases.listening():  # an audit sees every release, and may replay it (dpcl.privacy.releases)
        released = releases.publish(
            "label_release",
            np.asarray(released, dtype=np.int64),
            rows=None,  # it reads the labels' counts: one individual changes one count by one
            sensitivity=1.0,
            noise_scale=1.0 / epsilon,
            noise=mechanism,
            layout="set",  # the number of labels released is part of the release
        ).tolist()
    record.update(
        epsilon=float(epsilon),
        delta=float(delta),
        sensitivity="each individual contributes to one class count (add/remove)",
    )
    return released, record
