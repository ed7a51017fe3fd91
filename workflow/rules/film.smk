# FiLM learners on images (ViT backbones: LayerNorm scales/biases + head per task).
# PEFT ensemble: one job per (run, task) member -- independent given the released label
# spaces, so they spread over a cluster's GPUs -- then one evaluation job per run.
# Naive / Non-CL FiLM baselines: one job per run. Rules are always defined (the SLURM
# profile names them); they run only when `learners` lists a *_film learner.

import re

FILM_RUN = (
    f"{R}/runs/{{learner}}/{{dataset}}/{{backbone}}/{{scenario}}/seed{{seed}}/eps{{eps}}/{{method}}"
)
PEFT_FILM_RUN = FILM_RUN.replace("{learner}", "peft_film")


def n_tasks_of(scenario):
    return int(re.search(r"-t(\d+)$", scenario).group(1))


def _film_common(w):
    return {
        "manifest": f"{RES}/{w.dataset}/MANIFEST.json",
        "scenario": f"{R}/scenarios/{w.dataset}/{w.scenario}/seed{w.seed}.json",
        "labels": f"{R}/labels/{w.dataset}/{w.scenario}/seed{w.seed}/eps{w.eps}/{w.method}.json",
    }


FILM_PARAMS = dict(
    dataset_cfg=lambda w: config["datasets"][w.dataset],
    backbone_cfg=lambda w: config["backbones"][w.backbone],
    dpsgd=FILM_DPSGD,
    physical_batch=config["film"]["physical_batch"],
    device=config["film"]["device"],
)


rule film_member:
    input:
        unpack(_film_common),
    output:
        member=f"{PEFT_FILM_RUN}/members/task{{task}}.npz",
        record=f"{PEFT_FILM_RUN}/members/task{{task}}.json",
    params:
        **FILM_PARAMS,
    threads: 2
    resources:
        mem_mb=8000,
        runtime=720,  # minutes: DP-SGD through ViT-B/16 (38,400 FiLM parameters) on one GPU
    log:
        f"{R}/logs/film_member/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}_eps{{eps}}_{{method}}_task{{task}}.log",
    script:
        "../scripts/film_member.py"


rule film_eval:
    input:
        unpack(_film_common),
        members=lambda w: expand(f"{PEFT_FILM_RUN}/members/task{{task}}.npz", **w, task=range(n_tasks_of(w.scenario))),
        records=lambda w: expand(f"{PEFT_FILM_RUN}/members/task{{task}}.json", **w, task=range(n_tasks_of(w.scenario))),
    output:
        metrics=f"{PEFT_FILM_RUN}/metrics.json",
        privacy=f"{PEFT_FILM_RUN}/privacy.json",
    params:
        **FILM_PARAMS,
        aggregation=config["aggregation"],
    threads: 2
    resources:
        mem_mb=8000,
        runtime=240,
    log:
        f"{R}/logs/film_eval/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}_eps{{eps}}_{{method}}.log",
    script:
        "../scripts/film_eval.py"


rule film_baseline:
    input:
        unpack(_film_common),
    output:
        metrics=f"{FILM_RUN}/metrics.json",
        privacy=f"{FILM_RUN}/privacy.json",
        model=f"{FILM_RUN}/model.npz",
    wildcard_constraints:
        learner="naive_film|noncl_film",
    params:
        **FILM_PARAMS,
    threads: 2
    resources:
        mem_mb=8000,
        runtime=1440,  # minutes: every task's DP-SGD in one job
    log:
        f"{R}/logs/film_baseline/{{learner}}_{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}_eps{{eps}}_{{method}}.log",
    script:
        "../scripts/film_baseline.py"
