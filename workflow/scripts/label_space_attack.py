"""Fig. 1 attack table (thin wrapper: dpcl.stages.privacy.label_space_attack)."""

from dpcl.io import tee_stderr
from dpcl.stages.privacy import label_space_attack

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
label_space_attack(sm.params.cfg, sm.params.delta, sm.output.csv, sm.output.md)
