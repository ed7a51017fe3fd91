"""Equality checks shared by the benchmarks that assert their fast path gives the reference's result."""

from __future__ import annotations

import numpy as np


def same_pld(a, b) -> bool:
    """Whether two dp_accounting PLDs are equal bit for bit: both directions' lowest loss, infinity mass
    and probabilities (compared as integers, so -0.0 and NaN payloads count)."""
    for side in ("_pmf_remove", "_pmf_add"):
        x, y = getattr(a, side).to_dense_pmf(), getattr(b, side).to_dense_pmf()
        if (x._lower_loss, x._infinity_mass, x._probs.shape) != (
            y._lower_loss,
            y._infinity_mass,
            y._probs.shape,
        ):
            return False
        if not np.array_equal(x._probs.view(np.int64), y._probs.view(np.int64)):
            return False
    return True
