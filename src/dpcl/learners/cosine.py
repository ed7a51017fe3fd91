"""DP cosine classifier (paper 000 Sec. 5.1, Alg. 1, Eq. 9-10).

At task t, for **every** o ∈ O_t (with data in D_t or not):
    s_o ← s_o + Σ_{x ∈ D_{t,o}} f(x)/‖f(x)‖ + N(0, σ²I).
Summands have unit norm, so adding or removing one individual changes exactly one sum
by a vector of norm ≤ 1: L2 sensitivity Δ = 1 for the whole per-task release, and σ is
the analytic-Gaussian σ(ε, δ, Δ = 1). Sums, not means: class counts are never released.
Prediction: argmax over ∪_{k≤t} O_k of cos(f(x*), s_o).
"""

from __future__ import annotations

import numpy as np

from ..privacy.gaussian import gaussian_sigma

SENSITIVITY = 1.0


def normalize_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm; all-zero rows stay zero (norm ≤ 1 either way)."""
    x = np.asarray(x, dtype=np.float64)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def cosine_sigma(epsilon: float, delta: float) -> float:
    """Noise σ of the per-task class sums for a training budget (ε, δ); 0 if non-private."""
    if np.isinf(epsilon):
        return 0.0
    return gaussian_sigma(epsilon, delta, SENSITIVITY)


class CosineClassifier:
    """Cumulative noisy class-feature sums over a fixed label universe ``0..n_labels-1``."""

    def __init__(self, n_labels: int, dim: int) -> None:
        # float32 storage: sums of unit vectors and noise need no more precision, and the
        # ×1000 public label spaces (10^4-10^5 labels) stay small and fast to score.
        self.sums = np.zeros((n_labels, dim), dtype=np.float32)
        self.seen = np.zeros(n_labels, dtype=bool)  # ∪_k O_k so far

    def update(
        self,
        features: np.ndarray,
        labels: np.ndarray,
        label_space: list[int] | np.ndarray,
        sigma: float,
        rng: np.random.Generator,
    ) -> dict:
        """Add one task's noisy class sums (Eq. 9). Every label in O_t gets noise.

        ``labels`` must already be remapped into O_t (samples outside O_t dropped by the
        caller); a label outside O_t is a bug and raises.
        """
        o_t = np.asarray(sorted(set(int(o) for o in label_space)), dtype=np.int64)
        labels = np.asarray(labels, dtype=np.int64)
        if o_t.size and (o_t[0] < 0 or o_t[-1] >= len(self.sums)):
            raise ValueError(f"label space exceeds the classifier's universe of {len(self.sums)} labels")
        if labels.size and not np.isin(labels, o_t).all():
            raise ValueError(
                "training labels outside the task's output label space: drop or remap them first"
            )
        if sigma < 0:
            raise ValueError(f"sigma must be >= 0, got {sigma}")
        # One N(0, σ²I) draw per label of O_t (rows in sorted label order), then the data sums.
        # Noise is drawn in float32, like opacus's.
        if sigma > 0:
            task_sums = rng.standard_normal((len(o_t), self.sums.shape[1]), dtype=np.float32)
            task_sums *= np.float32(sigma)
        else:
            task_sums = np.zeros((len(o_t), self.sums.shape[1]), dtype=np.float32)
        if labels.size:  # Σ f(x)/‖f(x)‖ per present label, accumulated in float64
            present, inverse = np.unique(labels, return_inverse=True)
            data_sums = np.zeros((len(present), self.sums.shape[1]), dtype=np.float64)
            np.add.at(data_sums, inverse, normalize_rows(features))
            task_sums[np.searchsorted(o_t, present)] += data_sums.astype(np.float32)
        if o_t.size and o_t[-1] - o_t[0] + 1 == len(o_t):  # contiguous ids: update a slice in place
            self.sums[o_t[0] : o_t[-1] + 1] += task_sums
        else:
            self.sums[o_t] += task_sums
        self.seen[o_t] = True
        return {
            "mechanism": "gaussian" if sigma > 0 else "nonprivate",
            "sigma": float(sigma),
            "sensitivity": SENSITIVITY,
            "noised_labels": int(len(o_t)),
            "dimension": int(self.sums.shape[1]),
            "note": "noisy class-feature sums, unit-norm summands (paper 000 Alg. 1, Eq. 9)",
        }

    def predict(self, features: np.ndarray, max_block_bytes: int = 64 << 20) -> np.ndarray:
        """Argmax cosine similarity over the seen labels (Eq. 10), in memory-bounded blocks.

        Scores are computed block by block with a running top-1, so no full
        (samples × labels) matrix is ever held. Prototypes with zero norm carry no
        information and score −inf. Ties go to the smaller label id. With no usable
        label (e.g. label release dropped every class) the prediction is −1: always wrong.
        """
        labels = np.flatnonzero(self.seen)
        protos = self.sums if labels.size == len(self.sums) else self.sums[labels]
        norms = np.sqrt(np.einsum("ij,ij->i", protos, protos))
        valid = norms > 0
        if not valid.all():
            labels, protos, norms = labels[valid], protos[valid], norms[valid]
        protos = protos / norms[:, None]
        x = normalize_rows(features).astype(np.float32)
        n = len(x)
        best = np.full(n, -np.inf, dtype=np.float32)
        arg = np.full(n, -1, dtype=np.int64)
        if labels.size == 0:
            return arg
        rows = max(1, min(n, max_block_bytes // (4 * min(len(labels), 8192))))
        cols = max(1, max_block_bytes // (4 * rows))
        for r0 in range(0, n, rows):
            xr = x[r0 : r0 + rows]
            for c0 in range(0, len(labels), cols):
                scores = xr @ protos[c0 : c0 + cols].T
                j = scores.argmax(axis=1)
                s = scores[np.arange(len(xr)), j]
                better = s > best[r0 : r0 + rows]
                best[r0 : r0 + rows][better] = s[better]
                arg[r0 : r0 + rows][better] = labels[c0 + j[better]]
        return arg
