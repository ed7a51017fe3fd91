"""Output label spaces of one seed for every (ε, label method) (thin: dpcl.stages.labels.release_label_spaces)."""

from warm_worker import run_in_warm_worker

run_in_warm_worker()  # with warm_worker on, the rest runs in a pre-imported process (warm_worker.py)

from pathlib import Path

from dpcl.io import tee_stderr
from dpcl.stages.labels import release_label_spaces

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
pairs = [(e, m) for e in sm.params.eps_tags for m in sm.params.methods]  # the rule's expand() order
release_label_spaces(
    sm.wildcards.dataset,
    Path(sm.input.manifest).parent,
    sm.input.scenario,
    sm.params.methods,
    sm.params.epsilons,
    sm.params.delta,
    seed=int(sm.wildcards.seed),
    outputs=dict(zip(pairs, sm.output, strict=True)),
)
