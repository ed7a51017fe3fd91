"""Uncertainty acquisition functions with their clip bounds ([Schwethelm2025], Sec. III-D, App. D).

Each score is computed from the current (released, DP) model and one unlabelled record only,
so the scores of different records are disjoint queries (parallel composition, Thm 6). Every
score lies in [0, clip]: the clip bound is the score's sensitivity for the Laplace mechanism
(App. D: least confidence 1 − 1/K by its range; margin 1; entropy clipped to 0.8 and MC-BALD to
0.5, the "clipping trick"). Higher score = more informative.
"""

from __future__ import annotations

import numpy as np

ACQUISITIONS = ("confidence", "margin", "entropy", "bald")
#: Clip bounds C_Sel of App. D (confidence: its natural range, 1 − 1/K, see :func:`clip_bound`).
CLIPS = {"margin": 1.0, "entropy": 0.8, "bald": 0.5}


def clip_bound(name: str, n_classes: int) -> float:
    """C_Sel of acquisition ``name``: the sensitivity of its clipped score (App. D)."""
    if name == "confidence":
        return 1.0 - 1.0 / n_classes
    if name in CLIPS:
        return CLIPS[name]
    raise ValueError(f"unknown acquisition function {name!r}; choose one of {ACQUISITIONS}")


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _entropy(p: np.ndarray) -> np.ndarray:
    """Normalised entropy −Σ p log p / log K ∈ [0, 1] (App. D, Eq. 15)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
    return h / np.log(p.shape[1])


def scores(
    name: str,
    w: np.ndarray,
    b: np.ndarray,
    x: np.ndarray,
    rng: np.random.Generator | None = None,
    *,
    mc_passes: int = 20,
    dropout: float = 0.3,
) -> np.ndarray:
    """Clipped acquisition scores of the records ``x`` under the linear head (w, b).

    - confidence (Eq. 13): 1 − max_c p(c|x) ∈ [0, 1 − 1/K];
    - margin (Eq. 14): 1 − (p̂₁ − p̂₂) ∈ [0, 1];
    - entropy (Eq. 15): min(H(x), 0.8);
    - bald (Eq. 16-17): min(H(mean_j p_j) − mean_j H(p_j), 0.5) over ``mc_passes`` forward
      passes with inverted dropout of rate ``dropout`` on the features (MC dropout on the
      frozen backbone's output, the head's input).
    """
    k = w.shape[0]
    if name == "bald":
        if rng is None:
            raise ValueError("bald needs a random generator for its dropout masks")
        keep = 1.0 - dropout
        probs = []
        for _ in range(mc_passes):
            mask = rng.random(x.shape) < keep
            probs.append(_softmax((x * mask / keep) @ w.T + b))
        mean = np.mean(probs, axis=0)
        mi = _entropy(mean) - np.mean([_entropy(p) for p in probs], axis=0)
        return np.clip(mi, 0.0, clip_bound(name, k))
    p = _softmax(x @ w.T + b)
    if name == "confidence":
        s = 1.0 - p.max(axis=1)
    elif name == "margin":
        top2 = np.sort(p, axis=1)[:, -2:]
        s = 1.0 - (top2[:, 1] - top2[:, 0])
    elif name == "entropy":
        s = _entropy(p)
    else:
        raise ValueError(f"unknown acquisition function {name!r}; choose one of {ACQUISITIONS}")
    return np.clip(s, 0.0, clip_bound(name, k))
