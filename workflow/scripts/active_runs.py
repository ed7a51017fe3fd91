"""Every DP-AL run of one (pool variant, seed) (thin wrapper: dpcl.stages.active.run_active_seed)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from dpcl.io import tee_stderr
from dpcl.stages.active import run_active_seed

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
schedules = dict(zip(sm.params.schedule_keys, sm.input.schedules, strict=True))
run_active_seed(
    sm.input.pool,
    sm.input.public,
    sm.input.test,
    schedules,
    dict(sm.params.active),
    sm.wildcards.pool,
    seed=int(sm.wildcards.seed),
    per_class=int(sm.params.per_class),
    out_root=sm.params.root,
    dataset=dict(sm.params.active)["dataset"],
    threads=sm.threads,
    dataset_cfg=dict(sm.params.dataset_cfg),
)
