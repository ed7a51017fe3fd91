# DP-SGD head learners (PEFT ensemble head-only, Naive, Non-CL) on cached features:
# every (learner, ε, label method) of one seed in one job.


if HEAD_LEARNERS:

    rule tune_heads:
        input:
            features=f"{R}/features/{{dataset}}/{{backbone}}/{TUNE_SPLIT}.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
        output:
            expand(
                f"{R}/tuning/{{{{dataset}}}}/{{{{backbone}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}.json",
                eps=EPS,
            ),
        log:
            f"{R}/logs/tune_heads/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        conda:
            "../envs/dpcl.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=60,
        params:
            epsilons=config["epsilons"],
            eps_tags=EPS,
            delta=config["delta"],
            trials=config["tuning"]["trials"],
            protocol=config["tuning"]["protocol"],
            dataset_cfg=lambda w: config["datasets"][w.dataset],
            dpsgd=config["dpsgd"],
        script:
            "../scripts/tune_heads.py"

    rule heads:
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=[
                f"{R}/labels/{{dataset}}/{{scenario}}/seed{{seed}}/eps{e}/{m}.json" for e, m in HEAD_PAIRS
            ],
            tuned=_tuning_files,
        output:
            metrics=_head_outputs("metrics"),
            privacy=_head_outputs("privacy"),
            diagnostics=_head_outputs("diagnostics"),  # NOT private: counts etc., never published
        log:
            f"{R}/logs/heads/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        conda:
            "../envs/dpcl.yaml"
        threads: 1
        resources:
            **learners.job_resources("heads"),
        params:
            targets=TARGETS,
            learners=HEAD_LEARNERS,
            run_learners=[HEAD_RUN_LEARNERS[pair] for pair in HEAD_PAIRS],  # per label file
            dpsgd=config["dpsgd"],
            aggregation=config["aggregation"],
            eps_tags=EPS,
        script:
            "../scripts/heads.py"
