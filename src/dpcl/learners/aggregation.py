"""Ensemble aggregation rules for the PEFT ensemble (paper 000 Eq. 11, App. D.2).

Each member l has logits over its own output space O_l. ``argmax`` (Eq. 11) takes the
label of the largest logit over all members and labels; ``median`` (Eq. A101) first
subtracts each member's median logit, so members with overconfident offsets do not win
by scale alone.
"""

from __future__ import annotations

import numpy as np

RULES = ("argmax", "median")


def aggregate(
    member_logits: list[np.ndarray], member_labels: list[np.ndarray], rule: str = "argmax"
) -> np.ndarray:
    """Predicted labels from per-member logits (n × |O_l|) and label ids (|O_l|); −1 if no member has outputs."""
    if rule not in RULES:
        raise ValueError(f"unknown aggregation rule {rule!r}; allowed: {list(RULES)}")
    if not member_logits:
        raise ValueError("no ensemble members")
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
