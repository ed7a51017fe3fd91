"""Audits of FM-A-GEM (the sound variant): the canary audit of its per-task coefficient release and
training, and the white-box audit of the release itself (:func:`dpcl.learners.fm_agem.release_coefficients`)
against the claimed (ε, δ) of :func:`dpcl.learners.fm_agem.fm_sigma`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..learners.fm_agem import LEARNER, SENSITIVITY, FMConfig, FMHead, fm_sigma, release_coefficients
from ..seeding import rng
from .learners import canary_audit
from .whitebox import bound_coin_trials


def audit_canary(
    epsilon: float, delta: float, trials: int, seed: int, dim: int = 8, n_base: int = 12
) -> dict:
    """Audit FM-A-GEM's per-task coefficient release and training at budget ``epsilon``: one task, D = a
    few fixed projected records, the canary an axis-aligned record (it attains the mechanism's
    sensitivity); the statistic is the released head's margin for the canary's label on the canary
    (:func:`dpcl.audits.learners.canary_audit`). Its claimed ε is the task budget."""
    cfg = FMConfig(dim=dim)
    sigma = fm_sigma(epsilon, delta)
    base_gen = np.random.default_rng(54321)  # the fixed base data D
    zb = base_gen.normal(0, 0.3, (n_base, dim))
    zb /= np.maximum(1.0, np.linalg.norm(zb, axis=1, keepdims=True))
    yb = base_gen.integers(0, 3, n_base)
    canary = np.zeros(dim)
    canary[0] = 1.0  # ‖z‖ = 1 on an axis: the release's worst case

    def score(with_canary: bool, gen: np.random.Generator) -> float:
        z, y = (np.vstack([zb, canary]), np.append(yb, 0)) if with_canary else (zb, yb)
        head = FMHead(3, dim)
        head.learn_task(z, y, [0, 1, 2], sigma, gen, cfg)
        s = head.w @ canary
        return float(s[0] - s[1:].max())

    res = canary_audit(score, trials, seed, (LEARNER, float(epsilon)), delta)
    res.update(
        learner=LEARNER,
        epsilon=float(epsilon),
        claimed_epsilon=float(epsilon),
        attack="axis-aligned canary (the release's worst case); statistic: the released head's margin "
        "for its label",
    )
    return res


#: the white-box audit's outputs (‖e_y − 1/K‖ → 1, so a canary's contribution to the released vector
#: approaches the mechanism's sensitivity √2 as K grows: √(1 + (K − 1)/K))
AUDIT_OUTPUTS = 50


#: canaries per release: the release's noise grows with the square of its dimension, so many releases of
#: a few hundred canaries cost less per trial than one large one
AUDIT_CANARIES = 500


#: releases of the white-box audit per unit of the config's ``audit.whitebox_runs``
AUDIT_RELEASES_PER_RUN = 4


def audit_release(
    epsilon: float,
    delta: float,
    *,
    audit: dict,
    seed: int,
    release: Callable | None = None,
    alpha: float = 0.05,
) -> list[dict]:
    """White-box audit of the per-task release (:func:`release_coefficients`, the function
    :meth:`FMHead.learn_task` calls) at claimed (ε, δ), σ from :func:`fm_sigma`: the adversary sees the
    released coefficients (Ã_t, b̃_t). Canary j is the unit vector e_j (‖z‖ = 1, the norm bound the
    sensitivity rests on) with label j mod K, included by a fair coin; it adds 1 to Ã_t[j, j] and
    e_y − 1/K to b̃_t's column j and nothing else, so every canary is an independent trial. The
    statistic projects those entries on the canary's contribution. ``audit`` is the config's audit block
    (``whitebox_runs`` × :data:`AUDIT_RELEASES_PER_RUN` releases of :data:`AUDIT_CANARIES` canaries);
    ``release`` is the function under audit (tests pass broken variants). Claimed μ: √2/σ, the
    sensitivity over the noise."""
    release = release_coefficients if release is None else release
    runs = int(audit["whitebox_runs"]) * AUDIT_RELEASES_PER_RUN
    canaries = AUDIT_CANARIES
    if runs < 1:
        raise ValueError(f"the audit needs at least one release, got {runs}")
    sigma = fm_sigma(epsilon, delta)
    labels = np.arange(canaries) % AUDIT_OUTPUTS
    contrib_b = np.eye(AUDIT_OUTPUTS) - 1.0 / AUDIT_OUTPUTS  # column y: e_y − 1/K
    norm2 = 1.0 + float(contrib_b[:, 0] @ contrib_b[:, 0])
    z_in, z_out = [], []
    for r in range(runs):
        coins = rng(seed, "audit", "whitebox", LEARNER, float(epsilon), r, "coins").random(canaries) < 0.5
        chosen = np.flatnonzero(coins)
        z = np.zeros((len(chosen), canaries))
        z[np.arange(len(chosen)), chosen] = 1.0
        a, b = release(
            z,
            labels[chosen],
            AUDIT_OUTPUTS,
            sigma,
            rng(seed, "audit", "whitebox", LEARNER, float(epsilon), r),
        )
        stat = (np.diag(a) + np.einsum("kj,kj->j", b, contrib_b[:, labels])) / norm2
        z_in.extend(stat[coins].tolist())
        z_out.extend(stat[~coins].tolist())
    row = bound_coin_trials(z_out, z_in, runs=runs, per_run=canaries, delta=delta, alpha=alpha)
    return [
        row
        | {
            "part": "coefficient release",
            "claimed_epsilon": float(epsilon),
            "claimed_mu": SENSITIVITY / sigma,
            "delta": float(delta),
            "alpha": float(alpha),
            "setting": f"the released Taylor coefficients, sigma = {sigma:.4g} (sensitivity sqrt 2); "
            f"{canaries} unit-vector canaries per release x {runs} releases, fair coins",
            "threat_model": "white-box: the released Taylor coefficients of the task; add/remove one canary",
        }
    ]
