"""Figs. 4-7 (left), A3, A4, per-benchmark A5-A9 of [LabelSpace] and [Tobaben2024] Fig. 4 (thin wrapper: dpcl.stages.paper_figures.paper_figures)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.paper_figures import paper_figures

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
paper_figures(
    runs=dict(sm.params.runs),
    benchmarks=dict(sm.params.benchmarks),
    outputs={
        fig: list(sm.output[fig])
        for fig in ("fig4", "fig5", "fig6", "fig7", "figA3", "figA4", "p003_fig4_blurry")
    },
    task_outputs={
        bench: {m: list(p) for m, p in outs.items()} for bench, outs in dict(sm.params.task_figures).items()
    },
    scenarios=dict(sm.params.scenarios),
    resources=sm.params.resources,
    datasets=dict(sm.params.datasets),
)
