"""Selecting records to label: the paper's top-k and a per-record selection sound under add/remove.

[Schwethelm2025], Sec. III-D and Alg. 3 l. 28-30: scores clipped to [0, C_Sel] plus Laplace noise of
scale C_Sel/ε_phase, ε_phase = ε_Sel/T (the authors' code; Alg. 3 prints T·C_Sel/(i·ε_Sel)),
then the top k. Each record's noisy score is ε_phase-DP (Laplace mechanism, parallel
composition over records), but **fixed-size** selection couples records: adding a record x
whose noisy score enters the top k pushes the k-th record y out, so the labelled (training)
sets of neighbouring pools differ by a swap, which add/remove accounting does not cover; the
same holds for a fixed-size random initial set. The paper has no end-to-end theorem for this.

The sound alternative selects **each record independently**: record u is selected iff its
noisy score exceeds a threshold τ that does not depend on the private pool, and the initial
set is Poisson-sampled at a public rate. Then adding x changes no other record's selection,
and the training sets of neighbouring pools differ by x at most. τ is calibrated on a public
"shadow pool" (held-out public records run through the same selections with the same model
and fresh noise), so that the expected query size is the planned k; the realised size varies.
"""

from __future__ import annotations

import math

import numpy as np

from ..privacy import releases


def laplace_scale(clip: float, selection_epsilon: float, phases: int) -> float:
    """Scale of the per-phase Laplace noise: C_Sel / (ε_Sel / T). ε_Sel = 0 is refused here:
    a selection that spends nothing must not read scores at all (use a random selection)."""
    if not (selection_epsilon > 0 and math.isfinite(selection_epsilon)):
        raise ValueError(f"a DP selection needs 0 < selection_epsilon < inf, got {selection_epsilon}")
    return clip * phases / selection_epsilon


def noisy(
    scores: np.ndarray,
    scale: float,
    rng: np.random.Generator,
    *,
    rows: np.ndarray,
    sensitivity: float,
    take: np.ndarray | None = None,
) -> np.ndarray:
    """scores + Lap(scale) i.i.d. (scale 0: the non-private scores themselves): the selection's release,
    reported to an audit that listens (:mod:`dpcl.privacy.releases`, which may replay it). ``rows[take]``
    are the records the scores were computed from, one each (``take`` None: all of ``rows``), gathered only
    when an audit listens; ``sensitivity`` is the scores' clip bound C_Sel."""
    out = scores + rng.laplace(0.0, scale, size=scores.shape) if scale > 0 else scores.astype(float)
    if releases.listening():
        read = rows if take is None else rows[take]
        if len(read) != len(scores):
            raise ValueError(f"a selection needs one row per score, got {len(read)} rows for {len(scores)}")
        out = releases.publish(
            "laplace_scores",
            out,
            rows=read,
            sensitivity=sensitivity,
            noise_scale=scale,
            noise="laplace",
            layout="per_record",  # one noisy score per record scored
        )
    return out


def top_k(values: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of the k largest values, ties broken at random (Eq. 3); all if k ≥ len."""
    if k >= len(values):
        return np.arange(len(values))
    order = np.lexsort((rng.random(len(values)), -values))
    return np.sort(order[:k])


def above(values: np.ndarray, threshold: float) -> np.ndarray:
    """Indices of the values strictly above a (data-independent) threshold."""
    return np.flatnonzero(values > threshold)


def calibrate_threshold(public_values: np.ndarray, fraction: float) -> float:
    """τ with a share ``fraction`` of the public shadow pool's noisy scores above it."""
    if len(public_values) == 0:
        raise ValueError("the public shadow pool is empty: it cannot calibrate a selection threshold")
    fraction = min(max(fraction, 0.0), 1.0)
    if fraction <= 0:
        return math.inf
    if fraction >= 1:
        return -math.inf
    return float(np.quantile(public_values, 1.0 - fraction, method="higher"))


def random_fixed(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """k of n uniformly without replacement (the paper's random selection and initial set)."""
    return np.sort(rng.choice(n, size=min(k, n), replace=False))


def random_poisson(n: int, rate: float, rng: np.random.Generator) -> np.ndarray:
    """Each of n independently with probability ``rate`` (public): sound under add/remove."""
    return np.flatnonzero(rng.random(n) < min(max(rate, 0.0), 1.0))
