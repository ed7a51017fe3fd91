"""White-box audit of the DP cosine classifier's per-task release: the released class sums under
add/remove of one canary per class, tested against the claimed (ε, δ) of :func:`cosine_sigma`."""

from __future__ import annotations

import numpy as np

from ..learners.cosine import SENSITIVITY, CosineClassifier, cosine_sigma
from ..seeding import rng
from .whitebox import bound_coin_trials

#: the white-box audit's canary feature: far from unit norm, so that it shows if the summands are not
#: normalised (a correct implementation adds it as the unit vector e_0)
AUDIT_CANARY_SCALE = 10.0


def audit_prototypes(
    epsilon: float, delta: float, *, audit: dict, seed: int, alpha: float = 0.05
) -> list[dict]:
    """White-box audit of the per-task release (:meth:`CosineClassifier.update`, the function every run
    calls) at claimed (ε, δ), σ from :func:`cosine_sigma`: the adversary sees the released class sums.
    Every class holds one record with feature e_1; canary k adds a record with feature 10·e_0 to class k,
    included by a fair coin, so each class's sum is an independent trial (its own noise). The statistic
    is the released sum's coordinate 0: N(0, σ²) without the canary and N(1, σ²) with it. Claimed μ: 1/σ
    (sensitivity 1). ``audit["whitebox_runs"]`` releases of ``audit["whitebox_canaries"]`` classes."""
    runs, classes = int(audit["whitebox_runs"]), int(audit["whitebox_canaries"])
    if runs < 1 or classes < 2:
        raise ValueError(f"the audit needs runs >= 1 and canaries >= 2, got {runs} and {classes}")
    sigma = cosine_sigma(epsilon, delta)
    labels = np.arange(classes)
    z_in, z_out = [], []
    for r in range(runs):
        key = (seed, "audit", "whitebox", "prototypes", float(epsilon), r)
        coins = rng(*key, "coins").random(classes) < 0.5
        chosen = np.flatnonzero(coins)
        x = np.zeros((classes + len(chosen), 2))
        x[:classes, 1] = 1.0
        x[classes:, 0] = AUDIT_CANARY_SCALE
        clf = CosineClassifier(classes, 2)
        clf.update(x, np.concatenate([labels, chosen]), labels, sigma, rng(*key, "noise"))
        stat = clf.sums[:, 0].astype(np.float64)
        z_in.extend(stat[coins].tolist())
        z_out.extend(stat[~coins].tolist())
    row = bound_coin_trials(z_out, z_in, runs=runs, per_run=classes, delta=delta, alpha=alpha)
    return [
        row
        | {
            "part": "class sums",
            "claimed_epsilon": float(epsilon),
            "claimed_mu": SENSITIVITY / sigma,
            "delta": float(delta),
            "alpha": float(alpha),
            "setting": f"the released class sums, sigma = {sigma:.4g} (sensitivity 1); a canary of norm "
            f"{AUDIT_CANARY_SCALE:g} in each of {classes} classes by a fair coin x {runs} releases",
            "threat_model": "white-box: the released class sums of the task; add/remove one canary",
        }
    ]
