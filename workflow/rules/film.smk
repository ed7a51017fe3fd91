# FiLM learners on images (ViT backbones: LayerNorm scales/biases + head per task).
# PEFT ensemble: one job per run trains its members (independent given the released label
# spaces; data and backbone loaded once; the paper grid's 1,160 runs spread over a cluster's
# GPUs) and then evaluates the ensemble (one job, not two: a job costs Snakemake and the
# launcher ~0.4 s, more than a miniature run's evaluation).
# Naive / Non-CL / DP-A-GEM (App. D.4) FiLM baselines: one job per run. Rules
# are always defined (the SLURM profile names them); they run only when `learners` lists a
# *_film learner.
# With tuning.enabled, tune_film (one job per seed, every ε) tunes the DP-SGD
# hyperparameters on the tuning set of tuning.protocol (App. D.1) and every FiLM job of that
# (ε, seed) takes its config, scaled to its learner, from the cached result instead of
# film.dpsgd / dpsgd.


rule tune_film:
    input:
        manifest=lambda w: f"{RES}/{w.dataset}/MANIFEST.json",
        scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
        checkpoint=lambda w: checkpoint_files(config["backbones"][w.backbone]),  # a local file: reruns on change
    output:
        expand(
            f"{R}/tuning_film/{{{{dataset}}}}/{{{{backbone}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}.json",
            eps=EPS,
        ),
    log:
        f"{R}/logs/tune_film/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
    conda:
        "../envs/dpcl.yaml"
    threads: config["film"]["threads"]
    resources:
        mem_mb=8000,
        runtime=720,  # minutes: tuning.trials FiLM trainings per ε on a task-sized set, one GPU
        gpu=FILM_GPU,
    params:
        dataset_cfg=lambda w: config["datasets"][w.dataset],
        backbone_cfg=lambda w: config["backbones"][w.backbone],
        epsilons=config["epsilons"],
        eps_tags=EPS,
        delta=config["delta"],
        trials=config["tuning"]["trials"],
        protocol=config["tuning"]["protocol"],
        dpsgd=FILM_DPSGD,  # epochs and normaliser of the FiLM learners
        physical_batch=config["film"]["physical_batch"],
        device=config["film"]["device"],
        deterministic=config["film"]["deterministic"],
        precision=config["film"]["precision"],
    script:
        "../scripts/tune_film.py"


rule film_ensemble:
    input:
        **FILM_COMMON,
        checkpoint=lambda w: checkpoint_files(config["backbones"][w.backbone]),  # a local file: reruns on change
    output:
        # every member of the run: members/task{t}.npz (FiLM values + head) and task{t}.json (its
        # NON-PRIVATE training record, split into ledger entry and diagnostics by the evaluation)
        members=directory(f"{FILM_RUN}/members"),
        metrics=f"{FILM_RUN}/metrics.json",
        privacy=f"{FILM_RUN}/privacy.json",
        diagnostics=f"{FILM_RUN}/diagnostics.json",  # NOT private: counts etc., never published
    log:
        f"{R}/logs/film_ensemble/{{learner}}_{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}_eps{{eps}}_{{method}}.log",
    wildcard_constraints:
        learner=learners.wildcard("film_peft"),
    conda:
        "../envs/dpcl.yaml"
    threads: config["film"]["threads"]
    resources:
        **learners.job_resources("film_peft"),  # every task's DP-SGD through ViT-B/16, one GPU
        gpu=FILM_GPU,
    params:
        **FILM_PARAMS,
        aggregation=config["aggregation"],
    script:
        "../scripts/film_ensemble.py"


rule film_baseline:
    input:
        **FILM_COMMON,
        checkpoint=lambda w: checkpoint_files(config["backbones"][w.backbone]),  # a local file: reruns on change
    output:
        metrics=f"{FILM_RUN}/metrics.json",
        privacy=f"{FILM_RUN}/privacy.json",
        model=f"{FILM_RUN}/model.npz",
        diagnostics=f"{FILM_RUN}/diagnostics.json",  # NOT private: counts etc., never published
    log:
        f"{R}/logs/film_baseline/{{learner}}_{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}_eps{{eps}}_{{method}}.log",
    wildcard_constraints:
        learner=learners.wildcard("film_baseline"),
    conda:
        "../envs/dpcl.yaml"
    threads: config["film"]["threads"]
    resources:
        **learners.job_resources("film_baseline"),  # every task's DP-SGD in one job
        gpu=FILM_GPU,
    params:
        **FILM_PARAMS,
        # DP-A-GEM's buffer settings (App. D.4); only a learner that declares the block reads them,
        # so the others never rerun for them
        agem=lambda w: config["agem"] if "agem" in learners.get(w.learner).config_blocks else {},
    script:
        "../scripts/film_baseline.py"
