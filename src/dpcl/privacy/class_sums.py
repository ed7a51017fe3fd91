"""The Gaussian class-sum release ([LabelSpace] Alg. 1, Eq. 9): for every label o of a task's released label
space O_t, Σ_{x ∈ D_{t,o}} f(x)/‖f(x)‖ + N(0, σ²I) — noise on every label of O_t, with data or not.

Summands have unit norm, so adding or removing one individual changes one sum by a vector of norm ≤ 1:
L2 sensitivity 1 for the whole release (:data:`SENSITIVITY`). Sums, not means: counts are never
released. A learner adds these sums to its class prototypes; the privacy audit audits this very
function.
"""

from __future__ import annotations

import numpy as np

from ..sorted_ints import isin, sorted_distinct
from . import releases

#: L2 sensitivity of one task's class sums of unit-norm features under add/remove
SENSITIVITY = 1.0


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm; all-zero rows stay zero (norm ≤ 1 either way)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def noisy_class_sums(
    features: np.ndarray, labels: np.ndarray, label_space, sigma: float, rng: np.random.Generator, *, dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """(O_t sorted, one released sum per label of O_t as float32 rows of width ``dim``).

    ``labels`` must lie in O_t (records outside it dropped by the caller); one N(0, σ²I) draw per label
    of O_t in sorted label order, drawn in float32 like opacus's noise, then the data sums (accumulated
    in float64) added."""
    o_t = sorted_distinct(label_space)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size and not isin(labels, o_t).all():
        raise ValueError("training labels outside the task's output label space: drop or remap them first")
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    if sigma > 0:
        task_sums = rng.standard_normal((len(o_t), dim), dtype=np.float32)
        task_sums *= np.float32(sigma)
    else:
        task_sums = np.zeros((len(o_t), dim), dtype=np.float32)
    if labels.size:  # Σ f(x)/‖f(x)‖ per present label, accumulated in float64
        present, inverse = np.unique(labels, return_inverse=True)
        data_sums = np.zeros((len(present), dim), dtype=np.float64)
        np.add.at(data_sums, inverse, normalize_rows(features))
        task_sums[np.searchsorted(o_t, present)] += data_sums.astype(np.float32)
    if releases.listening():  # an audit sees every release, and may replay it (dpcl.privacy.releases)
        task_sums = releases.publish(
            "class_sums",
            task_sums,
            rows=features,
            sensitivity=SENSITIVITY,  # one record adds one unit vector to one sum
            noise_scale=sigma,
            attribution=lambda rows, labels, value: class_sum_attribution(rows, labels, value, o_t, dim),
        )
    return o_t, task_sums


def class_sum_attribution(
    rows: np.ndarray, labels: np.ndarray, value: np.ndarray, o_t: np.ndarray, dim: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each record's contribution to the released sums (its unit feature vector in its label's row)
    projected on the flat release ``value`` (label-major), and its norm (1; 0 for a zero row or a label
    outside O_t, which the release would refuse)."""
    unit = normalize_rows(np.asarray(rows, dtype=np.float64))
    labels = np.asarray(labels, dtype=np.int64)
    at = np.searchsorted(o_t, labels)
    inside = (at < len(o_t)) & (o_t[np.minimum(at, len(o_t) - 1)] == labels)
    sums = np.asarray(value, dtype=np.float64).reshape(len(o_t), dim)
    dots = np.where(inside, np.einsum("ij,ij->i", unit, sums[np.minimum(at, len(o_t) - 1)]), 0.0)
    return dots, np.where(inside, np.linalg.norm(unit, axis=1), 0.0)
