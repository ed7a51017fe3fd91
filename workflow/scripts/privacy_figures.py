"""Fig. 2 and Fig. A1 (thin wrapper: dpcl.stages.privacy.privacy_figures)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.privacy import privacy_figures

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
privacy_figures(sm.params.cfg, sm.output.fig2, sm.output.figA1)
