"""Evaluate one PEFT FiLM ensemble run (thin wrapper: dpcl.film_stages.film_eval_stage)."""

from pathlib import Path

from dpcl.film_stages import film_eval_stage
from dpcl.io import tee_stderr

sm = snakemake  # noqa: F821
tee_stderr(sm.log[0])
p, w = sm.params, sm.wildcards
film_eval_stage(w.dataset, Path(sm.input.manifest).parent, dict(p.dataset_cfg), dict(p.backbone_cfg),
                sm.input.scenario, sm.input.labels, list(sm.input.members), list(sm.input.records),
                dict(p.dpsgd), p.aggregation, p.device, sm.output.metrics, sm.output.privacy,
                tuned_path=getattr(sm.input, "tuned", None), targets=p.targets,
                out_diagnostics=sm.output.diagnostics)  # fmt: skip
