"""DP-SGD head learners of one seed (thin wrapper: dpcl.stages.heads.head_learner_sweep)."""

from dpcl.io import tee_stderr
from dpcl.stages.heads import head_learner_sweep

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
learners = sm.params.learners
n_runs = len(sm.input.labels)
# Outputs follow expand(learner, eps, method): learner-major, then (eps, method) as the labels.
runs = []
for r, labels in enumerate(sm.input.labels):
    outputs = {
        learner: tuple(getattr(sm.output, k)[i * n_runs + r] for k in ("metrics", "privacy", "diagnostics"))
        for i, learner in enumerate(learners)
    }
    runs.append({"labels": labels, "outputs": outputs})
tuned = dict(zip(sm.params.eps_tags, sm.input.tuned, strict=True)) if len(sm.input.tuned) else None
head_learner_sweep(sm.input.train, sm.input.test, sm.input.scenario, runs, learners, dict(sm.params.dpsgd),
                   sm.params.aggregation, threads=sm.threads, tuned=tuned, targets=sm.params.targets)  # fmt: skip
