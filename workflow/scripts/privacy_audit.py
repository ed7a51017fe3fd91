"""Empirical privacy audit table (thin wrapper: dpcl.stages.privacy.privacy_audit)."""

from dpcl.io import tee_stderr
from dpcl.stages.privacy import privacy_audit

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
privacy_audit(sm.params.cfg, sm.params.delta, sm.output.csv, sm.output.md)
