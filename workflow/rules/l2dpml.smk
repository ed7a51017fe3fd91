# L2DP-ML as published (paper 001; not DP, its ledger says so) and the sound functional-mechanism
# variant fm_agem, on cached features projected by a PCA fitted on the PUBLIC tuning split: every
# (learner, ε, label method) of one seed in one job (seconds of work). With tuning.enabled, fm_agem's
# (dim, lr, steps) are a grid search on the tuning set of tuning.protocol (public: the tune split).


if L2DPML_LEARNERS:

    rule l2dpml:
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            tune=f"{R}/features/{{dataset}}/{{backbone}}/tune.npz",  # public: the PCA is fitted here
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=expand(
                f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json",
                eps=EPS,
                method=L2DPML_METHODS,
            ),
        output:
            metrics=_l2dpml_outputs("metrics"),
            privacy=_l2dpml_outputs("privacy"),
            diagnostics=_l2dpml_outputs("diagnostics"),  # NOT private: counts etc., never published
        log:
            f"{R}/logs/l2dpml/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        conda:
            "../envs/dpcl.yaml"
        threads: 1
        resources:
            **learners.job_resources("l2dpml"),
        params:
            learners=L2DPML_LEARNERS,
            l2dpml=config["l2dpml"],
            fm_agem=config["fm_agem"],
            targets=TARGETS,
            tuning=config["tuning"],  # fm_agem's (dim, lr, steps): a grid search per run's budget
            dataset_cfg=lambda w: config["datasets"][w.dataset],
        script:
            "../scripts/l2dpml.py"
