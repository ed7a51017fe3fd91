# DP cosine classifier: every (ε, label method) of one seed in one job (seconds of work).


rule cosine:
    input:
        train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
        test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
        scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
        labels=expand(
            f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json",
            eps=EPS,
            method=METHODS,
        ),
    output:
        metrics=_cosine_outputs("metrics"),
        privacy=_cosine_outputs("privacy"),
        diagnostics=_cosine_outputs("diagnostics"),  # NOT private: counts etc., never published
    log:
        f"{R}/logs/cosine/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1  # one BLAS thread per job: parallel jobs use the cores better than threaded BLAS
    resources:
        **learners.job_resources("cosine"),
    params:
        targets=TARGETS,
    script:
        "../scripts/cosine.py"
