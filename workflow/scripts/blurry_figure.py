"""Fig. 7 right panel for an i-Blurry benchmark (thin wrapper: dpcl.stages.report.blurry_figure)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.report import blurry_figure

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
b = sm.params.bench
blurry_figure(
    sm.params.dataset,
    Path(sm.input[0]).parent,
    sm.params.dataset_cfg,
    b["n_tasks"],
    b["disjoint_pct"],
    b["blurry_figure_pcts"],
    sm.params.seed,
    sm.wildcards.benchmark,
    list(sm.output),
)
