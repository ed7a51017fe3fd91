"""DP-A-GEM baseline runs of one seed (thin wrapper: dpcl.stages.agem.agem_sweep)."""

from dpcl.io import tee_stderr
from dpcl.stages.agem import agem_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
# Outputs follow expand(eps, method), the same order as the label files.
runs = [{"labels": lab, "metrics": m, "privacy": p, "diagnostics": d}
        for lab, m, p, d in zip(sm.input.labels, sm.output.metrics, sm.output.privacy, sm.output.diagnostics,
                                strict=True)]  # fmt: skip
tuned = dict(zip(sm.params.eps_tags, sm.input.tuned, strict=True)) if len(sm.input.tuned) else None
agem_sweep(sm.input.train, sm.input.test, sm.input.scenario, runs, dict(sm.params.dpsgd), dict(sm.params.agem),
           threads=sm.threads, tuned=tuned, targets=sm.params.targets)  # fmt: skip
