"""Fig. A2 of one benchmark (thin wrapper: dpcl.stages.report.aggregation_figure)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.report import aggregation_figure

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
aggregation_figure(
    list(sm.input), sm.wildcards.benchmark, sm.params.methods, list(sm.output), sm.wildcards.learner
)
