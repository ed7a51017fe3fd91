"""Empirical privacy audit table from its parts (thin wrapper: dpcl.stages.privacy.privacy_audit)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.privacy import privacy_audit

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
privacy_audit(
    sm.params.cfg,
    sm.params.delta,
    sm.output.csv,
    sm.output.md,
    out_figures=[sm.output.png, sm.output.pdf],
    parts=dict(zip(sm.params.parts, sm.input.parts, strict=True)),
)
