"""Evaluate one PEFT FiLM ensemble run (thin wrapper: dpcl.stages.film.film_eval_stage)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.film import film_eval_stage

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p, w = sm.params, sm.wildcards
film_eval_stage(
    learner=w.learner,
    dataset=w.dataset,
    root=Path(sm.input.manifest).parent,
    dataset_cfg=dict(p.dataset_cfg),
    backbone_cfg=dict(p.backbone_cfg),
    scenario_path=sm.input.scenario,
    labels_path=sm.input.labels,
    member_paths=[f"{sm.input.members}/task{t}.npz" for t in range(p.n_tasks)],
    record_paths=[f"{sm.input.members}/task{t}.json" for t in range(p.n_tasks)],
    dpsgd_cfg=dict(p.dpsgd),
    aggregation=p.aggregation,
    device=p.device,
    out_metrics=sm.output.metrics,
    out_privacy=sm.output.privacy,
    tuned_path=getattr(sm.input, "tuned", None),
    targets=p.targets,
    out_diagnostics=sm.output.diagnostics,
)
