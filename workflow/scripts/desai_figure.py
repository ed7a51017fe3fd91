"""Fig. 3: comparison with Desai et al. in the Base Dataset setting (thin wrapper: dpcl.stages.agem.desai_figure)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.agem import desai_figure

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
desai_figure(list(sm.input), sm.wildcards.benchmark, [sm.output.png, sm.output.pdf])
