"""Tune the head learners' (or, rule tune_agem, DP-A-GEM's) DP-SGD hyperparameters for one seed
(thin: dpcl.stages.heads.tune_head_learners)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

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
    delta=sm.params.delta,
    outputs=dict(zip(sm.params.eps_tags, sm.output, strict=True)),
    n_trials=sm.params.trials,
    epochs=d["epochs"],
    normaliser=d["normaliser"],
    agem_buffer_fraction=sm.params.get("agem_buffer_fraction"),
)
