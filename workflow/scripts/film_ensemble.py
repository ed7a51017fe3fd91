"""Every PEFT FiLM member of one run, then the ensemble's evaluation (thin wrapper:
dpcl.stages.film.film_members_stage and film_eval_stage)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.film import film_eval_stage, film_members_stage

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p, w = sm.params, sm.wildcards
common = dict(
    learner=w.learner,
    dataset=w.dataset,
    root=Path(sm.input.manifest).parent,
    dataset_cfg=dict(p.dataset_cfg),
    backbone_cfg=dict(p.backbone_cfg),
    scenario_path=sm.input.scenario,
    labels_path=sm.input.labels,
    dpsgd_cfg=dict(p.dpsgd),
    device=p.device,
    tuned_path=getattr(sm.input, "tuned", None),
)
film_members_stage(
    **common,
    physical_batch=int(p.physical_batch),
    out_dir=sm.output.members,
    backbone_name=w.backbone,
)
film_eval_stage(
    **common,
    member_paths=[f"{sm.output.members}/task{t}.npz" for t in range(p.n_tasks)],
    record_paths=[f"{sm.output.members}/task{t}.json" for t in range(p.n_tasks)],
    aggregation=p.aggregation,
    out_metrics=sm.output.metrics,
    out_privacy=sm.output.privacy,
    targets=p.targets,
    out_diagnostics=sm.output.diagnostics,
)
