"""Task split of one seed (thin wrapper: dpcl.stages.scenarios.build_scenario)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

import re
from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.scenarios import build_scenario

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
kind, n, m, n_tasks = re.fullmatch(
    r"([a-z]+)(?:-n([0-9.]+)-m([0-9.]+))?-t(\d+)", sm.wildcards.scenario
).groups()
blurry = {"disjoint_pct": float(n), "blurry_pct": float(m)} if kind in ("iblurry", "siblurry") else {}
build_scenario(
    sm.wildcards.dataset,
    Path(sm.input[0]).parent,
    sm.params.dataset_cfg,
    kind,
    int(n_tasks),
    int(sm.wildcards.seed),
    out=sm.output[0],
    **blurry,
)
