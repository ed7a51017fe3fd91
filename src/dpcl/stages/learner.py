"""The stage that makes one run of any learner: it builds the learner's
:class:`~dpcl.learners.api.RunInputs` from the run's data and label file, calls the learner's ``run`` (the
learner contract, :mod:`dpcl.learners.api`), and turns the :class:`~dpcl.learners.api.RunResult` into the
run's metrics, its verified privacy ledger and its non-private diagnostics
(:func:`dpcl.stages.common.finish_run`). Every job on cached features (``prototypes``, ``heads``, ``agem``,
``projected``, ``features``) goes through :func:`run_learner`, the FiLM jobs on images
(:mod:`dpcl.stages.film`) and the privacy audits' runs (:mod:`dpcl.stages.audit_runs`) through
:func:`run_contract`.

This module also holds the ``features`` job of ``workflow/rules/learners.smk``: a learner that brings its
own ``run`` function (a user's, config ``learner_modules``), over every (ε, label method) of one seed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..io import log
from .common import (
    config_target,
    feature_runs,
    finish_run,
    hyperparameters_note,
    parse_eps,
    release_rng,
    task_inputs,
    write_run,
)


@dataclass(frozen=True, kw_only=True)
class RunFiles:
    """One run's input label file and its three output files."""

    labels: str | Path
    metrics: str | Path
    privacy: str | Path
    diagnostics: str | Path


@dataclass(frozen=True, kw_only=True)
class SeedJob:
    """The inputs of one job: one learner, one seed, every (ε, label method) it runs."""

    learner: str
    train: str | Path  #: the feature cache of the training split
    test: str | Path  #: the feature cache of the test split
    scenario: str | Path
    runs: tuple[RunFiles, ...]
    options: dict = field(default_factory=dict)  #: the learner's learner_options block
    targets: dict | None = None  #: ε tag -> {epsilon, delta} of the validated config
    modules: tuple[str, ...] = ()  #: the config's learner_modules (a user's learners)
    threads: int | None = None


def contract_inputs(
    learner: str,
    *,
    task_data,
    spaces,
    test_sets,
    scenario,
    labels: dict,
    options: dict | None = None,
    backbone: str = "features",
    job: Any = None,
):
    """The :class:`~dpcl.learners.api.RunInputs` of one run of ``learner``: each task's R_t^task(D_t)
    (``task_data[t]`` = (rows, labels, sample ids), features or images) with O_t (``spaces[t]``), the public
    ``test_sets``, the training budget the label file left, the run's noise streams (keyed by the data,
    ``backbone``, learner, ε, label method, task and mechanism: :func:`dpcl.stages.common.release_rng`),
    ``options`` and ``job``."""
    from ..learners.api import RunInputs, TaskData

    tb = labels["training_budget"]
    return RunInputs(
        learner=learner,
        tasks=tuple(
            TaskData(
                x=x,
                y=y,
                ids=ids,
                label_space=tuple(int(c) for c in o_t),
                dropped=int(len(scenario.train_indices[t]) - len(y)),
            )
            for t, ((x, y, ids), o_t) in enumerate(zip(task_data, spaces, strict=True))
        ),
        test_sets=tuple(test_sets),
        n_universe=int(labels["label_universe"]),
        epsilon=parse_eps(tb["epsilon"]),
        delta=float(tb["delta"]),
        seed=int(scenario.seed),
        rng_for=lambda t, mechanism: release_rng(labels, backbone, learner, t, mechanism),
        options=dict(options or {}),
        label_method=labels["method"],
        label_epsilon=max((float(e["epsilon"]) for e in labels["ledger"]), default=0.0),
        shared_inputs=not scenario.feature_permutation,
        job=job,
    )


def run_inputs(
    learner: str,
    *,
    train,
    test,
    scenario,
    labels: dict,
    options: dict | None = None,
    backbone: str = "features",
    job: Any = None,
):
    """The :class:`~dpcl.learners.api.RunInputs` of one run of ``learner`` on cached features
    (:func:`contract_inputs` over :func:`dpcl.stages.common.task_inputs`)."""
    spaces, task_data, test_sets = task_inputs(train, test, scenario, labels, with_ids=True)
    return contract_inputs(
        learner,
        task_data=task_data,
        spaces=spaces,
        test_sets=test_sets,
        scenario=scenario,
        labels=labels,
        options=options,
        backbone=backbone,
        job=job,
    )


def run_contract(
    inputs,
    *,
    labels: dict,
    target=None,
    job_name: str | None = None,
):
    """One run of ``inputs.learner`` through its ``run`` function: (metrics, verified privacy ledger,
    non-private diagnostics, the :class:`~dpcl.learners.api.RunResult`). ``job_name``, if given, is
    checked to be the registry job that runs the learner; ``target`` is the config's (ε, δ) (None: the
    label file's)."""
    from ..learners import registry

    run = registry.run_function(inputs.learner, job_name)
    result = run(inputs)
    n = len(inputs.tasks)
    if len(result.predictions) != n or len(result.records) != n:
        raise ValueError(
            f"learner {inputs.learner!r} returned {len(result.predictions)} prediction lists and "
            f"{len(result.records)} records for {n} tasks (one of each per task)"
        )
    hyperparameters = result.hyperparameters
    if hyperparameters is None:
        hyperparameters = hyperparameters_note(dict(inputs.options) or None, None)
    metrics, privacy, diag = finish_run(
        inputs.learner,
        labels,
        inputs.seed,
        result.predictions,
        result.records,
        [y for _, y in inputs.test_sets],
        extra=dict(result.extra),
        summary=result.summary,
        target=target,
        hyperparameters=hyperparameters,
        diagnostics=dict(result.diagnostics),
        claim=result.claim,
    )
    privacy.update(result.privacy_extra)
    return metrics, privacy, diag, result


def run_learner(
    learner: str,
    *,
    train,
    test,
    scenario,
    labels: dict,
    options: dict | None = None,
    target=None,
    backbone: str = "features",
    job: Any = None,
    job_name: str | None = None,
) -> tuple[dict, dict, dict, dict | None]:
    """One run of ``learner`` on cached features through its ``run`` function (:func:`run_contract`):
    (metrics, verified privacy ledger, non-private diagnostics, model arrays or None)."""
    inputs = run_inputs(
        learner,
        train=train,
        test=test,
        scenario=scenario,
        labels=labels,
        options=options,
        backbone=backbone,
        job=job,
    )
    metrics, privacy, diag, result = run_contract(inputs, labels=labels, target=target, job_name=job_name)
    return metrics, privacy, diag, result.model


def learner_sweep(job: SeedJob) -> None:
    """Every run of one (learner, seed) job: read the features once, run, verify and write each run."""
    from ..learners import registry

    registry.load_modules(job.modules)
    runs = [
        {"labels": r.labels, "metrics": r.metrics, "privacy": r.privacy, "diagnostics": r.diagnostics}
        for r in job.runs
    ]
    for run, train, test, sc, labels, _tuned, _cache, backbone in feature_runs(
        job.train, job.test, job.scenario, runs, job.threads, None
    ):
        t0 = time.perf_counter()
        metrics, privacy, diag, _model = run_learner(
            job.learner,
            train=train,
            test=test,
            scenario=sc,
            labels=labels,
            options=job.options,
            target=config_target(labels, job.targets),
            backbone=backbone,
            job_name="features",
        )
        write_run(run, metrics, privacy, diag)
        log(
            f"{job.learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
            f"{100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
        )
