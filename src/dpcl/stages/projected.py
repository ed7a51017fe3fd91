"""Stage of ``workflow/rules/projected.smk``: the learners of registry job ``projected`` (the functional
mechanism on cached features projected by a PCA fitted on the public tuning split: L2DP-ML as published,
[Lai2022], whose claim is violated under add/remove, and its sound variant FM-A-GEM) over every
(ε, label method) of one seed.

Each learner's run is made by its ``run`` function (:mod:`dpcl.learners.api`), whose inputs' ``job`` is
the seed's :class:`ProjectedJob` (the public PCA, the tuning set, the job's caches) and ``options`` its
config block."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json
from .common import config_target, write_run
from .learner import run_learner


@dataclass(frozen=True, kw_only=True)
class ProjectedJob:
    """What every run of one seed of the ``projected`` job shares (:attr:`dpcl.learners.api.RunInputs.job`)."""

    tune_x: np.ndarray  #: the PUBLIC tuning split's features (the PCA is fitted here)
    seed: int
    tuning: dict | None = None  #: the config's tuning block (a learner that tunes in its job reads it)
    tuning_data: Callable | None = None  #: () -> (x, y, rows, plan) of the tuning set, built on first use
    cache: dict = field(default_factory=dict)  #: the public PCA per dimension, tuning results, audits

    def projection(self, dim: int):
        """The public PCA's projection to ``dim`` dimensions (one SVD of the PUBLIC features per job)."""
        from ..public_pca import PublicPCA

        key = ("projection", dim)
        if key not in self.cache:
            if "pca" not in self.cache:
                self.cache["pca"] = PublicPCA(self.tune_x)
            self.cache[key] = self.cache["pca"].projection(dim)
        return self.cache[key]

    def claim_audit(self, epsilon: float, delta: float, cfg) -> dict | None:
        """L2DP-ML's audit of its published claim at this configuration
        (:func:`dpcl.audits.l2dpml_canary.claim_audit`, on public canary data), once per job."""
        from ..audits.l2dpml_canary import claim_audit

        return claim_audit(epsilon, delta, cfg, self.cache)


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

    for learner in learners:
        registry.run_function(learner, "projected")  # a clear error before any work
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
            tune_x=ux, seed=int(sc.seed), tuning=tuning if tuning_on else None, tuning_data=tuning_data
        )
        for run in runs:
            labels = read_json(run["labels"])
            t0 = time.perf_counter()
            accs = []
            for learner in learners:
                metrics, privacy, diag, _ = run_learner(
                    learner,
                    train=(tx, ty, tidx),
                    test=(ex, ey),
                    scenario=sc,
                    labels=labels,
                    options=blocks[block_of[learner]],
                    target=config_target(labels, targets),
                    backbone=meta["backbone"],
                    job=job,
                    job_name="projected",
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
