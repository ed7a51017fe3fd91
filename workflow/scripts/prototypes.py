"""Runs of one seed of the learners of registry job "prototypes" (thin wrapper:
dpcl.stages.prototypes.prototypes_sweep)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.common import runs_by_learner
from dpcl.stages.prototypes import prototypes_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
runs = runs_by_learner(sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics, learners)
prototypes_sweep(
    sm.input.train,
    sm.input.test,
    sm.input.scenario,
    runs,
    learners=learners,
    threads=sm.threads,
    targets=sm.params.targets,
)
