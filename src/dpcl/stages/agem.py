"""Stages of ``workflow/rules/agem.smk``: the enhanced DP-A-GEM baseline (App. D.4), head-only,
and Fig. 3."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json
from ..privacy.accounting import Budget
from .common import (
    config_target,
    feature_runs,
    finish_run,
    hyperparameters_note,
    parse_eps,
    read_records,
    release_rng,
    resolve_dpsgd,
    task_inputs,
    write_run,
)

#: the search behind a tuned DP-A-GEM (and Desai et al.) run (privacy.json "hyperparameters")
AGEM_SEARCH = (
    "DP-A-GEM's Optuna search (its two-task loop with the buffer rate, in the Base Dataset label space "
    "whatever the run's label method: dpcl.learners.agem.tune_agem_head)"
)


def run_agem(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    *,
    learner: str,
    dpsgd_cfg: dict,
    agem_cfg: dict,
    noise_cache: dict | None = None,
    backbone: str = "features",
    target: Budget | None = None,
    protocol: str | None = None,
) -> tuple[dict, dict, dict]:
    """One DP-A-GEM run for one (ε, label method): (metrics, privacy ledger, diagnostics). ``learner`` (its
    registered name) keys its noise streams and names its ledger.

    The ledger holds, per task, the label release (all of D_t), the train part's DP-SGD
    and the reference part's buffer rereads over the later tasks (disjoint parts, in
    parallel); it raises if any individual's total exceeds the target.
    """
    from ..learners.agem import AGEMConfig, agem_noise, privacy_summary, run_agem_head
    from ..training.heads import DPSGDConfig

    cfg, agem = DPSGDConfig.from_block(dpsgd_cfg), AGEMConfig.from_config(agem_cfg)
    agem.validate()
    tb = labels["training_budget"]
    n_tasks = len(scenario.train_indices)
    eps, delta = parse_eps(tb["epsilon"]), float(tb["delta"])
    noise, noise_ref = agem_noise(eps, delta, cfg, agem, n_tasks, noise_cache)
    spaces, task_data, test_sets = task_inputs(train, test, scenario, labels, with_ids=True)
    preds, records, stats = run_agem_head(
        task_data,
        test_sets,
        spaces,
        int(labels["label_universe"]),
        cfg,
        agem,
        noise=noise,
        noise_ref=noise_ref,
        rng_for=lambda t, part: release_rng(labels, backbone, learner, t, part),
        split_seed=seed,
    )
    extra = {
        "noise_multiplier": noise["noise_multiplier"],
        "buffer_noise_multiplier": None if noise_ref is None else noise_ref["noise_multiplier"],
        "dpsgd": dpsgd_cfg,
        "agem": agem_cfg,
    }
    return finish_run(
        learner,
        labels,
        seed,
        preds,
        records,
        [y for _, y in test_sets],
        extra=extra,
        summary=lambda p, tasks: privacy_summary(
            p, tasks, cfg, agem, noise=noise, noise_ref=noise_ref, n_tasks=n_tasks
        ),
        target=target,
        hyperparameters=hyperparameters_note(dpsgd_cfg, protocol, AGEM_SEARCH),
        diagnostics={"agem_tasks": stats},
    )


def run_agem_as_published(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    seed: int,
    *,
    learner: str,
    dpsgd_cfg: dict,
    agem_cfg: dict,
    noise_cache: dict | None = None,
    backbone: str = "features",
    target: Budget | None = None,
    protocol: str | None = None,
) -> tuple[dict, dict, dict]:
    """One run of Desai et al.'s DP-CL as published (paper 002 Alg. 1): σ calibrated by Lemma 2's claim,
    the ledger holding our tightest accounting of the actual rereads (PLD, uniform block choice) and
    the claim beside it (``published_claim`` with its three-valued verdicts; guarantee_holds: false
    unless the run's target is certified). ``learner`` (its registered name) keys its noise streams and
    names its ledger."""
    from ..learners.agem import AGEMConfig
    from ..learners.desai import desai_claim, lemma2_noise, run_desai_head
    from ..training.heads import DPSGDConfig

    cfg, agem = DPSGDConfig.from_block(dpsgd_cfg), AGEMConfig.from_config(agem_cfg)
    agem.validate()
    tb = labels["training_budget"]
    n_tasks = len(scenario.train_indices)
    eps, delta = parse_eps(tb["epsilon"]), float(tb["delta"])
    noise = lemma2_noise(eps, delta, cfg, agem.ref_rate(cfg), noise_cache)
    spaces, task_data, test_sets = task_inputs(train, test, scenario, labels, with_ids=True)
    preds, records, stats = run_desai_head(
        task_data,
        test_sets,
        spaces,
        int(labels["label_universe"]),
        cfg,
        agem,
        noise=noise,
        rng_for=lambda t, part: release_rng(labels, backbone, learner, t, part),
        split_seed=seed,
    )
    extra = {"noise_multiplier": noise["noise_multiplier"], "dpsgd": dpsgd_cfg, "agem": agem_cfg}
    label_eps = max((float(e["epsilon"]) for e in labels["ledger"]), default=0.0)  # public label release
    claim = desai_claim(noise, cfg, agem, n_tasks, label_eps) if math.isfinite(eps) else None
    if claim is not None:  # the verdicts (public parameters only) for Fig. 3 and the tables
        extra["published_claim"] = claim_summary(claim)
    return finish_run(
        learner,
        labels,
        seed,
        preds,
        records,
        [y for _, y in test_sets],
        extra=extra,
        target=target,
        hyperparameters=hyperparameters_note(dpsgd_cfg, protocol, AGEM_SEARCH),  # DP-A-GEM's study
        diagnostics={"desai_tasks": stats},
        claim=claim,
    )


def claim_summary(claim: dict) -> dict:
    """A published claim's verdicts for a run's metrics: overall, and per adjacency."""
    return {
        "source": claim["source"],
        "claimed_epsilon": claim["claimed_epsilon"],
        "verdict": claim["verdict"],
        "verdicts": {v["adjacency"]: v["verdict"] for v in claim["verdicts"]},
    }


def tuned_agem(agem_cfg: dict, tuned_path: str | Path | None) -> dict:
    """The ``agem`` block with the tuned buffer rate of ``tuned_path`` (a DP-A-GEM tuning result), if given."""
    if tuned_path is None:
        return dict(agem_cfg)
    res = read_json(tuned_path)
    if "best_buffer_sample_rate" not in res:
        raise ValueError(
            f"{tuned_path} is not a DP-A-GEM tuning result (no buffer rate); rerun its tune_agem job"
        )
    return {**agem_cfg, "buffer_sample_rate": float(res["best_buffer_sample_rate"])}


def agem_sweep(
    train_path: str | Path,
    test_path: str | Path,
    scenario_path: str | Path,
    runs: list[dict],
    *,
    dpsgd_cfg: dict,
    agem_cfg: dict,
    threads: int | None = None,
    tuned: dict[str, str] | None = None,
    targets: dict | None = None,
    learners: list[str] | tuple[str, ...],
) -> None:
    """All (ε, label method) runs of one seed of the memory-buffer learners (job ``agem`` of the learner
    registry: the enhanced DP-A-GEM, App. D.4, and Desai et al.'s DP-CL as published, paper 002), each
    made by its registered stage function; ``runs`` items: {labels, outputs: {learner: (metrics, privacy,
    diagnostics)}} or, for a single learner, {labels, metrics, privacy, diagnostics}.

    ``tuned`` maps ε tags to DP-A-GEM's own tuning results (:func:`dpcl.learners.agem.tune_agem_head`):
    its DP-SGD config scaled to a task and its buffer rate, which replaces ``agem.buffer_sample_rate``.
    """
    from ..learners.registry import stage_function

    stages = {learner: stage_function(learner, "agem") for learner in learners}
    for run, train, test, sc, labels, tuned_path, cache, backbone in feature_runs(
        train_path, test_path, scenario_path, runs, threads, tuned
    ):
        for learner in learners:
            t0 = time.perf_counter()
            cfg, protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, labels["epsilon_tag"], learner)
            agem = tuned_agem(agem_cfg, tuned_path)
            metrics, privacy, diag = stages[learner](
                train,
                test,
                sc,
                labels,
                int(sc.seed),
                learner=learner,
                dpsgd_cfg=cfg,
                agem_cfg=agem,
                noise_cache=cache,
                backbone=backbone,
                target=config_target(labels, targets),
                protocol=protocol,
            )
            paths = (
                run["outputs"][learner]
                if "outputs" in run
                else (run["metrics"], run["privacy"], run.get("diagnostics"))
            )
            write_run(
                {"metrics": paths[0], "privacy": paths[1], "diagnostics": paths[2]}, metrics, privacy, diag
            )
            log(
                f"{learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
                f"{100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
            )


def desai_figure(metrics_paths: list[str | Path], benchmark: str, outputs: list[str | Path]) -> None:
    """Fig. 3 for one benchmark: Cosine Classifier, PEFT Ensemble and DP-A-GEM in the Base Dataset setting."""
    from ..report.figures import plot_desai_comparison

    records = read_records(metrics_paths)
    other = sorted({r["label_method"] for r in records} - {"base"})
    if other:
        raise ValueError(f"Fig. 3 is drawn in the Base Dataset setting (label method 'base'), not {other}")
    plot_desai_comparison(records, f"{benchmark}: comparison with Desai et al. (Base Dataset)", outputs)
