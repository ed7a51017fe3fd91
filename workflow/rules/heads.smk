# DP-SGD head learners (PEFT ensemble head-only, Naive, Non-CL) on cached features:
# every (learner, ε, label method) of one seed in one job.


# (ε tag, method) of every run a heads job makes: at ε = inf only the nonprivate_label_methods
# (config/paper.yaml: base; the 1000x public label spaces without DP were most of a job's time)
HEAD_PAIRS = [
    (e, m)
    for e in EPS
    for m in HEAD_METHODS
    if e != "inf" or NONPRIVATE_METHODS is None or m in NONPRIVATE_METHODS
]


def _head_outputs(kind):
    # learner-major, then HEAD_PAIRS in the order of the label files (runs_by_learner)
    return [
        f"{R}/runs/{learner}/{{dataset}}/{{backbone}}/{{scenario}}/seed{{seed}}/eps{e}/{m}/{kind}.json"
        for learner in HEAD_LEARNERS
        for e, m in HEAD_PAIRS
    ]


TUNE = config["tuning"]["enabled"]
# tuning.protocol (App. D.1): "public" tunes on the public tune split, "paper" on the private
# training data (unaccounted, as the paper; privacy.json says so)
TUNE_SPLIT = "train" if config["tuning"]["protocol"] == "paper" else "tune"


def _tuning_files(w):
    if not TUNE:
        return []
    return expand(f"{R}/tuning/{w.dataset}/{w.backbone}/{w.scenario}/seed{w.seed}/eps{{eps}}.json", eps=EPS)


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
        threads: 1
        resources:
            mem_mb=2000,
            runtime=60,
        params:
            targets=TARGETS,
            learners=HEAD_LEARNERS,
            dpsgd=config["dpsgd"],
            aggregation=config["aggregation"],
            eps_tags=EPS,
        script:
            "../scripts/heads.py"
