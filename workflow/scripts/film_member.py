"""Every PEFT FiLM member of one run (thin wrapper: dpcl.stages.film.film_members_stage)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.film import film_members_stage

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p, w = sm.params, sm.wildcards
film_members_stage(
    learner=w.learner,
    dataset=w.dataset,
    root=Path(sm.input.manifest).parent,
    dataset_cfg=dict(p.dataset_cfg),
    backbone_cfg=dict(p.backbone_cfg),
    scenario_path=sm.input.scenario,
    labels_path=sm.input.labels,
    dpsgd_cfg=dict(p.dpsgd),
    physical_batch=int(p.physical_batch),
    device=p.device,
    out_dir=sm.output.members,
    tuned_path=getattr(sm.input, "tuned", None),
    backbone_name=w.backbone,
)
