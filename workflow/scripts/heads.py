"""DP-SGD head learners of one seed (thin wrapper: dpcl.stages.heads.head_learner_sweep)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.common import runs_by_learner
from dpcl.stages.heads import head_learner_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
runs = runs_by_learner(
    sm.input.labels,
    sm.output.metrics,
    sm.output.privacy,
    sm.output.diagnostics,
    learners,
    requested=[list(r) for r in sm.params.run_learners],
)
tuned = dict(zip(sm.params.eps_tags, sm.input.tuned, strict=True)) if len(sm.input.tuned) else None
head_learner_sweep(
    sm.input.train,
    sm.input.test,
    sm.input.scenario,
    runs,
    learners,
    dict(sm.params.dpsgd),
    aggregation=sm.params.aggregation,
    threads=sm.threads,
    tuned=tuned,
    targets=sm.params.targets,
)
