"""Solve one DP-AL schedule (thin wrapper: dpcl.stages.active.solve_schedule)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.active import solve_schedule

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
solve_schedule(sm.wildcards.key, dict(sm.params.active), sm.output[0])
