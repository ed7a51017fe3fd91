"""Stage of ``workflow/rules/learners.smk``: a learner that brings its own ``run`` function (registry job
``features``, :mod:`dpcl.learners.api`) over every (ε, label method) of one seed on cached features.

The stage does the files and the release boundary; the learner only trains and predicts: it gets
:class:`~dpcl.learners.api.RunInputs` and returns :class:`~dpcl.learners.api.RunResult`, whose per-task
records become the run's ledger (verified against the learner's ``LEDGER_SPEC`` before anything is
written) and non-private diagnostics (:func:`dpcl.stages.common.finish_run`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

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


def run_learner(learner: str, *, train, test, scenario, labels: dict, options: dict, target, backbone: str):
    """One run of ``learner`` (job ``features``): (metrics, verified privacy ledger, diagnostics)."""
    from ..learners import registry
    from ..learners.api import RunInputs, TaskData

    spec = registry.get(learner)
    if spec.job != "features":
        raise ValueError(f"learner {learner!r} runs in job {spec.job!r}, not in the features job")
    spaces, task_data, test_sets = task_inputs(train, test, scenario, labels, with_ids=True)
    tb = labels["training_budget"]
    inputs = RunInputs(
        tasks=tuple(
            TaskData(x=x, y=y, ids=ids, label_space=tuple(int(c) for c in o_t))
            for (x, y, ids), o_t in zip(task_data, spaces, strict=True)
        ),
        test_sets=tuple(test_sets),
        n_universe=int(labels["label_universe"]),
        epsilon=parse_eps(tb["epsilon"]),
        delta=float(tb["delta"]),
        seed=int(scenario.seed),
        rng_for=lambda t, mechanism: release_rng(labels, backbone, learner, t, mechanism),
        options=dict(options),
    )
    result = spec.run(inputs)
    if len(result.predictions) != len(task_data) or len(result.records) != len(task_data):
        raise ValueError(
            f"learner {learner!r} returned {len(result.predictions)} prediction lists and "
            f"{len(result.records)} records for {len(task_data)} tasks (one of each per task)"
        )
    return finish_run(
        learner,
        labels,
        int(scenario.seed),
        result.predictions,
        result.records,
        [y for _, y in test_sets],
        extra=dict(result.extra),
        target=target,
        hyperparameters=hyperparameters_note(dict(options) or None, None),
        diagnostics=dict(result.diagnostics),
    )


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
        metrics, privacy, diag = run_learner(
            job.learner,
            train=train,
            test=test,
            scenario=sc,
            labels=labels,
            options=job.options,
            target=config_target(labels, job.targets),
            backbone=backbone,
        )
        write_run(run, metrics, privacy, diag)
        log(
            f"{job.learner} seed {sc.seed} eps {labels['epsilon_tag']} {labels['method']}: final acc "
            f"{100 * metrics['final_accuracy']:.1f} % ({time.perf_counter() - t0:.1f} s)"
        )
