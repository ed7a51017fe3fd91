"""L2DP-ML and fm_agem runs of one seed (thin wrapper: dpcl.stages.l2dpml.l2dpml_sweep)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from dpcl.io import tee_stderr
from dpcl.stages.common import runs_by_learner
from dpcl.stages.l2dpml import l2dpml_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
runs = runs_by_learner(sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics, learners)
l2dpml_sweep(
    sm.input.train,
    sm.input.test,
    sm.input.tune,
    sm.input.scenario,
    runs,
    learners,
    l2dpml_cfg=dict(sm.params.l2dpml),
    fm_cfg=dict(sm.params.fm_agem),
    threads=sm.threads,
    targets=sm.params.targets,
    tuning=dict(sm.params.tuning),  # FM-A-GEM's grid search (tuning.enabled, tuning.protocol)
    dataset=sm.wildcards.dataset,
    dataset_cfg=dict(sm.params.dataset_cfg),
)
