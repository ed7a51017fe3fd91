"""Tables and figures of one benchmark and learner (thin wrapper: dpcl.stages.report.build_report)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.report import build_report

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
build_report(
    list(sm.input),
    sm.wildcards.benchmark,
    sm.params.methods,
    sm.output.csv,
    sm.output.md,
    [sm.output.png, sm.output.pdf],
)
