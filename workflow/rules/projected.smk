# Learners of registry job "projected" (the functional mechanism on cached features projected by a
# PCA fitted on the PUBLIC tuning split: L2DP-ML as published, not DP and its ledger says so, and
# its sound variant FM-A-GEM): every (learner, ε, label method) of one seed in one job (seconds of
# work). A learner that tunes in its job (FM-A-GEM's grid search, with tuning.enabled) reads the
# tuning set of tuning.protocol (public: the tune split).


if PROJECTED_LEARNERS:

    rule projected:
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            tune=f"{R}/features/{{dataset}}/{{backbone}}/tune.npz",  # public: the PCA is fitted here
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=expand(
                f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json",
                eps=EPS,
                method=job_methods("projected"),
            ),
        output:
            metrics=_job_outputs("projected", "metrics"),
            privacy=_job_outputs("projected", "privacy"),
            diagnostics=_job_outputs("projected", "diagnostics"),  # NOT private: counts etc., never published
        log:
            f"{R}/logs/projected/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        conda:
            "../envs/dpcl.yaml"
        threads: 1
        resources:
            **learners.job_resources("projected"),
        params:
            learners=PROJECTED_LEARNERS,
            blocks=job_blocks(PROJECTED_LEARNERS),  # each learner's own config block
            targets=TARGETS,
            tuning=config["tuning"],
            dataset_cfg=lambda w: config["datasets"][w.dataset],
        script:
            "../scripts/projected.py"
