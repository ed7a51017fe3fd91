"""Tune the head learners' (or, rule tune_agem, DP-A-GEM's) DP-SGD hyperparameters for one seed
(thin: dpcl.stages.heads.tune_head_learners)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from dpcl.io import tee_stderr
from dpcl.stages.heads import tune_head_learners

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
d = sm.params.dpsgd
tune_head_learners(
    sm.input.features,
    sm.input.scenario,
    sm.wildcards.dataset,
    dict(sm.params.dataset_cfg),
    sm.params.protocol,
    sm.params.epsilons,
    sm.params.delta,
    dict(zip(sm.params.eps_tags, sm.output, strict=True)),
    sm.params.trials,
    d["epochs"],
    d["normaliser"],
    sm.params.get("agem_buffer_fraction"),
)
