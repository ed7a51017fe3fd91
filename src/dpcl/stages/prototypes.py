"""Stage of ``workflow/rules/prototypes.smk``: the learners of registry job ``prototypes`` (noisy class
sums on cached features: the DP cosine classifier, [LabelSpace] Alg. 1) over every (ε, label method) of one
seed, each run made by the learner's ``run`` function (:mod:`dpcl.learners.api`)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json, write_npz
from ..privacy.accounting import Budget
from .common import config_target, write_run
from .learner import run_learner


def run_prototype_learner(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    *,
    learner: str,
    backbone: str = "features",
    target: Budget | None = None,
) -> tuple[dict, dict, dict, dict]:
    """One run of a ``prototypes`` learner through all tasks, made by its ``run`` function
    (:func:`dpcl.stages.learner.run_learner`): (metrics, privacy ledger, model arrays, diagnostics).

    ``train`` = (features, labels, original indices sorted ascending), ``test`` = (features, labels),
    ``labels`` = the label-release file of this (ε, method), ``backbone`` names the features and
    ``learner`` the registered learner (both part of the noise stream's key), ``target`` the config's
    (ε, δ)."""
    metrics, privacy, diag, model = run_learner(
        learner,
        train=train,
        test=test,
        scenario=scenario,
        labels=labels,
        target=target,
        backbone=backbone,
        job_name="prototypes",
    )
    return metrics, privacy, model, diag


def prototypes_sweep(
    train_path: str | Path,
    test_path: str | Path,
    scenario_path: str | Path,
    runs: list[dict],
    *,
    learners: list[str] | tuple[str, ...],
    save_model_max_labels: int = 1000,
    threads: int | None = None,
    targets: dict | None = None,
) -> None:
    """Run every (ε, label method) of one seed of the ``prototypes`` job's ``learners``; ``runs`` items:
    {labels, outputs: {learner: (metrics, privacy, diagnostics)}} or, for a single learner, {labels,
    metrics, privacy, diagnostics}. A model over at most ``save_model_max_labels`` labels is saved beside
    its metrics (model.npz).

    ``threads`` caps the BLAS threads (so parallel jobs do not oversubscribe the cores);
    ``targets`` (ε tag -> {epsilon, delta}) are the config's (see :func:`config_target`).
    """
    from threadpoolctl import threadpool_limits

    from ..features import load_feature_cache
    from ..learners.registry import run_function

    for learner in learners:
        run_function(learner, "prototypes")  # a clear error before any work
    with threadpool_limits(limits=threads):
        tx, ty, tidx, meta = load_feature_cache(train_path)
        ex, ey, _, _ = load_feature_cache(test_path)
        sc = Scenario.from_dict(read_json(scenario_path))
        for run in runs:
            labels = read_json(run["labels"])
            for learner in learners:
                t0 = time.perf_counter()
                metrics, privacy, model, diag = run_prototype_learner(
                    (tx, ty, tidx),
                    (ex, ey),
                    sc,
                    labels,
                    learner=learner,
                    backbone=meta["backbone"],
                    target=config_target(labels, targets),
                )
                log(
                    f"{learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: "
                    f"final acc {100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
                )
                paths = (
                    run["outputs"][learner]
                    if "outputs" in run
                    else (run["metrics"], run["privacy"], run.get("diagnostics"))
                )
                files = {"metrics": paths[0], "privacy": paths[1], "diagnostics": paths[2]}
                write_run(files, metrics, privacy, diag)
                if model["sums"].shape[0] <= save_model_max_labels:
                    write_npz(Path(files["metrics"]).with_name("model.npz"), **model)
