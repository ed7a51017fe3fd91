"""Cache backbone features of one dataset split (thin wrapper: dpcl.stages.features.cache_features)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.features import cache_features

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
cache_features(
    sm.wildcards.dataset,
    Path(sm.input[0]).parent,
    sm.wildcards.split,
    sm.params.dataset_cfg,
    sm.wildcards.backbone,
    sm.params.backbone_cfg,
    sm.output[0],
    threads=sm.threads,
)
