"""Stage of ``workflow/rules/projected.smk``: the learners of registry job ``projected`` (the functional
mechanism on cached features projected by a PCA fitted on the public tuning split: L2DP-ML as published,
paper 001, whose claim is violated under add/remove, and its sound variant FM-A-GEM) over every
(ε, label method) of one seed.

Each learner's run is made by its registered stage function (:attr:`LearnerSpec.stage`), which gets the
seed's :class:`ProjectedJob` (features, scenario, the public PCA and the job's caches), the run's label
file and the learner's own config block."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json
from .common import (
    config_target,
    finish_run,
    hyperparameters_note,
    parse_eps,
    release_rng,
    task_inputs,
    write_run,
)


@dataclass(frozen=True, kw_only=True)
class ProjectedJob:
    """What every run of one seed of the ``projected`` job shares."""

    train: tuple[np.ndarray, np.ndarray, np.ndarray]  #: training features, labels, sample ids
    test: tuple[np.ndarray, np.ndarray]
    tune_x: np.ndarray  #: the PUBLIC tuning split's features (the PCA is fitted here)
    scenario: Scenario
    backbone: str = "features"
    targets: dict | None = None  #: ε tag -> {epsilon, delta} of the validated config
    tuning: dict | None = None  #: the config's tuning block (a learner that tunes in its job reads it)
    tuning_data: Callable | None = None  #: () -> (x, y, rows, plan) of the tuning set, built on first use
    cache: dict = field(default_factory=dict)  #: the public PCA per dimension, tuning results, audits

    @property
    def seed(self) -> int:
        return int(self.scenario.seed)

    def projection(self, dim: int):
        """The public PCA's projection to ``dim`` dimensions (one SVD of the PUBLIC features per job)."""
        from ..learners.fm_agem import PublicPCA

        key = ("projection", dim)
        if key not in self.cache:
            if "pca" not in self.cache:
                self.cache["pca"] = PublicPCA(self.tune_x)
            self.cache[key] = self.cache["pca"].projection(dim)
        return self.cache[key]

    def inputs(self, labels: dict):
        """(label spaces, per-task (x, y), per-task test (x, y)) of the run whose label file is ``labels``."""
        return task_inputs(self.train, self.test, self.scenario, labels)

    def rng_for(self, learner: str, labels: dict) -> Callable:
        return lambda t, part: release_rng(labels, self.backbone, learner, t, part)


def run_as_published(job: ProjectedJob, labels: dict, *, learner: str, block_name: str, block: dict):
    """One run of L2DP-ML as published (paper 001 Alg. 2) on the job's PCA-projected features:
    (metrics, privacy ledger, diagnostics); the ledger records ε = ∞ with Theorem 2's claim and its
    three-valued verdicts beside it (:func:`dpcl.learners.l2dpml.theorem2_claim`)."""
    from ..learners.l2dpml import L2DPMLConfig, claim_audit, run_l2dpml, theorem2_claim, to_unit_box
    from .agem import claim_summary

    tb = labels["training_budget"]
    eps, delta = parse_eps(tb["epsilon"]), float(tb["delta"])
    spaces, task_data, test_sets = job.inputs(labels)
    cfg = L2DPMLConfig.from_config(block)
    proj = job.projection(cfg.input_dim)
    data = [(to_unit_box(proj.apply(x)), y) for x, y in task_data]
    tests = [(to_unit_box(proj.apply(x)), y) for x, y in test_sets]
    preds, records, stats, _ = run_l2dpml(
        data, tests, spaces, int(labels["label_universe"]), cfg, eps, rng_for=job.rng_for(learner, labels)
    )
    claim = (
        theorem2_claim(eps, cfg, delta, claim_audit(eps, delta, cfg, job.cache))
        if math.isfinite(eps)
        else None
    )
    extra = {block_name: block}
    if claim is not None:
        extra["published_claim"] = claim_summary(claim)
    return finish_run(
        learner,
        labels,
        job.seed,
        preds,
        records,
        [y for _, y in test_sets],
        extra=extra,
        target=config_target(labels, job.targets),
        hyperparameters=hyperparameters_note(block, None),
        diagnostics={f"{learner}_tasks": stats},
        claim=claim,
    )


def run_functional_agem(job: ProjectedJob, labels: dict, *, learner: str, block_name: str, block: dict):
    """One run of FM-A-GEM (the sound functional-mechanism variant) on the job's PCA-projected features:
    (metrics, privacy ledger, diagnostics). With the job's tuning enabled its (dim, lr, steps) are a grid
    search per (training budget, label space) on the job's tuning set
    (:func:`dpcl.learners.fm_agem.tune_fm_agem`), whose values replace the block's."""
    from ..learners.fm_agem import FM_DEFAULTS_CHOSEN, FM_SEARCH, FMConfig, run_fm_agem, tune_fm_agem
    from ..training.tuning_protocol import tuning_label_space

    tb = labels["training_budget"]
    eps, delta = parse_eps(tb["epsilon"]), float(tb["delta"])
    spaces, task_data, test_sets = job.inputs(labels)
    tuned = None
    if job.tuning and job.tuning.get("enabled", True):
        space = tuning_label_space(labels["method"])
        key = (learner, "tuned", eps, delta, space)
        if key not in job.cache:
            t0 = time.perf_counter()
            xs, ys, rows, plan = job.tuning_data()
            job.cache[key] = r = tune_fm_agem(
                xs[rows],
                ys[rows],
                plan.tasks,
                space,
                eps,
                delta,
                seed=job.seed,
                projection_for=job.projection,
                max_dim=min(job.tune_x.shape[1], len(job.tune_x) - 1),  # the public PCA's axes
            )
            log(
                f"tuned {learner} seed {job.seed} eps {eps:g} ({space} label space, "
                f"{job.tuning.get('protocol', 'public')} protocol): {r['best']}, validation accuracy "
                f"{100 * r['best_validation_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
            )
        tuned = job.cache[key]
        block = {**block, **tuned["best"]}
        values = {**tuned["best"], "label_space": space, "grid": tuned["grid"], "repeats": tuned["repeats"]}
        note = hyperparameters_note(values, job.tuning.get("protocol", "public"), FM_SEARCH)
    else:
        block = dict(block)
        fixed, measured = FMConfig.from_config(block), FMConfig()
        # any value left at (or set to) a measured default was chosen with private data
        private = (
            FM_DEFAULTS_CHOSEN
            if any(getattr(fixed, k) == getattr(measured, k) for k in ("dim", "lr", "steps"))
            else None
        )
        note = hyperparameters_note(block, None, fixed_with_private_data=private)
    cfg = FMConfig.from_config(block)
    preds, records, stats = run_fm_agem(
        task_data,
        test_sets,
        spaces,
        int(labels["label_universe"]),
        job.projection(cfg.dim),
        cfg,
        epsilon=eps,
        delta=delta,
        rng_for=job.rng_for(learner, labels),
    )
    return finish_run(
        learner,
        labels,
        job.seed,
        preds,
        records,
        [y for _, y in test_sets],
        extra={block_name: block},
        target=config_target(labels, job.targets),
        hyperparameters=note,
        diagnostics={f"{learner}_tasks": stats, **({f"{learner}_tuning": tuned} if tuned else {})},
    )


def projected_sweep(
    train_path: str | Path,
    test_path: str | Path,
    tune_path: str | Path,
    scenario_path: str | Path,
    runs: list[dict],
    learners: list[str],
    *,
    blocks: dict[str, dict],
    threads: int | None = None,
    targets: dict | None = None,
    tuning: dict | None = None,
    dataset: str | None = None,
    dataset_cfg: dict | None = None,
) -> None:
    """All (ε, label method) runs of one seed of the ``projected`` job's ``learners``; ``runs`` items:
    {labels, outputs: {learner: (metrics, privacy, diagnostics)}}; ``blocks`` are the config blocks the
    learners declare (:attr:`LearnerSpec.config_blocks`); ``targets`` the config's (ε tag -> {epsilon,
    delta}).

    ``tuning`` (the config's block; with ``dataset`` and its ``dataset_cfg``): a learner that tunes in
    its job reads its tuning set of ``tuning.protocol`` (:func:`dpcl.training.tuning_protocol.tuning_plan`
    over the first two tasks: the public tuning split, or as the paper private training data)."""
    from threadpoolctl import threadpool_limits

    from ..features import load_feature_cache
    from ..learners import registry
    from ..training.tuning_protocol import tuning_plan, tuning_rows

    stages = {learner: registry.stage_function(learner, "projected") for learner in learners}
    block_of = {}
    for learner in learners:
        names = registry.get(learner).config_blocks
        if len(names) != 1 or names[0] not in blocks:
            raise ValueError(f"learner {learner!r} needs its config block {names} (given: {sorted(blocks)})")
        block_of[learner] = names[0]
    with threadpool_limits(limits=threads):
        tx, ty, tidx, meta = load_feature_cache(train_path)
        ex, ey, _, _ = load_feature_cache(test_path)
        ux, uy, _, _ = load_feature_cache(tune_path)
        sc = Scenario.from_dict(read_json(scenario_path))
        tuning_on = bool(tuning and tuning.get("enabled", True))
        if tuning_on and (dataset is None or dataset_cfg is None):
            raise ValueError(
                "tuning in the projected job needs the dataset's name and config (dataset, dataset_cfg)"
            )
        found: list = []

        def tuning_data():
            if not found:
                plan = tuning_plan(dataset, dataset_cfg, sc.task_classes, tuning.get("protocol", "public"), 2)
                xs, ys = (tx, ty) if plan.private else (ux, uy)
                found.append((xs, ys, tuning_rows(ys, plan, int(sc.seed)), plan))
            return found[0]

        job = ProjectedJob(
            train=(tx, ty, tidx),
            test=(ex, ey),
            tune_x=ux,
            scenario=sc,
            backbone=meta["backbone"],
            targets=targets,
            tuning=tuning if tuning_on else None,
            tuning_data=tuning_data,
        )
        for run in runs:
            labels = read_json(run["labels"])
            t0 = time.perf_counter()
            accs = []
            for learner in learners:
                metrics, privacy, diag = stages[learner](
                    job,
                    labels,
                    learner=learner,
                    block_name=block_of[learner],
                    block=blocks[block_of[learner]],
                )
                paths = run["outputs"][learner]
                write_run(
                    {"metrics": paths[0], "privacy": paths[1], "diagnostics": paths[2]},
                    metrics,
                    privacy,
                    diag,
                )
                accs.append(f"{learner} {100 * metrics['final_accuracy']:.1f} %")
            log(
                f"projected seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: {', '.join(accs)} "
                f"({time.perf_counter() - t0:.1f} s)"
            )
