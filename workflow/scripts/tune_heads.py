"""Tune the head learners' (or, rule tune_agem, DP-A-GEM's, per label space) DP-SGD hyperparameters
for one seed (thin: dpcl.stages.heads.tune_head_learners)."""

from dpcl.worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (dpcl.worker)

from dpcl.io import tee_stderr
from dpcl.stages.heads import tune_head_learners

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
d = sm.params.dpsgd
# rule tune_agem: one study per label space its runs use (outputs space-major, then ε)
spaces = sm.params.get("agem_label_spaces") or [None]
n_eps = len(sm.params.eps_tags)
if len(sm.output) != n_eps * len(spaces):
    raise ValueError(f"{len(sm.output)} outputs for {len(spaces)} label spaces x {n_eps} ε")
for i, space in enumerate(spaces):
    tune_head_learners(
        sm.input.features,
        sm.input.scenario,
        sm.wildcards.dataset,
        dict(sm.params.dataset_cfg),
        sm.params.protocol,
        sm.params.epsilons,
        sm.params.delta,
        dict(zip(sm.params.eps_tags, sm.output[i * n_eps : (i + 1) * n_eps], strict=True)),
        sm.params.trials,
        d["epochs"],
        d["normaliser"],
        sm.params.get("agem_buffer_fraction"),
        space or "base",
    )
