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
    w.dataset,
    Path(sm.input.manifest).parent,
    dict(p.dataset_cfg),
    dict(p.backbone_cfg),
    sm.input.scenario,
    sm.input.labels,
    [f"{sm.input.members}/task{t}.npz" for t in range(p.n_tasks)],
    [f"{sm.input.members}/task{t}.json" for t in range(p.n_tasks)],
    dict(p.dpsgd),
    p.aggregation,
    p.device,
    sm.output.metrics,
    sm.output.privacy,
    tuned_path=getattr(sm.input, "tuned", None),
    targets=p.targets,
    out_diagnostics=sm.output.diagnostics,
)
