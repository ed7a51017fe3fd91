"""Runs of one seed of a learner with its own run function (thin wrapper: dpcl.stages.learner.learner_sweep)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.learner import RunFiles, SeedJob, learner_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learner_sweep(
    SeedJob(
        learner=sm.params.learner,
        train=sm.input.train,
        test=sm.input.test,
        scenario=sm.input.scenario,
        runs=tuple(
            RunFiles(labels=lab, metrics=met, privacy=priv, diagnostics=diag)
            for lab, met, priv, diag in zip(
                sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics, strict=True
            )
        ),
        options=dict(sm.params.options),
        targets=sm.params.targets,
        modules=tuple(sm.params.modules),
        threads=sm.threads,
    )
)
