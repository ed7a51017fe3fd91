# Learners that bring their own run function (registry job "features", dpcl.learners.api): a user's
# learner module named in learner_modules, or a built-in one declared that way. One job per
# (learner, seed) runs every (ε, label method) of that learner on cached features.


def _features_runs(learner):
    """(ε tag, label method) of every run a features job of ``learner`` makes (at ε = inf only the
    nonprivate_label_methods, when set)."""
    return [
        (e, m)
        for e in EPS
        for m in methods_for(learner)
        if e != "inf" or NONPRIVATE_METHODS is None or m in NONPRIVATE_METHODS
    ]


def _features_outputs(learner, kind):
    return [
        f"{R}/runs/{learner}/{{dataset}}/{{backbone}}/{{scenario}}/seed{{seed}}/eps{e}/{m}/{kind}.json"
        for e, m in _features_runs(learner)
    ]


for _learner in learners.job_learners(config["learners"], "features"):

    rule:
        name:
            f"learner_{_learner}"
        input:
            train=f"{R}/features/{{dataset}}/{{backbone}}/train.npz",
            test=f"{R}/features/{{dataset}}/{{backbone}}/test.npz",
            scenario=f"{R}/scenarios/{{dataset}}/{{scenario}}/seed{{seed}}.json",
            labels=[
                f"{R}/labels/{{dataset}}/{{scenario}}/seed{{seed}}/eps{e}/{m}.json"
                for e, m in _features_runs(_learner)
            ],
        output:
            metrics=_features_outputs(_learner, "metrics"),
            privacy=_features_outputs(_learner, "privacy"),
            diagnostics=_features_outputs(_learner, "diagnostics"),  # NOT private: never published
        log:
            f"{R}/logs/{_learner}/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        conda:
            "../envs/dpcl.yaml"
        threads: 1
        resources:
            **learners.get(_learner).resources,
        params:
            learner=_learner,
            targets=TARGETS,
            options=config["learner_options"].get(_learner) or {},
            modules=config["learner_modules"],
        script:
            "../scripts/learner.py"
