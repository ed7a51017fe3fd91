"""White-box audit of DP-A-GEM (head-only, :mod:`dpcl.learners.agem`) on its own training code: its train
part and its buffer rereads.

Threat model ([Nasr2021]; the adversary of DP-SGD's accountant): the adversary sees every
privatized release of :func:`~dpcl.learners.agem.run_agem_head` (each step's g of the train part and g_ref
of the buffer, before the projection and the optimiser), as the mechanism primitive reports it
(:mod:`dpcl.privacy.releases`: the released value, the rows it read and the head it was computed at;
the learner is not asked), and chooses the canaries. Adjacency: add/remove one individual, the ledger's.

Audit setting: T = 2 tasks, q = q_ref = 1 and one step per task, C = 0.1, buffer fraction 1/2; the noise
is what :func:`~dpcl.learners.agem.agem_noise` gives for the claimed (ε, δ): σ for the train part's
one step, σ_ref for the buffer's (T − 1) · steps = 1 reread. Each part is then one Gaussian mechanism
per read, so the claim is tested as μ-GDP: the largest μ the claimed (ε, δ) allows
(:func:`dpcl.audits.gdp.claim_mu`).

Canaries ("Dirac", [Steinke2023]): record k of task 0 has the value
:data:`DIRAC_SCALE` on a feature coordinate of its own and nothing else, so its clipped gradient lands in
one column of the head's weights that no other record touches; each is included by a fair coin. Its
part is decided by the learner's own public coin (:func:`~dpcl.learners.agem.reference_mask` of its
id): the audit picks ids whose coin puts half the canaries in the train part and half in the reference
part. The statistic of a canary sums, over **every release that read canaries of its part** (seen in
the rows each release reports, not taken from the ledger), the projection of the release on the clipped
gradient the canary would add at that release's head, divided by σC: N(0, 1) per release without the
canary (fresh noise, a predictable direction), shifted by about 1/σ with it. A release the ledger does
not account for (a train-part record also in the buffer, one reread too many) adds a shifted term, and
the μ bound exceeds what the claim allows.

Trials: the released columns of different canaries carry independent noise, so every canary is a
trial; the first quarter of the trainings fits the thresholds and the rest give the bounds
(:func:`dpcl.audits.whitebox.bound_trials`: ε at δ by Clopper-Pearson, and μ).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..learners.agem import LEARNER, AGEMConfig, agem_noise, reference_mask, run_agem_head, task_records
from ..privacy import releases
from ..seeding import rng
from ..training.heads import DPSGDConfig

#: the audit setting: q = q_ref = 1, one step per task, C = 0.1 (below every canary's gradient norm, so a
#: correct implementation clips every canary and a branch that escapes clipping shows)
AUDIT_DPSGD = DPSGDConfig(sample_rate=1.0, epochs=1.0, lr=0.01, clip=0.1, normaliser=1.0)
AUDIT_AGEM = AGEMConfig(buffer_fraction=0.5, buffer_sample_rate=1.0)
N_TASKS = 2
#: the label spaces of the two tasks (the canaries take the labels of task 0)
SPACES = [[0, 1], [2, 3]]
N_OUT = 4
#: the canary's value on its own coordinate: large, so its gradient is clipped to C with 1 % of its norm
#: in the shared bias
DIRAC_SCALE = 10.0
N_BASE, BASE_DIM = 8, 4
PARTS = ("train", "reference")
#: the buffer's Poisson audit (strong audits): T = 3 tasks of two labels, q = q_ref = 1/2 and 4 steps per
#: task (epochs 2), C = 0.1; canaries in task 0's reference part only, reread by tasks 1 and 2
POISSON_DPSGD = DPSGDConfig(sample_rate=0.5, epochs=2.0, lr=0.01, clip=0.1, normaliser=1.0)
POISSON_AGEM = AGEMConfig(buffer_fraction=0.5, buffer_sample_rate=0.5)
POISSON_SPACES = [[0, 1], [2, 3], [4, 5]]


def _canary_ids(canaries: int, split_seed: int) -> dict[str, np.ndarray]:
    """Ids (after the base records') whose public coin puts ``canaries`` canaries in each part."""
    ids = np.arange(N_BASE * N_TASKS, N_BASE * N_TASKS + 8 * canaries + 64)
    ref = reference_mask(ids, AUDIT_AGEM.buffer_fraction, split_seed)
    out = {"train": ids[~ref][:canaries], "reference": ids[ref][:canaries]}
    if min(len(v) for v in out.values()) < canaries:  # pragma: no cover - 8x the need at rate 1/2
        raise RuntimeError("not enough ids for the canaries")
    return out


def audit_whitebox(
    epsilon: float, delta: float, *, audit: dict, seed: int, alpha: float = 0.05
) -> list[dict]:
    """The white-box audit rows of DP-A-GEM at claimed (ε, δ), train part and buffer rereads (module
    docstring): ``audit["whitebox_runs"]`` runs of :func:`~dpcl.learners.agem.run_agem_head` with
    ``audit["whitebox_canaries"] // 2`` canaries per part each, a run split over trainings of at most
    :data:`~dpcl.audits.whitebox.MAX_DIRAC_COLUMNS` canary columns
    (:func:`~dpcl.audits.whitebox.dirac_trainings`)."""
    noise, noise_ref = agem_noise(epsilon, delta, AUDIT_DPSGD, AUDIT_AGEM, N_TASKS)

    def train(data, *, rng_for, split_seed):
        out: dict = {}
        run_agem_head(
            data,
            [],
            SPACES,
            N_OUT,
            AUDIT_DPSGD,
            AUDIT_AGEM,
            noise=noise,
            noise_ref=noise_ref,
            rng_for=rng_for,
            split_seed=split_seed,
            out=out,
        )
        return out["head"]

    return audit_memory_parts(
        epsilon,
        delta,
        audit=audit,
        seed=seed,
        alpha=alpha,
        learner=LEARNER,
        train=train,
        sigmas={"train": float(noise["noise_multiplier"]), "reference": float(noise_ref["noise_multiplier"])},
        claims={p: float(epsilon) for p in PARTS},
        setting=f"T = {N_TASKS}, q = q_ref = 1, 1 step per task, C = {AUDIT_DPSGD.clip:g}",
    ) + buffer_poisson_rows(epsilon, delta, audit=audit, seed=seed, alpha=alpha)


def buffer_poisson_rows(epsilon: float, delta: float, *, audit: dict, seed: int, alpha: float) -> list[dict]:
    """DP-A-GEM's buffer under Poisson sampling over T = 3 tasks (:func:`audit_buffer_poisson`), when the
    config asks for it (``whitebox_poisson_runs`` > 0; the strong audits): the claim is the ε its ledger
    states for task 0's reference part."""
    if not audit.get("whitebox_poisson_runs", 0):
        return []
    cfg, agem, n_tasks = POISSON_DPSGD, POISSON_AGEM, len(POISSON_SPACES)
    noise, noise_ref = agem_noise(epsilon, delta, cfg, agem, n_tasks)
    claim = task_records(0, n_tasks, cfg, agem, noise=noise, noise_ref=noise_ref, n_train=0, n_ref=0, info={})
    q_ref, sigma_ref = agem.ref_rate(cfg), float(noise_ref["noise_multiplier"])

    def train(data, *, rng_for, split_seed):
        out: dict = {}
        run_agem_head(
            data, [], POISSON_SPACES, 2 * n_tasks, cfg, agem, noise=noise, noise_ref=noise_ref,
            rng_for=rng_for, split_seed=split_seed, out=out,
        )  # fmt: skip
        return out["head"]

    return audit_buffer_poisson(
        epsilon, delta, audit=audit, seed=seed, learner=LEARNER, train=train, sigma_ref=sigma_ref,
        claim=float(claim[1]["epsilon"]), choice=lambda t: q_ref,
        what=f"sigma_ref = {sigma_ref:.4g}; the buffer holds every earlier reference part", alpha=alpha,
    )  # fmt: skip


def audit_memory_parts(
    epsilon: float,
    delta: float,
    *,
    audit: dict,
    seed: int,
    learner: str,
    train: Callable,
    sigmas: dict[str, float],
    claims: dict[str, float],
    setting: str,
    alpha: float = 0.05,
) -> list[dict]:
    """The white-box audit of a memory-buffer learner's two parts in this module's setting (module
    docstring), for DP-A-GEM and every learner that runs the same two-part mechanism (Desai et al.,
    :mod:`dpcl.learners.desai_whitebox`).

    ``train(data, *, rng_for, split_seed)`` runs the learner's own training on the tasks ``data`` and returns
    its trained head, whose update integrity is replayed over the reports (raises
    :class:`~dpcl.audits.whitebox.UpdateIntegrityError`); it trains
    (features, labels, ids per task; labels in :data:`SPACES`, :data:`N_OUT` outputs, :data:`AUDIT_DPSGD`,
    :data:`AUDIT_AGEM`); every release it makes is reported by the mechanism primitive
    (:mod:`dpcl.privacy.releases`), not by the learner; ``sigmas[part]`` is the noise multiplier its
    ledger states for the part ("train", "reference") and ``claims[part]`` the ε at δ it claims for one
    individual of that part.
    The rng streams are keyed by ``learner`` and ε; ``setting`` opens each row's setting sentence."""
    from .whitebox import bound_coin_trials, dirac_trainings

    # half the config's canaries per part, each part's in columns of their own: a run split over trainings
    canaries, runs = dirac_trainings(
        int(audit["whitebox_canaries"]) // 2, int(audit["whitebox_runs"]), columns_per_canary=2
    )
    if runs < 1 or canaries < 1:
        raise ValueError(f"the audit needs runs and canaries >= 1, got {runs} and {canaries}")
    reads = {"train": AUDIT_DPSGD.steps, "reference": (N_TASKS - 1) * AUDIT_DPSGD.steps}
    split_seed = 0
    ids = _canary_ids(canaries, split_seed)
    width = BASE_DIM + 2 * canaries
    cols = {p: BASE_DIM + k * canaries + np.arange(canaries) for k, p in enumerate(PARTS)}
    labels = np.arange(canaries) % len(SPACES[0])  # task 0's labels
    base = rng(seed, "audit", "whitebox", learner, "base")
    # float32, the features' type in training (a float64 copy would be converted at every read: the runs'
    # arrays are thousands of columns wide); the same values, the normal draws rounded once
    xb = np.zeros((N_TASKS * N_BASE, width), dtype=np.float32)
    xb[:, :BASE_DIM] = base.normal(0.0, 1.0, (N_TASKS * N_BASE, BASE_DIM))
    yb = np.concatenate([base.choice(s, N_BASE) for s in SPACES])
    canary_rows = {p: np.zeros((canaries, width), dtype=np.float32) for p in PARTS}
    for p in PARTS:
        canary_rows[p][np.arange(canaries), cols[p]] = DIRAC_SCALE
    attributed = dict.fromkeys(PARTS, 0)
    z: dict[tuple[str, bool], list[float]] = {(p, w): [] for p in PARTS for w in (False, True)}
    for r in range(runs):
        key = (seed, "audit", "whitebox", learner, float(epsilon), r)
        coins = {p: rng(*key, "coins", p).random(canaries) < 0.5 for p in PARTS}
        x0, y0, i0 = [xb[:N_BASE]], [yb[:N_BASE]], [np.arange(N_BASE)]
        for p in PARTS:
            chosen = np.flatnonzero(coins[p])
            xc = np.zeros((len(chosen), width), dtype=np.float32)
            xc[np.arange(len(chosen)), cols[p][chosen]] = DIRAC_SCALE
            x0.append(xc)
            y0.append(labels[chosen])
            i0.append(ids[p][chosen])
        data = [
            (np.concatenate(x0), np.concatenate(y0), np.concatenate(i0)),
            (xb[N_BASE:], yb[N_BASE:], np.arange(N_BASE, 2 * N_BASE)),
        ]
        with releases.recording(keep_values=True) as rec:  # every release, as its primitive made it
            head = train(
                data,
                rng_for=lambda t, part, key=key: rng(*key, "train", t, part),
                split_seed=split_seed,
            )
        _check_updates(rec.releases, head, AUDIT_DPSGD, N_TASKS)
        stat = {p: np.zeros(canaries) for p in PARTS}
        for p in PARTS:
            # the releases that read this part's canaries, whatever the ledger says (one that also read
            # the other part's would add a shifted term to their statistic); an absent canary is scored
            # on the same releases
            span = slice(int(cols[p][0]), int(cols[p][-1]) + 1)  # the part's canary columns, in a row
            read = [
                rel
                for rel in rec.releases
                if rel.noise_scale > 0 and rel.rows is not None and rel.rows[:, span].any()
            ]
            if len(read) < reads[p]:
                raise RuntimeError(
                    f"{len(read)} releases read the {p} part's canaries, the setting has {reads[p]}"
                )
            for rel in read:
                dots, norms = rel.attribute(canary_rows[p], labels)
                stat[p] += dots / (rel.noise_scale * np.maximum(norms, 1e-12))
            attributed[p] = max(attributed[p], len(read))
        for p in PARTS:
            z[p, False].extend(stat[p][~coins[p]].tolist())
            z[p, True].extend(stat[p][coins[p]].tolist())
    rows = []
    for p in PARTS:
        z_out, z_in = np.array(z[p, False]), np.array(z[p, True])
        row = bound_coin_trials(z_out, z_in, runs=runs, per_run=canaries, delta=delta, alpha=alpha)
        what = (
            "canaries in task 0's train part, read by its step"
            if p == "train"
            else "canaries in task 0's reference part, reread through the buffer by task 1's step"
        )
        rows.append(
            row
            | {
                "part": "train part" if p == "train" else "buffer rereads",
                "claimed_epsilon": float(claims[p]),
                "claimed_mu": reads[p] ** 0.5 / sigmas[p],
                "noise_multiplier": sigmas[p],
                "delta": float(delta),
                "alpha": float(alpha),
                "setting": f"{setting}, sigma = {sigmas[p]:.4g}; {what}; {canaries} Dirac canaries per part "
                f"and training x {runs} trainings, fair coins",
                "threat_model": "white-box: every privatized gradient sum (g and g_ref); add/remove one canary",
            }
        )
    return rows


def _check_updates(seen, head, cfg: DPSGDConfig, n_tasks: int) -> None:
    """The trained head's update integrity over the releases the primitives reported
    (:func:`dpcl.audits.integrity.memory_replay_mismatch`): raises
    :class:`~dpcl.audits.whitebox.UpdateIntegrityError`."""
    from .integrity import memory_replay_mismatch
    from .whitebox import UpdateIntegrityError

    why = memory_replay_mismatch(seen, (head.w, head.b), cfg, n_tasks=n_tasks)
    if why is not None:
        raise UpdateIntegrityError(why)


def audit_buffer_poisson(
    epsilon: float,
    delta: float,
    *,
    audit: dict,
    seed: int,
    learner: str,
    train: Callable,
    sigma_ref: float,
    claim: float,
    choice: Callable[[int], float],
    what: str,
    alpha: float = 0.05,
) -> list[dict]:
    """The buffer rereads of a memory-buffer learner under Poisson sampling over T = 3 tasks
    (:data:`POISSON_DPSGD`, :data:`POISSON_AGEM`), when the config asks for it
    (``audit["whitebox_poisson_runs"]`` > 0; the strong audits; else no row): twice that many trainings
    of ``train`` (as in :func:`audit_memory_parts`, on :data:`POISSON_SPACES`) with a quarter of
    ``audit["whitebox_canaries"]`` Dirac canaries in task 0's reference part, each included by a fair
    coin (as many trials as half the canaries in half the trainings, in less time: the attribution's
    cost grows with the square of the canaries). ``what`` describes the learner's buffer in the setting.

    The adversary knows the public schedule (task 0 releases g at each of its steps, every later task g
    then g_ref at each step), not the hidden draws: at task t's step a canary is in g_ref with
    probability ``choice(t)`` (DP-A-GEM: q_ref, its buffer holds every earlier reference part; Desai et
    al.: q_ref / t, one of the t blocks drawn uniformly). Its statistic is the log likelihood ratio of
    that subsampled Gaussian, summed over every g_ref of the schedule: at each, the canary's clipped
    gradient at the release's head (the primitive's attribution) projected on the release. The claim
    tested is ``claim``, the ε the ledger states for one individual of that part at δ (a subsampled
    Gaussian is not μ-GDP: the row has no μ)."""
    from .whitebox import bound_coin_trials

    runs, canaries = 2 * int(audit.get("whitebox_poisson_runs", 0)), int(audit["whitebox_canaries"]) // 4
    if not runs:
        return []
    if canaries < 1:
        raise ValueError(f"the audit needs canaries >= 1, got {canaries}")
    cfg, steps, n_tasks = POISSON_DPSGD, POISSON_DPSGD.steps, len(POISSON_SPACES)
    split_seed = 0
    ids = _canary_ids(canaries, split_seed)["reference"]
    width = BASE_DIM + canaries
    cols = BASE_DIM + np.arange(canaries)
    labels = np.arange(canaries) % len(POISSON_SPACES[0])
    canary_x = np.zeros((canaries, width), dtype=np.float32)
    canary_x[np.arange(canaries), cols] = DIRAC_SCALE
    base = rng(seed, "audit", "whitebox", learner, "poisson", "base")
    xb = np.zeros((n_tasks * N_BASE, width), dtype=np.float32)
    xb[:, :BASE_DIM] = base.normal(0.0, 1.0, (n_tasks * N_BASE, BASE_DIM))
    yb = np.concatenate([base.choice(s, N_BASE) for s in POISSON_SPACES])
    # the schedule: (task, is g_ref) of every release, in order
    schedule = [(0, False)] * steps + [
        (t, ref) for t in range(1, n_tasks) for _ in range(steps) for ref in (False, True)
    ]
    z_in, z_out = [], []
    for r in range(runs):
        key = (seed, "audit", "whitebox", learner, "poisson", float(epsilon), r)
        coins = rng(*key, "coins").random(canaries) < 0.5
        chosen = np.flatnonzero(coins)
        data = [
            (
                np.concatenate([xb[:N_BASE], canary_x[chosen]]),
                np.concatenate([yb[:N_BASE], labels[chosen]]),
                np.concatenate([np.arange(N_BASE), ids[chosen]]),
            )
        ] + [
            (
                xb[t * N_BASE : (t + 1) * N_BASE],
                yb[t * N_BASE : (t + 1) * N_BASE],
                np.arange(t * N_BASE, (t + 1) * N_BASE),
            )
            for t in range(1, n_tasks)
        ]
        with releases.recording(keep_values=True, keep_rows=False) as rec:
            head = train(
                data, rng_for=lambda t, part, key=key: rng(*key, "train", t, part), split_seed=split_seed
            )
        if len(rec.releases) != len(schedule):
            raise RuntimeError(
                f"the training released {len(rec.releases)} times, its public schedule has {len(schedule)}"
            )
        _check_updates(rec.releases, head, cfg, n_tasks)
        stat = np.zeros(canaries)
        for release, (t, ref) in zip(rec.releases, schedule, strict=True):
            if not ref:
                continue
            dots, norms = release.attribute(canary_x, labels)
            u = dots / np.maximum(norms * sigma_ref * cfg.clip, 1e-300)  # N(0, 1) without the canary
            mu = norms / (sigma_ref * cfg.clip)
            p = choice(t)
            stat += np.logaddexp(math.log1p(-p), math.log(p) + mu * u - mu**2 / 2) if p < 1 else mu * u
        z_in.extend(stat[coins].tolist())
        z_out.extend(stat[~coins].tolist())
    row = bound_coin_trials(z_out, z_in, runs=runs, per_run=canaries, delta=delta, alpha=alpha, with_mu=False)
    setting = (
        f"T = {n_tasks}, q = q_ref = {cfg.sample_rate:g}, {steps} steps per task, C = {cfg.clip:g}, {what}; "
        f"{canaries} Dirac canaries in task 0's reference part per training x {runs} trainings, fair coins; "
        "statistic: the subsampled Gaussian's log likelihood ratio over every g_ref of the public schedule "
        "(the hidden draws unused)"
    )
    return [
        row
        | {
            "part": f"buffer rereads, Poisson q = {cfg.sample_rate:g}, T = {n_tasks}",
            "setting": setting,
            "claimed_epsilon": float(claim),
            "claimed_mu": None,
            "mu_lower_bound": None,
            "noise_multiplier": float(sigma_ref),
            "delta": float(delta),
            "alpha": float(alpha),
            "threat_model": "white-box: every privatized gradient sum (g and g_ref), not the hidden draws; "
            "add/remove one canary",
        }
    ]
