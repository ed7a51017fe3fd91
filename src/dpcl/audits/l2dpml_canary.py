"""Canary audit of L2DP-ML as published (Alg. 2) under add/remove of one canary, and the audit a run of
the learner asks its job for (:meth:`dpcl.stages.projected.ProjectedJob.claim_audit`) to judge
Theorem 2's claim: the canary world is public, so the audit reads no private data."""

from __future__ import annotations

import numpy as np

from ..learners.l2dpml import (
    LEARNER,
    RUN_AUDIT_MAX_TRIALS,
    RUN_AUDIT_SEED,
    RUN_AUDIT_TRIALS,
    L2DPMLConfig,
    claimed_epsilon,
    run_l2dpml,
)
from ..seeding import rng
from .learners import canary_audit, trials_to_refute

#: the audit table's trainings per world are enough for a perfect separation of the worlds to bound ε at
#: the claim plus this margin: one training of D on the canary's side of the threshold still leaves the
#: bound above the claim
TABLE_MARGIN = 0.5


def claim_audit(epsilon: float, delta: float, cfg, cache: dict | None = None) -> dict | None:
    """The add/remove audit of this configuration's claim (:func:`audit_canary`:
    canary world, no private data), or None where a refutation would need more than
    ``RUN_AUDIT_MAX_TRIALS`` trainings per world. Cached per (ε, δ, config) in ``cache``."""
    key = ("l2dpml_audit", float(epsilon), float(delta), repr(cfg))
    if cache is not None and key in cache:
        return cache[key]
    claim = claimed_epsilon(epsilon, cfg, None)
    out = None
    if 2 * trials_to_refute(claim + 1.0, delta) <= RUN_AUDIT_MAX_TRIALS:
        out = audit_canary(epsilon, delta, RUN_AUDIT_TRIALS, RUN_AUDIT_SEED, cfg)
    if cache is not None:
        cache[key] = out
    return out


def audit_canary(
    epsilon: float, delta: float, trials: int, seed: int, cfg: L2DPMLConfig | None = None
) -> dict:
    """Audit L2DP-ML as published at training budget ``epsilon`` (add/remove): D = ∅, D' = {canary}.
    Alg. 2 runs ⌈|D_t|/λ⌉ × epochs SGD steps, so the canary adds whole steps whose shared Laplace noise
    moves θ₁ far from its initialisation; the statistic is ‖θ₁‖_F of the released model
    (:func:`dpcl.audits.learners.canary_audit`)."""
    cfg = cfg or L2DPMLConfig()
    canary = np.full((1, cfg.input_dim), 0.9)  # an input in [0, 1]^d
    spaces = [[0, 1]]

    def score(with_canary: bool, gen: np.random.Generator) -> float:
        x = canary if with_canary else np.zeros((0, cfg.input_dim))
        y = np.zeros(len(x), dtype=np.int64)
        s = gen.integers(2**63 - 1)
        *_, model = run_l2dpml(
            [(x, y)], [], spaces, 2, cfg, epsilon, rng_for=lambda t, part: rng(int(s), t, part)
        )
        return float(np.linalg.norm(model.theta1))

    claim = claimed_epsilon(epsilon, cfg, None)
    # the canary separates the worlds perfectly, so the bound is limited by the number of runs: take
    # enough that a perfect separation could refute the claim by TABLE_MARGIN (capped)
    trials = max(trials, min(2 * trials_to_refute(claim + TABLE_MARGIN, delta), 200_000))
    res = canary_audit(score, trials, seed, (LEARNER, float(epsilon)), delta)
    res.update(
        learner=LEARNER,
        epsilon=float(epsilon),
        claimed_epsilon=claim,
        attack="D = {} vs D' = {canary}: the canary adds Alg. 2 steps; statistic ||theta_1||_F",
        adjacency="add/remove one individual (the canary)",
        claim_note="claimed epsilon: Theorem 2 without its gamma term, which grows with the trained "
        "theta_1 and so is no a-priori budget",
    )
    return res
