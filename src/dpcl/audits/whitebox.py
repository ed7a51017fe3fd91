"""White-box audits of the DP-SGD head learners on their own training code (``dpcl.training.heads.train_head``,
which the PEFT ensemble's heads and the Naive and Non-CL head baselines run).

Threat model ([Nasr2021], adversary instantiation; [Nasr2023], tight auditing): the adversary
sees every privatized gradient sum DP-SGD releases (clipped, noised, before the normaliser and the
optimiser) and the model it was computed at, and chooses the canary. Adjacency: add/remove one
individual, the ledger's.

Audit setting: sampling rate q = 1 and one step, so each release is one Gaussian mechanism with the
accountant's σ for the claimed (ε, δ) at (q = 1, 1 step); the audited code is the same function the
pipeline runs, uninstrumented: the adversary reads what the mechanism primitive reports
(:mod:`dpcl.privacy.releases`), and the trained head must be Adam applied to those releases
(:mod:`dpcl.audits.integrity`; a training function whose head moves by anything else is an error).

- **Weight branch, many canaries in one run** ([Steinke2023]): canary k is a "Dirac"
  record whose features are a large value on a coordinate of its own (no other record uses it), so its
  clipped gradient lands in one column of the head's weights and nowhere else in that column. From the
  zero initialisation each canary's contribution is fixed and the noise of different columns is
  independent, so the column of each canary is an independent draw of the Gaussian mechanism with the
  canary present (coin 1) or absent (coin 0): one run gives thousands of trials of both worlds. The
  statistic projects the column on the gradient a correct implementation adds (known to the
  adversary), z = ⟨o, g⟩ / ‖g‖², N(0, s²) without and N(1, s²) with the canary, s = σC/‖g‖.
- **Bias branch, one canary per run**: a canary with zero features has its whole gradient in the bias,
  which every record shares, so each run is one trial (D = {}, D' = {canary}); the statistic is the same
  projection.
- **Poisson sampling and many steps** (:func:`audit_head_poisson`, the strong audits only): the weight
  branch's Dirac canaries at the pipeline's kind of setting, q < 1 and many steps, σ from the accountant
  for (q, steps). The adversary sees every step's release and the head it was computed at, so it knows
  the clipped gradient each canary would add at that step; the canary's column then releases N(0, 1)
  (normalised) without it and, with it, N(μ_t, 1) when Poisson sampling takes it (probability q) and
  N(0, 1) otherwise. The statistic is the log likelihood ratio of that mixture summed over the steps
  (the Neyman-Pearson test of the composition). This audits the sampling rate, the step count and the
  composition the accountant charges for; the claim is (ε, δ) only (a subsampled Gaussian is not
  μ-GDP), so the row has no μ.

The threshold is chosen on the first quarter of the trials and the Clopper-Pearson lower bound
(:func:`dpcl.audits.audit.epsilon_lower_bound`) computed on the rest, so it holds at confidence 1 − α
whatever the implementation does (a threshold planned from the claimed σ would have no power against
noise below it). A correct implementation stays at or below its claim (with probability ≥ 1 − α); noise below the
ledger's σ or a gradient branch that escapes clipping pushes the bound above the claim.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import ndtr

from ..privacy import releases
from ..seeding import rng
from ..training.heads import DPSGDConfig, LinearHead, train_head
from .audit import attainable_lower_bounds, epsilon_lower_bound
from .gdp import gdp_bound
from .integrity import adam_replay_mismatch

#: the audit setting's DP-SGD: q = 1, one step, C = 0.1 (the step's noise is σ·C); C is below every
#: canary's gradient norm (≥ ‖softmax(0) − e_y‖ = 0.82 with 3 outputs), so a correct implementation clips
#: every canary and a branch that escapes clipping shows
AUDIT_DPSGD = DPSGDConfig(sample_rate=1.0, epochs=1.0, lr=0.01, clip=0.1, normaliser=1.0)
#: the canary's feature value on its own coordinate: large, so that its gradient is clipped to C
DIRAC_SCALE = 10.0
N_BASE, BASE_DIM, N_OUT = 8, 4, 3
#: the most feature columns a training's Dirac canaries take (each canary a column of its own): a training's
#: dense work (its features, gradient sums and attributions) grows with the square of its canaries, so a
#: config's run of more canaries is split into as many trainings of at most this many columns
#: (:func:`dirac_trainings`; the trials are the same; measured costs in benchmarks/README.md)
MAX_DIRAC_COLUMNS = 1250


def dirac_trainings(canaries: int, runs: int, *, columns_per_canary: int = 1) -> tuple[int, int]:
    """(canaries per training, trainings) of an audit sized ``runs`` runs of ``canaries`` Dirac canaries,
    each taking ``columns_per_canary`` feature columns: every run split into the fewest trainings of at most
    :data:`MAX_DIRAC_COLUMNS` columns, its canaries shared equally (as many trials, up to the remainder of
    the division)."""
    split = max(1, math.ceil(canaries * columns_per_canary / MAX_DIRAC_COLUMNS))
    return canaries // split, runs * split


def _sigma(epsilon: float, delta: float) -> float:
    from ..privacy.sgd_accounting import noise_multiplier

    return noise_multiplier(epsilon, delta, AUDIT_DPSGD.sample_rate, AUDIT_DPSGD.steps)


def _base_data(seed: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed records D: features on the first BASE_DIM coordinates only, random labels."""
    gen = rng(seed, "audit", "whitebox", "base")
    x = np.zeros((N_BASE, width))
    x[:, :BASE_DIM] = gen.normal(0.0, 1.0, (N_BASE, BASE_DIM))
    return x, gen.integers(0, N_OUT, N_BASE)


def _correct_gradient(features: np.ndarray, label: int, cfg: DPSGDConfig) -> tuple[np.ndarray, np.ndarray]:
    """The clipped (weight row-block, bias) gradient a correct implementation adds for one record at the
    zero initialisation: δ = softmax(0) − e_y, scaled by min(1, C / (‖δ‖ √(‖x‖² + 1)))."""
    delta = np.full(N_OUT, 1.0 / N_OUT)
    delta[label] -= 1.0
    norm = np.linalg.norm(delta) * math.sqrt(float(features @ features) + 1.0)
    c = min(1.0, cfg.clip / norm)
    return c * np.outer(delta, features), c * delta


def _trained(train: Callable, head: LinearHead, x, y, cfg: DPSGDConfig, sigma: float, gen) -> list:
    """Train ``head`` with ``train`` and return every release the mechanism primitives reported, with
    their values and states (:mod:`dpcl.privacy.releases`: the function under audit does not choose what
    the audit sees); the head's update integrity is checked against them
    (:func:`dpcl.audits.integrity.adam_replay_mismatch`: raises :class:`UpdateIntegrityError`)."""
    with releases.recording(keep_values=True, keep_rows=False) as rec:
        train(head, x, y, cfg, sigma, gen)
    seen = [r for r in rec.releases if r.mechanism == "clipped_gradient_sum"]
    if len(seen) != cfg.steps:
        raise RuntimeError(
            f"the training function released {len(seen)} steps, the audit setting has {cfg.steps}"
        )
    why = adam_replay_mismatch(seen, head.params, cfg)
    if why is not None:
        raise UpdateIntegrityError(why)
    return seen


class UpdateIntegrityError(RuntimeError):
    """The trained head is not the optimiser applied to the releases the primitives reported."""


def _run(train: Callable, x: np.ndarray, y: np.ndarray, sigma: float, gen: np.random.Generator):
    """(g_w, g_b) of the audit setting's one release (q = 1, one step) of ``train`` on (x, y)."""
    head = LinearHead(x.shape[1], N_OUT)
    (release,) = _trained(train, head, x, y, AUDIT_DPSGD, sigma, gen)
    g = release.value
    return g[: head.w.size].reshape(head.w.shape), g[head.w.size :]


def bound_coin_trials(
    z_out: ArrayLike,
    z_in: ArrayLike,
    *,
    runs: int,
    per_run: int,
    delta: float,
    alpha: float,
    with_mu: bool = True,
) -> dict:
    """:func:`bound_trials` of a many-canary audit: ``runs`` runs of ``per_run`` canaries, each included
    by a fair coin; the first quarter of the runs (their canaries of both worlds) fits the threshold."""
    out, inn = np.asarray(z_out), np.asarray(z_in)
    calibrate = min(len(out), len(inn), max(1, runs // 4) * per_run // 2)
    return bound_trials(out, inn, calibrate, delta, alpha, with_mu=with_mu)


def bound_trials(
    z_out: np.ndarray, z_in: np.ndarray, calibrate: int, delta: float, alpha: float, *, with_mu: bool = True
) -> dict:
    """Threshold chosen on the first ``calibrate`` trials of each world, the Clopper-Pearson lower bound
    on ε computed on the rest, which the threshold never saw; beside it (``with_mu``) the f-DP route's
    lower bound on μ (:func:`dpcl.audits.gdp.gdp_bound`, the same split) for audits whose claim is
    Gaussian in their setting. A row with both tests is refuted when either fires, so each runs at α/2
    (Bonferroni): the row's verdict errs with probability at most α. Without μ the ε test has all of α.

    The statistic is Gaussian in both worlds with a common spread (a shifted projection of Gaussian
    noise), so the calibration trials give its two means and spread, and the threshold is the one whose
    tail probabilities under that fit attain the largest bound on the bound set
    (:func:`dpcl.audits.audit.attainable_lower_bounds`): stable where empirical tail counts are a handful.
    Whatever the implementation does, the bound stays valid (the threshold depends on the calibration
    trials only); a fit that is off costs power, not validity."""
    cal_out, cal_in = z_out[:calibrate], z_in[:calibrate]
    z_out, z_in = z_out[calibrate:], z_in[calibrate:]
    n_bound = min(len(z_out), len(z_in))
    m0, m1 = float(cal_out.mean()), float(cal_in.mean())
    sd = float(np.sqrt((cal_out.var() + cal_in.var()) / 2)) or 1.0
    candidates = max(m0, m1) + sd * np.linspace(-2.0, 8.0, 201)
    bounds = attainable_lower_bounds(
        ndtr(-(candidates - m0) / sd),
        ndtr(-(candidates - m1) / sd),
        n_bound,
        delta,
        alpha / 2 if with_mu else alpha,
    )
    t = float(candidates[int(np.argmax(bounds))])  # the first of the best
    k_d, k_dp = int((z_out > t).sum()), int((z_in > t).sum())
    a = alpha / 2 if with_mu else alpha
    mu = (
        gdp_bound(np.r_[cal_out, z_out], np.r_[cal_in, z_in], calibrate, a)
        if with_mu
        else {"mu_lower_bound": None}
    )
    return mu | {
        "threshold": t,
        "counts": [k_d, k_dp],
        "trials_per_world": [int(len(z_out)), int(len(z_in))],
        "calibration_trials": int(calibrate),
        "epsilon_lower_bound": epsilon_lower_bound(k_d, len(z_out), k_dp, len(z_in), delta, a),
    }


def audit_head_weights(
    epsilon: float,
    delta: float,
    *,
    canaries: int,
    runs: int,
    seed: int,
    train: Callable = train_head,
    alpha: float = 0.05,
) -> dict:
    """Audit the head's weight branch at claimed (ε, δ): ``runs`` trainings, each with ``canaries``
    Dirac canaries included by independent fair coins (module docstring); ``train`` is the training
    function under audit (the pipeline's ``train_head``; tests pass broken variants)."""
    if canaries < 1 or runs < 1:
        raise ValueError(f"canaries and runs must be >= 1, got {canaries} and {runs}")
    sigma = _sigma(epsilon, delta)
    width = BASE_DIM + canaries
    xb, yb = _base_data(seed, width)
    cols = BASE_DIM + np.arange(canaries)
    labels = np.arange(canaries) % N_OUT
    # the canary's clipped gradient in its own column (the same for every canary of a label)
    g = {
        k: _correct_gradient(np.r_[np.zeros(BASE_DIM), DIRAC_SCALE], k, AUDIT_DPSGD)[0][:, -1]
        for k in range(N_OUT)
    }
    gk = np.stack([g[int(k)] for k in labels], axis=1)  # N_OUT × canaries: canary k's gradient column
    gk_sq = (gk * gk).sum(axis=0)
    z_in, z_out = [], []
    for r in range(runs):
        coins = rng(seed, "audit", "whitebox", "weights", float(epsilon), r, "coins").random(canaries) < 0.5
        # float32, the features' type in training (train_head would convert a float64 copy: 2,500 × 5,000
        # entries per run in the strong audits); the same values, DIRAC_SCALE and the base rows rounded once
        x = np.zeros((N_BASE + int(coins.sum()), width), dtype=np.float32)
        x[:N_BASE] = xb
        chosen = np.flatnonzero(coins)
        x[N_BASE + np.arange(len(chosen)), cols[chosen]] = DIRAC_SCALE
        y = np.concatenate([yb, labels[chosen]])
        g_w, _ = _run(
            train, x, y, sigma, rng(seed, "audit", "whitebox", "weights", float(epsilon), r, "train")
        )
        # every canary's projection at once (N_OUT terms summed in order, as a dot product of N_OUT entries)
        z = (g_w[:, cols] * gk).sum(axis=0) / gk_sq
        z_in.extend(z[coins].tolist())
        z_out.extend(z[~coins].tolist())
    row = bound_coin_trials(z_out, z_in, runs=runs, per_run=canaries, delta=delta, alpha=alpha)
    return row | {
        "audit": "head weights: Dirac canaries, many per run",
        "claimed_epsilon": float(epsilon),
        "claimed_mu": AUDIT_DPSGD.steps**0.5 / sigma,
        "delta": float(delta),
        "noise_multiplier": float(sigma),
        "sample_rate": AUDIT_DPSGD.sample_rate,
        "steps": AUDIT_DPSGD.steps,
        "alpha": float(alpha),
        "threat_model": "white-box: every privatized gradient sum; add/remove one canary",
    }


def audit_head_bias(
    epsilon: float,
    delta: float,
    *,
    trials: int,
    seed: int,
    train: Callable = train_head,
    alpha: float = 0.05,
) -> dict:
    """Audit the head's bias branch at claimed (ε, δ): a canary with zero features (its whole gradient in
    the shared bias), one trial per training, ``trials`` trainings per world."""
    if trials < 2:
        raise ValueError(f"trials must be >= 2, got {trials}")
    sigma = _sigma(epsilon, delta)
    label = 0
    _, g = _correct_gradient(np.zeros(BASE_DIM), label, AUDIT_DPSGD)
    z: dict[bool, list[float]] = {False: [], True: []}
    for world in (False, True):  # D = {} and D' = {canary}: the bias holds the canary's gradient alone
        x = np.zeros((int(world), BASE_DIM))
        y = np.full(int(world), label, dtype=np.int64)
        for i in range(trials):
            _, g_b = _run(
                train, x, y, sigma, rng(seed, "audit", "whitebox", "bias", float(epsilon), world, i)
            )
            z[world].append(float(g_b @ g / (g @ g)))
    row = bound_trials(np.array(z[False]), np.array(z[True]), max(1, trials // 4), delta, alpha)
    return row | {
        "audit": "head bias: zero-feature canary, one per run",
        "claimed_epsilon": float(epsilon),
        "claimed_mu": AUDIT_DPSGD.steps**0.5 / sigma,
        "delta": float(delta),
        "noise_multiplier": float(sigma),
        "sample_rate": AUDIT_DPSGD.sample_rate,
        "steps": AUDIT_DPSGD.steps,
        "alpha": float(alpha),
        "threat_model": "white-box: every privatized gradient sum; add/remove one canary",
    }


#: the Poisson audit's DP-SGD: q = 1/4 and 16 steps, otherwise the audit setting's
POISSON_DPSGD = DPSGDConfig(sample_rate=0.25, epochs=4.0, lr=0.01, clip=0.1, normaliser=1.0)


def audit_head_poisson(
    epsilon: float,
    delta: float,
    *,
    canaries: int,
    runs: int,
    seed: int,
    cfg: DPSGDConfig = POISSON_DPSGD,
    train: Callable = train_head,
    alpha: float = 0.05,
) -> dict:
    """Audit ``train`` (the pipeline's ``train_head``) with Poisson sampling at ``cfg``'s rate over its
    steps at claimed (ε, δ), σ from the accountant for (q, steps): ``runs`` trainings, each with
    ``canaries`` Dirac canaries included by fair coins; each canary's statistic is the log likelihood ratio
    of the subsampled Gaussian summed over every step's release (module docstring)."""
    from ..privacy.sgd_accounting import noise_multiplier

    if canaries < 1 or runs < 1:
        raise ValueError(f"canaries and runs must be >= 1, got {canaries} and {runs}")
    q, steps = cfg.sample_rate, cfg.steps
    sigma = noise_multiplier(epsilon, delta, q, steps)
    width = BASE_DIM + canaries
    xb, yb = _base_data(seed, width)
    cols = BASE_DIM + np.arange(canaries)
    labels = np.arange(canaries) % N_OUT
    canary_x = np.zeros((canaries, width), dtype=np.float32)
    canary_x[np.arange(canaries), cols] = DIRAC_SCALE
    z_in, z_out = [], []
    for r in range(runs):
        key = (seed, "audit", "whitebox", "poisson", float(epsilon), q, steps, r)
        coins = rng(*key, "coins").random(canaries) < 0.5
        chosen = np.flatnonzero(coins)
        x = np.zeros((N_BASE + len(chosen), width))
        x[:N_BASE] = xb
        x[N_BASE + np.arange(len(chosen)), cols[chosen]] = DIRAC_SCALE
        y = np.concatenate([yb, labels[chosen]])
        head = LinearHead(width, N_OUT)
        stat = np.zeros(canaries)
        for release in _trained(train, head, x, y, cfg, sigma, rng(*key, "train")):
            # each canary's clipped gradient at the step's head (known to the adversary) projected on the
            # release, and its norm: the primitive's attribution at the release's own state
            dots, norms = release.attribute(canary_x, labels)
            u = dots / np.maximum(norms * sigma * cfg.clip, 1e-300)  # N(0, 1) without the canary
            mu = norms / (sigma * cfg.clip)
            stat += np.logaddexp(math.log1p(-q), math.log(q) + mu * u - mu**2 / 2) if q < 1 else mu * u
        z_in.extend(stat[coins].tolist())
        z_out.extend(stat[~coins].tolist())
    row = bound_coin_trials(z_out, z_in, runs=runs, per_run=canaries, delta=delta, alpha=alpha, with_mu=False)
    return row | {
        "audit": "head weights: Dirac canaries, Poisson sampling over many steps",
        "claimed_epsilon": float(epsilon),
        "claimed_mu": None,
        "mu_lower_bound": None,
        "delta": float(delta),
        "noise_multiplier": float(sigma),
        "sample_rate": q,
        "steps": steps,
        "alpha": float(alpha),
        "threat_model": "white-box: every privatized gradient sum; add/remove one canary",
    }


def audit_heads(epsilon: float, delta: float, *, audit: dict, seed: int) -> list[dict]:
    """The white-box audit rows of ``train_head`` (weights and bias) at claimed (ε, δ), sized by the
    config's ``audit`` block (``whitebox_runs``, ``whitebox_canaries``, ``whitebox_bias_trials``; a run's
    canaries split over trainings by :func:`dirac_trainings`): the registry's white-box audit of every
    learner that trains its heads with it."""
    canaries, runs = dirac_trainings(int(audit["whitebox_canaries"]), int(audit["whitebox_runs"]))
    w = audit_head_weights(epsilon, delta, canaries=canaries, runs=runs, seed=seed)
    b = audit_head_bias(epsilon, delta, trials=int(audit["whitebox_bias_trials"]), seed=seed)
    common = f"q = 1, 1 step, C = {AUDIT_DPSGD.clip:g}, sigma = {w['noise_multiplier']:.4g}"
    return [
        w
        | {
            "part": "weights",
            "setting": f"{common}; {canaries} Dirac canaries per training x {runs} trainings, fair coins",
        },
        b | {"part": "bias", "setting": f"{common}; a zero-feature canary, one per training"},
    ] + _poisson_rows(epsilon, delta, audit=audit, seed=seed, canaries=int(audit["whitebox_canaries"]))


def _poisson_rows(epsilon: float, delta: float, *, audit: dict, seed: int, canaries: int) -> list[dict]:
    """The Poisson-sampling row of :func:`audit_heads` when the config asks for it
    (``whitebox_poisson_runs`` > 0; the strong audits): eight times that many trainings of an eighth of the
    canaries, as many bound trials as half the ``canaries`` in ``whitebox_poisson_runs`` trainings at a
    fraction of the cost (a training's attribution, at each of its steps, costs the square of its
    canaries)."""
    runs = 8 * int(audit.get("whitebox_poisson_runs", 0))
    canaries = canaries // 8
    if not runs:
        return []
    if canaries < 2:
        raise ValueError(f"the heads' Poisson audit needs whitebox_canaries >= 16, got {8 * canaries}")
    p = audit_head_poisson(epsilon, delta, canaries=canaries, runs=runs, seed=seed)
    cfg = POISSON_DPSGD
    return [
        p
        | {
            "part": f"weights, Poisson q = {cfg.sample_rate:g}, {cfg.steps} steps",
            "setting": f"q = {cfg.sample_rate:g}, {cfg.steps} steps, C = {cfg.clip:g}, "
            f"sigma = {p['noise_multiplier']:.4g}; {canaries} Dirac canaries per training x {runs} trainings, "
            "fair coins; statistic: the subsampled Gaussian's log likelihood ratio summed over the steps",
        }
    ]
