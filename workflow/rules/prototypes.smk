# Learners of registry job "prototypes" (noisy class sums on cached features: the DP cosine
# classifier): every (learner, ε, label method) of one seed in one job (seconds of work).


if PROTOTYPE_LEARNERS:

    rule prototypes:
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=expand(
                f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json",
                eps=EPS,
                method=job_methods("prototypes"),
            ),
        output:
            metrics=_job_outputs("prototypes", "metrics"),
            privacy=_job_outputs("prototypes", "privacy"),
            diagnostics=_job_outputs("prototypes", "diagnostics"),  # NOT private: counts etc., never published
        log:
            f"{R}/logs/prototypes/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        conda:
            "../envs/dpcl.yaml"
        threads: 1  # one BLAS thread per job: parallel jobs use the cores better than threaded BLAS
        resources:
            **learners.job_resources("prototypes"),
        params:
            learners=PROTOTYPE_LEARNERS,
            targets=TARGETS,
        script:
            "../scripts/prototypes.py"
