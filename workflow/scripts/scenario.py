"""Task split of one seed (thin wrapper: dpcl.stages.build_scenario)."""

import re
from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages import build_scenario

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
kind, n_tasks = re.fullmatch(r"([a-z]+)-t(\d+)", sm.wildcards.scenario).groups()
build_scenario(
    sm.wildcards.dataset, Path(sm.input[0]).parent, sm.params.dataset_cfg, kind, int(n_tasks),
    int(sm.wildcards.seed), sm.output[0],
)  # fmt: skip
