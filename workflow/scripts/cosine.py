"""DP cosine classifier runs of one seed (thin wrapper: dpcl.stages.cosine.cosine_sweep)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from dpcl.io import tee_stderr
from dpcl.stages.cosine import cosine_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
runs = [
    {"labels": lab, "metrics": met, "privacy": priv, "diagnostics": diag}
    for lab, met, priv, diag in zip(
        sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics, strict=True
    )
]
cosine_sweep(
    sm.input.train, sm.input.test, sm.input.scenario, runs, threads=sm.threads, targets=sm.params.targets
)
