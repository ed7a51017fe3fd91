# Tables (Table A3 layout) and figures per benchmark and learner.


rule report:
    input:
        lambda w: run_files(w.learner, w.benchmark, "metrics"),
    output:
        csv=f"{R}/tables/{{benchmark}}_{{learner}}.csv",
        md=f"{R}/tables/{{benchmark}}_{{learner}}.md",
        png=f"{R}/figures/{{benchmark}}_{{learner}}_avg_acc.png",
        pdf=f"{R}/figures/{{benchmark}}_{{learner}}_avg_acc.pdf",
    log:
        f"{R}/logs/report/{{benchmark}}_{{learner}}.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        methods=lambda w: methods_for(w.learner, w.benchmark),
    script:
        "../scripts/report.py"


rule summary_table:
    input:
        lambda w: [f for learner in config["learners"] for f in run_files(learner, w.benchmark, "metrics")],
    output:
        csv=f"{R}/tables/{{benchmark}}.csv",
        md=f"{R}/tables/{{benchmark}}.md",
    log:
        f"{R}/logs/report/{{benchmark}}_summary.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        methods=METHODS,
    script:
        "../scripts/summary_table.py"


rule blurry_figure:
    input:
        lambda w: f"{RES}/{bench_wildcards(w.benchmark)['dataset']}/MANIFEST.json",
    output:
        multiext(f"{R}/figures/{{benchmark}}_blurry_samples", ".png", ".pdf"),
    log:
        f"{R}/logs/report/{{benchmark}}_blurry_samples.log",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        bench=lambda w: config["benchmarks"][w.benchmark],
        dataset=lambda w: bench_wildcards(w.benchmark)["dataset"],  # the first seed's (a variant per seed)
        dataset_cfg=lambda w: config["datasets"][bench_wildcards(w.benchmark)["dataset"]],
        seed=lambda w: bench_seeds(w.benchmark)[0],
    script:
        "../scripts/blurry_figure.py"


rule aggregation_figure:
    input:
        lambda w: run_files(w.learner, w.benchmark, "metrics"),
    output:
        multiext(f"{R}/figures/{{benchmark}}_{{learner}}_figA2_aggregation", ".png", ".pdf"),
    log:
        f"{R}/logs/report/{{benchmark}}_{{learner}}_figA2_aggregation.log",
    wildcard_constraints:
        learner="peft_head|peft_film",
    conda:
        "../envs/dpcl.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        methods=lambda w: methods_for(w.learner, w.benchmark),
    script:
        "../scripts/aggregation_figure.py"
