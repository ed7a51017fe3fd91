"""Runs of one seed of the learners of registry job "projected" (thin wrapper:
dpcl.stages.projected.projected_sweep)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.common import runs_by_learner
from dpcl.stages.projected import projected_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
runs = runs_by_learner(sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics, learners)
projected_sweep(
    sm.input.train,
    sm.input.test,
    sm.input.tune,
    sm.input.scenario,
    runs,
    learners,
    blocks={name: dict(block) for name, block in sm.params.blocks.items()},
    threads=sm.threads,
    targets=sm.params.targets,
    tuning=dict(sm.params.tuning),  # a learner that tunes in its job (tuning.enabled, tuning.protocol)
    dataset=sm.wildcards.dataset,
    dataset_cfg=dict(sm.params.dataset_cfg),
)
