"""Tune the FiLM learners' DP-SGD hyperparameters for one seed (thin: dpcl.stages.film.tune_film_stage)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.film import tune_film_stage

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p = sm.params
tune_film_stage(
    dataset=sm.wildcards.dataset,
    root=Path(sm.input.manifest).parent,
    dataset_cfg=dict(p.dataset_cfg),
    backbone_cfg=dict(p.backbone_cfg),
    scenario_path=sm.input.scenario,
    epsilons=list(p.epsilons),
    delta=float(p.delta),
    outputs=dict(zip(p.eps_tags, sm.output, strict=True)),
    n_trials=int(p.trials),
    dpsgd_cfg=dict(p.dpsgd),
    physical_batch=int(p.physical_batch),
    device=p.device,
    deterministic=p.deterministic,
    precision=p.precision,
    protocol=p.protocol,
)
