# DP-A-GEM baseline (enhanced Desai et al. 2021, paper 000 App. D.4), head-only on cached
# features: every (ε, label method) of one seed in one job; and Fig. 3 (Sec. 6.1).
# Its memory buffer keeps raw samples across tasks: a baseline, not a method of the paper.

# agem_head: the enhanced DP-A-GEM (App. D.4); desai_head: Desai et al.'s DP-CL as published (paper 002,
# Alg. 1, Lemma 2's claim beside the accounted rereads). One job per seed runs both.
AGEM_LEARNERS = [l for l in config["learners"] if l in ("agem_head", "desai_head")]
AGEM = bool(AGEM_LEARNERS)
FIG3_EPS = [e for e in EPS if e in ("1", "8")] or [e for e in EPS if e != "inf"] or EPS


def _agem_outputs(kind):
    return expand(
        f"{R}/runs/{{learner}}/{{{{dataset}}}}/{{{{backbone}}}}/{{{{scenario}}}}/seed{{{{seed}}}}/eps{{eps}}/{{method}}/{kind}.json",
        learner=AGEM_LEARNERS,
        eps=EPS,
        method=AGEM_METHODS,
    )


def _fig3_runs(w):
    learners = [
        l
        for l in (
            "cosine",
            "peft_head",
            "peft_film",
            "agem_head",
            "agem_film",
            "desai_head",
            "l2dpml",
            "fm_agem",
        )
        if l in bench_learners(w.benchmark) and "base" in methods_for(l, w.benchmark)
    ]
    eps = [e for e in FIG3_EPS if e in bench_eps(w.benchmark)]
    return [
        f
        for l in learners
        for f in run_files(l, w.benchmark, "metrics")
        if f.endswith("/base/metrics.json") and any(f"/eps{e}/" in f for e in eps)
    ]


def fig3_files():
    """Fig. 3 targets: benchmarks where DP-A-GEM (head-only or FiLM) runs the Base Dataset setting."""
    return [
        f"{R}/figures/{name}_fig3_desai.{ext}"
        for name in config["benchmarks"]
        if any(
            l in bench_learners(name) and "base" in methods_for(l, name)
            for l in ("agem_head", "agem_film", "desai_head", "l2dpml", "fm_agem")
        )
        and any(e in bench_eps(name) for e in FIG3_EPS)
        for ext in ("png", "pdf")
    ]


def _agem_tuning_files(w):
    if not TUNE:
        return []
    return expand(
        f"{R}/tuning_agem/{w.dataset}/{w.backbone}/{w.scenario}/seed{w.seed}/eps{{eps}}.json", eps=EPS
    )


if AGEM:

    # DP-A-GEM's own Optuna study (issue 14 item 3): the same ranges and tuning set as the head
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
                method=AGEM_METHODS,
            ),
            tuned=_agem_tuning_files,
        output:
            metrics=_agem_outputs("metrics"),
            privacy=_agem_outputs("privacy"),
            diagnostics=_agem_outputs("diagnostics"),  # NOT private: counts etc., never published
        log:
            f"{R}/logs/agem/{{dataset}}_{{backbone}}_{{scenario}}_seed{{seed}}.log",
        threads: 1
        resources:
            mem_mb=2000,
            runtime=60,
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
        png=f"{R}/figures/{{benchmark}}_fig3_desai.png",
        pdf=f"{R}/figures/{{benchmark}}_fig3_desai.pdf",
    log:
        f"{R}/logs/report/{{benchmark}}_fig3_desai.log",
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/desai_figure.py"
