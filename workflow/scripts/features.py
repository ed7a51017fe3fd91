"""Cache backbone features of one dataset split (thin wrapper: dpcl.stages.features.cache_features)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.features import cache_features

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
cache_features(
    dataset=sm.wildcards.dataset,
    root=Path(sm.input[0]).parent,
    split=sm.wildcards.split,
    dataset_cfg=sm.params.dataset_cfg,
    backbone_name=sm.wildcards.backbone,
    backbone_cfg=sm.params.backbone_cfg,
    out=sm.output[0],
    threads=sm.threads,
)
