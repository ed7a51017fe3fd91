"""Fig. 1 attack table (thin wrapper: dpcl.stages.privacy.label_space_attack)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.privacy import label_space_attack

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
label_space_attack(sm.params.cfg, sm.params.delta, sm.output.csv, sm.output.md)
