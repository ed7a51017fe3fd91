"""Stages of ``workflow/rules/agem.smk``: the enhanced DP-A-GEM baseline (App. D.4), head-only,
and Fig. 3."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..data.scenarios import Scenario
from ..io import log, read_json
from ..privacy.accounting import Budget
from .common import config_target, feature_runs, read_records, resolve_dpsgd, write_run
from .learner import run_learner


@dataclass(frozen=True, kw_only=True)
class MemoryJob:
    """What the ``agem`` job gives a memory-buffer learner's run (:attr:`dpcl.learners.api.RunInputs.job`):
    the run's DP-SGD config (tuned or configured) and ``agem`` block, the tuning protocol (None: untuned)
    and the seed's noise cache."""

    dpsgd_cfg: dict
    agem_cfg: dict
    protocol: str | None = None
    noise_cache: dict | None = None


def run_memory_learner(
    train: tuple[np.ndarray, np.ndarray, np.ndarray],
    test: tuple[np.ndarray, np.ndarray],
    scenario: Scenario,
    labels: dict,
    *,
    learner: str,
    dpsgd_cfg: dict,
    agem_cfg: dict,
    noise_cache: dict | None = None,
    backbone: str = "features",
    target: Budget | None = None,
    protocol: str | None = None,
) -> tuple[dict, dict, dict]:
    """One run of a memory-buffer learner (job ``agem``) for one (ε, label method), made by its ``run``
    function (:func:`dpcl.stages.learner.run_learner`): (metrics, privacy ledger, diagnostics).
    ``learner`` (its registered name) keys its noise streams and names its ledger."""
    metrics, privacy, diag, _ = run_learner(
        learner,
        train=train,
        test=test,
        scenario=scenario,
        labels=labels,
        options=agem_cfg,
        target=target,
        backbone=backbone,
        job=MemoryJob(dpsgd_cfg=dpsgd_cfg, agem_cfg=agem_cfg, protocol=protocol, noise_cache=noise_cache),
        job_name="agem",
    )
    return metrics, privacy, diag


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
    registry: the enhanced DP-A-GEM, App. D.4, and Desai et al.'s DP-CL as published, [Desai2021]), each
    made by its ``run`` function; ``runs`` items: {labels, outputs: {learner: (metrics, privacy,
    diagnostics)}} or, for a single learner, {labels, metrics, privacy, diagnostics}.

    ``tuned`` maps ε tags to DP-A-GEM's own tuning results (:func:`dpcl.learners.agem.tune_agem_head`):
    its DP-SGD config scaled to a task and its buffer rate, which replaces ``agem.buffer_sample_rate``.
    """
    from ..learners.registry import run_function

    for learner in learners:
        run_function(learner, "agem")  # a clear error before any work
    for run, train, test, sc, labels, tuned_path, cache, backbone in feature_runs(
        train_path, test_path, scenario_path, runs, threads, tuned
    ):
        for learner in learners:
            t0 = time.perf_counter()
            cfg, protocol = resolve_dpsgd(dpsgd_cfg, tuned_path, labels["epsilon_tag"], learner)
            agem = tuned_agem(agem_cfg, tuned_path)
            metrics, privacy, diag = run_memory_learner(
                train,
                test,
                sc,
                labels,
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
