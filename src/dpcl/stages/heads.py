"""Stages of ``workflow/rules/heads.smk``: the DP-SGD head learners on cached features (PEFT
ensemble head-only, Naive, Non-CL) and their tuning (App. D.1, :mod:`dpcl.training.tuning_protocol`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..config import eps_tag
from ..data.scenarios import Scenario
from ..io import log, read_json, write_json
from ..privacy.accounting import Budget
from .common import config_target, feature_runs, resolve_dpsgd, write_run
from .learner import run_learner


@dataclass(frozen=True, kw_only=True)
class HeadJob:
    """What the ``heads`` job gives a head learner's run (:attr:`dpcl.learners.api.RunInputs.job`): its
    DP-SGD config (the tuning result scaled to its training set, App. D.1, or the configured block), the
    tuning protocol (None: untuned), the ensemble's aggregation rule and the seed's noise cache."""

    dpsgd_cfg: dict
    protocol: str | None = None
    aggregation: str = "argmax"
    noise_cache: dict | None = None


def run_head_learners(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    learners: list[str],
    *,
    dpsgd_cfg: dict,
    aggregation: str = "argmax",
    noise_cache: dict | None = None,
    backbone: str = "features",
    target: Budget | None = None,
    tuned_path: str | Path | None = None,
) -> dict[str, tuple[dict, dict, dict]]:
    """Every head learner for one (ε, label method): {learner: (metrics, privacy ledger, diagnostics)},
    each made by its ``run`` function (:func:`dpcl.stages.learner.run_learner`); with ``tuned_path`` each
    learner runs the tuning result scaled to its training set (App. D.1)."""
    out = {}
    for learner in learners:
        learner_cfg, protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, labels["epsilon_tag"], learner)
        job = HeadJob(
            dpsgd_cfg=learner_cfg, protocol=protocol, aggregation=aggregation, noise_cache=noise_cache
        )
        metrics, privacy, diag, _ = run_learner(
            learner,
            train=train,
            test=test,
            scenario=scenario,
            labels=labels,
            target=target,
            backbone=backbone,
            job=job,
            job_name="heads",
        )
        out[learner] = (metrics, privacy, diag)
    return out


def head_learner_sweep(
    train_path: str | Path,
    test_path: str | Path,
    scenario_path: str | Path,
    runs: list[dict],
    learners: list[str],
    dpsgd_cfg: dict,
    *,
    aggregation: str = "argmax",
    threads: int | None = None,
    tuned: dict[str, str] | None = None,
    targets: dict | None = None,
) -> None:
    """All (ε, label method) runs of one seed; ``runs`` items: {labels, outputs: {learner: (metrics,
    privacy[, diagnostics])}}.

    ``tuned`` maps ε tags to tuning results; their DP-SGD config (scaled per learner) replaces
    ``dpsgd_cfg``; ``targets`` are the config's (ε tag -> {epsilon, delta}).
    """
    for run, train, test, sc, labels, tuned_path, cache, backbone in feature_runs(
        train_path, test_path, scenario_path, runs, threads, tuned
    ):
        t0 = time.perf_counter()
        res = run_head_learners(
            train,
            test,
            sc,
            labels,
            int(sc.seed),
            [learner for learner in learners if learner in run["outputs"]],
            dpsgd_cfg=dpsgd_cfg,
            aggregation=aggregation,
            noise_cache=cache,
            backbone=backbone,
            target=config_target(labels, targets),
            tuned_path=tuned_path,
        )
        for learner, (metrics, privacy, diag) in res.items():
            paths = run["outputs"][learner]
            write_run(
                {
                    "metrics": paths[0],
                    "privacy": paths[1],
                    "diagnostics": paths[2] if len(paths) > 2 else None,
                },
                metrics,
                privacy,
                diag,
            )
        accs = ", ".join(f"{k} {100 * v[0]['final_accuracy']:.1f} %" for k, v in res.items())
        log(
            f"heads seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: {accs} "
            f"({time.perf_counter() - t0:.1f} s)"
        )


def tune_head_learners(
    features_path: str | Path,
    scenario_path: str | Path,
    dataset: str,
    dataset_cfg: dict,
    protocol: str,
    epsilons: list[float],
    *,
    delta: float,
    outputs: dict[str, str],
    n_trials: int,
    epochs: float,
    normaliser: float,
    agem_buffer_fraction: float | None = None,
) -> None:
    """Tune the head learners' DP-SGD hyperparameters once per (ε, seed) on the tuning set of
    ``protocol`` (:func:`dpcl.training.tuning_protocol.tuning_plan`: the public tuning split's, or
    as the paper the private training data's, first-task classes) read from ``features_path`` (the
    plan's split), and write each result with the configs scaled to the runs. With
    ``agem_buffer_fraction`` the study is DP-A-GEM's own (:func:`dpcl.learners.agem.tune_agem_head`:
    its two-task loop over the first two tasks' classes, and its buffer rate)."""
    from ..features import load_feature_cache
    from ..learners.agem import tune_agem_head
    from ..training.tuning import tune_head
    from ..training.tuning_protocol import tuning_plan, tuning_rows, with_run_configs

    sc = Scenario.from_dict(read_json(scenario_path))
    plan = tuning_plan(
        dataset, dataset_cfg, sc.task_classes, protocol, 1 if agem_buffer_fraction is None else 2
    )
    x, y, _, meta = load_feature_cache(features_path)
    if meta.get("split", plan.split) != plan.split:
        raise ValueError(
            f"{features_path} caches split {meta.get('split')!r}, the {protocol} protocol tunes on "
            f"{plan.split!r}"
        )
    rows = tuning_rows(y, plan, int(sc.seed))
    for eps in epsilons:
        t0 = time.perf_counter()
        journal = f"{outputs[eps_tag(eps)]}.optuna-journal"  # a retried job resumes its search
        if agem_buffer_fraction is None:
            res = tune_head(
                x[rows],
                y[rows],
                eps,
                delta,
                int(sc.seed),
                n_trials=n_trials,
                epochs=epochs,
                normaliser=normaliser,
                journal=journal,
            )
        else:
            res = tune_agem_head(
                x[rows],
                y[rows],
                eps,
                delta,
                int(sc.seed),
                agem_buffer_fraction,
                n_trials=n_trials,
                epochs=epochs,
                normaliser=normaliser,
                tasks=plan.tasks,
                journal=journal,
            )
        res = with_run_configs(res, plan) | {"seed": sc.seed}
        write_json(outputs[eps_tag(eps)], res)
        who = "heads" if agem_buffer_fraction is None else "agem (DP-A-GEM with its buffer rate)"
        log(
            f"tuned {who} seed {sc.seed} eps {eps_tag(eps)} ({protocol} protocol, factor "
            f"{res['plan']['factor_per_task']:.3g}): validation accuracy "
            f"{100 * res['best_validation_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
        )
