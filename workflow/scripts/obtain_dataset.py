"""Obtain a data set (thin wrapper: see dpcl.stages.data.obtain_dataset)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.data import obtain_dataset

tee_stderr(snakemake.log[0])  # noqa: F821
obtain_dataset(snakemake.wildcards.dataset, snakemake.output[0], snakemake.params.cfg)  # noqa: F821
