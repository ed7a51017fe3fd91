"""DP-A-GEM (enhanced, App. D.4) and Desai et al. as published, runs of one seed (thin wrapper:
dpcl.stages.agem.agem_sweep)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.agem import agem_sweep
from dpcl.stages.common import runs_by_learner

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
runs = runs_by_learner(sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics, learners)
tuned = dict(zip(sm.params.eps_tags, sm.input.tuned, strict=True)) if len(sm.input.tuned) else None
agem_sweep(
    sm.input.train,
    sm.input.test,
    sm.input.scenario,
    runs,
    dpsgd_cfg=dict(sm.params.dpsgd),
    agem_cfg=dict(sm.params.agem),
    threads=sm.threads,
    tuned=tuned,
    targets=sm.params.targets,
    learners=learners,
)
