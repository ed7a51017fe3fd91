"""results/report.html from every table and figure of the run (thin wrapper: dpcl.stages.paper_figures.html_report)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.paper_figures import html_report

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
html_report(list(sm.input), dict(sm.params.config), sm.output[0])
