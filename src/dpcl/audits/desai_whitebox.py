"""White-box audit of Desai et al.'s DP-CL as published ([Desai2021], :mod:`dpcl.learners.desai`) on its own
training code, :func:`~dpcl.learners.desai.run_desai_head`: its train part and its mini-memory rereads.

The threat model, canaries and statistic are DP-A-GEM's (:mod:`dpcl.learners.agem_whitebox`, whose
:func:`~dpcl.learners.agem_whitebox.audit_memory_parts` runs this audit too): the adversary sees every
privatized release (g of the train part, g_ref of the chosen block, as the mechanism primitive reports
them) and the head each was computed at, and chooses Dirac canaries, half of them in task 0's train part and half in
its reference part (the mini-memory block M_0), by the learner's own public split coin. Adjacency:
add/remove one individual, the ledger's.

What differs from DP-A-GEM is what is audited. The noise is Lemma 2's (:func:`~dpcl.learners.desai.
lemma2_noise`): ONE σ for g and g_ref, the smallest with ε_i + ε'_i ≤ ε at δ/2 each, where ε is the
published claim the audit is run at. The rows compare the audit with what the ledger states for one
individual of each part, our accounting of the code (:mod:`dpcl.learners.desai` docstring): an individual
is in one part only, and in this setting (T = 2 tasks, q = q_ref = 1, one step per task) each part is read
once, by one Gaussian mechanism with that σ, so its claim is μ = 1/σ and ε at δ is the Gaussian
mechanism's (:func:`dpcl.audits.audit.gaussian_epsilon`); the published claim ε (which charges both parts
to everyone) is in the setting. With two tasks the uniform block choice always picks M_0, so the mixture
over hidden block choices that the ledger accounts for T ≥ 3 (``choice_prob``) is not exercised by these
two rows: they show that the code draws Lemma 2's σ on both branches and clips per example on both. The
strong audits' Poisson row (:func:`buffer_poisson_rows`) exercises it: T = 3 tasks at q = q_ref = 1/2,
block M_0 drawn with probability 1/t at task t, hidden from the adversary.
"""

from __future__ import annotations

from ..learners.desai import LEARNER, lemma2_noise, run_desai_head, task_records
from .agem_whitebox import (
    AUDIT_AGEM,
    AUDIT_DPSGD,
    N_OUT,
    N_TASKS,
    PARTS,
    POISSON_AGEM,
    POISSON_DPSGD,
    POISSON_SPACES,
    SPACES,
    audit_buffer_poisson,
    audit_memory_parts,
)


def audit_whitebox(
    epsilon: float, delta: float, *, audit: dict, seed: int, alpha: float = 0.05
) -> list[dict]:
    """The white-box audit rows of Desai et al. as published at its claimed (ε, δ) (σ from Lemma 2), train
    part and mini-memory rereads (module docstring), sized like DP-A-GEM's (``whitebox_runs``,
    ``whitebox_canaries``)."""
    from .audit import gaussian_epsilon

    noise = lemma2_noise(epsilon, delta, AUDIT_DPSGD, AUDIT_AGEM.ref_rate(AUDIT_DPSGD))
    sigma = float(noise["noise_multiplier"])

    def train(data, *, rng_for, split_seed):
        out: dict = {}
        run_desai_head(
            data,
            [],
            SPACES,
            N_OUT,
            AUDIT_DPSGD,
            AUDIT_AGEM,
            noise=noise,
            rng_for=rng_for,
            split_seed=split_seed,
            out=out,
        )
        return out["head"]

    rows = audit_memory_parts(
        epsilon,
        delta,
        audit=audit,
        seed=seed,
        alpha=alpha,
        learner=LEARNER,
        train=train,
        sigmas={p: sigma for p in PARTS},
        claims={p: gaussian_epsilon(sigma, delta) for p in PARTS},
        setting=f"Lemma 2's claim eps = {epsilon:g} (one sigma for g and g_ref); T = {N_TASKS}, q = q_ref = 1, "
        f"1 step per task, C = {AUDIT_DPSGD.clip:g}",
    )
    rows += buffer_poisson_rows(epsilon, delta, audit=audit, seed=seed, alpha=alpha)
    return [r | {"published_epsilon": float(epsilon)} for r in rows]


def buffer_poisson_rows(epsilon: float, delta: float, *, audit: dict, seed: int, alpha: float) -> list[dict]:
    """The mini-memory under Poisson sampling over T = 3 tasks with the uniform block choice
    (:func:`~dpcl.learners.agem_whitebox.audit_buffer_poisson`: block M_0 is drawn with probability 1/t
    at task t, hidden from the adversary), when the config asks for it (``whitebox_poisson_runs`` > 0; the
    strong audits): the claim is the ε our ledger states for task 0's reference part (the mixture over
    the block choice, ``choice_prob``), σ Lemma 2's for the published ε."""
    if not audit.get("whitebox_poisson_runs", 0):
        return []
    cfg, agem, n_tasks = POISSON_DPSGD, POISSON_AGEM, len(POISSON_SPACES)
    q_ref = agem.ref_rate(cfg)
    noise = lemma2_noise(epsilon, delta, cfg, q_ref)
    claim = task_records(0, n_tasks, cfg, agem, noise=noise, n_train=0, n_ref=0, info={})
    sigma = float(noise["noise_multiplier"])

    def train(data, *, rng_for, split_seed):
        out: dict = {}
        run_desai_head(
            data, [], POISSON_SPACES, 2 * n_tasks, cfg, agem, noise=noise, rng_for=rng_for,
            split_seed=split_seed, out=out,
        )  # fmt: skip
        return out["head"]

    return audit_buffer_poisson(
        epsilon, delta, audit=audit, seed=seed, learner=LEARNER, train=train, sigma_ref=sigma,
        claim=float(claim[1]["epsilon"]), choice=lambda t: q_ref / t,
        what=f"Lemma 2's sigma = {sigma:.4g}; one of the t blocks drawn uniformly at task t's step", alpha=alpha,
    )  # fmt: skip
