"""Enhanced DP-A-GEM ([Desai2021]) head-only on cached features: a baseline.

[LabelSpace] Sec. 6.1 ("Comparison with Desai et al.", Fig. 3) and App. D.4. One linear head
over the label universe (softmax restricted to ∪_{k≤t} O_k, like the Naive baseline's head) is
trained task after task with DP-SGD. Each task's data D_t is split into disjoint parts
D_t^train and D_t^ref; the reference parts of past tasks form the memory buffer. At every
step of task t ≥ 1 the learner computes two DP gradients (App. D.4, items 1-2):

- g: the sum of clipped per-example gradients of a Poisson sample (rate q) of D_t^train
  plus N(0, σ²C²I);
- g_ref: the same for a Poisson sample (rate q_ref) of the buffer, noise multiplier σ_ref;

and, if gᵀg_ref < 0, projects g̃ = g − (gᵀg_ref / g_refᵀg_ref) g_ref (Eq. A102) before the
Adam step. The projection is post-processing of two DP releases.

Privacy (per individual, add/remove adjacency):

- a D_t^train individual is read by task t's ``steps`` steps only: (σ, q, steps);
- a D_s^ref individual is reread at every step of every later task s+1, …, T−1:
  (σ_ref, q_ref, (T−1−s)·steps), worst case s = 0 with (T−1)·steps compositions.
  σ_ref is calibrated for that worst case, so T must be known in advance (it is public:
  part of the scenario). [Desai2021] Lemma 2 charges the buffer only once; we do not.
- the two parts are disjoint, so they compose in parallel with each other; the task's
  label release (which counts all of D_t) composes sequentially with both.

The split is a fixed function of each individual's identity (a seeded coin per sample
id, probability ``buffer_fraction``), never "k samples per class": with a fixed-size
draw, adding one individual would move another one between the parts, so the parts
would not be a data-independent partition and parallel composition would not apply.
The buffer of the last task would never be reread, so D_{T-1} is not split.

Not private in the paper's sense: the buffer keeps **raw samples** across tasks, which
the paper's privacy model forbids (Table 1: only DP releases may be kept between tasks).
This learner exists to be compared against, not to be deployed.

The FiLM twin (:mod:`dpcl.learners.agem_film`) shares :func:`split_task`, :func:`agem_noise`,
:func:`task_records` and :func:`privacy_summary` with this module, and the projection
(:mod:`dpcl.training.projection`; here on the head's weight and bias in place).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..privacy.accounting import REDERIVE_TOL, Budget
from ..privacy.ledger import Ledger, LedgerError
from ..privacy.ledger_fields import at_least, budget, integer, mapping, number
from ..privacy.sgd_accounting import accountant_record, noise_multiplier_info
from ..privacy.verify import EntrySpec, LedgerSpec
from ..seeding import rng
from ..sorted_ints import isin
from ..training.adam import Adam
from ..training.clipped_sum import HeadData, noisy_clipped_sum
from ..training.heads import DPSGDConfig, LinearHead
from ..training.projection import project_parts_
from .aggregation import aggregate
from .peft import dpsgd_noise
from .registry import LearnerAudit, LearnerSpec


def check_summary(block: Any, ledger: Ledger, total: Budget) -> None:
    """privacy.json's "agem" block against the verified ledger (the verifier calls it through
    :data:`LEDGER_SPEC`): the train part's parameters as task 0's train entry states them, the buffer's
    worst case at least the worst reference entry's ε over the run's T − 1 later tasks, and the
    per-individual total at least the ledger's; raises :class:`LedgerError` naming the field."""
    block = mapping(block, "agem")
    train = mapping(block.get("train_part"), "agem.train_part")
    t0 = ledger.tasks.get(0, [])
    first = next((e for e in t0 if e.get("part") == "train"), None)
    if first is None:
        raise LedgerError("agem: the ledger has no train part to summarise")
    for key in ("noise_multiplier", "sample_rate", "steps"):
        got = (integer if key == "steps" else number)(train.get(key), f"agem.train_part.{key}")
        if got != first.get(key, got if first["mechanism"] == "nonprivate" else None):
            raise LedgerError(
                f"agem.train_part.{key}: states {got!r}, task 0's train entry has {first.get(key)!r}"
            )
    buf = block.get("buffer_part")
    if buf is not None:
        buf = mapping(buf, "agem.buffer_part")
        refs = [e for es in ledger.tasks.values() for e in es if e.get("part") == "reference"]
        worst = max((float(e.get("epsilon_accounted", e["epsilon"])) for e in refs), default=0.0)
        at_least(
            number(buf.get("epsilon_worst_case"), "agem.buffer_part.epsilon_worst_case", allow_inf=True),
            worst,
            "agem.buffer_part.epsilon_worst_case",
            rel_tol=REDERIVE_TOL,  # the worst reference entry's accountant figure, re-derived here
        )
        later = integer(buf.get("worst_case_later_tasks"), "agem.buffer_part.worst_case_later_tasks")
        if ledger.n_tasks is not None and later != ledger.n_tasks - 1:
            raise LedgerError(
                f"agem.buffer_part.worst_case_later_tasks: {later}, a {ledger.n_tasks}-task run has {ledger.n_tasks - 1}"
            )
    per = budget(block.get("per_individual_total"), "agem.per_individual_total")
    at_least(per.epsilon, total.epsilon, "agem.per_individual_total.epsilon")
    at_least(per.delta, total.delta, "agem.per_individual_total.delta")


#: the ledger of DP-A-GEM, head-only or FiLM (checked by dpcl.privacy.verify against the plan): the
#: train part's DP-SGD and, except in the last task, the reference part's rereads (App. D.4)
LEDGER_SPEC = LedgerSpec(
    training=(
        EntrySpec("dpsgd", part="train", query="clipped_gradient_sums"),
        EntrySpec("dpsgd_buffer", part="reference", query="clipped_gradient_sums", all_but_last=True),
    ),
    summary="agem",
    summary_check=check_summary,
)

LEARNER = "agem_head"

#: the search behind a tuned DP-A-GEM (and Desai et al.) run (privacy.json "hyperparameters")
AGEM_SEARCH = (
    "DP-A-GEM's Optuna search (its two-task loop with the buffer rate, in the Base Dataset label space "
    "whatever the run's label method: dpcl.learners.agem.tune_agem_head)"
)

#: the registry's entries (dpcl.learners.registry)
SPECS = (
    LearnerSpec(
        name="agem_head",
        display="DP-A-GEM (head-only)",
        figure_label="DP-A-GEM (enhanced, App. D.4)",
        adapter="head",
        job="agem",
        methods="agem",
        module="agem",
        fig3="compared",
        config_blocks=("agem",),
        run="dpcl.learners.agem:run",
        audit=LearnerAudit(function="dpcl.audits.agem_canary:audit_canary", name="DP-A-GEM learner (head)"),
        whitebox=LearnerAudit(function="dpcl.audits.agem_whitebox:audit_whitebox", name="DP-A-GEM"),
        resources={"mem_mb": 2000, "runtime": 60},
    ),
)


@dataclass(frozen=True)
class AGEMConfig:
    """Memory-buffer settings of DP-A-GEM (App. D.4: 10 % of a training class size)."""

    buffer_fraction: float = 0.1  # probability that a training sample goes to its task's reference part
    buffer_sample_rate: float | None = None  # Poisson rate q_ref of the buffer batch; None: DP-SGD's q

    def validate(self) -> None:
        """Raise with the key named if a value is out of range."""
        if not 0.0 < self.buffer_fraction < 1.0:
            raise ValueError(f"agem.buffer_fraction must lie in (0, 1), got {self.buffer_fraction!r}")
        q = self.buffer_sample_rate
        if q is not None and not 0.0 < q <= 1.0:
            raise ValueError(f"agem.buffer_sample_rate must lie in (0, 1] or be null, got {q!r}")

    @classmethod
    def from_config(cls, block: dict) -> AGEMConfig:
        """From the config's ``agem`` block; workflow-only keys (``label_methods``) are ignored."""
        return cls(**{k: v for k, v in block.items() if k in ("buffer_fraction", "buffer_sample_rate")})

    def ref_rate(self, cfg: DPSGDConfig) -> float:
        """q_ref: the configured buffer rate, else the training rate q."""
        return float(self.buffer_sample_rate if self.buffer_sample_rate is not None else cfg.sample_rate)


def reference_mask(sample_ids: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Which samples belong to their task's reference part: a seeded coin per sample id.

    The coin of an individual depends only on (seed, its id), so adding or removing one
    individual never moves another between the train and reference parts.
    """
    ids = np.asarray(sample_ids, dtype=np.int64)
    if ids.size == 0:
        return np.zeros(0, dtype=bool)
    if ids.min() < 0:
        raise ValueError("sample ids must be non-negative")
    coins = rng(seed, LEARNER, "reference_split").random(int(ids.max()) + 1)
    return coins[ids] < fraction


def buffer_record(
    noise_multiplier: float,
    sample_rate: float,
    steps_per_task: int,
    later_tasks: int,
    delta: float,
    accountant: str = "prv",
) -> dict:
    """Ledger entry of a reference part reread by ``later_tasks`` tasks of ``steps_per_task`` steps each."""
    if later_tasks < 1:
        raise ValueError(f"a buffer entry needs at least one later task, got {later_tasks}")
    rec = accountant_record(noise_multiplier, sample_rate, steps_per_task * later_tasks, delta, accountant)
    rec.update(
        mechanism="dpsgd_buffer",
        steps_per_task=int(steps_per_task),
        later_tasks=int(later_tasks),
        part="reference",
    )
    return rec


def agem_noise(
    epsilon: float, delta: float, cfg: DPSGDConfig, agem: AGEMConfig, n_tasks: int, cache: dict | None = None
) -> tuple[dict, dict | None]:
    """Noise for g (``steps`` at q) and for g_ref (calibrated for (T−1)·steps at q_ref), each
    within the task's training budget (ε, δ), App. D.4 (f). The second is None if T = 1."""
    train = dpsgd_noise(epsilon, delta, cfg, cache)
    if n_tasks < 2:
        return train, None
    q_ref, reads = agem.ref_rate(cfg), (n_tasks - 1) * cfg.steps
    if math.isinf(epsilon):
        return train, {
            "mechanism": "nonprivate",
            "noise_multiplier": 0.0,
            "epsilon": math.inf,
            "delta": 0.0,
            "sample_rate": q_ref,
            "steps": reads,
        }
    key = ("buffer", epsilon, delta, q_ref, reads)
    if cache is not None and key in cache:
        return train, dict(cache[key])
    info = noise_multiplier_info(epsilon, delta, q_ref, reads)
    ref = {
        "noise_multiplier": info["noise_multiplier"],
        "accountant": info["accountant"],
        "sample_rate": q_ref,
        "steps_per_task": cfg.steps,
        "worst_case_steps": reads,
        "epsilon_target": epsilon,
        "delta": delta,
    }
    if cache is not None:
        cache[key] = dict(ref)
    return train, ref


def split_task(
    y: np.ndarray, ids: np.ndarray, o_t: list[int], last: bool, agem: AGEMConfig, split_seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(kept: label in O_t, reference part) masks of one task's samples; the last task is not split
    (its reference part would never be reread). Train part = kept & ~reference."""
    keep = isin(y, o_t)
    if last:
        return keep, np.zeros(len(y), dtype=bool)
    return keep, reference_mask(ids, agem.buffer_fraction, split_seed)


def task_records(
    t: int,
    n_tasks: int,
    cfg: DPSGDConfig,
    agem: AGEMConfig,
    *,
    noise: dict,
    noise_ref: dict | None,
    n_train: int,
    n_ref: int,
    info: dict,
) -> list[dict]:
    """Ledger entries of task t (App. D.4): its train part's DP-SGD (``part: train``)
    and, unless t is the last task, its reference part's rereads by the T − 1 − t later tasks
    (``dpsgd_buffer``, ``part: reference``); ``info`` is the task's training record."""
    entries = [
        {
            **noise,
            "steps": cfg.steps,
            "sample_rate": cfg.sample_rate,
            "part": "train",
            "data": f"train part of D_{t}",
            "samples": n_train,
            **info,
        }
    ]
    if t == n_tasks - 1:
        return entries
    if noise_ref is None:
        raise ValueError("more than one task needs the buffer's noise (agem_noise)")
    sigma_ref = float(noise_ref["noise_multiplier"])
    if sigma_ref > 0:
        rec = buffer_record(
            sigma_ref,
            agem.ref_rate(cfg),
            cfg.steps,
            n_tasks - 1 - t,
            float(noise_ref["delta"]),
            noise_ref["accountant"],
        )
        rec["epsilon_target"] = noise_ref["epsilon_target"]
    else:
        rec = {**noise_ref, "steps": cfg.steps * (n_tasks - 1 - t), "part": "reference"}
    rec["data"] = (
        f"reference part of D_{t} (raw, kept in the buffer and reread by tasks {t + 1}..{n_tasks - 1})"
    )
    rec["samples"] = n_ref
    entries.append(rec)
    return entries


def privacy_summary(
    privacy: dict,
    ledger_tasks: dict[int, list[dict]],
    cfg: DPSGDConfig,
    agem: AGEMConfig,
    *,
    noise: dict,
    noise_ref: dict | None,
    n_tasks: int,
) -> dict:
    """privacy.json's "agem" block: both parts' noise and compositions, the buffer's worst case
    (App. D.4 (d)) and the per-individual total (``privacy["overall"]`` of the verified ledger)."""
    buffer = [e for es in ledger_tasks.values() for e in es if e.get("part") == "reference"]
    return {
        "note": "baseline: the buffer keeps raw samples across tasks, which the paper's privacy model forbids "
        "([LabelSpace] Table 1); the (ε, δ) below hold per individual under add/remove adjacency",
        "train_part": {
            "noise_multiplier": noise["noise_multiplier"],
            "sample_rate": cfg.sample_rate,
            "steps": cfg.steps,
            "compositions": "steps of its own task only",
        },
        "buffer_part": None
        if noise_ref is None
        else {
            "noise_multiplier": noise_ref["noise_multiplier"],
            "sample_rate": agem.ref_rate(cfg),
            "steps_per_task": cfg.steps,
            "worst_case_later_tasks": n_tasks - 1,
            "worst_case_compositions": (n_tasks - 1) * cfg.steps,
            "epsilon_worst_case": max((float(e["epsilon"]) for e in buffer), default=0.0),
            "compositions": "every step of every later task (sequential), App. D.4 (d)",
        },
        "per_individual_total": privacy["overall"],
    }


def _noisy_clipped_sum(
    head: LinearHead,
    data: HeadData,
    rate: float,
    clip: float,
    sigma: float,
    gen: np.random.Generator,
    active: np.ndarray,
    out: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Σ clip_C(g_i) over a Poisson sample at ``rate`` plus N(0, σ²C²I) (App. D.4, item 1), and the
    clipped fraction of the sample (a diagnostic): :func:`dpcl.training.clipped_sum.noisy_clipped_sum`
    (the weight and bias parts views of ``out``, flat as ``head.params``, when given)."""
    g_w, g_b, batch, n_clipped = noisy_clipped_sum(
        data, head.w, head.b, rate=rate, clip=clip, sigma=sigma, gen=gen, active=active, out=out
    )
    return g_w, g_b, (n_clipped / len(batch) if len(batch) else 0.0)


def train_agem_task(
    head: LinearHead,
    x: np.ndarray,
    y: np.ndarray,
    buf_x: np.ndarray | None,
    buf_y: np.ndarray | None,
    cfg: DPSGDConfig,
    *,
    sigma: float,
    q_ref: float,
    sigma_ref: float,
    gen: np.random.Generator,
    gen_ref: np.random.Generator,
    active: np.ndarray,
) -> dict:
    """One task of DP-A-GEM in place; ``buf_x is None`` means no buffer mechanism (task 0).

    With a buffer mechanism, g_ref is computed at every step even if the buffer happens to
    be empty (then it is pure noise), so whether the buffer is empty is never revealed.
    Both releases are made, and reported to an audit that listens, by the mechanism primitive
    (:func:`dpcl.training.clipped_sum.noisy_clipped_sum`; :mod:`dpcl.audits.agem_whitebox`).
    """
    cfg.validate()
    for name, s in (("noise_multiplier", sigma), ("buffer noise_multiplier", sigma_ref)):
        if s < 0 or (s > 0 and math.isinf(cfg.clip)):
            raise ValueError(f"{name} must be >= 0 and a private run needs a finite clip, got {s}")
    adam = Adam.for_head(head, cfg)
    data = HeadData(x, y)
    buf = HeadData(buf_x, buf_y) if buf_x is not None else None
    grad, ref = np.empty_like(head.params), np.empty_like(head.params)  # g and g_ref, flat as the head
    clipped = projected = 0.0
    for _ in range(cfg.steps):
        g_w, g_b, c = _noisy_clipped_sum(head, data, cfg.sample_rate, cfg.clip, sigma, gen, active, out=grad)
        clipped += c
        if buf is not None:
            r_w, r_b, _ = _noisy_clipped_sum(head, buf, q_ref, cfg.clip, sigma_ref, gen_ref, active, out=ref)
            projected += project_parts_([g_w, g_b], [r_w, r_b])
        adam.step([grad])  # g_w, g_b are views of grad; / the public normaliser (dpcl.training.heads)
    return {"mean_clipped_fraction": clipped / cfg.steps, "projected_fraction": projected / cfg.steps}


def run_agem_head(
    task_data: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    n_universe: int,
    cfg: DPSGDConfig,
    agem: AGEMConfig,
    *,
    noise: dict,
    noise_ref: dict | None,
    rng_for: Callable[[int, str], np.random.Generator],
    split_seed: int,
    out: dict | None = None,
) -> tuple[list[list[np.ndarray]], list[list[dict]], list[dict]]:
    """Train DP-A-GEM through the tasks: (predictions[t][i], ledger entries per task, task stats).

    ``task_data[t]`` = (features, labels, sample ids); ``noise``/``noise_ref`` come from
    :func:`agem_noise`; ``rng_for(t, part)`` gives the generator of task t's "train" or
    "reference" mechanism; ``split_seed`` seeds :func:`reference_mask`; a dict passed as ``out``
    receives the final head (``out["head"]``, e.g. for an audit's score).
    """
    agem.validate()
    n_tasks = len(task_data)
    if n_tasks > 1 and noise_ref is None:
        raise ValueError("more than one task needs the buffer's noise (agem_noise)")
    sigma = float(noise["noise_multiplier"])
    sigma_ref = float(noise_ref["noise_multiplier"]) if noise_ref else 0.0
    q_ref = agem.ref_rate(cfg)
    dim = task_data[0][0].shape[1]
    head = LinearHead(dim, n_universe)
    active = np.zeros(n_universe, dtype=bool)
    # the buffer keeps the features' type (float32 features stay float32: no float64 copy to convert back)
    buf_x, buf_y = np.zeros((0, dim), dtype=task_data[0][0].dtype), np.zeros(0, dtype=np.int64)
    preds: list[list[np.ndarray]] = []
    records: list[list[dict]] = []
    stats: list[dict] = []
    for t, (x, y, ids) in enumerate(task_data):
        o_t = sorted(label_spaces[t])
        active[o_t] = True
        keep, ref = split_task(y, ids, o_t, t == n_tasks - 1, agem, split_seed)
        tr = keep & ~ref
        info = train_agem_task(
            head,
            x[tr],
            y[tr],
            buf_x if t > 0 else None,
            buf_y if t > 0 else None,
            cfg,
            sigma=sigma,
            q_ref=q_ref,
            sigma_ref=sigma_ref,
            gen=rng_for(t, "train"),
            gen_ref=rng_for(t, "reference"),
            active=active,
        )
        records.append(
            task_records(
                t,
                n_tasks,
                cfg,
                agem,
                noise=noise,
                noise_ref=noise_ref,
                n_train=int(tr.sum()),
                n_ref=int((keep & ref).sum()),
                info=info,
            )
        )
        stats.append(
            {"task": t, "train_samples": int(tr.sum()), "buffer_samples_before": int(len(buf_y)), **info}
        )
        buf_x = np.concatenate([buf_x, x[keep & ref]])
        buf_y = np.concatenate([buf_y, y[keep & ref]])
        ids_active = np.flatnonzero(active)
        preds.append(
            [
                aggregate([head.logits(xt)[:, ids_active]], [ids_active])
                if ids_active.size
                else np.full(len(xt), -1)
                for xt, _ in test_sets[: t + 1]
            ]
        )
    if out is not None:
        out["head"] = head
    return preds, records, stats


def tune_agem_head(
    x: np.ndarray,
    y: np.ndarray,
    epsilon: float,
    delta: float,
    seed: int,
    buffer_fraction: float,
    *,
    n_trials: int = 20,
    epochs: float = 40.0,
    normaliser: float = 128.0,
    tasks: list[list[int]] | tuple[tuple[int, ...], ...] | None = None,
    journal=None,
) -> dict:
    """DP-A-GEM's own Optuna study (App. D.1 ranges plus the buffer's sampling rate) on a tuning set.

    Each trial runs the learner's own two-task loop (:func:`train_agem_task`) on the 70 % part:
    ``tasks`` are the two tasks' classes (labels of ``y``; default: the classes in two halves; the
    workflow passes the benchmark's first two tasks, :func:`dpcl.training.tuning_protocol.tuning_plan`),
    task 0's reference part (``buffer_fraction``, :func:`reference_mask`) is kept as the buffer and
    reread at every step of task 1 at the trial's buffer rate; both noise multipliers come from
    the RDP accountant's fast search at (ε, δ) (the buffer's for its one later task,
    :func:`~dpcl.privacy.sgd_accounting.coarse_noise_multiplier`); the score is the final
    accuracy on the 30 % of both tasks.
    """
    from ..privacy.sgd_accounting import coarse_noise_multiplier
    from ..training.tuning import tune_dpsgd

    classes = np.unique(y)
    tasks = [list(t) for t in (tasks if tasks is not None else np.array_split(classes, 2))]
    if len(tasks) != 2 or not all(tasks) or sorted(c for t in tasks for c in t) != classes.tolist():
        raise ValueError(
            f"DP-A-GEM's tuning needs two tasks of classes covering the tuning set's {classes.tolist()}, "
            f"got {tasks}"
        )
    rows = [np.searchsorted(classes, t) for t in tasks]  # the tuning loop's label rows of each task
    ref_sigmas: dict[tuple[float, int], float] = {}

    def train_and_score(tr, va, yy, *, n_classes, cfg, sigma, gen, checkpoint, buffer_sample_rate) -> float:
        # no checkpoints, no pruning: on the embedded default, stopping these two-task trials
        # below the median cost 1-2 points of the chosen trial's validation accuracy
        key = (buffer_sample_rate, cfg.steps)  # the buffer is reread by the one later task's steps
        if key not in ref_sigmas:
            ref_sigmas[key] = 0.0 if math.isinf(epsilon) else coarse_noise_multiplier(epsilon, delta, *key)
        # the Base Dataset setting (Fig. 3): every tuning class is in the label space from task 0
        head, active = LinearHead(x.shape[1], n_classes), np.ones(n_classes, dtype=bool)
        in_ref = reference_mask(tr, buffer_fraction, int(gen.integers(2**31)))
        first = np.isin(yy[tr], rows[0])
        t0, buf = tr[first & ~in_ref], tr[first & in_ref]
        gen_ref = np.random.default_rng(gen.integers(2**63))
        train_agem_task(
            head,
            x[t0],
            yy[t0],
            None,
            None,
            cfg,
            sigma=sigma,
            q_ref=buffer_sample_rate,
            sigma_ref=0.0,
            gen=gen,
            gen_ref=gen_ref,
            active=active,
        )
        t1 = tr[~first]
        train_agem_task(
            head,
            x[t1],
            yy[t1],
            x[buf],
            yy[buf],
            cfg,
            sigma=sigma,
            q_ref=buffer_sample_rate,
            sigma_ref=ref_sigmas[key],
            gen=gen,
            gen_ref=gen_ref,
            active=active,
        )
        return float(np.mean(head.logits(x[va]).argmax(1) == yy[va]))

    res = tune_dpsgd(
        y,
        epsilon,
        delta,
        seed,
        train_and_score,
        n_trials=n_trials,
        epochs=epochs,
        normaliser=normaliser,
        keys=(LEARNER,),
        buffer_rate=True,
        journal=journal,
    )
    return res | {
        "learner": LEARNER,
        "buffer_fraction": buffer_fraction,
        "tasks": [[int(c) for c in t] for t in tasks],
    }


def run(inputs):
    """One DP-A-GEM run for one (ε, label method), the learner contract (:mod:`dpcl.learners.api`);
    ``inputs.job`` is the ``agem`` job's :class:`dpcl.stages.agem.MemoryJob` (the run's DP-SGD config,
    tuned or configured, its ``agem`` block, the tuning protocol and the seed's noise cache).

    The ledger holds, per task, the label release (all of D_t), the train part's DP-SGD
    and the reference part's buffer rereads over the later tasks (disjoint parts, in
    parallel); it raises if any individual's total exceeds the target.
    """
    from ..training.tuning_protocol import hyperparameters_note
    from .api import RunResult

    job = inputs.job
    dpsgd_cfg, agem_cfg = job.dpsgd_cfg, job.agem_cfg
    cfg, agem = DPSGDConfig.from_block(dpsgd_cfg), AGEMConfig.from_config(agem_cfg)
    agem.validate()
    n_tasks = len(inputs.tasks)
    noise, noise_ref = agem_noise(inputs.epsilon, inputs.delta, cfg, agem, n_tasks, job.noise_cache)
    preds, records, stats = run_agem_head(
        [(t.x, t.y, t.ids) for t in inputs.tasks],
        list(inputs.test_sets),
        [list(t.label_space) for t in inputs.tasks],
        inputs.n_universe,
        cfg,
        agem,
        noise=noise,
        noise_ref=noise_ref,
        rng_for=inputs.rng_for,
        split_seed=inputs.seed,
    )
    extra = {
        "noise_multiplier": noise["noise_multiplier"],
        "buffer_noise_multiplier": None if noise_ref is None else noise_ref["noise_multiplier"],
        "dpsgd": dpsgd_cfg,
        "agem": agem_cfg,
    }
    return RunResult(
        predictions=preds,
        records=records,
        extra=extra,
        summary=lambda p, tasks: privacy_summary(
            p, tasks, cfg, agem, noise=noise, noise_ref=noise_ref, n_tasks=n_tasks
        ),
        hyperparameters=hyperparameters_note(dpsgd_cfg, job.protocol, AGEM_SEARCH),
        diagnostics={"agem_tasks": stats},
    )
