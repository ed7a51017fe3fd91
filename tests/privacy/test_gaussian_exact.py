"""The analytic Gaussian σ holds in exact arithmetic (50-digit evaluation), not only in floats."""

import mpmath
import numpy as np
import pytest

from dpcl.privacy.gaussian import SIGMA_MARGIN, gaussian_sigma


def exact_delta(sigma: float, epsilon: float, sensitivity: float = 1.0) -> mpmath.mpf:
    """Balle & Wang's δ(σ) with 50 significant digits: Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ)."""
    with mpmath.workdps(50):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        a, b = d / (2 * s), e * s / d
        return mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b)


GRID = [(eps, delta) for eps in np.geomspace(0.01, 20, 15) for delta in (1e-3, 1e-5, 1e-6, 1e-9)]


@pytest.mark.parametrize(("epsilon", "delta"), GRID)
def test_sigma_never_undershoots_in_exact_arithmetic(epsilon, delta):
    sigma = gaussian_sigma(float(epsilon), delta)
    with mpmath.workdps(50):
        assert exact_delta(sigma, float(epsilon)) <= mpmath.mpf(delta)
        # and the margin costs almost nothing: without it δ would sit at the target to ~1e-9 relative
        tight = sigma / (1 + SIGMA_MARGIN) * (1 - 1e-6)
        assert exact_delta(tight, float(epsilon)) > mpmath.mpf(delta)


def test_design_reference_values():
    assert gaussian_sigma(1.0, 1e-5) == pytest.approx(3.7306, abs=1e-4)
    assert gaussian_sigma(8.0, 1e-5) == pytest.approx(0.6002, abs=1e-4)
