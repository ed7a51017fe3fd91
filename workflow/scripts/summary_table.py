"""Table of every learner of one benchmark (thin wrapper: dpcl.stages.report.build_summary_table)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.report import build_summary_table

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
build_summary_table(list(sm.input), sm.wildcards.benchmark, sm.params.methods, sm.output.csv, sm.output.md)
