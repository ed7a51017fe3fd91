# DP-SGD head learners (PEFT ensemble head-only, Naive, Non-CL) on cached features:
# every (learner, ε, label method) of one seed in one job.


def _head_outputs(kind):
    return expand(
        f"{R}/runs/{{learner}}/{{{{dataset}}}}/{{{{backbone}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}/{kind}.json",
        learner=HEAD_LEARNERS, eps=EPS, method=HEAD_METHODS,
    )


if HEAD_LEARNERS:

    rule heads:
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=expand(f"{R}/labels/{{{{dataset}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}.json", eps=EPS, method=HEAD_METHODS),
        output:
            metrics=_head_outputs("metrics"),
            privacy=_head_outputs("privacy"),
        params:
            learners=HEAD_LEARNERS,
            dpsgd=config["dpsgd"],
            aggregation=config["aggregation"],
        threads: 1
        resources:
            mem_mb=2000,
            runtime=60,
        log:
            f"{R}/logs/heads/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        script:
            "../scripts/heads.py"
