"""Fig. 7 right panel for an i-Blurry benchmark (thin wrapper: dpcl.stages.report.blurry_figure)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.report import blurry_figure

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
b = sm.params.bench
blurry_figure(
    dataset=sm.params.dataset,
    root=Path(sm.input[0]).parent,
    dataset_cfg=sm.params.dataset_cfg,
    n_tasks=b["n_tasks"],
    disjoint_pct=b["disjoint_pct"],
    blurry_pcts=b["blurry_figure_pcts"],
    seed=sm.params.seed,
    title=sm.wildcards.benchmark,
    outputs=list(sm.output),
)
