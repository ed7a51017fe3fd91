"""One part of the empirical privacy audit table (thin wrapper: dpcl.stages.privacy.audit_part)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.privacy import audit_part

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
audit_part(sm.params.cfg, sm.params.delta, sm.wildcards.part, sm.output[0], setting=sm.params.setting)
