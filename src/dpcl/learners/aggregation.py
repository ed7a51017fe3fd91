"""Ensemble aggregation rules for the PEFT ensemble (paper 000 Eq. 11, App. D.2).

Each member l has logits over its own output space O_l.

- ``argmax`` (Eq. 11): the label of the largest logit over all members and labels.
- ``median`` (Eq. A101): first subtract each member's median logit, so members with
  overconfident offsets do not win by scale alone.
- ``entropy`` (Zhao et al. 2024, "SAFE", Eq. 11, γ = 1 as in App. D.2): per test input,
  member l gets weight w_l = softmax_l(−γ H_l) with H_l the entropy of softmax(z_l) over
  O_l, and the ensemble scores label y by Σ_{l : y ∈ O_l} w_l z_{l,y}. SAFE combines two
  learners over one label space (a weighted sum of their logits); with members over
  different spaces a label scores only from the members that hold it (their logits
  zero-padded to the union), which reduces to SAFE's rule when all spaces coincide.
  Members with an empty output space take no part. (Formula read from SAFE's code:
  entropy −Σ p log(p + 1e-9), weights softmax(−γ·H) across learners.)

All rules are post-processing of the released members: evaluating several of them costs
no privacy.
"""

from __future__ import annotations

import numpy as np

RULES = ("argmax", "median", "entropy")


def _softmax(z: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def entropy(z: np.ndarray) -> np.ndarray:
    """Entropy (nats) of softmax(z) per row; the 1e-9 guard is SAFE's."""
    p = _softmax(z, axis=1)
    return -(p * np.log(p + 1e-9)).sum(axis=1)


def _entropy_aggregate(
    member_logits: list[np.ndarray], member_labels: list[np.ndarray], gamma: float
) -> np.ndarray:
    live = [(z, np.asarray(lab, dtype=np.int64)) for z, lab in zip(member_logits, member_labels, strict=True)
            if z.shape[1] > 0]  # fmt: skip
    n = member_logits[0].shape[0]
    if not live:
        return np.full(n, -1, dtype=np.int64)
    h = np.stack([entropy(z) for z, _ in live], axis=1)  # n × members
    w = _softmax(-gamma * h, axis=1)
    union = np.unique(np.concatenate([lab for _, lab in live]))
    score = np.zeros((n, union.size))
    for k, (z, lab) in enumerate(live):
        np.add.at(score, (slice(None), np.searchsorted(union, lab)), w[:, k : k + 1] * z)
    return union[score.argmax(axis=1)]


def aggregate(
    member_logits: list[np.ndarray], member_labels: list[np.ndarray], rule: str = "argmax", gamma: float = 1.0
) -> np.ndarray:
    """Predicted labels from per-member logits (n × |O_l|) and label ids (|O_l|); −1 if no member has outputs."""
    if rule not in RULES:
        raise ValueError(f"unknown aggregation rule {rule!r}; allowed: {list(RULES)}")
    if not member_logits:
        raise ValueError("no ensemble members")
    if rule == "entropy":
        return _entropy_aggregate(member_logits, member_labels, gamma)
    n = member_logits[0].shape[0]
    best = np.full(n, -np.inf)
    pred = np.full(n, -1, dtype=np.int64)
    for z, labels in zip(member_logits, member_labels, strict=True):
        if z.shape[1] == 0:
            continue
        if rule == "median":
            z = z - np.median(z, axis=1, keepdims=True)
        j = z.argmax(axis=1)
        s = z[np.arange(n), j]
        better = s > best
        best[better] = s[better]
        pred[better] = np.asarray(labels)[j[better]]
    return pred
