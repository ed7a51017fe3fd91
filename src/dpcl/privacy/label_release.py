"""DP release of the output label space (paper 000 Sec. 4.2, Eq. 7).

k-truncated symmetric geometric distribution (k-TSGD) thresholding of Desfontaines
et al. (2022, Thm 6): with p = 1 − e^{−ε} and
    k = ⌈(1/ε) ln((e^ε + 2δ − 1) / ((e^ε + 1) δ))⌉,
Pr[Z = z] ∝ e^{−ε|z|} on {−k, …, k}, and label y is released iff |C_t(y)| + Z_y > k.
Only labels present in the data are candidates; each individual is in one class, so
the per-class counts have L1 sensitivity 1 per label and the release is (ε, δ)-DP.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np


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
    case over neighbouring datasets (Desfontaines et al. 2022, Thm 6).
    """
    ee = math.expm1(epsilon)
    return ee / ((ee + 2.0) * math.exp(k * epsilon) - 2.0)


def tsgd_pmf(epsilon: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Support {−k, …, k} and probabilities ∝ e^{−ε|z|} (exact, normalised in float64)."""
    z = np.arange(-k, k + 1)
    logw = -epsilon * np.abs(z)
    w = np.exp(logw - logw.max())
    return z, w / w.sum()


def keep_probability(class_size: int | np.ndarray, epsilon: float, delta: float) -> np.ndarray | float:
    """Exact Pr[n + Z > k] that a class of size n is released (0 for n = 0, 1 for n > 2k)."""
    if math.isinf(epsilon):
        return (
            np.where(np.asarray(class_size) > 0, 1.0, 0.0) if np.ndim(class_size) else float(class_size > 0)
        )
    k = tsgd_threshold(epsilon, delta)
    z, p = tsgd_pmf(epsilon, k)
    # survival[i] = Pr[Z >= z[i]]
    surv = np.cumsum(p[::-1])[::-1]
    n = np.asarray(class_size)
    thresh = k - n + 1  # need Z >= k - n + 1
    idx = np.clip(thresh + k, 0, 2 * k + 1)
    surv_ext = np.concatenate([surv, [0.0]])
    out = np.where(n > 0, np.minimum(surv_ext[idx], 1.0), 0.0)
    out = np.where(thresh <= -k, np.where(n > 0, 1.0, 0.0), out)
    return float(out) if np.ndim(class_size) == 0 else out


def sample_tsgd(epsilon: float, k: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` i.i.d. draws of k-TSGD(p = 1 − e^{−ε}) by inverse-CDF sampling."""
    z, p = tsgd_pmf(epsilon, k)
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    u = rng.random(size)
    return z[np.searchsorted(cdf, u, side="right")]


def release_labels(
    counts: Mapping[int, int],
    n_label_universe: int,
    epsilon: float,
    delta: float,
    rng: np.random.Generator,
) -> tuple[list[int], dict]:
    """Release O_t = {y : |C_t(y)| + Z_y > k} over the labels present in the data (Eq. 7).

    One noise draw is made per label of the whole universe ``0..n_label_universe-1`` in a
    fixed order, so label y's noise does not depend on which other labels are present.
    ``epsilon = inf`` is the non-private limit: every present label is released.
    Returns the sorted released labels and the mechanism's record for the ledger.
    """
    for y, c in counts.items():
        if not 0 <= int(y) < n_label_universe:
            raise ValueError(f"label {y} outside the label universe 0..{n_label_universe - 1}")
        if int(c) < 0:
            raise ValueError(f"negative count {c} for label {y}")
    if math.isinf(epsilon):
        released = sorted(int(y) for y, c in counts.items() if c > 0)
        return released, {"mechanism": "label_oracle_nonprivate", "epsilon": math.inf, "delta": 0.0}
    k = tsgd_threshold(epsilon, delta)
    noise = sample_tsgd(epsilon, k, n_label_universe, rng)
    released = sorted(int(y) for y, c in counts.items() if c > 0 and c + noise[int(y)] > k)
    record = {
        "mechanism": "ktsgd_label_release",
        "epsilon": float(epsilon),
        "delta": float(delta),
        "k": k,
        "p": -math.expm1(-epsilon),
        "delta_achieved": tsgd_delta(k, epsilon),
        "sensitivity": "each individual contributes to one class count (add/remove)",
    }
    return released, record
