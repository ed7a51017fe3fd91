"""L2DP-ML and fm_agem runs of one seed (thin wrapper: dpcl.stages.l2dpml.l2dpml_sweep)."""

from dpcl.io import tee_stderr
from dpcl.stages.l2dpml import l2dpml_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
n_runs = len(sm.input.labels)
# Outputs follow expand(learner, eps, method): learner-major, then (eps, method) as the labels.
runs = [{"labels": labels, "outputs": {learner: tuple(getattr(sm.output, k)[i * n_runs + r]
                                                      for k in ("metrics", "privacy", "diagnostics"))
                                       for i, learner in enumerate(learners)}}
        for r, labels in enumerate(sm.input.labels)]  # fmt: skip
l2dpml_sweep(sm.input.train, sm.input.test, sm.input.tune, sm.input.scenario, runs, learners, dict(sm.params.l2dpml),
             dict(sm.params.fm_agem), threads=sm.threads, targets=sm.params.targets)  # fmt: skip
