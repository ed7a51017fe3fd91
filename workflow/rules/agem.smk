# DP-A-GEM baseline ([Desai2021], enhanced as in [LabelSpace] App. D.4), head-only on cached
# features: every (ε, label method) of one seed in one job; and Fig. 3 (Sec. 6.1).
# Its memory buffer keeps raw samples across tasks: a baseline, not a method of the paper.


if AGEM:

    # DP-A-GEM's own Optuna study: the same ranges and tuning set as the head
    # learners plus its buffer rate, each trial running its two-task loop (dpcl.learners.agem)
    rule tune_agem:
        input:
            features=f"{R}/features/{{dataset}}/{{backbone}}/{TUNE_SPLIT}.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
        output:
            expand(
                f"{R}/tuning_agem/{{{{dataset}}}}/{{{{backbone}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}.json",
                eps=EPS,
            ),
        log:
            f"{R}/logs/tune_agem/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        priority: 80
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
            agem_buffer_fraction=config["agem"]["buffer_fraction"],
        script:
            "../scripts/tune_heads.py"

    rule agem:
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=expand(
                f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json",
                eps=EPS,
                method=job_methods("agem"),
            ),
            tuned=_agem_tuning_files,
        output:
            metrics=_job_outputs("agem", "metrics"),
            privacy=_job_outputs("agem", "privacy"),
            diagnostics=_job_outputs("agem", "diagnostics"),  # NOT private: counts etc., never published
        log:
            f"{R}/logs/agem/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        priority: 70  # the longest jobs start first
        conda:
            "../envs/dpcl.yaml"
        threads: 1
        resources:
            **learners.job_resources("agem"),
        params:
            targets=TARGETS,
            dpsgd=config["dpsgd"],
            agem=config["agem"],
            eps_tags=EPS,
            learners=AGEM_LEARNERS,
        script:
            "../scripts/agem.py"


# Always defined (the SLURM profile and localrules name it); a target only via fig3_files().
rule fig3_desai:
    input:
        _fig3_runs,
    output:
        png=report(
            f"{R}/figures/{{benchmark}}_fig3_desai.png",
            caption="../report/fig3_desai.rst",
            category="4. Paper figures",
            subcategory="{benchmark}",
        ),
        pdf=f"{R}/figures/{{benchmark}}_fig3_desai.pdf",
    log:
        f"{R}/logs/report/{{benchmark}}_fig3_desai.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/desai_figure.py"
