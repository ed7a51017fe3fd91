"""Tables A3-A10 in the paper's layout beside the published numbers (thin wrapper: dpcl.stages.paper_tables.build_paper_tables)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.paper_tables import build_paper_tables

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
written = build_paper_tables(
    dict(sm.params.runs),
    dict(sm.params.benchmarks),
    Path(sm.output[0]).parent,
    dict(sm.params.tuning),
    miniature=bool(sm.params.miniature),
)
missing = sorted(set(map(str, sm.output)) - set(map(str, written)))
if missing:
    raise RuntimeError(f"paper_tables did not write {missing}")
