"""Tune the FiLM learners' DP-SGD hyperparameters for one seed (thin: dpcl.stages.film.tune_film_stage)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.film import tune_film_stage

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p = sm.params
tune_film_stage(
    sm.wildcards.dataset,
    Path(sm.input.manifest).parent,
    dict(p.dataset_cfg),
    dict(p.backbone_cfg),
    sm.input.scenario,
    list(p.epsilons),
    float(p.delta),
    dict(zip(p.eps_tags, sm.output, strict=True)),
    int(p.trials),
    dict(p.dpsgd),
    int(p.physical_batch),
    p.device,
    p.protocol,
)
