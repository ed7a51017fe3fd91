"""Canary audit of the enhanced DP-A-GEM head (App. D.4) on its own loop: one canary in task 0's
training part or in its reference part (read through the buffer during task 1), D = a few fixed
records; the claimed ε is the run's target."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from ..learners.agem import LEARNER, AGEMConfig, agem_noise, reference_mask, run_agem_head
from ..seeding import rng
from ..training.heads import DPSGDConfig
from .learners import canary_audit


def audit_canary(
    epsilon: float,
    delta: float,
    trials: int,
    seed: int,
    *,
    part: str = "train",
    n_base: int = 20,
    dim: int = 8,
) -> dict:
    """Audit the enhanced DP-A-GEM head (App. D.4) at training budget ``epsilon`` with the canary in task 0's
    ``part``: "train" (read by task 0's DP-SGD) or "reference" (read through the buffer during task 1).
    Two tasks; D = a few fixed records, the canary a far-out record of task 0 placed by its public coin;
    the statistic is the released head's margin for the canary's label on the canary's features
    (:func:`dpcl.audits.learners.canary_audit`). Its claimed ε is the run's target."""
    cfg = DPSGDConfig(sample_rate=0.5, epochs=5.0, lr=0.1, clip=1.0, normaliser=8.0)
    agem = AGEMConfig(buffer_fraction=0.5)
    noise, noise_ref = agem_noise(epsilon, delta, cfg, agem, 2)
    base_gen = np.random.default_rng(12345)  # the fixed base data D (the same in every run)
    xb = base_gen.normal(0, 0.3, (n_base, dim))
    yb = base_gen.integers(0, 4, n_base)
    tasks = [np.flatnonzero(yb < 2), np.flatnonzero(yb >= 2)]
    split_seed = 0
    ids_free = np.arange(n_base, n_base + 1000)
    in_ref = reference_mask(ids_free, agem.buffer_fraction, split_seed)
    canary_id = int(ids_free[in_ref if part == "reference" else ~in_ref][0])  # the public coin places it
    canary_x = np.zeros(dim)
    canary_x[0] = 3.0
    spaces = [[0, 1], [2, 3]]

    def score(with_canary: bool, gen: np.random.Generator) -> float:
        data = []
        for t, idx in enumerate(tasks):
            x, y, ids = xb[idx], yb[idx], idx.copy()
            if with_canary and t == 0:
                x, y, ids = np.vstack([x, canary_x]), np.append(y, 1), np.append(ids, canary_id)
            data.append((x, y, ids))
        s, out = int(gen.integers(2**63 - 1)), {}
        run_agem_head(
            data,
            [],
            spaces,
            4,
            cfg,
            agem,
            noise=noise,
            noise_ref=noise_ref,
            rng_for=lambda t, part: rng(s, t, part),
            split_seed=split_seed,
            out=out,
        )
        z = out["head"].logits(canary_x[None, :])[0]
        return float(z[1] - np.max(np.delete(z, 1)))

    res = canary_audit(score, trials, seed, (LEARNER, part, float(epsilon)), delta)
    res.update(
        learner=LEARNER,
        epsilon=float(epsilon),
        claimed_epsilon=float(epsilon),
        attack=f"canary in task 0's {part} part; statistic: the released head's margin for its label",
        dpsgd=asdict(replace(cfg)),
    )
    return res
