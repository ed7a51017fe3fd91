"""One Naive, Non-CL or DP-A-GEM FiLM run (thin wrapper: dpcl.stages.film.film_run_stage)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.film import film_run_stage

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p, w = sm.params, sm.wildcards
film_run_stage(
    w.learner,
    w.dataset,
    Path(sm.input.manifest).parent,
    dict(p.dataset_cfg),
    dict(p.backbone_cfg),
    scenario_path=sm.input.scenario,
    labels_path=sm.input.labels,
    dpsgd_cfg=dict(p.dpsgd),
    physical_batch=int(p.physical_batch),
    device=p.device,
    deterministic=p.deterministic,
    precision=p.precision,
    out_metrics=sm.output.metrics,
    out_privacy=sm.output.privacy,
    out_diagnostics=sm.output.diagnostics,
    out_model=sm.output.model,
    tuned_path=getattr(sm.input, "tuned", None),
    agem_cfg=dict(p.agem),
    targets=p.targets,
    backbone_name=w.backbone,
)
