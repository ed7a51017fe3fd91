"""The f-DP route of an audit ([Dong2022]; [Nasr2023], tight auditing): a rigorous lower
bound on the Gaussian-DP parameter μ of a mechanism, from one threshold test's error rates.

A mechanism is μ-GDP when every test between D and D' has type II error β ≥ Φ(Φ⁻¹(1 − α) − μ) at type I
error α. A threshold test run on n trials per world gives Clopper-Pearson upper bounds ᾱ and β̄ (α/2
each, so both hold together with confidence 1 − α), and then

    μ ≥ Φ⁻¹(1 − ᾱ) − Φ⁻¹(β̄)

holds for every μ-GDP mechanism whatever it is: a bound above the claimed μ refutes the claim.

Why this beside the (ε, δ) bound of :mod:`dpcl.audits.audit`: in the audit setting of the white-box
audits (sampling rate 1) a DP-SGD run of k steps with noise multiplier σ is exactly (√k/σ)-GDP, so the
accountant's claim is a claimed μ. An (ε, δ) bound at δ = 1e-5 rests on events of probability near δ and
needs millions of trials to approach the claim; the μ bound rests on error rates near one half, where
a hundred thousand trials pin μ down to a few hundredths. So the μ route tells a correct implementation
from one that spends √2× its noise budget (one reread too many), which the (ε, δ) route cannot at
ε = 1 with the trials an audit can afford.

The claim tested is the ledger's (ε, δ) itself, not the noise the code happened to use: a claim of
(ε, δ)-DP for a mechanism that is Gaussian in the audit setting allows at most the μ of
:func:`claim_mu`, the largest μ whose curve stays within (ε, δ) ([Dong2022], Cor. 2.13). A μ bound above
it refutes the claim whatever σ the code computed; an audit that compared with √reads/σ would pass a
calibration that returned too little noise, since the ledger would state the same wrong σ.

The ε it is reported with (:func:`gdp_epsilon`) is the ε at δ of the μ-GDP curve at the bound; it is a
lower bound on the mechanism's ε at δ only for mechanisms whose trade-off curve is Gaussian (as the
accountant's is in this setting); the rigorous statement is the one on μ.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from .audit import clopper_pearson


def mu_lower_bound(k_d: int, n_d: int, k_dp: int, n_dp: int, alpha: float = 0.05) -> float:
    """Lower bound on μ at confidence 1 − α from a threshold test that rejects D when the statistic
    exceeds the threshold: ``k_d`` of ``n_d`` trials of D exceed it (type I errors) and ``k_dp`` of
    ``n_dp`` trials of D' do (the complement are type II errors). Clipped at 0."""
    for k, n in ((k_d, n_d), (k_dp, n_dp)):
        if not (0 <= k <= n and n >= 1):
            raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    _, fpr = clopper_pearson(k_d, n_d, alpha / 2, two_sided=False)
    _, fnr = clopper_pearson(n_dp - k_dp, n_dp, alpha / 2, two_sided=False)
    if fpr >= 1.0 or fnr >= 1.0:
        return 0.0
    return max(0.0, float(ndtri(1.0 - fpr) - ndtri(fnr)))


def gdp_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of the μ-GDP trade-off curve: Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) ([Dong2022], Cor. 2.13)."""
    if mu <= 0:
        return 0.0
    return float(ndtr(-epsilon / mu + mu / 2) - math.exp(epsilon) * ndtr(-epsilon / mu - mu / 2))


def claim_mu(epsilon: float, delta: float) -> float:
    """The largest μ whose μ-GDP curve satisfies (ε, δ)-DP: what a claim of (ε, δ)-DP allows a mechanism
    that is Gaussian in the audit setting. Solved here from the GDP curve alone (not with the library's
    noise calibration, which is among the things an audit tests)."""
    if not (epsilon > 0 and math.isfinite(epsilon)) or not 0 < delta < 1:
        raise ValueError(f"need a finite epsilon > 0 and delta in (0, 1), got {epsilon!r} and {delta!r}")
    hi = 1.0
    while gdp_delta(hi, epsilon) < delta:  # δ(ε) grows with μ, from 0 towards 1
        hi *= 2.0
    return float(brentq(lambda m: gdp_delta(m, epsilon) - delta, 0.0, hi, xtol=1e-12, rtol=1e-12))


def gdp_epsilon(mu: float, delta: float) -> float:
    """The ε at δ of the μ-GDP trade-off curve (that of the Gaussian mechanism with noise 1/μ)."""
    from .audit import gaussian_epsilon

    if not (mu >= 0 and math.isfinite(mu)):
        raise ValueError(f"mu must be finite and >= 0, got {mu!r}")
    return 0.0 if mu == 0 else gaussian_epsilon(1.0 / mu, delta)


def gdp_bound(z_out: np.ndarray, z_in: np.ndarray, calibrate: int, alpha: float = 0.05) -> dict:
    """The μ bound of a statistic observed ``z_out`` (without the canary) and ``z_in`` (with it): the
    threshold is the midpoint of the two worlds' means on the first ``calibrate`` trials of each (where
    both error rates sit near one half, the bound's most precise region), the bound is computed on the
    rest, which the threshold never saw."""
    z_out, z_in = np.asarray(z_out, dtype=float), np.asarray(z_in, dtype=float)
    if not (1 <= calibrate < min(len(z_out), len(z_in))):
        raise ValueError(f"calibrate must lie in [1, {min(len(z_out), len(z_in))}), got {calibrate}")
    if not (np.isfinite(z_out).all() and np.isfinite(z_in).all()):
        raise ValueError("the audit statistic must be finite")
    m_out, m_in = float(z_out[:calibrate].mean()), float(z_in[:calibrate].mean())
    sign = 1.0 if m_in >= m_out else -1.0  # the side the canary moves the statistic to, from calibration
    t = 0.5 * sign * (m_out + m_in)
    rest_out, rest_in = sign * z_out[calibrate:], sign * z_in[calibrate:]
    k_d, k_dp = int((rest_out > t).sum()), int((rest_in > t).sum())
    return {
        "gdp_threshold": t,
        "gdp_direction": sign,
        "gdp_counts": [k_d, k_dp],
        "mu_lower_bound": mu_lower_bound(k_d, len(rest_out), k_dp, len(rest_in), alpha),
    }
