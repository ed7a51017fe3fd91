"""Empirical privacy audits of whole learners: a canary individual, many trainings with and without it,
a threshold on a statistic of the released model, and a Clopper-Pearson lower bound on ε (the same
bound as :mod:`dpcl.audits.audit` uses for the mechanisms).

Each training in either world uses independent randomness (its own noise, batches and initialisation),
exactly as two independent runs of the learner would; the threshold is chosen on the first half of the
runs and the bound is computed on the second half, so it is a valid 1 − α lower bound on the ε of the
released model at the given δ. A learner whose lower bound exceeds its claimed ε does not satisfy its
claim; a lower bound below the claim is consistent with it (an audit can refute, never prove).

The registry names what is audited: a learner's :attr:`LearnerSpec.audit` (a :class:`LearnerAudit`) points
to its own audit function (in its module), which builds its canary world and calls :func:`canary_audit`.
Under add/remove adjacency (D' = D ∪ {canary}) so far: L2DP-ML as published (its claim is refuted),
the enhanced DP-A-GEM head (App. D.4) and FM-A-GEM (their claims hold); each audit's setting and
statistic are in its function's docstring and in the audit table's ``setting`` column.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..seeding import rng
from .audit import _best_threshold, epsilon_lower_bound


def canary_audit(
    score: Callable[[bool, np.random.Generator], float],
    trials: int,
    seed: int,
    key: tuple,
    delta: float,
    alpha: float = 0.05,
) -> dict:
    """Run ``score(with_canary, gen)`` ``trials`` times per world with independent generators; pick the
    threshold on the first half, bound ε on the second half. Returns counts, threshold and the bound."""
    if trials < 4:
        raise ValueError(f"trials must be >= 4, got {trials}")
    x_d = np.array([score(False, rng(seed, "audit", "learner", *key, "D", i)) for i in range(trials)])
    x_dp = np.array([score(True, rng(seed, "audit", "learner", *key, "D'", i)) for i in range(trials)])
    half = trials // 2
    t = _best_threshold(x_d[:half], x_dp[:half], delta, alpha)
    k_d, k_dp, n = int((x_d[half:] > t).sum()), int((x_dp[half:] > t).sum()), trials - half
    return {
        "trials": int(trials),
        "bound_trials": int(n),
        "alpha": float(alpha),
        "delta": float(delta),
        "threshold": float(t),
        "counts": [k_d, k_dp],
        "epsilon_lower_bound": epsilon_lower_bound(k_d, n, k_dp, n, delta, alpha),
    }


def trials_to_refute(epsilon: float, delta: float, alpha: float = 0.05) -> int:
    """Smallest number of bound runs per world whose perfect separation gives a lower bound ≥ ``epsilon``."""
    n = 4
    while epsilon_lower_bound(0, n, n, n, delta, alpha) < epsilon:
        n = int(n * 1.25) + 1
    return n


def learner_audit_table(epsilons: list[float], delta: float, trials: int, seed: int) -> list[dict]:
    """One row per (audited learner, finite ε): claimed ε against the empirical lower bound. Learners in
    the order of :func:`dpcl.learners.registry.audited` (methods audited as published first)."""
    from ..learners import registry

    audits = [(spec, registry.audit_function(spec.name)) for spec in registry.audited()]
    rows = []
    for eps in epsilons:
        if not math.isfinite(eps):
            continue
        for spec, audit in audits:
            rows.append(audit(eps, delta, trials, seed) | {"learner": spec.name})
    return rows
