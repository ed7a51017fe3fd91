"""Stage of ``workflow/rules/prototypes.smk``: the learners of registry job ``prototypes`` (noisy class
sums on cached features: the DP cosine classifier, paper 000 Alg. 1) over every (ε, label method) of one
seed, each run made by the learner's registered stage function (:attr:`LearnerSpec.stage`)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json, write_npz
from ..learners.cosine import CosineClassifier, cosine_sigma
from ..privacy.accounting import Budget
from .common import (
    config_target,
    finish_run,
    parse_eps,
    release_rng,
    task_inputs,
    write_run,
)


def run_cosine(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    *,
    learner: str,
    backbone: str = "features",
    target: Budget | None = None,
) -> tuple[dict, dict, dict, dict]:
    """One DP cosine-classifier run through all tasks: (metrics, privacy ledger, model, diagnostics).

    ``train`` = (features, labels, original indices sorted ascending), ``test`` =
    (features, labels), ``labels`` = the label-release file of this (ε, method), ``backbone``
    names the features and ``learner`` the registered learner (both part of the noise stream's key),
    ``target`` the config's (ε, δ).
    """
    tb = labels["training_budget"]
    t_eps = parse_eps(tb["epsilon"])
    sigma = cosine_sigma(t_eps, float(tb["delta"]))
    clf = CosineClassifier(int(labels["label_universe"]), train[0].shape[1])
    spaces, task_data, test_sets = task_inputs(train, test, scenario, labels)  # R_t^task(D_t), Eq. 8
    preds: list[list[np.ndarray]] = []
    records = []
    for t, (x, y) in enumerate(task_data):
        rec = clf.update(x, y, spaces[t], sigma, release_rng(labels, backbone, learner, t, "gaussian"))
        rec.update(
            epsilon=t_eps,
            delta=float(tb["delta"]) if math.isfinite(t_eps) else 0.0,
            data=f"features of R_task(D_{t})",
            samples=int(len(y)),
            dropped=int(len(scenario.train_indices[t]) - len(y)),
        )
        records.append(rec)
        if scenario.feature_permutation:  # every test set through its own task's permutation
            preds.append([clf.predict(xt) for xt, _ in test_sets[: t + 1]])
            continue
        pred = clf.predict(np.concatenate([xt for xt, _ in test_sets[: t + 1]]))  # one pass over all seen
        bounds = np.cumsum([len(yt) for _, yt in test_sets[: t + 1]])[:-1]
        preds.append(np.split(pred, bounds))
    metrics, privacy, diag = finish_run(
        learner,
        labels,
        seed,
        preds,
        records,
        [yt for _, yt in test_sets],
        extra={"sigma": sigma},
        target=target,
    )
    privacy["sigma"] = sigma
    return metrics, privacy, {"sums": clf.sums, "seen": clf.seen}, diag


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
    from ..learners.registry import stage_function

    stages = {learner: stage_function(learner, "prototypes") for learner in learners}
    with threadpool_limits(limits=threads):
        tx, ty, tidx, meta = load_feature_cache(train_path)
        ex, ey, _, _ = load_feature_cache(test_path)
        sc = Scenario.from_dict(read_json(scenario_path))
        for run in runs:
            labels = read_json(run["labels"])
            for learner in learners:
                t0 = time.perf_counter()
                metrics, privacy, model, diag = stages[learner](
                    (tx, ty, tidx),
                    (ex, ey),
                    sc,
                    labels,
                    int(sc.seed),
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
