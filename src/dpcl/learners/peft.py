"""The PEFT ensemble ([LabelSpace] Alg. 2) and the Naive / Non-CL baselines (App. F.1), head-only on
cached features (:func:`run_head_learner`) and with FiLM on images (:func:`run_film_learner`); each
learner's ``run`` (the learner contract) is :func:`run_head` or :func:`run_film`.

- ``peft_head``: per task t a fresh zero-initialised linear head over O_t, trained on D_t;
  prediction aggregates all members seen so far (Eq. 11 or App. D.2).
- ``naive_head``: one head over the label universe, trained task after task on D_t with
  the softmax restricted to ∪_{k≤t} O_k (Alg. A1: a lower bound, no forgetting remedy).
- ``noncl_head``: one head trained once on ∪_t D_t over ∪_t O_t (Alg. A2: DP but not CL);
  only its final accuracy row is defined.

Each individual is in one task, so per-task DP-SGD runs compose in parallel; the Non-CL
run touches each individual once. The noise multiplier comes from the task's training
budget (what label release left) via the PRV accountant.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ..privacy.sgd_accounting import accountant_record, noise_multiplier_info
from ..privacy.verify import EntrySpec, LedgerSpec
from ..sorted_ints import isin
from ..training.heads import DPSGDConfig, LinearHead, train_head
from .aggregation import RULES, EnsembleVotes, aggregate
from .registry import LearnerAudit, LearnerSpec

#: the ledger of the PEFT ensemble and its Naive / Non-CL baselines, head-only or FiLM (checked by
#: dpcl.privacy.verify against the plan): one DP-SGD run on each task's data
_DPSGD_SPEC = LedgerSpec(training=(EntrySpec("dpsgd", query="clipped_gradient_sums"),))
LEDGER_SPECS = {
    name: _DPSGD_SPEC
    for name in ("peft_head", "naive_head", "noncl_head", "peft_film", "naive_film", "noncl_film")
}

if TYPE_CHECKING:  # the FiLM engine imports torch: loaded only when a FiLM learner runs
    from ..backbones import Preprocessing
    from ..training.film_member import FilmMember

LEARNERS = ("peft_head", "naive_head", "noncl_head")
FILM_LEARNERS = ("peft_film", "naive_film", "noncl_film")

#: the white-box audit of train_head, which every head learner runs (dpcl.audits.whitebox)
HEADS_WHITEBOX = LearnerAudit(function="dpcl.audits.whitebox:audit_heads", name="DP-SGD heads")
#: the white-box audit of train_film, which every FiLM learner runs (dpcl.audits.film: one run, many
#: canaries, on the embedded EfficientNet-Lite0; off unless the config's audit.film_canaries > 0)
FILM_WHITEBOX = LearnerAudit(
    function="dpcl.audits.film:audit_film", name="FiLM (EfficientNet-Lite0)", requires="film_canaries"
)

#: the registry's entries (dpcl.learners.registry)
SPECS = (
    LearnerSpec(
        name="peft_head",
        run="dpcl.learners.peft:run_head",
        display="PEFT Ensemble (head-only)",
        adapter="head",
        job="heads",
        methods="head_label_methods",
        module="peft",
        fig3="ours",
        ensemble=True,
        paper_table_note="The paper's PEFT Ensemble rows are FiLM (peft_film); PEFT (head-only) has no "
        "published counterpart in this table.",
        whitebox=HEADS_WHITEBOX,
        resources={"mem_mb": 2000, "runtime": 60},
    ),
    LearnerSpec(
        name="naive_head",
        run="dpcl.learners.peft:run_head",
        display="Naive (head-only)",
        adapter="head",
        job="heads",
        methods="baseline_label_methods",
        module="peft",
        whitebox=HEADS_WHITEBOX,
        resources={"mem_mb": 2000, "runtime": 60},
    ),
    LearnerSpec(
        name="noncl_head",
        run="dpcl.learners.peft:run_head",
        display="Non-CL (head-only)",
        adapter="head",
        job="heads",
        methods="baseline_label_methods",
        module="peft",
        trains_on="all_tasks",
        whitebox=HEADS_WHITEBOX,
        resources={"mem_mb": 2000, "runtime": 60},
    ),
    LearnerSpec(
        name="peft_film",
        run="dpcl.learners.peft:run_film",
        display="PEFT Ensemble (FiLM)",
        adapter="film",
        job="film_peft",
        methods="head_label_methods",
        module="peft",
        fig3="ours",
        ensemble=True,
        whitebox=FILM_WHITEBOX,
        resources={"mem_mb": 8000, "runtime": 1680},  # minutes: every member's training, then the evaluation
    ),
    LearnerSpec(
        name="naive_film",
        display="Naive (FiLM)",
        adapter="film",
        job="film_baseline",
        run="dpcl.learners.peft:run_film",
        methods="baseline_label_methods",
        module="peft",
        whitebox=FILM_WHITEBOX,
        resources={"mem_mb": 8000, "runtime": 1440},
    ),
    LearnerSpec(
        name="noncl_film",
        display="Non-CL (FiLM)",
        adapter="film",
        job="film_baseline",
        run="dpcl.learners.peft:run_film",
        methods="baseline_label_methods",
        module="peft",
        trains_on="all_tasks",
        whitebox=FILM_WHITEBOX,
        resources={"mem_mb": 8000, "runtime": 1440},
    ),
)


def dpsgd_noise(epsilon: float, delta: float, cfg: DPSGDConfig, cache: dict | None = None) -> dict:
    """Noise multiplier and ledger record for one DP-SGD run at (ε, δ); non-private if ε = inf."""
    if math.isinf(epsilon):
        return {
            "mechanism": "nonprivate",
            "noise_multiplier": 0.0,
            "epsilon": math.inf,
            "delta": 0.0,
            "sample_rate": cfg.sample_rate,
            "steps": cfg.steps,
        }
    key = (epsilon, delta, cfg.sample_rate, cfg.steps)
    if cache is not None and key in cache:
        return dict(cache[key])
    info = noise_multiplier_info(epsilon, delta, cfg.sample_rate, cfg.steps)
    rec = accountant_record(info["noise_multiplier"], cfg.sample_rate, cfg.steps, delta, info["accountant"])
    rec["epsilon_target"] = epsilon
    if cache is not None:
        cache[key] = dict(rec)
    return rec


def label_rows(o_t: list[int], labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep-mask of samples whose label is in O_t and their row index in sorted O_t."""
    o = np.asarray(sorted(o_t), dtype=np.int64)
    keep = isin(labels, o)
    return keep, np.searchsorted(o, labels[keep])


def run_head_learner(
    learner: str,
    task_data: list[tuple[np.ndarray, np.ndarray]],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    n_universe: int,
    cfg: DPSGDConfig,
    *,
    noise: dict,
    rng_for,
    aggregation: str = "argmax",
    by_rule: dict[str, list[list[np.ndarray]]] | None = None,
) -> tuple[list[list[np.ndarray]], list[dict]]:
    """Train ``learner`` through the tasks; return predictions[t][i] on task i's test set
    after task t, and one mechanism record per task for the ledger.

    ``rng_for(t)`` gives task t's generator (sampling and noise). For ``peft_head``, a dict
    passed as ``by_rule`` is filled with the predictions of every aggregation rule (App. D.2,
    Fig. A2): post-processing of the same members, so it costs no privacy.
    """
    if learner not in LEARNERS:
        raise ValueError(f"unknown learner {learner!r}; allowed: {list(LEARNERS)}")
    sigma = noise["noise_multiplier"]
    n_tasks = len(task_data)
    preds: list[list[np.ndarray]] = []
    records: list[dict] = []
    dim = task_data[0][0].shape[1]
    if learner == "noncl_head":
        union = sorted(set().union(*map(set, label_spaces)))
        xs, ys = zip(*task_data, strict=True)
        x, y = np.concatenate(xs), np.concatenate(ys)
        keep, rows = label_rows(union, y)
        head = LinearHead(dim, len(union))
        info = train_head(head, x[keep], rows, cfg, sigma, rng_for(0))
        rec = {**noise, **info, "data": "features of all tasks at once", "samples": int(keep.sum())}
        records = [rec] * n_tasks  # one run; each individual's task sees it once
        union_arr = np.asarray(union, dtype=np.int64)
        final = [
            aggregate([head.logits(xt)], [union_arr]) if len(union) else np.full(len(xt), -1)
            for xt, _ in test_sets
        ]
        preds = [[None] * (t + 1) for t in range(n_tasks - 1)] + [final]
        return preds, records
    if learner == "naive_head":
        head = LinearHead(dim, n_universe)
        active = np.zeros(n_universe, dtype=bool)
    members: list[tuple[LinearHead, np.ndarray]] = []
    votes = [EnsembleVotes(len(xt)) for xt, _ in test_sets]  # each member's logits on a test set once
    added = [0] * len(test_sets)
    for t, (x, y) in enumerate(task_data):
        o_t = sorted(label_spaces[t])
        if learner == "peft_head":
            keep, rows = label_rows(o_t, y)
            member = LinearHead(dim, len(o_t))
            info = train_head(member, x[keep], rows, cfg, sigma, rng_for(t))
            members.append((member, np.asarray(o_t, dtype=np.int64)))
        else:
            active[o_t] = True
            keep = isin(y, o_t)
            info = train_head(head, x[keep], y[keep], cfg, sigma, rng_for(t), active=active)
        records.append({**noise, **info, "data": f"features of D_{t}", "samples": int(keep.sum())})
        row = []
        for i, (xt, _) in enumerate(test_sets[: t + 1]):
            if learner == "peft_head":
                for m in range(added[i], len(members)):
                    votes[i].add(members[m][0].logits(xt), members[m][1])
                added[i] = len(members)
                row.append(votes[i].predict(aggregation))
                if by_rule is not None:
                    for rule in RULES:
                        rows = by_rule.setdefault(rule, [])
                        if i == 0:
                            rows.append([])
                        rows[t].append(row[-1] if rule == aggregation else votes[i].predict(rule))
            else:
                ids = np.flatnonzero(active)
                row.append(aggregate([head.logits(xt)[:, ids]], [ids]) if ids.size else np.full(len(xt), -1))
        preds.append(row)
    return preds, records


def run_head(inputs):
    """One run of a head learner (``inputs.learner``: one of :data:`LEARNERS`) through all tasks, the
    learner contract (:mod:`dpcl.learners.api`). ``inputs.job`` is the ``heads`` job's
    :class:`dpcl.stages.heads.HeadJob` (the run's DP-SGD config, tuned or configured, its tuning protocol,
    the aggregation rule and the seed's noise cache). An ensemble's metrics get every aggregation rule's
    accuracies on the same members (App. D.2, Fig. A2)."""
    from ..metrics import accuracy_matrix
    from ..training.tuning_protocol import hyperparameters_note
    from .api import RunResult
    from .registry import get

    job = inputs.job
    cfg = DPSGDConfig.from_block(job.dpsgd_cfg)
    noise = dpsgd_noise(inputs.epsilon, inputs.delta, cfg, job.noise_cache)
    by_rule: dict = {}
    preds, records = run_head_learner(
        inputs.learner,
        [(t.x, t.y) for t in inputs.tasks],
        list(inputs.test_sets),
        [list(t.label_space) for t in inputs.tasks],
        inputs.n_universe,
        cfg,
        noise=noise,
        rng_for=lambda t: inputs.rng_for(t, "dpsgd"),
        aggregation=job.aggregation,
        by_rule=by_rule if get(inputs.learner).ensemble else None,  # an ensemble: every aggregation rule
    )
    extra = {
        "noise_multiplier": noise["noise_multiplier"],
        "dpsgd": job.dpsgd_cfg,
        "aggregation": job.aggregation,
    }
    if by_rule:  # every aggregation rule on the same members (App. D.2, Fig. A2)
        test_y = [y for _, y in inputs.test_sets]
        accs = {rule: accuracy_matrix(p, test_y) for rule, p in by_rule.items()}
        extra["acc_by_aggregation"] = accs
        extra["final_accuracy_by_aggregation"] = {rule: float(np.nanmean(a[-1])) for rule, a in accs.items()}
    return RunResult(
        predictions=preds,
        records=records,
        extra=extra,
        hyperparameters=hyperparameters_note(job.dpsgd_cfg, job.protocol),
    )


def train_film_members(
    task_data: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    backbone,
    *,
    pre: Preprocessing,
    cfg: DPSGDConfig,
    noise: dict,
    rng_for: Callable[[int], np.random.Generator],
    physical_batch: int = 32,
    device: str = "auto",
    progress: bool = False,
    precision: str = "fp32",
) -> tuple[list[FilmMember], list[dict]]:
    """The PEFT ensemble's FiLM members (Alg. 2): per task t a member (FiLM values + a fresh head over
    O_t) trained with DP-SGD on task t's images whose label is in O_t; (members, one ledger record per
    task). ``rng_for(t)`` gives task t's generator (sampling and noise)."""
    import time

    from ..io import log
    from ..training.film import train_film

    sigma = float(noise["noise_multiplier"])
    members, records = [], []
    for t, ((x, y), o_t) in enumerate(zip(task_data, label_spaces, strict=True)):
        o_t = sorted(o_t)
        keep, rows = label_rows(o_t, y)
        t0 = time.perf_counter()
        member, info = train_film(
            backbone,
            x[keep],
            rows,
            len(o_t),
            cfg,
            noise_multiplier=sigma,
            rng=rng_for(t),
            pre=pre,
            physical_batch=physical_batch,
            device=device,
            progress=progress,
            precision=precision,
        )
        members.append(member)
        records.append(
            {
                **noise,
                **info,
                "data": f"images of R_task(D_{t})",
                "samples": int(keep.sum()),
                "labels": o_t,
                "lr": cfg.lr,
            }
        )
        if progress:
            log(f"member {t}: {info['steps']} steps, σ = {sigma:.4g} ({time.perf_counter() - t0:.1f} s)")
    return members, records


def ensemble_predictions(
    backbone,
    members: list[FilmMember],
    label_spaces: list[list[int]],
    test_images: list[np.ndarray],
    pre: Preprocessing,
    *,
    device: str = "auto",
) -> dict[str, list[list[np.ndarray]]]:
    """Every aggregation rule's predictions of a FiLM ensemble (Eq. 11, App. D.2): ``[rule][t][i]`` on
    test set i ≤ t after task t, with members 0..t. Each member's values are swapped into the backbone
    once and its logits on each test set computed once (member t joins every test set's votes at task
    t)."""
    from ..training.film_inference import film_logits_each

    spaces = [np.asarray(sorted(o), dtype=np.int64) for o in label_spaces]
    votes = [EnsembleVotes(len(xt)) for xt in test_images]
    by_rule: dict[str, list[list[np.ndarray]]] = {rule: [] for rule in RULES}
    for t, member in enumerate(members):
        for i, z in enumerate(film_logits_each(backbone, member, test_images, pre, device=device)):
            votes[i].add(z, spaces[t])
        for rule in RULES:
            by_rule[rule].append([votes[i].predict(rule) for i in range(t + 1)])
    return by_rule


def run_film(inputs):
    """One run of a FiLM learner (``inputs.learner``: one of :data:`FILM_LEARNERS`) on images through
    all tasks, the learner contract (:mod:`dpcl.learners.api`). The tasks' ``x`` are images;
    ``inputs.job`` is the FiLM job's :class:`dpcl.stages.film.FilmJob` (the backbone with frozen
    normalisation statistics and its preprocessing, the run's DP-SGD config, tuned or configured, its
    tuning protocol, the aggregation rule, physical batch and device). The ensemble returns its members
    and every aggregation rule's accuracies on them (App. D.2, Fig. A2); a baseline its final model."""
    import time

    from ..metrics import accuracy_matrix
    from ..training.tuning_protocol import hyperparameters_note
    from .api import RunResult

    job = inputs.job
    cfg = DPSGDConfig.from_block(job.dpsgd_cfg)
    noise = dpsgd_noise(inputs.epsilon, inputs.delta, cfg)
    task_data = [(t.x, t.y) for t in inputs.tasks]
    spaces = [sorted(t.label_space) for t in inputs.tasks]
    tuned = job.protocol is not None
    extra = {"noise_multiplier": noise["noise_multiplier"], "dpsgd": job.dpsgd_cfg, "tuned": tuned}
    note = hyperparameters_note(job.dpsgd_cfg, job.protocol)
    kw = {
        "physical_batch": job.physical_batch,
        "device": job.device,
        "progress": job.progress,
        "precision": job.precision,
    }
    if inputs.learner == "peft_film":
        members, records = train_film_members(
            task_data,
            spaces,
            job.backbone,
            pre=job.pre,
            cfg=cfg,
            noise=noise,
            rng_for=lambda t: inputs.rng_for(t, "dpsgd"),
            **kw,
        )
        records = [{**r, "tuned": tuned} for r in records]
        by_rule = ensemble_predictions(
            job.backbone, members, spaces, [x for x, _ in inputs.test_sets], job.pre, device=job.device
        )
        test_y = [y for _, y in inputs.test_sets]
        accs = {rule: accuracy_matrix(p, test_y) for rule, p in by_rule.items()}
        extra |= {
            "aggregation": job.aggregation,
            "acc_by_aggregation": accs,
            "final_accuracy_by_aggregation": {r: float(np.nanmean(a[-1])) for r, a in accs.items()},
            "trainable_parameters": [r["trainable_parameters"] for r in records],
        }
        return RunResult(
            predictions=by_rule[job.aggregation],
            records=records,
            extra=extra,
            hyperparameters=note,
            members=[m.to_arrays() for m in members],
        )
    t0 = time.perf_counter()
    preds, records, members = run_film_learner(
        inputs.learner,
        task_data,
        list(inputs.test_sets),
        spaces,
        inputs.n_universe,
        job.backbone,
        pre=job.pre,
        cfg=cfg,
        noise=noise,
        rng_for=lambda t: inputs.rng_for(t, "dpsgd"),
        **kw,
    )
    model, ids = members[0]
    return RunResult(
        predictions=preds,
        records=records,
        extra=extra,
        hyperparameters=note,
        diagnostics={"seconds": round(time.perf_counter() - t0, 1)},
        model={"label_ids": ids, **model.to_arrays()},
    )


def run_film_learner(
    learner: str,
    task_data: list[tuple[np.ndarray, np.ndarray]],
    test_sets: list[tuple[np.ndarray, np.ndarray]],
    label_spaces: list[list[int]],
    n_universe: int,
    backbone,
    *,
    pre: Preprocessing,
    cfg: DPSGDConfig,
    noise: dict,
    rng_for: Callable[[int], np.random.Generator],
    aggregation: str = "argmax",
    physical_batch: int = 32,
    device: str = "auto",
    progress: bool = False,
    precision: str = "fp32",
) -> tuple[list[list[np.ndarray | None]], list[dict], list[tuple[FilmMember, np.ndarray]]]:
    """Train a FiLM learner through the tasks on images (mirrors ``run_head_learner``).

    Returns predictions[t][i] on task i's test images after task t (Non-CL: only the last
    row), one ledger record per task (``{**noise, **run info, "data"}``), and the released
    models with their label ids (per task for ``peft_film``, one for the baselines).
    ``rng_for(t)`` gives task t's generator (sampling and noise).
    """
    from ..training.film import train_film
    from ..training.film_inference import film_logits
    from ..training.film_member import pretrained_member

    if learner not in FILM_LEARNERS:
        raise ValueError(f"unknown FiLM learner {learner!r}; allowed: {list(FILM_LEARNERS)}")
    sigma = float(noise["noise_multiplier"])
    n_tasks = len(task_data)
    kw = {"physical_batch": physical_batch, "device": device, "progress": progress, "precision": precision}

    def logits(member: FilmMember, images: np.ndarray) -> np.ndarray:
        return film_logits(backbone, member, images, pre, device=device)

    if learner == "noncl_film":
        union = sorted(set().union(*map(set, label_spaces)))
        xs, ys = zip(*task_data, strict=True)
        x, y = np.concatenate(xs), np.concatenate(ys)
        keep, rows = label_rows(union, y)
        member, info = train_film(
            backbone, x[keep], rows, len(union), cfg, noise_multiplier=sigma, rng=rng_for(0), pre=pre, **kw
        )
        rec = {**noise, **info, "data": "images of all tasks at once", "samples": int(keep.sum())}
        union_arr = np.asarray(union, dtype=np.int64)
        final = [
            aggregate([logits(member, xt)], [union_arr]) if union else np.full(len(xt), -1)
            for xt, _ in test_sets
        ]
        preds: list[list[np.ndarray | None]] = [[None] * (t + 1) for t in range(n_tasks - 1)] + [final]
        return preds, [rec] * n_tasks, [(member, union_arr)]
    if learner == "peft_film":
        trained, records = train_film_members(
            task_data, label_spaces, backbone, pre=pre, cfg=cfg, noise=noise, rng_for=rng_for, **kw
        )
        by_rule = ensemble_predictions(
            backbone, trained, label_spaces, [xt for xt, _ in test_sets], pre, device=device
        )
        spaces = [np.asarray(sorted(o), dtype=np.int64) for o in label_spaces]
        return by_rule[aggregation], records, list(zip(trained, spaces, strict=True))
    preds, records = [], []
    model = pretrained_member(backbone, n_universe)
    active = np.zeros(n_universe, dtype=bool)
    for t, (x, y) in enumerate(task_data):
        o_t = sorted(label_spaces[t])
        active[o_t] = True
        keep = isin(y, o_t)
        model, info = train_film(
            backbone,
            x[keep],
            y[keep],
            n_universe,
            cfg,
            noise_multiplier=sigma,
            rng=rng_for(t),
            pre=pre,
            init=model,
            active=active,
            **kw,
        )
        records.append({**noise, **info, "data": f"images of D_{t}", "samples": int(keep.sum())})
        ids = np.flatnonzero(active)
        preds.append(
            [
                aggregate([logits(model, xt)[:, ids]], [ids]) if ids.size else np.full(len(xt), -1)
                for xt, _ in test_sets[: t + 1]
            ]
        )
    return preds, records, [(model, np.arange(n_universe, dtype=np.int64))]
